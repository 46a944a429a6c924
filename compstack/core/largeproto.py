"""Models past protobuf's 2 GiB limit: their size, and shape inference on them.

protobuf cannot serialize a message over 2 GiB, and with its upb backend ``ByteSize`` itself
raises ``EncodeError`` there; ``onnx.shape_inference.infer_shapes`` serializes the model. A
3.4 GB model (the zoo's sd-unet) met both.
"""

from __future__ import annotations

import onnx

__all__ = ["byte_size", "infer_shapes"]


def infer_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """``onnx.shape_inference.infer_shapes`` (``data_prop``). Past protobuf's 2 GiB limit
    (shape inference serializes the model) it runs with the weights of 256 bytes or more
    detached, as external data, and restored after: the same view of the model, and so the
    same inferred types, as when the file :func:`compstack.core.ir.save` wrote (external data from 256 bytes,
    ``onnx_ir.save``'s threshold) is loaded again. Before, a 3.4 GB model (sd-unet) had no
    inference when exported and had it when read back, and its fingerprint changed.

    Raises:
        onnx.shape_inference.InferenceError: as ``infer_shapes``.
    """
    if byte_size(proto) < 2**31 - 1:
        return onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    detached: list[tuple[onnx.TensorProto, bytes]] = []
    try:
        for t in proto.graph.initializer:
            if t.data_location != onnx.TensorProto.EXTERNAL and len(t.raw_data) >= 256:
                detached.append((t, t.raw_data))
                t.ClearField("raw_data")
                t.data_location = onnx.TensorProto.EXTERNAL
                entry = t.external_data.add()
                entry.key, entry.value = "location", "compstack-detached"
        if byte_size(proto) >= 2**31 - 1:
            return proto  # still too large (weights in other fields): no inference, in both paths
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    finally:
        for t, data in detached:
            del t.external_data[:]
            t.data_location = onnx.TensorProto.DEFAULT
            t.raw_data = data
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(inferred.graph.value_info)
    for mine, theirs in zip(proto.graph.output, inferred.graph.output):
        mine.type.CopyFrom(theirs.type)
    return proto


def byte_size(proto: onnx.ModelProto) -> int:
    """``proto.ByteSize()``, bytes, or 2**31 for a model past protobuf's 2 GiB limit (where
    ``ByteSize`` itself raises ``EncodeError`` with protobuf's upb backend: sd-unet, 3.4 GB)."""
    from google.protobuf.message import EncodeError

    try:
        return int(proto.ByteSize())
    except EncodeError:
        return 2**31
