"""ONNX node-test cases, generated from the case definitions the ``onnx`` wheel ships.

The wheel no longer ships the node-test data (``onnx/backend/test/data/node``), only
the generators (``onnx.backend.test.case.node.collect_testcases``). We run them once per
onnx version and cache the result as a pickle under
``<cache>/conformance/onnx-<version>/cases.pkl`` (about 1,880 cases for onnx 1.23).

Each :class:`Case` holds the model (serialised), the first data set's inputs and
expected outputs as numpy arrays (TensorProto-encoded ones such as float8/int4 are
decoded with ``onnx.numpy_helper``, giving ``ml_dtypes`` arrays), and the case's own
tolerances. Cases whose inputs or outputs are not plain tensors (sequences, optionals)
keep ``io_kind`` so the harness can report them as ``unsupported`` instead of failing.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["Case", "cases_path", "load_cases", "select"]


@dataclass
class Case:
    """One ONNX node test.

    Attributes:
        name: the test name (``test_abs``).
        model: the serialised ``ModelProto``.
        inputs: input arrays in graph-input order.
        outputs: expected output arrays in graph-output order.
        rtol, atol: the case's tolerances (the ONNX runner's defaults: 1e-3, 1e-7).
        io_kind: ``tensor`` when every input and output is a tensor, else what is not
            (``sequence``, ``optional``).
    """

    name: str
    model: bytes
    inputs: list[Any] = field(default_factory=list)
    outputs: list[Any] = field(default_factory=list)
    rtol: float = 1e-3
    atol: float = 1e-7
    io_kind: str = "tensor"


def _to_array(value: Any) -> tuple[Any, str]:
    import onnx
    from onnx import numpy_helper

    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value), "tensor"
    if value is None:
        return None, "optional"
    if isinstance(value, (list, tuple)):
        return value, "sequence"
    return np.asarray(value), "tensor"


def _convert(tc: Any) -> Case:
    ins, outs = tc.data_sets[0]
    kind = "tensor"
    arrays_in, arrays_out = [], []
    for src, dst in ((ins, arrays_in), (outs, arrays_out)):
        for value in src:
            arr, k = _to_array(value)
            dst.append(arr)
            if k != "tensor":
                kind = k
    return Case(tc.name, tc.model.SerializeToString(), arrays_in, arrays_out, float(tc.rtol), float(tc.atol), kind)


def _generate() -> list[Case]:
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            cases = node.collect_testcases(None)
    return [_convert(tc) for tc in cases if tc.kind == "node"]


def cases_path(cache_dir: Path) -> Path:
    """The cache file of the installed onnx's cases: ``<cache>/conformance/onnx-<version>/cases.pkl``."""
    import onnx

    return cache_dir / "conformance" / f"onnx-{onnx.__version__}" / "cases.pkl"


def load_cases(cache_dir: Path) -> list[Case]:
    """All node-test cases of the installed onnx, generated once and cached.

    Args:
        cache_dir: compstack's cache folder.

    Returns:
        The cases, sorted by name.
    """
    path = cases_path(cache_dir)
    if path.exists():
        try:
            with open(path, "rb") as f:
                return pickle.load(f)  # our own cache file, written below
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError):
            path.unlink(missing_ok=True)
    cases = sorted(_generate(), key=lambda c: c.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    with open(tmp, "wb") as f:
        pickle.dump(cases, f, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(tmp, path)
    return cases


def select(cases: Sequence[Case], pattern: str | None = None, sample: int | None = None,
           seed: int = 0) -> list[Case]:
    """Cases whose name matches ``pattern`` (a regex, searched), then a fixed sample.

    The sample is reproducible: ``sample`` cases drawn with ``numpy.random.default_rng(seed)``
    from the filtered list, returned in name order.
    """
    out = list(cases)
    if pattern:
        rx = re.compile(pattern)
        out = [c for c in out if rx.search(c.name)]
    if sample is not None and sample < len(out):
        idx = np.random.default_rng(seed).choice(len(out), size=sample, replace=False)
        out = [out[i] for i in sorted(idx)]
    return out
