"""Plain ``jax.numpy`` zoo models: ``jax-mlp``, ``jax-transformer`` and ``jax-cnn``.

Written out here with fixed-seed numpy weights (``np.random.RandomState``), so the
converted nodes' provenance (``compstack.source``) points at the lines below. Each
builder returns a :class:`compstack.frontends.zoo._common.JaxBuilt`: the function, its example
arguments ``(params, input)`` and the input's value range; the ``params`` pytree is
baked into the graph as initializers named by key path (``params.attn.wq``), the input
stays a graph input. Nothing here imports torch.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from compstack.frontends.zoo._common import JaxBuilt

__all__ = ["build_cnn", "build_mlp", "build_transformer", "cnn", "mlp", "transformer_block"]

Params = dict[str, Any]


def _dense(rng: np.random.RandomState, d_in: int, d_out: int) -> Params:
    """A Dense layer's ``w`` float32[d_in, d_out] (scaled 1/sqrt(d_in)) and ``b`` float32[d_out]."""
    w = rng.standard_normal((d_in, d_out)) / np.sqrt(d_in)
    b = rng.uniform(-0.1, 0.1, d_out)
    return {"w": w.astype(np.float32), "b": b.astype(np.float32)}


# ----------------------------------------------------------------------------- jax-mlp


def mlp(params: Params, x: jax.Array) -> jax.Array:
    """Dense-GELU(tanh)-Dense-softmax: x float32[B, 64] -> probabilities float32[B, 10]."""
    h = jax.nn.gelu(x @ params["fc1"]["w"] + params["fc1"]["b"], approximate=True)
    logits = h @ params["fc2"]["w"] + params["fc2"]["b"]
    return jax.nn.softmax(logits, axis=-1)


def build_mlp() -> JaxBuilt:
    """``jax-mlp``: x float32[8, 64] in [-1, 1) -> Dense(128) -> GELU -> Dense(10) -> softmax."""
    rng = np.random.RandomState(0)
    params = {"fc1": _dense(rng, 64, 128), "fc2": _dense(rng, 128, 10)}
    x = rng.uniform(-1.0, 1.0, (8, 64)).astype(np.float32)
    return JaxBuilt(mlp, (params, x), {"x": (-1.0, 1.0)}, ["probs"])


# ----------------------------------------------------------------------------- jax-transformer

HEADS = 4


def _layer_norm(p: Params, x: jax.Array, eps: float = 1e-5) -> jax.Array:
    """LayerNorm over the last axis with ``scale`` and ``bias``."""
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * p["scale"] + p["bias"]


def _attention(p: Params, x: jax.Array, heads: int) -> jax.Array:
    """Multi-head self-attention: x float32[B, S, D] -> float32[B, S, D]."""
    b, s, d = x.shape
    dh = d // heads
    q = (x @ p["wq"] + p["bq"]).reshape(b, s, heads, dh)
    k = (x @ p["wk"] + p["bk"]).reshape(b, s, heads, dh)
    v = (x @ p["wv"] + p["bv"]).reshape(b, s, heads, dh)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.float32(np.sqrt(dh))
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(b, s, d)
    return out @ p["wo"] + p["bo"]


def transformer_block(params: Params, x: jax.Array) -> jax.Array:
    """One pre-LN encoder block: x + MHA(LN(x)), then + MLP(LN(.)) with exact GELU.

    x float32[B, S, 64] -> float32[B, S, 64].
    """
    with jax.named_scope("attn"):
        x = x + _attention(params["attn"], _layer_norm(params["ln1"], x), HEADS)
    with jax.named_scope("mlp"):
        h = _layer_norm(params["ln2"], x)
        h = jax.nn.gelu(h @ params["mlp"]["w1"] + params["mlp"]["b1"], approximate=False)
        x = x + h @ params["mlp"]["w2"] + params["mlp"]["b2"]
    return x


def build_transformer() -> JaxBuilt:
    """``jax-transformer``: x float32[2, 16, 64] in [-1, 1); 4 heads, MLP 256."""
    rng = np.random.RandomState(1)
    d, hidden = 64, 256

    def ln() -> Params:
        return {"scale": rng.uniform(0.8, 1.2, d).astype(np.float32),
                "bias": rng.uniform(-0.1, 0.1, d).astype(np.float32)}

    attn: Params = {}
    for n in ("q", "k", "v", "o"):
        dense = _dense(rng, d, d)
        attn[f"w{n}"], attn[f"b{n}"] = dense["w"], dense["b"]
    fc1, fc2 = _dense(rng, d, hidden), _dense(rng, hidden, d)
    params = {"ln1": ln(), "attn": attn, "ln2": ln(),
              "mlp": {"w1": fc1["w"], "b1": fc1["b"], "w2": fc2["w"], "b2": fc2["b"]}}
    x = rng.uniform(-1.0, 1.0, (2, 16, d)).astype(np.float32)
    return JaxBuilt(transformer_block, (params, x), {"x": (-1.0, 1.0)}, ["y"])


# ----------------------------------------------------------------------------- jax-cnn


def _conv(x: jax.Array, w: jax.Array, b: jax.Array, groups: int = 1) -> jax.Array:
    """NCHW / OIHW convolution, stride 1, SAME padding, plus bias."""
    y = lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"), feature_group_count=groups)
    return y + b[None, :, None, None]


def _max_pool(x: jax.Array) -> jax.Array:
    """2x2 max pooling, stride 2, over H and W of an NCHW tensor."""
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")


def cnn(params: Params, image: jax.Array) -> jax.Array:
    """Conv-ReLU-MaxPool, depthwise+pointwise Conv-ReLU-MaxPool, global mean, Dense.

    image float32[B, 3, 32, 32] (NCHW) -> logits float32[B, 10].
    """
    x = _max_pool(jax.nn.relu(_conv(image, params["conv1"]["w"], params["conv1"]["b"])))
    x = _conv(x, params["dw"]["w"], params["dw"]["b"], groups=x.shape[1])
    x = _max_pool(jax.nn.relu(_conv(x, params["pw"]["w"], params["pw"]["b"])))
    x = jnp.mean(x, axis=(2, 3))
    return x @ params["fc"]["w"] + params["fc"]["b"]


def build_cnn() -> JaxBuilt:
    """``jax-cnn``: image float32[2, 3, 32, 32] in [-1, 1); channels 16 -> 32; 10 classes."""
    rng = np.random.RandomState(2)

    def conv(c_out: int, c_in: int, k: int) -> Params:
        w = rng.standard_normal((c_out, c_in, k, k)) / np.sqrt(c_in * k * k)
        return {"w": w.astype(np.float32), "b": rng.uniform(-0.1, 0.1, c_out).astype(np.float32)}

    params = {"conv1": conv(16, 3, 3), "dw": conv(16, 1, 3), "pw": conv(32, 16, 1), "fc": _dense(rng, 32, 10)}
    image = rng.uniform(-1.0, 1.0, (2, 3, 32, 32)).astype(np.float32)
    return JaxBuilt(cnn, (params, image), {"image": (-1.0, 1.0)}, ["logits"])
