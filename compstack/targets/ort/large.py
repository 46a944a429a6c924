"""Models near or past protobuf's 2 GiB limit on ONNX Runtime: weights as external data.

A ``ModelProto`` cannot be serialized past 2 GiB (protobuf's limit on one message), and ORT
writes the optimized model (``SessionOptions.optimized_model_filepath``) as one protobuf
unless told to put initializers in a separate file. ONNX Runtime docs, "Session options":
``session.optimized_model_external_initializers_file_name`` and
``session.optimized_model_external_initializers_min_size_in_bytes``; ONNX's external data
format: ``onnx/docs/ExternalData.md`` (keys ``location``, ``offset``, ``length``).

For a model whose serialized size passes :data:`LIMIT` (Qwen2.5-0.5B: 1.98 GB of float32
weights, a Stable Diffusion UNet: 3.4 GB), :func:`session_model` writes the model into the
compile's scratch folder with its large initializers in ``model.onnx.data`` and hands ORT
the path; ORT then writes ``optimized.onnx`` with its initializers in
``optimized.onnx.data`` (:data:`DATA`), and the artifact is both files. Smaller models go
to ORT as bytes, as before, and their artifact is ``optimized.onnx`` alone.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Any

import onnx

__all__ = ["DATA", "LIMIT", "session_model"]

#: Serialized model size (bytes) above which the model goes to ORT as a file with external
#: data: 1 GiB leaves room below protobuf's 2 GiB for what ORT's optimizer adds (prepacked
#: or duplicated weights, fused constants).
LIMIT = 1 << 30

#: The optimized model's external data file, beside ``optimized.onnx``.
DATA = "optimized.onnx.data"

#: Initializers smaller than this (bytes) stay inside the protobuf (ONNX's and ORT's default).
_MIN_EXTERNAL = 1024


def session_model(proto: onnx.ModelProto, folder: Path, so: Any) -> bytes | str:
    """What to hand ``onnxruntime.InferenceSession`` for ``proto``: its bytes, or for a
    model past :data:`LIMIT` the path of a copy in ``folder`` whose initializers of 1 KiB
    and more are in ``model.onnx.data``; then ``so`` (``SessionOptions``) is also told to
    write the optimized model's initializers to :data:`DATA`.

    ``proto`` is left as it was (its raw data moved out for the write and read back).

    Raises:
        OSError: ``folder`` cannot be written.
    """
    from compstack.core.ir import byte_size

    if byte_size(proto) <= LIMIT:  # past 2 GiB protobuf cannot even count it (EncodeError): a large model
        return proto.SerializeToString()
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA)
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes",
                                str(_MIN_EXTERNAL))
    path = folder / "model.onnx"
    _write_external(proto, path, path.name + ".data")
    return str(path)


def _write_external(proto: onnx.ModelProto, path: Path, location: str) -> None:
    """Write ``proto`` to ``path`` with each large ``raw_data`` initializer in ``location``
    (beside it), then put the raw data back into ``proto`` from that file."""
    moved: list[tuple[onnx.TensorProto, int, int]] = []
    data = path.parent / location
    try:
        with data.open("wb") as f:
            for t in proto.graph.initializer:
                if t.data_location == onnx.TensorProto.EXTERNAL or len(t.raw_data) < _MIN_EXTERNAL:
                    continue
                offset, raw = f.tell(), t.raw_data
                f.write(raw)
                moved.append((t, offset, len(raw)))
                del raw
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                for key, value in (("location", location), ("offset", str(offset)), ("length", str(moved[-1][2]))):
                    entry = t.external_data.add()
                    entry.key, entry.value = key, value
        path.write_bytes(proto.SerializeToString())
    finally:
        _restore(moved, data)


def _restore(moved: list[tuple[onnx.TensorProto, int, int]], data: Path) -> None:
    if not moved:
        return
    with data.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        for t, offset, length in moved:
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
            t.raw_data = mm[offset:offset + length]
