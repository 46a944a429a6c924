"""The float64 reference of a model too large for onnx.reference (compstack.run.stackref):
compstack's translated program run eagerly in float64, its float32 run as the noise floor,
ORT with optimisations off as the cross-check. On the real stacks (PyTorch, ORT)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import compstack
from compstack import targets as registry
from compstack.run import refchoice
from compstack.run.session import CompareOptions
from compstack.run.stackref import LARGE_ROLE, UB_NOTE

pytest.importorskip("torch")

if "faulty-sin" not in registry.names():
    registry.register("faulty-sin", "faulty:WrongSinTarget")


def _cancel(tmp: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """``sin(a*b - c*b)`` with ``c`` within 1e-6 of ``a``: float32 loses most digits."""
    r = np.random.default_rng(2)
    a, b = (1000 + r.random(256)).astype(np.float32), (1000 + r.random(256)).astype(np.float32)
    c = (a * (1 + 1e-6 * r.standard_normal(256))).astype(np.float32)
    g = h.make_graph([h.make_node("Mul", ["a", "b"], ["p"]), h.make_node("Mul", ["c", "b"], ["q"]),
                      h.make_node("Sub", ["p", "q"], ["d"]), h.make_node("Sin", ["d"], ["y"])], "cancel",
                     [h.make_tensor_value_info(n, T.FLOAT, [256]) for n in "abc"],
                     [h.make_tensor_value_info("y", T.FLOAT, [256])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path := tmp / "cancel.onnx"))
    return path, {"a": a, "b": b, "c": c}


def _compare(tmp: Path, path: Path, feeds: dict[str, np.ndarray], targets: list[str], reference: str = "eager-float64",
             executor: str = "inline") -> compstack.Report:
    opts = CompareOptions(targets=targets, inputs=feeds, latency=None, cache=False, executor=executor,
                          reference=reference)
    return compstack.compare(str(path), targets, options=opts, cache_dir=tmp / "cache", db=tmp / "db.sqlite")


def test_the_eager_float64_reference_is_float64_and_gives_a_noise_floor(tmp_path: Path) -> None:
    path, feeds = _cancel(tmp_path)
    report = _compare(tmp_path, path, feeds, ["ort-cpu"])
    assert report.reference["role"] == LARGE_ROLE and report.reference["precision"] == "float64", report.reference
    ref = report.arrays["inductor-cpu::y"]
    a, b, c = (feeds[k].astype(np.float64) for k in "abc")
    assert ref.dtype == np.float64 and np.allclose(ref, np.sin(a * b - c * b), rtol=1e-12, atol=1e-12)
    row = report.results[0]
    out = row.outputs[0]  # ORT computes a*b - c*b in float32: beyond the tolerance, within the eager float32 floor
    assert row.status == "ok" and out["kind"] == "imprecise" and out["floor"] > 1e-3, (row.status, row.error, out)


def test_a_stack_beyond_the_floor_is_the_stacks_fault(tmp_path: Path) -> None:
    path, feeds = _cancel(tmp_path)
    row = _compare(tmp_path, path, feeds, ["faulty-sin"]).results[0]
    assert row.status == "mismatch" and row.fault == "stack", (row.status, row.fault, row.error)
    assert "agrees with a second float64 oracle (ort-cpu (opt_level=disable), float32)" in row.error, row.error
    assert UB_NOTE in row.notes


def test_a_wrong_reference_is_suspect_not_a_stack_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A defect of compstack's translation (Sin computed as Cos) is in the float64 program and
    its float32 run alike; the reference then disagrees with ORT (optimisations off) beyond
    the float32 noise floor, and the ORT row is reference-suspect, not a stack's mismatch."""
    import onnx_ir as ir

    import compstack.translate.fx as fx

    to_fx = fx.to_fx

    def wrong(model: ir.Model, **kw):  # noqa: ANN202, ANN003
        for node in model.graph:
            node.op_type = "Cos" if node.op_type == "Sin" else node.op_type
        return to_fx(model, **kw)

    monkeypatch.setattr(fx, "to_fx", wrong)  # inline executor: the reference's jobs run here
    path, feeds = _cancel(tmp_path)
    row = _compare(tmp_path, path, feeds, ["ort-cpu"]).results[0]
    assert row.status == "reference-suspect" and row.fault == "compstack", (row.status, row.fault, row.error)
    assert "the translated program in float64 (aot_eager) vs ort-cpu (opt_level=disable), float32" in row.error


