"""ONNX node-test cases, generated from the case definitions the ``onnx`` wheel ships.

The wheel no longer ships the node-test data (``onnx/backend/test/data/node``), only
the generators (``onnx.backend.test.case.node.collect_testcases``). We run them once per
onnx version and cache the result under ``<cache>/conformance/onnx-<version>/``
(about 1,880 cases for onnx 1.23) as ``cases.bin``: a JSON index followed by the
models' and arrays' protobuf bytes (``ModelProto``, ``TensorProto``), with a manifest
(``meta.json``: size and SHA-256) checked before every read. Nothing is unpickled: a
crafted or damaged cache file is refused and regenerated, never executed.

Each :class:`Case` holds the model (serialised), the first data set's inputs and
expected outputs as numpy arrays (TensorProto-encoded ones such as float8/int4 are
decoded with ``onnx.numpy_helper``, giving ``ml_dtypes`` arrays), and the case's own
tolerances. Cases whose inputs or outputs are not plain tensors (sequences, optionals)
keep ``io_kind`` so the harness can report them as ``unsupported`` instead of failing.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import struct
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

__all__ = ["Case", "cases_path", "load_cases", "read_cases", "select"]


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
    arrays_in: list[Any] = []
    arrays_out: list[Any] = []
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


_MAGIC = b"CSCASES2"


def cases_path(cache_dir: Path) -> Path:
    """The cases file of the installed onnx: ``<cache>/conformance/onnx-<version>/cases.bin``."""
    import onnx

    from compstack.core.store import Store

    return Store(cache_dir).entry("cases", f"onnx-{onnx.__version__}") / "cases.bin"


def _encode(cases: Sequence[Case]) -> bytes:
    """Index + blob (see the module docstring); arrays of non-tensor cases are not kept
    (the harness reports those cases as ``unsupported`` without reading them)."""
    from onnx import numpy_helper

    blob = bytearray()

    def put(raw: bytes) -> list[int]:
        blob.extend(raw)
        return [len(blob) - len(raw), len(raw)]

    index = []
    for c in cases:
        tensor = c.io_kind == "tensor"
        index.append({
            "name": c.name, "rtol": c.rtol, "atol": c.atol, "io_kind": c.io_kind, "model": put(c.model),
            "inputs": [put(numpy_helper.from_array(np.asarray(a)).SerializeToString()) for a in c.inputs] if tensor
            else [], "outputs": [put(numpy_helper.from_array(np.asarray(a)).SerializeToString()) for a in c.outputs]
            if tensor else []})
    head = json.dumps(index).encode()
    return _MAGIC + struct.pack("<Q", len(head)) + head + bytes(blob)


def read_cases(path: Path) -> list[Case]:
    """Read a cases file written by :func:`load_cases`, after checking it against its
    manifest (``meta.json`` beside it).

    Raises:
        ValueError: the file or its manifest is missing, damaged or altered.
    """
    from onnx import TensorProto, numpy_helper

    from compstack.core.integrity import check_manifest

    meta, problem = check_manifest(Path(path).parent)  # the store's manifest (kind ``cases``)
    if meta is None:
        raise ValueError(f"conformance cases {path}: {problem}")
    raw = Path(path).read_bytes()
    if raw[:8] != _MAGIC:
        raise ValueError(f"conformance cases {path}: not a compstack cases file")
    (n,) = struct.unpack("<Q", raw[8:16])
    base = 16 + n
    index = json.loads(raw[16:base])

    def get(span: list[int]) -> bytes:
        return raw[base + span[0]:base + span[0] + span[1]]

    def arr(span: list[int]) -> Any:
        return numpy_helper.to_array(TensorProto.FromString(get(span)))

    return [Case(e["name"], get(e["model"]), [arr(x) for x in e["inputs"]], [arr(x) for x in e["outputs"]],
                 float(e["rtol"]), float(e["atol"]), e["io_kind"]) for e in index]


def load_cases(cache_dir: Path) -> list[Case]:
    """All node-test cases of the installed onnx, generated once and cached.

    Args:
        cache_dir: compstack's cache folder.

    Returns:
        The cases, sorted by name.
    """
    from compstack.core.store import Store

    path = cases_path(cache_dir)
    store = Store(cache_dir)
    if path.parent.exists():
        try:
            return read_cases(path)
        except (OSError, ValueError, KeyError, TypeError, struct.error):
            store.evict("cases", path.parent.name)  # damaged or altered: regenerate
    cases = sorted(_generate(), key=lambda c: c.name)
    staging = store.staging("cases")
    try:
        (staging / path.name).write_bytes(_encode(cases))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    store.publish(staging, "cases", path.parent.name, [staging / path.name], {"onnx": path.parent.name})
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
