"""compstack.analysis.irtext.irdiff on real stage texts: op histograms, graph matching, diffs."""

from __future__ import annotations

import json
import re
from typing import Any

import onnx
import pytest
from onnx import helper

import models as M
from compstack.analysis.irtext.irdiff import (
    GraphDiff,
    NodeRef,
    diff_texts,
    match_graphs,
    onnx_text_graph,
    op_histogram,
)
from compstack.core import ir as cir


def _target(module: str, cls: str) -> Any:
    """The target class, or skip when its stack is missing here."""
    mod = pytest.importorskip(module)
    target = getattr(mod, cls)
    if not target.availability().ok:
        pytest.skip(target.availability().reason)
    return target


def _lower(module: str, cls: str, proto: onnx.ModelProto) -> Any:
    return _target(module, cls)().lower(cir.from_proto(proto))


def _mlp_extra_relu() -> onnx.ModelProto:
    """The test MLP with one more Relu at the end (y -> relu2 -> y2)."""
    model = M.mlp()
    model.graph.node.append(helper.make_node("Relu", ["y"], ["y2"], name="relu2"))
    model.graph.output[0].name = "y2"
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.fixture(scope="module")
def ort_texts() -> dict[str, str]:
    """ORT ``onnx`` and ``optimized`` stages of mlp, conv_bn_relu and mlp+Relu."""
    out = {}
    for name, proto in (("mlp", M.mlp()), ("cbr", M.conv_bn_relu()), ("mlp_relu", _mlp_extra_relu())):
        lowered = _lower("compstack.targets.ort.target", "OrtCpuTarget", proto)
        out[f"{name}:onnx"] = lowered.as_text("onnx")
        out[f"{name}:optimized"] = lowered.compile().as_text("optimized")
    return out


@pytest.fixture(scope="module")
def iree_texts() -> dict[str, str]:
    out = {}
    for name, proto in (("mlp", M.mlp()), ("cbr", M.conv_bn_relu()), ("mlp_relu", _mlp_extra_relu())):
        lowered = _lower("compstack.targets.iree.target", "IreeLlvmCpuTarget", proto)
        out[f"{name}:torch-onnx"] = lowered.as_text("torch-onnx")
        if name != "mlp_relu":
            out[f"{name}:flow"] = lowered.as_text("flow")
    return out


@pytest.fixture(scope="module")
def tvm_texts() -> dict[str, str]:
    out = {}
    for name, proto in (("mlp", M.mlp()), ("mlp_relu", _mlp_extra_relu())):
        lowered = _lower("compstack.targets.relax.target", "TvmLlvmTarget", proto)
        out[f"{name}:relax"] = lowered.as_text("relax")
        out[f"{name}:relax-fused"] = lowered.as_text("relax-fused")
    return out


# ---- histograms --------------------------------------------------------------------------------

def test_iree_flow_histogram_counts_dispatches(iree_texts: dict[str, str]) -> None:
    for name, dispatches in (("mlp", 1), ("cbr", None)):
        text = iree_texts[f"{name}:flow"]
        hist = op_histogram(text, "mlir")
        expected = len(re.findall(r"= flow\.dispatch @", text))
        assert expected >= 1 and (dispatches is None or expected == dispatches)
        assert hist["flow.executable"] == hist["flow.dispatch"] == hist["flow.executable.export"] == expected
    assert op_histogram(iree_texts["mlp:flow"], "mlir")["linalg.matmul"] == 1


def test_iree_torch_onnx_histogram_counts_onnx_ops(iree_texts: dict[str, str]) -> None:
    hist = op_histogram(iree_texts["cbr:torch-onnx"], "mlir")
    assert hist["onnx.Conv"] == hist["onnx.BatchNormalization"] == hist["onnx.Relu"] == 1
    assert hist["onnx.Constant"] == 6 and "torch.operator" not in hist
    assert hist["func.func"] == 1 and hist["func.return"] == 1


def test_tvm_histograms(tvm_texts: dict[str, str]) -> None:
    assert op_histogram(tvm_texts["mlp:relax"], "tvmscript") == {"R.matmul": 1, "R.add": 1, "R.nn.relu": 1}
    fused = op_histogram(tvm_texts["mlp:relax-fused"], "tvmscript")
    assert fused == {"prim_func": 1, "call_tir:fused_matmul_add_relu": 1}
    # Uniqueness digits of a global do not change its kind.
    renamed = tvm_texts["mlp:relax-fused"].replace("fused_matmul_add_relu", "fused_matmul_add_relu2")
    assert op_histogram(renamed, "tvmscript") == fused


def test_onnx_text_histogram_and_graph(ort_texts: dict[str, str]) -> None:
    assert op_histogram(ort_texts["mlp:onnx"], "onnx-text") == {"MatMul": 1, "Add": 1, "Relu": 1}
    assert op_histogram(ort_texts["mlp:optimized"]) == {"com.microsoft::FusedGemm": 1}
    g = onnx_text_graph(ort_texts["mlp:onnx"])
    assert list(g.nodes) == ["matmul", "add", "relu"]
    assert [g.nodes[n]["op"] for n in g] == ["MatMul", "Add", "Relu"]
    assert g.edges["matmul", "add"]["tensors"] == ["xw"] and g.edges["add", "relu"]["tensors"] == ["xwb"]
    assert g.graph["inputs"] == ["x"] and g.graph["initializers"] == ["W", "b"] and g.graph["outputs"] == ["y"]


