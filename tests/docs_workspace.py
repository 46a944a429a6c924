"""The files the documentation's examples name (``model.onnx``, ``inputs.npz``, ``my_model.py``,
``a.mlir``...), written into the folder an example runs in by
``tests/test_docs_examples.py``: small, generated here, so that the examples run as written."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np

from conftest import make_mlp
from test_trtprofile import LAYER_INFO, PROFILE

ROOT = Path(__file__).resolve().parents[1]

_TORCH_MODEL = '''\
import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 8)
        self.fc2 = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.fc2(torch.sin(self.fc1(x)))


def build():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(4, 16),)
'''

_JAX_MODEL = '''\
import jax.numpy as jnp
import numpy as np


def build():
    w = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32)

    def f(x):
        return jnp.tanh(x @ w)

    return f, (np.ones((4, 16), np.float32),)
'''

_KERAS_MODEL = '''\
import numpy as np
import tensorflow as tf


def build():
    tf.keras.utils.set_random_seed(0)
    model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    return model, (np.ones((4, 16), np.float32),)
'''

_MLIR_A = '''\
func.func @main(%arg0: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %arg0, %arg0 : tensor<4xf32>
  return %0 : tensor<4xf32>
}
'''


def _huge_npz(path: Path) -> None:
    """A zip whose member ``x.npy`` declares a float32 [2**22, 2**22] array in 64 bytes."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False,
                                                "shape": (4194304, 4194304)})
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", head.getvalue() + bytes(64))


def _bug_bundle(folder: Path) -> None:
    """``bug/``: a real explain bundle. tvm-llvm 0.27's Relax frontend fails to compile a
    ``Pow`` whose input has a symbolic dim ("emit_te now only supports Tensor that has
    ShapeExpr shape"; found by ``compstack fuzz --seed 7``). Nothing is written when this
    TVM compiles it (the blocks that replay ``bug/`` then fail and say so)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from compstack.explain import explain

    c = numpy_helper.from_array(-np.ones((3, 1, 1), np.float16), "c")
    graph = helper.make_graph([helper.make_node("Pow", ["x", "c"], ["y"])], "pow",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["d", 1, 1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [3, 1, 1])], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model)
    explain(model, {"x": np.full((3, 1, 1), 2.0, np.float16)}, ["tvm-llvm"], out_dir=folder / "bug",
            keep_symbolic=True)


def write(folder: Path, bundle: bool = False) -> Path:
    """Write every file the examples name into ``folder`` (with ``bundle``, also the real
    explain bundle ``bug/``: seconds of TVM); returns it."""
    make_mlp(folder / "model.onnx")
    (folder / "path" / "to").mkdir(parents=True)
    make_mlp(folder / "path" / "to" / "model.onnx")
    (folder / "models").mkdir()
    make_mlp(folder / "models" / "mlp4.onnx")
    make_mlp(folder / "models" / "mlp2.onnx", batch=2)
    (folder / "models.txt").write_text("zoo:mlp\nmodels/mlp2.onnx\n", encoding="utf-8")
    x = np.random.default_rng(1).standard_normal((4, 16)).astype(np.float32)
    np.savez(folder / "inputs.npz", x=x)
    rng = np.random.default_rng(2)  # explain.md: inputs of zoo:bert (vocab 1000, seq 16)
    np.savez(folder / "in.npz", input_ids=rng.integers(0, 1000, (2, 16), dtype=np.int64),
             attention_mask=np.ones((2, 16), np.int64), token_type_ids=np.zeros((2, 16), np.int64))
    _huge_npz(folder / "huge.npz")
    (folder / "my_model.py").write_text(_TORCH_MODEL, encoding="utf-8")
    (folder / "my_jax_model.py").write_text(_JAX_MODEL, encoding="utf-8")
    (folder / "my_keras_model.py").write_text(_KERAS_MODEL, encoding="utf-8")
    (folder / "prof.json").write_text(json.dumps(PROFILE), encoding="utf-8")
    (folder / "layers.json").write_text(json.dumps(LAYER_INFO), encoding="utf-8")
    (folder / "a.mlir").write_text(_MLIR_A, encoding="utf-8")
    (folder / "b.mlir").write_text(_MLIR_A.replace("addf", "mulf"), encoding="utf-8")
    shutil.copytree(ROOT / "examples", folder / "examples")  # custom-ops.md: examples/custom_op_model.py
    (folder / "build").mkdir()  # a folder compstack did not write (trust-data.md)
    (folder / "build" / "notes.txt").write_text("mine\n", encoding="utf-8")
    if bundle:
        _bug_bundle(folder)
    return folder
