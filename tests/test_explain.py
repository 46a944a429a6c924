"""compstack explain / bisect / reduce (issue #14) on models made here.

The headline case is real: TVM 0.27's ONNX frontend ignores ConvTranspose's
``output_shape`` attribute (the conformance case ``test_convtranspose_output_shape`` is
in its XFAIL file), placed in the middle of a 30-node model. The other faults are made
on purpose by the test-only targets of ``tests/faulty.py``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compstack import targets as registry
from compstack.analysis.verdict import judge
from compstack.explain import explain, replay
from conftest import TESTS, said

for _name, _cls in [("faulty-sin", "WrongSinTarget"), ("faulty-fused", "WrongFusionTarget"),
                    ("faulty-opt", "WrongOptimizerTarget"), ("faulty-xla-translation", "WrongTranslationTarget"),
                    ("faulty-pass", "WrongPassTarget"), ("faulty-precision", "WrongPrecisionTarget")]:
    if _name not in registry.names():
        registry.register(_name, f"faulty:{_cls}")


@pytest.fixture(autouse=True)
def _workers_see_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    path = [str(TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(path))


def _deconv_model(pre: int = 12, post: int = 12) -> onnx.ModelProto:
    """``pre`` unary ops, ConvTranspose(strides 3x2, output_shape 10x8), ``post`` unary ops."""
    rng = np.random.default_rng(0)
    nodes, cur = [], "x"
    for i in range(pre):
        op = ("Tanh", "Sigmoid", "Relu")[i % 3]
        nodes.append(helper.make_node(op, [cur], [f"a{i}"], name=f"pre{i}_{op}"))
        cur = f"a{i}"
    nodes.append(helper.make_node("ConvTranspose", [cur, "W"], ["ct"], name="deconv", strides=[3, 2],
                                  output_shape=[10, 8]))
    cur = "ct"
    for i in range(post):
        op = ("Tanh", "Sigmoid", "Neg")[i % 3]
        nodes.append(helper.make_node(op, [cur], [f"b{i}"], name=f"post{i}_{op}"))
        cur = f"b{i}"
    w = numpy_helper.from_array(rng.standard_normal((1, 2, 3, 3)).astype(np.float32), "W")
    graph = helper.make_graph(nodes, "deconv_chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 3, 3])],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, [1, 2, 10, 8])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _chain(ops: list[str], shape: tuple[int, ...] = (4, 8), seed: int = 0) -> onnx.ModelProto:
    """A chain of ops; binary ones take a seeded constant of ``shape``."""
    rng = np.random.default_rng(seed)
    nodes, inits, cur = [], [], "x"
    for i, op in enumerate(ops):
        out = f"t{i}"
        if op in ("Add", "Mul", "Sub"):
            inits.append(numpy_helper.from_array((rng.standard_normal(shape) * 0.5).astype(np.float32), f"w{i}"))
            nodes.append(helper.make_node(op, [cur, f"w{i}"], [out], name=f"n{i}_{op}"))
        else:
            nodes.append(helper.make_node(op, [cur], [out], name=f"n{i}_{op}"))
        cur = out
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, list(shape))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


_FILLER = ["Mul", "Tanh", "Sub", "Sigmoid", "Add", "Abs"]


def _x(shape: tuple[int, ...], seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- the verdict ------------------------------------------------------------------------


def test_verdict_tells_imprecise_from_wrong() -> None:
    rng = np.random.default_rng(0)
    ref64 = rng.standard_normal(2000)
    ref32 = ref64 + rng.standard_normal(2000) * 1e-3  # an ill-conditioned float32 computation
    # The outputs stand for a float32 model's: the judge's default tolerance is now the
    # output dtype's (compstack.analysis.numerics.tolerance_for), so they are float32 arrays.
    assert judge((ref64 + 1e-7).astype(np.float32), ref64, ref32).kind == "ok"
    noisy = judge((ref64 + rng.standard_normal(2000) * 1e-3).astype(np.float32), ref64, ref32)
    assert noisy.kind == "imprecise" and noisy.rmse > 0 and noisy.floor > 0
    wrong = judge(ref64 + 0.1, ref64, ref32)
    assert wrong.kind == "wrong" and wrong.bad and wrong.rmse / wrong.floor > 50
    nan = ref64.copy()
    nan[3] = np.nan
    assert judge(nan, ref64, ref32).kind == "nan"
    assert judge(np.array([1, 2, 3]), np.array([1, 2, 4]), np.array([1, 2, 4])).kind == "wrong"
    assert judge(np.zeros((2, 3)), np.zeros((3, 2)), np.zeros((3, 2))).kind == "shape"


# ---- a real stack bug ------------------------------------------------------------------


def test_explain_finds_reduces_attributes_and_bundles_a_real_tvm_bug(tmp_path: Path) -> None:
    model = _deconv_model(15, 14)
    assert len(model.graph.node) == 30
    others = ["ort-cpu", "iree-llvm-cpu", "xla-cpu", *(["openvino-cpu"] if "openvino-cpu" in registry.names() else [])]
    rep = explain(model, {"x": _x((1, 1, 3, 3))}, ["tvm-llvm", *others], keep="tvm-llvm!=ref", out_dir=tmp_path / "bug")
    assert rep["found"] and rep["target"] == "tvm-llvm"
    b = rep["bisect"]
    assert b["node"]["name"] == "deconv" and b["node"]["op_type"] == "ConvTranspose"
    assert b["kind"] == "op" and b["compiles"] <= b["bound"] == 7
    assert rep["reduce"]["nodes_after"] <= 3 and "ConvTranspose" in rep["reduce"]["ops"]
    assert rep["attribution"]["culprit"] == "stack"  # still wrong with opt_level=0: the frontend
    bundle = tmp_path / "bug"
    for f in ("model.onnx", "inputs.npz", "test_data_set_0/input_0.pb", "test_data_set_0/output_0.pb",
              "repro_tvm-llvm.py", "ISSUE.md", "versions.json", "flags.json", "outputs/tvm-llvm.npz"):
        assert (bundle / f).is_file(), f
    assert list((bundle / "stages" / "tvm-llvm").glob("*-relax.py"))
    onnx.checker.check_model(onnx.load(str(bundle / "model.onnx")), full_check=True)
    assert "ConvTranspose" in (bundle / "ISSUE.md").read_text()
    # the standalone repro reproduces with compstack made unimportable
    script = "import runpy, sys; sys.modules['compstack'] = None; runpy.run_path(sys.argv[1], run_name='__main__')"
    done = subprocess.run([sys.executable, "-P", "-c", script, str(bundle / "repro_tvm-llvm.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr
    expected = list(numpy_helper.to_array(onnx.load_tensor(str(bundle / "test_data_set_0" / "output_0.pb"))).shape)
    assert "mismatch reproduced" in done.stdout and f"expected {expected}" in done.stdout
    for other in others:  # every other stack's standalone repro runs and agrees with the reference
        done = subprocess.run([sys.executable, "-P", "-c", script, str(bundle / f"repro_{other}.py")],
                              capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 0 and "no mismatch" in done.stdout, (other, done.stdout, done.stderr[-2000:])
    again = replay(bundle)
    assert again["reproduces"] and again["target"] == "tvm-llvm"
    # a repro that cannot run (the stack missing) exits 2, never 1 ("reproduced")
    blocked = "import runpy, sys; sys.modules['tvm'] = None; runpy.run_path(sys.argv[1], run_name='__main__')"
    done = subprocess.run([sys.executable, "-P", "-c", blocked, str(bundle / "repro_tvm-llvm.py")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and "could not run" in done.stdout


def test_keep_a_disagreement_between_two_stacks() -> None:
    rep = explain(_deconv_model(4, 4), {"x": _x((1, 1, 3, 3))}, ["tvm-llvm", "ort-cpu"], keep="tvm-llvm!=ort-cpu",
                  steps="reduce")
    assert rep["found"] and rep["keep"] == "tvm-llvm!=ort-cpu"
    assert rep["reduce"]["ops"] == ["ConvTranspose"]
    same = explain(_deconv_model(4, 4), {"x": _x((1, 1, 3, 3))}, ["ort-cpu", "xla-cpu"], keep="ort-cpu!=xla-cpu")
    assert not same["found"]


def test_explain_ort_agrees_on_the_same_model() -> None:
    rep = explain(_deconv_model(), {"x": _x((1, 1, 3, 3))}, ["ort-cpu"])
    assert not rep["found"]
    assert {v["kind"] for v in rep["verdicts"]["ort-cpu"].values()} == {"ok"}


# ---- made-on-purpose faults -------------------------------------------------------------


def test_wrong_op_in_a_30_node_model_is_named_and_reduced_to_it() -> None:
    ops = (_FILLER * 5)[:30]
    ops[17] = "Sin"
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-sin"])
    assert rep["bisect"]["node"]["name"] == "n17_Sin" and rep["bisect"]["kind"] == "op"
    assert rep["bisect"]["compiles"] <= 7  # ceil(log2 30) + 2
    assert rep["reduce"]["ops"] == ["Sin"]
    # the second pass: the input shrinks to one element, then all ones (sin 1 != cos 1)
    assert rep["simplify"]["steps"] == ["input t16: shape [4, 8] -> [1, 1]", "input t16: all ones"]
    # ORT with its optimiser off is still wrong (the fault is in "lowering"): the stack
    assert rep["attribution"]["culprit"] == "stack"


def test_interaction_is_right_alone_and_reduced_to_the_pair() -> None:
    ops = (["Add", "Neg", "Sub", "Tanh"] * 8)[:30]
    ops[14], ops[15] = "Add", "Relu"  # the only Relu, after an Add
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-fused"])
    b = rep["bisect"]
    assert b["node"]["name"] == "n15_Relu" and b["kind"] == "interaction"
    assert rep["reduce"]["ops"] == ["Add", "Relu"]


def test_optimizer_fault_is_attributed_to_the_optimizer() -> None:
    ops = (_FILLER * 4)[:20]
    ops[9] = "Sin"
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-opt"])
    assert rep["reduce"]["ops"] == ["Sin"]
    assert rep["attribution"]["culprit"] == "optimizer"
    assert rep["attribution"]["checks"][-1]["holds"] is False


def test_the_pass_at_fault_is_named() -> None:
    ops = (_FILLER * 4)[:20]
    ops[9] = "Sin"
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-pass"])
    att = rep["attribution"]
    assert att["culprit"] == "optimizer" and att["pass_name"] == "SinFolding"
    assert att["checks"][-1]["run"] == "faulty-pass (disabled_optimizers=SinFolding)"


def test_ort_reports_the_transformers_that_changed_a_model() -> None:
    from compstack.core import ir as cir
    from compstack.targets.ort.target import OrtCpuTarget, OrtOptions

    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv"), helper.make_node("Relu", ["c"], ["z"])]
    graph = helper.make_graph(nodes, "cr", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 6, 6])], [w])
    model = cir.canonicalize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source="cr")
    applied = OrtCpuTarget().applied_passes(model)
    assert "ConvActivationFusion" in applied  # ORT's own log: Conv+Relu fused
    off = OrtCpuTarget(OrtOptions(disabled_optimizers=("ConvActivationFusion",)))
    assert "ConvActivationFusion" not in off.applied_passes(model)
    assert "FusedConv" not in off.lower(model).compile().as_text("optimized")


def test_tvm_reports_the_passes_that_changed_a_model_and_disables_them() -> None:
    from compstack.core import ir as cir
    from compstack.targets.relax.target import TvmLlvmTarget, TvmOptions

    model = cir.canonicalize(_chain(["Add", "Relu", "Mul", "Tanh"]), source="chain")
    applied = TvmLlvmTarget().applied_passes(model)
    assert "FuseOps" in applied and "LegalizeOps" in applied  # TVM's own pass instrument
    off = TvmLlvmTarget(TvmOptions(disabled_passes=("FuseOps",)))
    assert "FuseOps" not in off.applied_passes(model)
    compiled = off.lower(model).compile()
    x = _x((4, 8))
    want = explain(_chain(["Add", "Relu", "Mul", "Tanh"]), {"x": x}, ["tvm-llvm"],
                   target_options={"tvm-llvm": {"disabled_passes": "FuseOps"}})
    assert not want["found"] and compiled.run({"x": x})


def test_xla_reports_the_hlo_passes_that_changed_a_model_and_disables_them() -> None:
    from compstack.core import ir as cir
    from compstack.targets.xla.target import XlaCpuTarget, XlaOptions

    model = cir.canonicalize(_chain(["Add", "Relu", "Mul", "Tanh"]), source="chain")
    from compstack.targets.base import LowerRequest

    request = LowerRequest(example_inputs={"x": _x((4, 8))})
    on, off = XlaCpuTarget(None, request), XlaCpuTarget(XlaOptions(disable_hlo_passes=("fusion",)), request)
    assert "fusion" in on.applied_passes(model)  # XLA's own per-pass dump
    assert "fusion" not in off.applied_passes(model)
    rep = explain(_chain(["Add", "Relu", "Mul", "Tanh"]), {"x": _x((4, 8))}, ["xla-cpu"],
                  target_options={"xla-cpu": {"disable_hlo_passes": "fusion"}})
    assert not rep["found"]  # still right without fusion


def test_inductor_without_its_code_generation_agrees() -> None:
    from compstack.targets.inductor.target import InductorCpuTarget

    assert InductorCpuTarget.optimizations_off == {"options": {"backend": "aot_eager"}}
    rep = explain(_chain(["Add", "Relu", "Mul", "Tanh"]), {"x": _x((4, 8))}, ["inductor-cpu"],
                  target_options={"inductor-cpu": {"backend": "aot_eager"}})
    assert not rep["found"] and rep["status"]["inductor-cpu"]["status"] == "ok"


def test_translation_bug_is_attributed_to_compstack() -> None:
    ops = (_FILLER * 3)[:16]
    ops[8] = "Sin"
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-xla-translation"])
    assert rep["bisect"]["node"]["op_type"] == "Sin"
    att = rep["attribution"]
    assert att["culprit"] == "compstack" and "compstack bug" in att["summary"]
    assert att["checks"][0]["run"].endswith("eager") and att["checks"][0]["holds"] is True
    healthy = explain(_chain(ops), {"x": _x((4, 8))}, ["xla-cpu"])  # the real translation of the same model
    assert not healthy["found"]


def test_float32_ill_conditioned_model_is_not_called_a_stack_bug() -> None:
    # (x + 3e4) - 3e4 in float32 keeps about 3 significant digits of x: every honest
    # float32 computation misses the tolerance, the float64 reference does not.
    big = numpy_helper.from_array(np.full((64, 64), 3e4, np.float32), "big")
    nodes = [helper.make_node("Add", ["x", "big"], ["s"], name="add_big"),
             helper.make_node("Sub", ["s", "big"], ["y"], name="sub_big")]
    graph = helper.make_graph(nodes, "cancel", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [64, 64])], [big])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = (np.random.default_rng(3).standard_normal((64, 64)) * 1e-2).astype(np.float32)
    rep = explain(model, {"x": x}, ["ort-cpu"])
    v = rep["verdicts"]["ort-cpu"]["y"]
    assert v["kind"] == "imprecise", v  # beyond rtol/atol, within the float32 noise floor
    assert v["max_abs"] > 1e-5 + 1e-3 * 1e-2 and v["floor"] > 0
    assert not rep["found"]


def test_undefined_behaviour_is_labelled() -> None:
    from compstack.explain import undefined_behaviour

    nodes = [helper.make_node("Div", ["a", "b"], ["q"], name="idiv"),
             helper.make_node("Cast", ["f"], ["i"], name="tocast", to=TensorProto.INT8),
             helper.make_node("RandomNormalLike", ["f"], ["r"], name="noise")]
    graph = helper.make_graph(nodes, "ub", [helper.make_tensor_value_info("a", TensorProto.INT32, [2]),
                                            helper.make_tensor_value_info("b", TensorProto.INT32, [2]),
                                            helper.make_tensor_value_info("f", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info(n, t, [2]) for n, t in
                               (("q", TensorProto.INT32), ("i", TensorProto.INT8), ("r", TensorProto.FLOAT))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    found = undefined_behaviour(model, {"a": np.array([4, 5], np.int32), "b": np.array([2, 0], np.int32),
                                        "f": np.array([1.0, 300.0], np.float32)})
    assert [line.split(":")[0] for line in found] == ["idiv", "tocast", "noise"]
    assert undefined_behaviour(model, {"a": np.array([4, 5], np.int32), "b": np.array([2, 1], np.int32),
                                       "f": np.array([1.0, 3.0], np.float32)}) == ["noise: RandomNormalLike is random; runs need not agree"]


# ---- the commands -----------------------------------------------------------------------


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-m", "compstack.cli", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600, env=dict(os.environ))


def test_cli_explain_bisect_reduce_and_replay(tmp_path: Path) -> None:
    onnx.save(_deconv_model(), str(tmp_path / "model.onnx"))
    done = _cli("bisect", "model.onnx", "--targets", "tvm-llvm", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["bisect"]["node"]["name"] == "deconv"
    done = _cli("reduce", "model.onnx", "--targets", "tvm-llvm", "-o", "small.onnx", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    small = onnx.load(str(tmp_path / "small.onnx"))
    assert [n.op_type for n in small.graph.node] == ["ConvTranspose"]
    done = _cli("explain", "model.onnx", "--targets", "tvm-llvm,ort-cpu", "--keep", "tvm-llvm!=ref,ort-cpu==ref",
                "-o", "bug", "--time-budget", "5m", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "first divergent node: deconv" in done.stdout and "attribution: stack" in done.stdout
    assert (tmp_path / "bug" / "repro_ort-cpu.py").is_file()  # every target gets its repro
    done = _cli("explain", "--replay", "bug", cwd=tmp_path)
    assert done.returncode == 0 and "the discrepancy reproduces" in done.stdout


def test_zero_node_model_has_nothing_to_explain() -> None:
    graph = helper.make_graph([], "passthru", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])])
    rep = explain(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
                  {"x": np.ones(2, np.float32)}, ["ort-cpu"])
    assert not rep["found"] and "no nodes" in rep["summary"]


def test_bundle_folder_with_other_files_is_never_touched(tmp_path: Path) -> None:
    onnx.save(_deconv_model(2, 2), str(tmp_path / "model.onnx"))
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    for out in ("mine", "."):
        done = _cli("explain", "model.onnx", "--targets", "tvm-llvm", "-o", out, cwd=tmp_path)
        assert done.returncode == 2 and "not empty" in done.stderr, done.stderr
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious" and (tmp_path / "model.onnx").is_file()


@pytest.mark.parametrize("flags,model,needle", [
    ({}, True, "malformed bundle"),
    ({"tvm-llvm": 5}, True, "malformed bundle"),
    ({"tvm-llvm": {"options": {}}}, False, "unreadable bundle"),
])
def test_replay_of_a_malformed_bundle_is_one_line(tmp_path: Path, flags: dict, model: bool, needle: str) -> None:
    b = tmp_path / "b"
    b.mkdir()
    if model:
        onnx.save(_deconv_model(1, 1), str(b / "model.onnx"))
    else:
        (b / "model.onnx").write_bytes(b"garbage")
    np.savez(b / "inputs.npz", x=_x((1, 1, 3, 3)))
    (b / "explain.json").write_text(json.dumps({"target": "tvm-llvm"}))
    (b / "flags.json").write_text(json.dumps(flags))
    done = _cli("explain", "--replay", "b", cwd=tmp_path)
    assert done.returncode == 2 and needle in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize("args,needle", [
    (["explain", "model.onnx"], "--targets is required"),
    (["explain", "model.onnx", "--targets", "ort-cpu", "--keep", "ort-cpu~ref"], "--keep"),
    (["explain", "model.onnx", "--targets", "ort-cpu", "--keep", "tvm-llvm!=ref"], "not one of --targets"),
    (["explain", "model.onnx", "--targets", "ort-cpu", "--time-budget", "soon"], "--time-budget"),
    (["explain", "model.onnx", "--targets", "nosuch"], "unknown target"),
    (["explain", "--replay", "."], "not a compstack explain bundle"),
    (["reduce", "missing.onnx", "--targets", "ort-cpu"], "missing.onnx"),
])
def test_cli_bad_input_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    onnx.save(_deconv_model(2, 2), str(tmp_path / "model.onnx"))
    done = _cli(*args, cwd=tmp_path)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert needle in done.stderr and "Traceback" not in done.stderr
    assert len(said(done.stderr)) == 1


def test_a_precision_knob_that_closes_the_gap_is_no_bug() -> None:
    ops = (_FILLER * 4)[:20]
    ops[9] = "Sin"
    rep = explain(_chain(ops), {"x": _x((4, 8))}, ["faulty-precision"])
    att = rep["attribution"]
    assert att["culprit"] == "precision" and att["knob"] == "strict-test-knob"
    assert "differs because of strict-test-knob" in att["summary"] and "not a bug" in att["summary"]
    assert att["checks"][-1] == {**att["checks"][-1], "run": "faulty-precision (opt_level=basic)", "holds": False}


def test_input_shapes_shrink_together_and_only_while_the_model_stays_valid() -> None:
    from onnx.reference import ReferenceEvaluator

    from compstack.explain.core import _valid, shrink_shapes

    def runs(m: onnx.ModelProto, f: dict[str, np.ndarray]) -> bool:
        if not _valid(m):
            return False
        try:
            ReferenceEvaluator(m).run(None, f)
        except Exception:  # noqa: BLE001 - a candidate the reference cannot run is refused
            return False
        return True

    def model(nodes, inputs, out_shape):  # noqa: ANN001, ANN202
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, out_shape)])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    add = model([helper.make_node("Add", ["x", "y"], ["z"])], [("x", [4, 8]), ("y", [4, 8])], [4, 8])
    feeds = {"x": _x((4, 8)), "y": _x((4, 8))}
    m, f, steps = shrink_shapes(add, feeds, runs)
    assert f["x"].shape == f["y"].shape == (1, 1) and np.array_equal(f["x"], feeds["x"][:1, :1])
    assert steps == ["input x: shape [4, 8] -> [1, 1]", "input y: shape [4, 8] -> [1, 1]"]
    shape = helper.make_tensor("s", TensorProto.INT64, [1], [32])
    reshape = model([helper.make_node("Constant", [], ["s"], value=shape), helper.make_node("Reshape", ["x", "s"], ["z"])],
                    [("x", [4, 8])], [32])
    m, f, steps = shrink_shapes(reshape, {"x": _x((4, 8))}, runs)
    assert steps == [] and f["x"].shape == (4, 8)  # 32 elements are needed: no smaller input is valid


def test_iree_precision_knob_is_a_flag_iree_compile_accepts(tmp_path) -> None:  # noqa: ANN001
    from compstack.targets.iree.target import IreeLlvmCpuTarget

    knob = IreeLlvmCpuTarget.precision_knobs["fp-reduction reassociation"]["options"]["extra_flags"]
    g = helper.make_graph([helper.make_node("ReduceSum", ["x"], ["z"], keepdims=0)], "r",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [])])
    path = tmp_path / "r.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    done = subprocess.run([sys.executable, "-P", "-m", "compstack.cli", "compare", str(path), "--targets", "iree-llvm-cpu",
                           "--option", f"iree-llvm-cpu:extra_flags={knob}", "--json", "--no-cache"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    row = json.loads(done.stdout)["results"][0]
    assert row["status"] == "ok" and knob in json.dumps(row)


def test_inductor_names_its_config_switches_and_turns_them_off() -> None:
    from torch._dynamo.utils import counters

    from compstack.core import ir as cir
    from compstack.targets.inductor.target import PASS_SWITCHES, InductorCpuTarget, InductorOptions

    w = numpy_helper.from_array(np.ones((16, 4), np.float32), "w")
    b = numpy_helper.from_array(np.ones((4,), np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["z"])]
    graph = helper.make_graph(nodes, "mm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 16])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 4])], [w, b])
    model = cir.canonicalize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), source="mm")
    applied = InductorCpuTarget().applied_passes(model)
    assert "pattern_matcher" in applied and set(applied) <= set(PASS_SWITCHES)  # mm + bias -> addmm fired
    off = InductorCpuTarget(InductorOptions(disable_config=("pattern_matcher",)))
    assert "pattern_matcher" not in off.applied_passes(model)
    assert counters["inductor"].get("pattern_matcher_count", 0) == 0  # switched off: nothing rewritten
    assert InductorOptions(disable_config=("nosuch",)).validate().startswith("disable_config=nosuch")


def test_a_failure_only_with_symbolic_dims_is_kept_symbolic_and_reduced() -> None:
    """A real TVM failure found by the fuzzer (finding 0001 of a symbolic-shape campaign):
    Cast+Mod(fmod=1) on an input with dynamic dims fails to compile; with static shapes it
    compiles. Pieces keep the graph input's dim_params only with ``keep_symbolic``."""
    w = numpy_helper.from_array(np.arange(10, dtype=np.int64).reshape(5, 1, 2) + 1, "w")
    nodes = [helper.make_node("Cast", ["x"], ["c"], to=TensorProto.INT64),
             helper.make_node("Mod", ["c", "w"], ["z"], fmod=1)]
    graph = helper.make_graph(nodes, "sym", [helper.make_tensor_value_info("x", TensorProto.BOOL, ["n", 1, "m"])],
                              [helper.make_tensor_value_info("z", TensorProto.INT64, [5, 1, 2])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = {"x": np.array([False, False, True, False, False, True, True, False, True, True]).reshape(5, 1, 2)}
    static = explain(model, feeds, ["tvm-llvm"], steps="reduce")
    assert not static["found"]  # every piece static: TVM compiles it
    sym = explain(model, feeds, ["tvm-llvm"], steps="reduce", keep_symbolic=True)
    assert sym["found"] and sym["reduce"]["ops"] == ["Cast", "Mod"]
    assert sym["status"]["tvm-llvm"]["status"] == "failed" and sym["status"]["tvm-llvm"]["stage"] == "compile"


def test_with_input_shapes_keeps_symbolic_dims() -> None:
    from compstack.explain.core import with_input_shapes
    from compstack.explain.graph import symbolic_like

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4, 2])])
    shrunk = with_input_shapes(helper.make_model(graph), {"x": (1, 2, 1)})
    assert [d.dim_param or d.dim_value for d in shrunk.graph.input[0].type.tensor_type.shape.dim] == ["n", 2, 1]
    vi = symbolic_like(graph.input[0], (3, 1, 1))
    assert [d.dim_param or d.dim_value for d in vi.type.tensor_type.shape.dim] == ["n", 1, 1]
    assert [d.dim_value for d in symbolic_like(graph.input[0], (3, 1)).type.tensor_type.shape.dim] == [3, 1]