def test_auto_takes_it_above_the_size_limit_and_a_failed_one_falls_back(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    path, feeds = _cancel(tmp_path)
    monkeypatch.setattr(refchoice, "FLOAT64_MAX_PARAMS", -1)
    assert _compare(tmp_path, path, feeds, ["ort-cpu"], reference="auto").reference["role"] == LARGE_ROLE
    g = h.make_graph([h.make_node("Sin", ["x"], ["s"]), h.make_node("Unique", ["s"], ["y"], sorted=1)], "u",
                     [h.make_tensor_value_info("x", T.FLOAT, [16])], [h.make_tensor_value_info("y", T.FLOAT, ["n"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(uniq := tmp_path / "uniq.onnx"))  # Unique: no FX converter, so no eager float64 program
    report = _compare(tmp_path, uniq, {"x": np.linspace(-1, 1, 16, dtype=np.float32)}, ["ort-cpu"], reference="auto")
    assert report.reference["target"] == "ort-cpu" and report.reference["fallback_from"] == "inductor-cpu"
    assert "role" not in report.reference and report.results[0].status == "ok"


def test_sweep_falls_back_as_compare_does(tmp_path: Path) -> None:
    from conftest import run_cli

    g = h.make_graph([h.make_node("Unique", ["x"], ["y"], sorted=1)], "u",
                     [h.make_tensor_value_info("x", T.FLOAT, [16])], [h.make_tensor_value_info("y", T.FLOAT, ["n"])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(uniq := tmp_path / "uniq.onnx"))
    res = run_cli("sweep", str(uniq), "--targets", "ort-cpu", "--reference", "eager-float64", "--no-latency",
                  "--db", str(tmp_path / "db.sqlite"), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    import sqlite3

    with sqlite3.connect(tmp_path / "db.sqlite") as conn:
        assert conn.execute("SELECT target, status, reference FROM results").fetchall() == [("ort-cpu", "ok", "ort-cpu")]


def test_the_float64_copy_without_protobuf_is_the_protobuf_one(tmp_path: Path) -> None:
    """to_float64_model (the eager float64 reference of a large model: weights widened one by
    one, no protobuf copy; sd-unet's went past 18 GB) gives the model to_float64 gives: the
    same graph, float64 weights, a narrowing Cast kept, integer initializers untouched, and
    the source model unchanged."""
    import onnx_ir as ir

    from compstack.core import ir as cir
    from compstack.targets.common.precision import to_float64, to_float64_model

    rng = np.random.default_rng(0)
    w = onnx.numpy_helper.from_array(rng.standard_normal((16, 16)).astype(np.float32), "w")
    idx = onnx.numpy_helper.from_array(np.arange(16, dtype=np.int64)[::-1].copy(), "idx")
    nodes = [h.make_node("MatMul", ["x", "w"], ["y"]), h.make_node("Gather", ["y", "idx"], ["g"], axis=1),
             h.make_node("Cast", ["g"], ["d"], to=T.DOUBLE), h.make_node("Cast", ["d"], ["n"], to=T.FLOAT),
             h.make_node("Constant", [], ["c"], value=onnx.numpy_helper.from_array(np.float32(0.5))),
             h.make_node("Mul", ["n", "c"], ["out"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 16])],
                         [h.make_tensor_value_info("out", T.FLOAT, [2, 16])], [w, idx])
    proto = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    model = ir.from_proto(proto)
    lean = cir.to_proto(to_float64_model(model))
    assert lean == to_float64(cir.to_proto(ir.from_proto(proto)))
    assert cir.to_proto(model) == cir.to_proto(ir.from_proto(proto))  # the source keeps its float32 weights
    assert onnx.numpy_helper.to_array(lean.graph.initializer[0]).dtype == np.float64
    assert onnx.numpy_helper.to_array(lean.graph.initializer[1]).dtype == np.int64
    assert [a.i for n in lean.graph.node if n.op_type == "Cast" for a in n.attribute] == [T.DOUBLE, T.FLOAT, T.DOUBLE]
