"""Memory-mapped external initializers, made inline for the stacks that take a ``ModelProto``.

``compstack.run.jobs.load_job_model`` reads a model's external weights into memory up to
1.5 GiB and leaves larger ones memory-mapped (``onnx_ir.ExternalTensor``: Qwen2.5-0.5B's
1.98 GB, the SD UNet's 3.4 GB). ``onnx_ir.serde.serialize_model`` keeps such a tensor as an
external reference whose ``location`` is relative to the model's folder, so a stack handed
the proto or its bytes (ONNX Runtime's ``InferenceSession(bytes)``, TVM's ``from_onnx``,
OpenVINO's ``read_model(bytes)``) looked for ``model.onnx.data`` in its current folder and
failed ("External data path ... escapes working directory"; "not regular file").
"""

from __future__ import annotations

from typing import Any

__all__ = ["inline_external"]


def inline_external(proto: Any, model: Any) -> Any:
    """``proto`` (serialised from ``model``) with the data of every external tensor read in
    from the folder ``model``'s memory-mapped initializers name (``ExternalTensor.base_dir``);
    unchanged when it has none. A proto over 2 GiB then exists in memory but cannot be
    serialised (protobuf's limit).

    Raises:
        OSError: the external data file cannot be read.
    """
    import onnx
    import onnx_ir as ir

    bases = {str(v.const_value.base_dir) for v in model.graph.initializers.values()
             if isinstance(v.const_value, ir.ExternalTensor)}
    if not bases:
        return proto
    for base in bases:  # one folder in practice: the model file's
        for tensor in onnx.external_data_helper._get_all_tensors(proto):  # noqa: SLF001
            if onnx.external_data_helper.uses_external_data(tensor):
                onnx.external_data_helper.load_external_data_for_tensor(tensor, base)
                tensor.data_location = onnx.TensorProto.DEFAULT
                del tensor.external_data[:]
    return proto