def test_a_failure_on_symbolic_dims_reproduces_from_its_bundle(tmp_path: Path) -> None:
    """A stack that fails only when an input dim is symbolic (tvm-llvm 0.27's Relax frontend on
    Pow with a ``dim_param`` input: "emit_te now only supports Tensor that has ShapeExpr shape",
    found by ``compstack fuzz --seed 7``): the reduced bundle keeps the symbolic dim the
    reduction checked, so its replay reproduces (it did not while shrinking dropped it)."""
    c = numpy_helper.from_array(-np.ones((3, 1, 1), np.float16), "c")
    graph = helper.make_graph([helper.make_node("Pow", ["x", "c"], ["y"]), helper.make_node("Relu", ["y"], ["z"])],
                              "pow", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["d", 2, 2])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT16, [3, 2, 2])], [c])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    feeds = {"x": np.full((3, 2, 2), 2.0, np.float16)}
    rep = explain(model, feeds, ["tvm-llvm"], out_dir=tmp_path / "bug", keep_symbolic=True)
    if not rep["found"]:
        pytest.skip("this tvm-llvm compiles Pow on a symbolic dim: nothing to reproduce")
    saved = onnx.load(str(tmp_path / "bug" / "model.onnx"))
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in saved.graph.input]
    assert any(isinstance(d, str) for ds in dims for d in ds), dims  # the symbolic dim is still there
    again = replay(tmp_path / "bug")
    assert again["reproduces"] and again["target"] == "tvm-llvm", again


def test_a_kept_failure_must_fail_with_the_same_error_class() -> None:
    """A reduction keeps the failure it was given: a piece that fails at the same stage with
    another error class (a different bug) does not count as the failure reproduced."""
    from compstack.explain.keep import error_class

    assert error_class("compile: AssertionError: emit_te now only supports Tensor that has ShapeExpr shape") \
        == "AssertionError"
    assert error_class("InternalError: CodeGenVM cannot emit this Relax operator directly") == "InternalError"
    assert error_class("killed after 60 s") == ""
