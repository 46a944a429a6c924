"""Tests of compstack.frontends.from_torch and compstack.frontends.from_pyfile."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.core.errors import UserError

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

from compstack.frontends.from_pyfile import import_pyfile  # noqa: E402 - after the importorskip above
from compstack.frontends.from_torch import import_torch  # noqa: E402

THIS_FILE = Path(__file__).resolve()


class TinyNet(torch.nn.Module):
    """Conv-BN-ReLU, residual Add, mean, Linear: enough to exercise BN and provenance."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(8)
        self.skip = torch.nn.Conv2d(3, 8, 1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))  # LINE_BN
        y = y + self.skip(x)
        return self.fc(y.mean(dim=(2, 3)))


class TwoInputs(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 2 + b


def _tiny() -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    net = TinyNet()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 2.0)
    return net.eval(), torch.randn(2, 3, 8, 8)


def _run_ort(source: cir.SourceModel) -> list[np.ndarray]:
    sess = ort.InferenceSession(cir.to_proto(source.model).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    return sess.run(None, source.example_inputs)


def _line_of(marker: str) -> int:
    for i, line in enumerate(THIS_FILE.read_text().splitlines(), start=1):
        if marker in line:
            return i
    raise AssertionError(marker)


@pytest.fixture(scope="module")
def tiny_source() -> tuple[cir.SourceModel, torch.nn.Module, torch.Tensor]:
    net, x = _tiny()
    return import_torch(net, (x,), name="tiny"), net, x


def test_import_torch_matches_eager(tiny_source) -> None:
    source, net, x = tiny_source
    assert source.name == "tiny" and source.origin == "torch" and source.native is net
    assert list(source.example_inputs) == ["x"]
    np.testing.assert_array_equal(source.example_inputs["x"], x.numpy())
    (out,) = _run_ort(source)
    with torch.no_grad():
        ref = net(x).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-5, rtol=0)


def test_graph_as_written_and_tvm_friendly(tiny_source) -> None:
    source = tiny_source[0]
    ops = [n.op_type for n in source.model.graph]
    assert ops.count("BatchNormalization") == 1
    assert "Add" in ops and "ReduceMean" in ops
    assert "Constant" not in ops  # lifted: no Constant(value_ints) feeding axes/shapes
    assert source.model.opset_imports[""] >= cir.DEFAULT_OPSET


def test_provenance_survives_and_points_at_user_code(tiny_source) -> None:
    source = tiny_source[0]
    bn = next(n for n in source.model.graph if n.op_type == "BatchNormalization")
    for key in ("namespace", "pkg.torch.onnx.stack_trace", "pkg.torch.onnx.fx_node"):
        assert bn.metadata_props.get(key), key
    where = cir.source_of(bn)
    assert where.startswith(f"{THIS_FILE}:{_line_of('# LINE_BN')}"), where
    # every computing node of the user's forward is traced back to this file
    for node in source.model.graph:
        assert cir.source_of(node).startswith(str(THIS_FILE)), (node.op_type, cir.source_of(node))


def test_fold_batchnorm_folds_and_keeps_numerics() -> None:
    net, x = _tiny()
    folded = import_torch(net, (x,), name="tiny-folded", fold_batchnorm=True)
    ops = [n.op_type for n in folded.model.graph]
    assert "BatchNormalization" not in ops and ops.count("Conv") == 2
    (out,) = _run_ort(folded)
    with torch.no_grad():
        np.testing.assert_allclose(out, net(x).numpy(), atol=1e-5, rtol=0)


def test_dict_inputs_names_and_exported_program() -> None:
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    by_kw = import_torch(TwoInputs(), {"b": b, "a": a}, name="kw")
    assert set(by_kw.example_inputs) == {"a", "b"}
    np.testing.assert_array_equal(by_kw.example_inputs["a"], a.numpy())
    np.testing.assert_allclose(_run_ort(by_kw)[0], (a * 2 + b).numpy(), atol=1e-6)

    renamed = import_torch(TwoInputs(), (a, b), name="renamed",
                           input_names=["lhs", "rhs"], output_names=["out"])
    assert list(renamed.example_inputs) == ["lhs", "rhs"]
    assert [v.name for v in renamed.model.graph.outputs] == ["out"]

    ep = torch.export.export(TwoInputs(), (a, b))
    from_ep = import_torch(ep, None, name="ep")
    assert list(from_ep.example_inputs) == ["a", "b"]
    np.testing.assert_allclose(_run_ort(from_ep)[0], (a * 2 + b).numpy(), atol=1e-6)


def test_exporter_is_silent(capfd) -> None:
    import_torch(TwoInputs(), (torch.randn(2), torch.randn(2)), name="quiet")
    out, _ = capfd.readouterr()
    assert out == ""


