"""``compstack import-profile``: trtexec profile + layer info mapped to the IR's nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compstack.targets.trt.profile import metadata_nodes, split_layer_name
from conftest import make_mlp, run_cli, said

# The layout of trtexec --exportProfile (Profiler::exportJSONProfile, sampleReporting.cpp).
PROFILE = [
    {"count": 10},
    {"name": "fc1 + bias1 + relu1", "timeMs": 3.0, "averageMs": 0.3, "medianMs": 0.29, "percentage": 75.0},
    {"name": "fc2", "timeMs": 1.0, "averageMs": 0.1, "medianMs": 0.1, "percentage": 25.0},
]

# The layout of trtexec --exportLayerInfo with --profilingVerbosity=detailed; the fused
# layer's Metadata lists its three ONNX nodes joined by a control character.
LAYER_INFO = {
    "Layers": [
        {"Name": "fc1 + bias1 + relu1", "LayerType": "CaskGemm",
         "Inputs": [{"Name": "x", "Location": "Device", "Dimensions": [4, 16], "Format/Datatype": "Float"}],
         "Outputs": [{"Name": "h2", "Location": "Device", "Dimensions": [4, 8], "Format/Datatype": "Float"}],
         "Metadata": "[ONNX Layer: fc1]\x1f[ONNX Layer: bias1]\x1f[ONNX Layer: relu1]",
         "TacticName": "sm80_xmma_gemm", "StreamId": 0},
        {"Name": "fc2", "LayerType": "CaskGemm",
         "Inputs": [{"Name": "h2"}], "Outputs": [{"Name": "y"}],
         "Metadata": "[ONNX Layer: fc2]"},
    ],
    "Bindings": ["x", "y"],
}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, Path]:
    model = make_mlp(tmp_path / "mlp.onnx")
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps(PROFILE))
    info = tmp_path / "layers.json"
    info.write_text(json.dumps(LAYER_INFO))
    return model, profile, info


def test_maps_fused_and_plain_layers(isolated_env: Path, files) -> None:
    model, profile, info = files
    proc = run_cli("import-profile", str(model), "--profile", str(profile), "--layer-info", str(info), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["schema_version"] == 1
    layers = {r["name"]: r for r in data["layers"]}
    fused = layers["fc1 + bias1 + relu1"]
    assert fused["nodes"] == ["fc1", "bias1", "relu1"] and fused["how"] == "metadata"
    assert fused["type"] == "CaskGemm" and fused["median_ms"] == pytest.approx(0.29)
    assert layers["fc2"]["nodes"] == ["fc2"]
    assert data["coverage"] == pytest.approx(1.0)
    assert data["unmapped_nodes"] == []
    assert data["total_average_ms"] == pytest.approx(0.4)
    assert data["total_time_ms"] == pytest.approx(4.0)
    assert data["count"] == 10


def test_text_table(isolated_env: Path, files) -> None:
    model, profile, info = files
    proc = run_cli("import-profile", str(model), "--profile", str(profile), "--layer-info", str(info))
    assert proc.returncode == 0, proc.stderr
    assert "fc1, bias1, relu1" in proc.stdout
    assert "coverage: 4/4 nodes (100.0 %)" in proc.stdout
    assert "0.4000 ms/run" in proc.stdout


def test_without_layer_info_uses_names_and_lists_unmapped(isolated_env: Path, tmp_path: Path) -> None:
    model = make_mlp(tmp_path / "mlp.onnx")
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps([{"count": 1}, {"name": "PWN(fc1, bias1)", "timeMs": 1.0, "averageMs": 1.0,
                                                  "percentage": 100.0}]))
    proc = run_cli("import-profile", str(model), "--profile", str(profile), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["layers"][0]["nodes"] == ["fc1", "bias1"] and data["layers"][0]["how"] == "name"
    assert data["coverage"] == pytest.approx(0.5)
    assert [n["name"] for n in data["unmapped_nodes"]] == ["relu1", "fc2"]


@pytest.mark.parametrize("content", ["{not json", json.dumps({"Layers": []}), json.dumps([{"count": 3}])])
def test_bad_profile_is_one_line_exit_2(isolated_env: Path, tmp_path: Path, content: str) -> None:
    model = make_mlp(tmp_path / "mlp.onnx")
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    proc = run_cli("import-profile", str(model), "--profile", str(bad))
    assert proc.returncode == 2
    assert len(said(proc.stderr)) == 1 and "--profile" in proc.stderr
    assert proc.stdout == ""


def test_missing_files_exit_2(isolated_env: Path, files, tmp_path: Path) -> None:
    model, profile, _ = files
    proc = run_cli("import-profile", str(model), "--profile", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and len(said(proc.stderr)) == 1
    proc = run_cli("import-profile", str(model), "--profile", str(profile), "--layer-info", str(profile))
    assert proc.returncode == 2 and "--layer-info" in proc.stderr
    assert len(said(proc.stderr)) == 1


def test_split_layer_name_forms() -> None:
    order = ["a", "b", "c", "d", "e"]
    assert split_layer_name("a + c", order) == ["a", "c"]
    assert split_layer_name("PWN(PWN(b, a), c)", order) == ["a", "b", "c"]
    assert split_layer_name("{ForeignNode[b...d]}", order) == ["b", "c", "d"]
    assert split_layer_name("Reformatting CopyNode for Input Tensor 0 to a", order) == []
    assert split_layer_name("e", order) == ["e"]


def test_metadata_separators_and_function_stack() -> None:
    meta = "[ONNX Layer: a]\x1f[ONNX Layer: b | outer (MyFn)]\x1e[ONNX Layer: c]"
    assert metadata_nodes(meta) == ["a", "b", "c"]


def test_tensorrt_joins_fusion_and_profile_tables(isolated_env: Path, files) -> None:
    """The imported TensorRT profile becomes a row beside live targets: kernel map,
    per-layer time, --missed and --by-node (time split by FLOPs within a fused layer)."""
    model, profile, info = files
    proc = run_cli("fusion", str(model), "--targets", "ort-cpu", "--missed", "--trt-profile", str(profile),
                   "--trt-layer-info", str(info), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    rows = {t["target"]: t for t in data["targets"]}
    trt = rows["tensorrt (trtexec)"]
    assert trt["kernels"]["kernel_count"] == 2 and trt["kernels"]["coverage"] == pytest.approx(1.0)
    assert [k["nodes"] for k in trt["kernels"]["kernels"]] == [["fc1", "bias1", "relu1"], ["fc2"]]
    assert trt["kernels"]["kernels"][0]["kind"] == "library"
    proc = run_cli("profile", str(model), "--target", "ort-cpu", "--by-node", "--min-runs", "3", "--min-time", "0",
                   "--warmup", "1", "--trt-profile", str(profile), "--trt-layer-info", str(info), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    nodes = {r["node"]: r for r in data["by_node"]}
    trt_ms = {n: r["ms"]["tensorrt (trtexec)"] for n, r in nodes.items()}
    assert trt_ms["fc2"] == pytest.approx(0.1)
    assert sum(trt_ms[n] for n in ("fc1", "bias1", "relu1")) == pytest.approx(0.29)
    assert trt_ms["fc1"] > trt_ms["bias1"]  # split by FLOPs: the MatMul dominates
    row = next(t for t in data["targets"] if t["target"] == "tensorrt (trtexec)")
    assert row["roofline"] == {}  # this machine's CPU peaks say nothing about the GPU


def test_trt_layer_info_needs_profile(isolated_env: Path, files) -> None:
    model, _, info = files
    proc = run_cli("fusion", str(model), "--targets", "ort-cpu", "--trt-layer-info", str(info))
    assert proc.returncode == 2 and "--trt-layer-info needs --trt-profile" in proc.stderr
