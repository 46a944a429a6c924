"""compstack's own custom ops, in the ``compstack`` ONNX domain.

* ``compstack::rms_norm`` — RMSNorm over the last axis (LLaMA-style normalisation).
* ``compstack::bias_gelu`` — the fused bias + GELU of a transformer MLP, returning the
  activation and the pre-activation (two outputs).

Kernels: ``csrc/cpu/*.cc`` (C++, every CPU stack) and ``csrc/cuda/*.cu`` (CUDA).
This module is imported by the registry on first use; do not import it for its side
effect elsewhere.
"""

from __future__ import annotations

import math

import numpy as np

from compstack.ops import Attr, TensorType, custom_op

__all__ = ["bias_gelu", "rms_norm"]


def _last_axis_rule(what: str):  # type: ignore[no-untyped-def]
    def check(x: TensorType, vec: TensorType) -> None:
        if x.rank < 1:
            raise ValueError("x must have at least one dim")
        if vec.rank != 1:
            raise ValueError(f"{what} must be 1-D, got rank {vec.rank}")
        if x.shape[-1] is not None and vec.shape[0] is not None and x.shape[-1] != vec.shape[0]:
            raise ValueError(f"{what} has {vec.shape[0]} elements but x's last dim is {x.shape[-1]}")

    return check


_check_rms = _last_axis_rule("weight")
_check_bias = _last_axis_rule("bias")


def _rms_norm_shape(x: TensorType, weight: TensorType, *, epsilon: float) -> TensorType:
    _check_rms(x, weight)
    if epsilon < 0:
        raise ValueError(f"epsilon must be >= 0, got {epsilon}")
    return x


@custom_op(
    "compstack::rms_norm",
    inputs=["x: T", "weight: T"],
    outputs=["y: T"],
    dtypes={"T": ["float32", "float16"]},
    attrs={"epsilon": Attr(float, 1e-6, "added to the mean square before the square root")},
    shape=_rms_norm_shape,
    kernels={"cpu": "cs_rms_norm", "cuda": "cs_rms_norm_cuda"},
    test_shapes=[((1, 1), (1,)), ((3, 7), (7,)), ((2, 5, 16), (16,)), ((4, 33), (33,)),
                 ((1, 3, 1, 129), (129,))],
)
def rms_norm(x: np.ndarray, weight: np.ndarray, *, epsilon: float = 1e-6) -> np.ndarray:
    """RMSNorm over the last axis: ``y = x / sqrt(mean(x**2, -1) + epsilon) * weight``.

    Shapes: x ``[..., D]``, weight ``[D]`` -> y ``[..., D]``; dtypes float32 or float16
    (both the same). Computed in float64, returned in x's dtype.
    """
    xf = x.astype(np.float64)
    inv = 1.0 / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + epsilon)
    return (xf * inv * weight.astype(np.float64)).astype(x.dtype)


def _bias_gelu_shape(x: TensorType, bias: TensorType, *, approximate: int) -> list[TensorType]:
    _check_bias(x, bias)
    if approximate not in (0, 1):
        raise ValueError(f"approximate must be 0 (erf) or 1 (tanh), got {approximate}")
    return [x, x]


_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(h: np.ndarray, approximate: int) -> np.ndarray:
    if approximate:
        return 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
    return 0.5 * h * (1.0 + np.asarray(_erf(h / math.sqrt(2.0)), dtype=np.float64))


@custom_op(
    "compstack::bias_gelu",
    inputs=["x: T", "bias: T"],
    outputs=["y: T", "pre: T"],
    dtypes={"T": ["float32", "float16"]},
    attrs={"approximate": Attr(int, 0, "0: exact GELU (erf); 1: the tanh approximation")},
    shape=_bias_gelu_shape,
    kernels={"cpu": "cs_bias_gelu", "cuda": "cs_bias_gelu_cuda"},
    test_shapes=[((1, 1), (1,)), ((3, 7), (7,)), ((2, 5, 16), (16,)), ((4, 33), (33,)),
                 ((1, 3, 1, 129), (129,))],
)
def bias_gelu(x: np.ndarray, bias: np.ndarray, *, approximate: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Fused bias + GELU: ``pre = x + bias``, ``y = gelu(pre)``; returns ``(y, pre)``.

    Shapes: x ``[..., N]``, bias ``[N]`` -> y, pre ``[..., N]``; dtypes float32 or
    float16. ``approximate=1`` uses the tanh form of GELU. Computed in float64,
    returned in x's dtype.
    """
    pre = x.astype(np.float64) + bias.astype(np.float64)
    y = _gelu(pre, approximate)
    return y.astype(x.dtype), pre.astype(x.dtype)