class _DataDependent(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


class _NoOnnx(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.linalg.eigvals(x).real


@pytest.mark.parametrize(
    ("program", "inputs", "pattern"),
    [
        (_DataDependent(), (torch.randn(3),), r"^bad: torch\.export failed: \w+"),
        (_NoOnnx(), (torch.randn(3, 3),), r"^bad: ONNX export failed: .*linalg_eig"),
        ("not a module", (torch.randn(3),), r"^bad: expected a torch\.nn\.Module"),
        (TwoInputs(), (torch.randn(3), 1.0), r"^bad: example input 1 is a float"),
        (TwoInputs(), None, r"^bad: example_inputs are required"),
    ],
)
def test_import_torch_errors_are_one_line(program, inputs, pattern) -> None:
    with pytest.raises(UserError, match=pattern) as info:
        import_torch(program, inputs, name="bad")
    assert "\n" not in str(info.value)


# ---------------------------------------------------------------- from_pyfile

GOOD = """
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.tanh(self.lin(x))

def build():
    torch.manual_seed(0)
    return M().eval(), (torch.randn(2, 4),)

def build_dict():
    torch.manual_seed(0)
    return M().eval(), {"x": torch.randn(2, 4)}

def build_onnx():
    import onnx
    from onnx import helper, TensorProto
    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])

def boom():
    raise RuntimeError("the model is broken\\nsecond line")

def wrong():
    return 42

def module_only():
    return M()

def needs_arg(size):
    return M(), (torch.randn(2, size),)

NOT_A_FUNCTION = 3
"""


@pytest.fixture(scope="module")
def model_py(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pyfile") / "model.py"
    path.write_text(textwrap.dedent(GOOD))
    return path


def test_pyfile_torch_tuple_and_dict(model_py) -> None:
    source = import_pyfile(f"{model_py}:build")
    assert source.name == "model.py:build" and source.origin == "torch"
    assert list(source.example_inputs) == ["x"]
    (out,) = _run_ort(source)
    with torch.no_grad():
        ref = source.native(torch.from_numpy(source.example_inputs["x"])).numpy()
    np.testing.assert_allclose(out, ref, atol=1e-6)
    # provenance points into the user's file
    gemm = next(n for n in source.model.graph if n.op_type == "Gemm")
    assert cir.source_of(gemm).startswith(f"{model_py.resolve()}:10"), cir.source_of(gemm)

    by_dict = import_pyfile(f"{model_py}:build_dict")
    assert by_dict.name == "model.py:build_dict" and list(by_dict.example_inputs) == ["x"]


def test_pyfile_onnx_model(model_py) -> None:
    source = import_pyfile(f"{model_py}:build_onnx")
    assert source.origin == "onnx" and source.name == "model.py:build_onnx"
    assert [n.op_type for n in source.model.graph] == ["Relu"]
    assert source.model.opset_imports[""] >= cir.DEFAULT_OPSET


@pytest.mark.parametrize(
    ("suffix", "pattern"),
    [
        ("", r"expected FILE\.py:FUNCTION"),
        (":", r"expected FILE\.py:FUNCTION"),
        (":nope", (r"model\.py: no function 'nope' \(functions defined there: boom, build, "
                   r"build_dict, build_onnx, module_only, needs_arg, wrong\)")),
        (":NOT_A_FUNCTION", r"'NOT_A_FUNCTION' is of type int, not a function"),
        (":needs_arg", r"must take no arguments \(it requires size\)"),
        (":boom", r"^model\.py:boom: raised RuntimeError: the model is broken$"),
        (":wrong", r"^model\.py:wrong: expected the function to return .*onnx\.ModelProto, got int$"),
        (":module_only", r"expected the function to return \(torch\.nn\.Module.*got M$"),
    ],
)
def test_pyfile_errors(model_py, suffix, pattern) -> None:
    with pytest.raises(UserError, match=pattern) as info:
        import_pyfile(f"{model_py}{suffix}")
    assert "\n" not in str(info.value)


def test_pyfile_missing_and_broken_files(tmp_path) -> None:
    with pytest.raises(UserError, match=r"missing\.py: no such file"):
        import_pyfile(f"{tmp_path / 'missing.py'}:build")
    with pytest.raises(UserError, match=r"not a file"):
        import_pyfile(f"{tmp_path}:build")
    syntax = tmp_path / "syntax.py"
    syntax.write_text("def build(:\n    pass\n")
    with pytest.raises(UserError, match=r"syntax\.py: import failed: SyntaxError: ") as info:
        import_pyfile(f"{syntax}:build")
    assert "\n" not in str(info.value)
    failing = tmp_path / "failing.py"
    failing.write_text("import no_such_module_for_compstack\n")
    with pytest.raises(UserError, match=r"failing\.py: import failed: ModuleNotFoundError: "
                                        r"No module named 'no_such_module_for_compstack'"):
        import_pyfile(f"{failing}:build")


def test_pyfile_can_import_its_neighbours(tmp_path) -> None:
    (tmp_path / "helper_mod_cs.py").write_text("import torch\nSIZE = 5\n")
    (tmp_path / "main.py").write_text(textwrap.dedent("""
        import torch
        from helper_mod_cs import SIZE
        def build():
            return torch.nn.Linear(SIZE, 2).eval(), (torch.ones(1, SIZE),)
    """))
    source = import_pyfile(f"{tmp_path / 'main.py'}:build")
    assert source.example_inputs["input"].shape == (1, 5)
    assert str(tmp_path) not in sys.path


def test_frontends_import_no_torch() -> None:
    code = ("import sys, compstack.frontends.from_torch, compstack.frontends.from_pyfile, "
            "compstack.frontends.zoo; "
            "print(sorted(m for m in ('torch', 'transformers', 'onnxruntime') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