# ---- graph match (ORT onnx vs optimized) ----------------------------------------------------------

def test_ort_fuses_matmul_add_relu_into_one_node(ort_texts: dict[str, str]) -> None:
    match = match_graphs(ort_texts["mlp:onnx"], ort_texts["mlp:optimized"])
    assert len(match.fused) == 1
    group = match.fused[0]
    assert group.node.op == "com.microsoft::FusedGemm"
    assert group.covers == (NodeRef("matmul", "MatMul"), NodeRef("add", "Add"), NodeRef("relu", "Relu"))
    assert match.split == match.removed == match.added == match.kept == match.changed_op == ()


def test_ort_nchwc_conv_fusion_and_added_reorder(ort_texts: dict[str, str]) -> None:
    match = match_graphs(ort_texts["cbr:onnx"], ort_texts["cbr:optimized"])
    ops = {n: op for n, op in re.findall(r"= (\S+?)(?:<.*)?\(.*#\s(.+)$", ort_texts["cbr:optimized"], re.M)}
    assert len(match.fused) == 1, ops
    group = match.fused[0]
    assert group.node.op.endswith("Conv")
    assert [c.name for c in group.covers] == ["conv", "bn", "relu"]
    if "com.microsoft.nchwc::ReorderOutput" in ops.values():  # NCHWc layout on x86 CPUs
        assert [r.op for r in match.added] == ["com.microsoft.nchwc::ReorderOutput"]
    assert match.removed == () and match.split == ()


def test_graph_match_identity_keeps_every_node(ort_texts: dict[str, str]) -> None:
    match = match_graphs(ort_texts["cbr:onnx"], ort_texts["cbr:onnx"])
    assert [p.a.name for p in match.kept] == ["conv", "bn", "relu"]
    assert not (match.fused or match.split or match.added or match.removed or match.changed_op)


# ---- diff_texts ---------------------------------------------------------------------------------------

def _relu_row(diff: GraphDiff, kind: str) -> tuple[int, int, int]:
    row = diff.histogram[kind]
    return row.a, row.b, row.delta


def test_extra_relu_shows_in_every_stack(ort_texts: dict[str, str], iree_texts: dict[str, str],
                                         tvm_texts: dict[str, str]) -> None:
    cases = [("onnx", ort_texts, "Relu", r"^\+  %v\d+ = Relu\(%v\d+\)$"),
             ("torch-onnx", iree_texts, "onnx.Relu", r'^\+ .*torch\.operator "onnx\.Relu"'),
             ("relax", tvm_texts, "R.nn.relu", r"^\+ .*= R\.nn\.relu\(")]
    for stage, texts, kind, added_line in cases:
        diff = diff_texts(texts[f"mlp:{stage}"], texts[f"mlp_relu:{stage}"], a_name="mlp", b_name="mlp+relu")
        assert not diff.equal
        assert _relu_row(diff, kind) == (1, 2, 1), stage
        assert diff.unified[:2] == ["--- mlp", "+++ mlp+relu"]
        assert any(re.search(added_line, ln) for ln in diff.unified), (stage, diff.unified)
        assert (diff.added, diff.removed, diff.changed) == (0, 0, 1), stage
        assert any(re.match(rf"^\s+{re.escape(kind)}\s+1\s+2\s+\+1$", ln) for ln in diff.stat_text()), stage


def test_diff_of_ort_stages_reports_the_fusion(ort_texts: dict[str, str]) -> None:
    diff = diff_texts(ort_texts["mlp:onnx"], ort_texts["mlp:optimized"], a_name="ort:onnx", b_name="ort:optimized")
    assert diff.graph is not None and len(diff.graph.fused) == 1
    assert _relu_row(diff, "com.microsoft::FusedGemm") == (0, 1, 1)
    assert (diff.added, diff.removed, diff.changed) == (1, 3, 0)
    stat = diff.stat_text()
    assert any(ln.strip().startswith("fused") and "FusedGemm" in ln and "matmul [MatMul]" in ln for ln in stat)
    data = json.loads(json.dumps(diff.to_json()))
    assert data["graph"]["fused"][0]["node"]["op"] == "com.microsoft::FusedGemm"
    assert data["histogram"]["MatMul"] == {"a": 1, "b": 0, "delta": -1}


def test_equal_inputs(iree_texts: dict[str, str], tvm_texts: dict[str, str], ort_texts: dict[str, str]) -> None:
    for text in (iree_texts["mlp:flow"], tvm_texts["mlp:relax-fused"], ort_texts["cbr:optimized"]):
        diff = diff_texts(text, text)
        assert diff.equal and diff.unified == []
        assert all(r.delta == 0 for r in diff.histogram.values()) and diff.histogram
        assert (diff.added, diff.removed, diff.changed) == (0, 0, 0)
        assert diff.stat_text()[0].endswith(": equal")


def test_relax_vs_fused_histogram(tvm_texts: dict[str, str]) -> None:
    diff = diff_texts(tvm_texts["mlp:relax"], tvm_texts["mlp:relax-fused"])
    assert diff.graph is None and diff.a_dialect == diff.b_dialect == "tvmscript"
    assert _relu_row(diff, "call_tir:fused_matmul_add_relu") == (0, 1, 1)
    assert _relu_row(diff, "R.matmul") == (1, 0, -1)
