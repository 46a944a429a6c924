"""IREE's ONNX importer with node names kept as MLIR locations (``python import_onnx.py MODEL.onnx
OUT.mlir``, as ``iree-import-onnx`` imports, which has no option to keep them).

The ``iree-llvm-cpu`` target calls :func:`main` in its worker process; the file is also copied
into the scratch folder and its command logged, so ``COMPSTACK_SAVE_TEMPS`` keeps a replayable
command. It imports nothing of compstack, so the copy runs anywhere IREE's compiler is installed.
"""

import sys

import onnx


def main(src: str, dst: str) -> None:
    """Import the ONNX model ``src`` and write its MLIR module, with locations, to ``dst``.

    Raises:
        Exception: whatever the importer or the verifier raises on the model.
    """
    from google.protobuf.message import EncodeError
    from iree.compiler.extras import onnx_importer
    from iree.compiler.ir import Context

    model = onnx.load(src)
    try:
        model = onnx.shape_inference.infer_shapes(model, data_prop=True)
    except (ValueError, EncodeError):  # past protobuf's 2 GiB (sd-unet): the model keeps the shapes it has
        pass
    info = onnx_importer.ModelInfo(model)
    module = info.create_module(context=Context()).operation
    onnx_importer.NodeImporter.define_function(info.main_graph, module).import_all()
    module.verify()
    with open(dst, "w") as f:
        f.write(module.get_asm(assume_verified=True, enable_debug_info=True))


if __name__ == "__main__":
    main(*sys.argv[1:3])
