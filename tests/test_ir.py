"""Common IR: loading (and refusing bad files), canonical form, text, fingerprint, stats."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compstack.analysis.opstats import op_stats
from compstack.core import ir as cir
from compstack.core.errors import UserError
from conftest import make_mlp


def test_load_upgrades_opset_and_names_nodes(tmp_path: Path) -> None:
    path = make_mlp(tmp_path / "m.onnx", opset=13)
    model = cir.load(path)
    assert model.opset_imports[""] == cir.DEFAULT_OPSET
    assert [n.name for n in model.graph] == ["fc1", "bias1", "relu1", "fc2"]
    # Shape inference filled intermediate shapes.
    h2 = next(n for n in model.graph if n.name == "relu1").outputs[0]
    assert [int(d) for d in h2.shape] == [4, 8]


def test_unnamed_and_duplicate_nodes_get_unique_names(tmp_path: Path) -> None:
    nodes = [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"], name="r"),
             helper.make_node("Relu", ["b"], ["c"], name="r")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), tmp_path / "d.onnx")
    names = [n.name for n in cir.load(tmp_path / "d.onnx").graph]
    assert len(set(names)) == 3 and all(names)


def test_text_form_is_stable_and_hides_weights(tmp_path: Path) -> None:
    a = cir.to_text(cir.load(make_mlp(tmp_path / "a.onnx")))
    b = cir.to_text(cir.load(make_mlp(tmp_path / "b.onnx")))
    assert a == b
    assert "%h0 = MatMul(%x, %w1)  # fc1" in a
    assert "init   %w1: FLOAT[16,8] #" in a
    assert "0.1" not in a.split("init")[1].split("\n")[0]  # values are hashed, not printed


def test_fingerprint_tracks_content(tmp_path: Path) -> None:
    a = cir.load(make_mlp(tmp_path / "a.onnx"))
    b = cir.load(make_mlp(tmp_path / "b.onnx"))
    c = cir.load(make_mlp(tmp_path / "c.onnx", batch=8))
    assert cir.fingerprint(a) == cir.fingerprint(b)
    assert cir.fingerprint(a) != cir.fingerprint(c)
    assert len(cir.fingerprint(a)) == 16


def test_op_stats_counts_flops_and_params(tmp_path: Path) -> None:
    stats = op_stats(cir.load(make_mlp(tmp_path / "m.onnx")))
    assert stats.op_counts == {"Add": 1, "MatMul": 2, "Relu": 1}
    assert stats.params == 16 * 8 + 8 + 8 * 4
    assert stats.flops == 2 * 4 * 16 * 8 + 2 * 4 * 8 * 4


def test_conv_and_gemm_flops(tmp_path: Path) -> None:
    w = numpy_helper.from_array(np.ones((8, 3, 3, 3), np.float32), "w")
    b = numpy_helper.from_array(np.ones(8, np.float32), "b")
    gw = numpy_helper.from_array(np.ones((10, 8 * 16 * 16), np.float32), "gw")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Flatten", ["c"], ["f"]),
             helper.make_node("Gemm", ["f", "gw"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 10])], [w, b, gw])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), tmp_path / "c.onnx")
    stats = op_stats(cir.load(tmp_path / "c.onnx"))
    conv = 2 * (2 * 8 * 16 * 16) * (3 * 3 * 3) + 2 * 8 * 16 * 16
    gemm = 2 * 2 * 10 * (8 * 16 * 16)
    assert stats.flops == conv + gemm


def test_networkx_view_has_edges_with_bytes(tmp_path: Path) -> None:
    g = cir.to_networkx(cir.load(make_mlp(tmp_path / "m.onnx")))
    assert set(g.nodes) == {"fc1", "bias1", "relu1", "fc2"}
    data = g.get_edge_data("fc1", "bias1")["h0"]
    assert data["bytes"] == 4 * 8 * 4 and data["dtype"] == "FLOAT"


# ---- bad files: one clear UserError each -------------------------------------------------

def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such file"):
        cir.load(tmp_path / "nope.onnx")


def test_not_onnx(tmp_path: Path) -> None:
    p = tmp_path / "x.onnx"
    p.write_text("hello, I am not a protobuf\n")
    with pytest.raises(UserError, match=r"x.onnx: "):
        cir.load(p)


def test_truncated(tmp_path: Path) -> None:
    full = make_mlp(tmp_path / "m.onnx").read_bytes()
    p = tmp_path / "t.onnx"
    p.write_bytes(full[: len(full) // 2])
    with pytest.raises(UserError, match="t.onnx: .*(truncated|not an ONNX)"):
        cir.load(p)


def test_checker_failure(tmp_path: Path) -> None:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), tmp_path / "bad.onnx")
    with pytest.raises(UserError, match="bad.onnx: ONNX checker"):
        cir.load(tmp_path / "bad.onnx")


def test_unknown_domain(tmp_path: Path) -> None:
    node = helper.make_node("Frobnicate", ["x"], ["y"], domain="acme.ops", name="frob1")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("acme.ops", 1)])
    onnx.save(m, tmp_path / "dom.onnx")
    with pytest.raises(UserError, match="node 'frob1' uses unknown op domain 'acme.ops'"):
        cir.load(tmp_path / "dom.onnx")


def test_external_data_roundtrip_and_traversal_refused(tmp_path: Path) -> None:
    m = onnx.load(make_mlp(tmp_path / "m.onnx"))
    (tmp_path / "ok").mkdir()
    onnx.save(m, tmp_path / "ok" / "m.onnx", save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    loaded = cir.load(tmp_path / "ok" / "m.onnx")
    assert cir.fingerprint(loaded) == cir.fingerprint(cir.load(tmp_path / "m.onnx"))
    # Now point the location outside the model's folder.
    evil = onnx.load(tmp_path / "ok" / "m.onnx", load_external_data=False)
    for t in evil.graph.initializer:
        for e in t.external_data:
            if e.key == "location":
                e.value = "../../etc/passwd"
    (tmp_path / "evil").mkdir()
    onnx.save(evil, tmp_path / "evil" / "m.onnx")
    with pytest.raises(UserError, match="points outside the model's folder"):
        cir.load(tmp_path / "evil" / "m.onnx")


def test_save_to_unwritable_folder(tmp_path: Path) -> None:
    model = cir.load(make_mlp(tmp_path / "m.onnx"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(UserError, match="cannot write"):
        cir.save(model, blocker / "sub" / "m.onnx")


@pytest.mark.parametrize("target", ["ort-cpu", "tvm-llvm", "openvino-cpu"])
def test_memory_mapped_weights_reach_the_stacks(target: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A worker leaves a model's external weights memory-mapped above 1.5 GiB (Qwen2.5-0.5B,
    # the SD UNet). to_proto kept them as references relative to the model's folder, and a
    # stack handed the proto looked in its current folder: ORT "External data path ...
    # escapes working directory", TVM "not regular file", OpenVINO "invalid external data".
    from compstack import targets as registry
    from compstack.targets.base import LowerRequest

    if not registry.get(target).availability().ok:
        pytest.skip(f"{target} is not installed")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
                              "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 64])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(folder / "m.onnx"),
              save_as_external_data=True, location="m.onnx.data", size_threshold=0)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # where the stack would have looked for m.onnx.data
    import onnx_ir

    model = onnx_ir.load(str(folder / "m.onnx"))
    assert isinstance(model.graph.initializers["w"].const_value, onnx_ir.ExternalTensor)
    x = rng.standard_normal((2, 64)).astype(np.float32)
    out = registry.get(target)(registry.get(target).Options(), LowerRequest()).lower(model).compile().run({"x": x})
    y = next(iter(out.values())) if isinstance(out, dict) else out[0]
    np.testing.assert_allclose(y, x @ w + b, rtol=1e-4, atol=1e-4)


def test_a_model_past_2_gib_gets_the_same_fingerprint_after_a_save_and_load(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """sd-unet (3.4 GB) had no shape inference when exported (protobuf's limit) but had it
    when its cached file was loaded (weights external, proto small): another fingerprint, and
    the zoo cache threw the entry away. The size is simulated: any inline weight counts 2 GiB."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from compstack.core import ir as cir

    w = numpy_helper.from_array(np.ones((16, 16), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[w])
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    import compstack.core.largeproto as largeproto

    monkeypatch.setattr(largeproto, "byte_size", lambda p: 2**31 if any(len(t.raw_data) >= 256 for t in p.graph.initializer)
                        else p.ByteSize())
    model = cir.canonicalize(proto, source="big")
    assert any(v.name == "h" for v in model.graph[0].outputs) and model.graph.outputs[0].shape is not None
    cir.save(model, tmp_path / "m.onnx", external_data=True)
    again = cir.load(tmp_path / "m.onnx")
    assert cir.fingerprint(again) == cir.fingerprint(model)
    assert numpy_helper.to_array(onnx.load(str(tmp_path / "m.onnx")).graph.initializer[0]).sum() == 256.0
