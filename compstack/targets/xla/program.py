"""What ``xla-cpu`` compiles and runs: the ``jax.stages`` objects of one model
(:class:`XlaLowered`, :class:`XlaCompiled`) and the helpers that trace and call them
(moved out of :mod:`compstack.targets.xla.target`, unchanged)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError
from compstack.targets.base import Compiled, Lowered

if TYPE_CHECKING:
    from compstack.targets.xla.target import XlaCpuTarget

__all__ = ["XlaCompiled", "XlaLowered"]


def _x64(on: bool) -> Any:
    """``jax.enable_x64(True)`` around everything the translated path traces, compiles and
    calls (ONNX graphs hold int64/float64); a no-op for native JAX programs, which keep
    the user's own setting. A context, not the process-wide flag, so user JAX code in the
    same process keeps JAX's default dtypes."""
    import contextlib

    import jax

    return jax.enable_x64(True) if on else contextlib.nullcontext()


def _input_specs(model: ir.Model, given: dict[str, np.ndarray] | None = None) -> list[Any]:
    """``jax.ShapeDtypeStruct`` per graph input: the IR's static shape, or the shape of
    the job's input array (``--input-shape`` fixes dynamic dims there).

    Raises:
        UnsupportedError: a dynamic input shape and no input array to take it from.
    """
    import jax

    specs = []
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        if given and v.name in given and v.dtype is not None:
            arr = np.asarray(given[v.name])
            specs.append(jax.ShapeDtypeStruct(arr.shape, np.dtype(v.dtype.numpy())))
            continue
        if v.shape is None or v.dtype is None or not all(isinstance(d, int) for d in v.shape):
            raise UnsupportedError(f"xla: input '{v.name}' has no static shape; give --input-shape")
        specs.append(jax.ShapeDtypeStruct(v.shape.numpy(), np.dtype(v.dtype.numpy())))
    return specs


def _as_float64(x: Any) -> Any:
    """A float input (spec or array) as float64; anything else unchanged."""
    import jax

    if not np.issubdtype(np.dtype(x.dtype), np.floating) or np.dtype(x.dtype) == np.float64:
        return x
    if isinstance(x, jax.ShapeDtypeStruct):
        return jax.ShapeDtypeStruct(x.shape, np.float64)
    return x.astype(np.float64)


def _native_call(native: Any, x64: bool = False) -> Callable[[Any, list[Any]], list[Any]]:
    from compstack.frontends.native import flatten_outputs

    def call(compiled: Any, inputs: list[Any]) -> list[Any]:
        if x64:
            inputs = [_as_float64(x) for x in inputs]
        args, kwargs = native.pack(list(inputs))
        return flatten_outputs(compiled(*args, **kwargs), "jax")

    return call


def _translated_call(params: dict[str, Any]) -> Callable[[Any, list[Any]], list[Any]]:
    def call(compiled: Any, inputs: list[Any]) -> list[Any]:
        return list(compiled(params, *inputs))

    return call


class XlaLowered(Lowered):
    """A ``jax.stages.Lowered`` and how to call what it compiles to."""

    target: XlaCpuTarget

    def __init__(self, target: XlaCpuTarget, model: ir.Model, stages: dict[str, Any], lowered: Any,
                 call: Callable[[Any, list[Any]], list[Any]], export_fn: Any, export_args: Any, path: str) -> None:
        super().__init__(target, model, stages)
        self.jax_lowered = lowered
        self.call = call
        self.export_fn = export_fn
        self.export_args = export_args
        self.path = path

    def x64(self) -> Any:
        """The dtype mode this program was traced in (see :func:`_x64`)."""
        return _x64(self.path == "translated" or bool(getattr(self.target.options, "x64", False)))

    def compile_impl(self) -> XlaCompiled:
        from compstack.targets.common.twopath import seal_cache_dir
        from compstack.targets.xla.cache import use_store

        folder = use_store(self.target.cache_root)
        with self.x64():
            compiled = self.jax_lowered.compile(compiler_options=self.target.compiler_options() or None)
        seal_cache_dir(folder)
        out = XlaCompiled(self.target, self.model, compiled, self)
        out.stages["hlo-optimized"] = compiled.as_text
        self.add_stage("hlo-optimized", compiled.as_text)
        return out

    def cost_analysis_impl(self) -> dict[str, float]:
        cost = self.jax_lowered.cost_analysis()
        if isinstance(cost, list):  # older JAX: one dict per device
            cost = cost[0] if cost else {}
        if not cost:
            raise NotImplementedError
        return {"flops": float(cost.get("flops", 0.0)), "bytes": float(cost.get("bytes accessed", 0.0))}


class XlaCompiled(Compiled):
    """A ``jax.stages.Compiled`` executable."""

    target: XlaCpuTarget

    artifact_files = ("model.jax_export",)

    def __init__(self, target: XlaCpuTarget, model: ir.Model, compiled: Any, lowered: XlaLowered) -> None:
        super().__init__(target, model)
        self.compiled = compiled
        self.lowered = lowered
        self.run_command = ""

    def run_impl(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        with self.lowered.x64():
            return [np.asarray(o) for o in self.lowered.call(self.compiled, inputs)]

    def prepare_impl(self, inputs: list[np.ndarray]) -> Callable[[], Any]:
        import contextlib
        import functools

        import jax

        device = self.target._device()
        with self.lowered.x64():
            placed = [jax.device_put(x, device) for x in inputs]
        # decided once, not per call: the timed call is the stack's call plus the wait
        on = self.lowered.path == "translated" or bool(getattr(self.target.options, "x64", False))
        enter = functools.partial(jax.enable_x64, True) if on else contextlib.nullcontext
        call, compiled, block = self.lowered.call, self.compiled, jax.block_until_ready

        def once() -> Any:
            with enter():
                return block(call(compiled, placed))

        return once

    def kernels_impl(self) -> Any:
        from compstack.targets.xla.kernels import kernel_map

        return kernel_map(self)

    def profile_impl(self, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
        from compstack.targets.xla.kernels import profile

        with self.lowered.x64():
            return profile(self, inputs, warmup, runs)

    def save_impl(self, folder: Path) -> None:
        from jax import export

        args, kwargs = self.lowered.export_args
        with self.lowered.x64():
            exported = export.export(self.lowered.export_fn)(*args, **kwargs)
        path = folder / self.artifact_files[0]
        path.write_bytes(exported.serialize())
        self.run_command = (
            "python -c \"import sys, numpy as np; from jax import export; "
            f"e = export.deserialize(open('{path}', 'rb').read()); "
            "x = np.load(sys.argv[1]); print(e.call(*[x[k] for k in x.files]))\" inputs.npz")
