"""What the torch-based targets (Inductor, TorchScript) share: example inputs for
capturing a program, and a profiled loop under ``torch.profiler``.

A target module never imports another target's module; both import this one.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError

__all__ = ["example_arrays", "profiled_events"]


def example_arrays(model: ir.Model, target: Any, refused: Callable[[str], bool]) -> list[np.ndarray]:
    """Input set 0 when the job has one (``target.example_inputs``), else zeros of each
    input's static shape: capturing records ops and guards on shapes and dtypes, not
    values, and zeros are valid indices for gathers.

    Args:
        model: the common IR.
        target: the target (its ``name`` and ``example_inputs``).
        refused: True for a numpy dtype name the stack cannot hold.

    Raises:
        UnsupportedError: an input without a static shape, or of a refused dtype.
    """
    given = target.example_inputs or {}
    out = []
    for v in model.graph.inputs:
        if v.is_initializer():
            continue
        if v.name in given:
            out.append(np.asarray(given[v.name]))
            continue
        if v.shape is None or v.dtype is None or not all(isinstance(d, int) for d in v.shape):
            raise UnsupportedError(f"{target.name}: input '{v.name}' has no static shape; give --input-shape")
        dtype = np.dtype(v.dtype.numpy())
        if refused(dtype.name):
            raise UnsupportedError(f"{target.name}: input '{v.name}' is {dtype.name}, which torch barely supports")
        out.append(np.zeros(v.shape.numpy(), dtype))
    return out


def profiled_events(compiled: Any, inputs: list[list[np.ndarray]], warmup: int, runs: int) -> Any:
    """``torch.profiler`` events of ``warmup`` + ``runs`` calls of the compiled program,
    each timed run inside a ``record_function("compstack_run_<i>")`` range (after two
    calls under a throw-away profiler session: its own first-session start-up)."""
    from torch.profiler import ProfilerActivity, record_function
    from torch.profiler import profile as torch_profile

    calls = [compiled.prepare_impl(arrays) for arrays in inputs]
    with torch_profile(activities=[ProfilerActivity.CPU]):
        for i in range(2):
            calls[i % len(calls)]()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(warmup):
            calls[i % len(calls)]()
        for i in range(runs):
            with record_function(f"compstack_run_{i}"):
                calls[(warmup + i) % len(calls)]()
    return prof.events()


