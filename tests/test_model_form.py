"""The stacks get the user's ONNX model as written (its opset), ``--opset N`` upgrades on
request, and every row says which form it ran."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import make_mlp, run_cli

FAST = ["--min-runs", "3", "--min-time", "0", "--warmup", "1"]


def _rows(*args: str) -> tuple[dict, dict[str, dict]]:
    proc = run_cli("compare", *args, "--json", "--no-latency")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    return data, {r["target"]: r for r in data["results"]}


def _opset_line(stage_file: Path) -> str:
    return stage_file.read_text().splitlines()[0]


def test_opset13_model_reaches_ort_at_opset13(isolated_env: Path) -> None:
    model = make_mlp(isolated_env / "mlp13.onnx", opset=13)
    data, rows = _rows(str(model), "--targets", "ort-cpu")
    row = rows["ort-cpu"]
    assert row["status"] == "ok" and row["outputs"][0]["ok"]
    assert row["flags"]["model_form"] == "as-written" and row["flags"]["model_opset"] == 13
    assert data["model"]["stack_form"] == "as-written" and data["model"]["stack_opset"] == 13
    out = isolated_env / "low"
    proc = run_cli("lower", str(model), "--target", "ort-cpu", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "ai.onnx:13" in _opset_line(out / "stages" / "00-onnx.txt")
    assert json.loads((out / "manifest.json").read_text())["flags"]["model_opset"] == 13


def test_opset_flag_upgrades_what_the_stacks_get(isolated_env: Path) -> None:
    model = make_mlp(isolated_env / "mlp13.onnx", opset=13)
    data, rows = _rows(str(model), "--targets", "ort-cpu", "--opset", "20")
    assert rows["ort-cpu"]["status"] == "ok"
    assert rows["ort-cpu"]["flags"]["model_form"] == "opset 20" and rows["ort-cpu"]["flags"]["model_opset"] == 20
    out = isolated_env / "low"
    assert run_cli("lower", str(model), "--target", "ort-cpu", "-o", str(out), "--opset", "20").returncode == 0
    assert "ai.onnx:20" in _opset_line(out / "stages" / "00-onnx.txt")
    proc = run_cli("compare", str(model), "--targets", "ort-cpu", "--opset", "12")
    assert proc.returncode == 2 and "--opset only upgrades" in proc.stderr


def test_table_names_the_form(isolated_env: Path) -> None:
    model = make_mlp(isolated_env / "mlp13.onnx", opset=13)
    proc = run_cli("compare", str(model), "--targets", "ort-cpu", "--no-latency")
    assert proc.returncode == 0, proc.stderr
    assert "as written (opset 13)" in proc.stdout


def _resize10(path: Path) -> Path:
    """An opset-10 Resize (nearest, x2): compstack's FX converters start at Resize-11."""
    scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1.0, 1.0, 2.0, 2.0])
    node = helper.make_node("Resize", ["x", "scales"], ["y"], mode="nearest")
    graph = helper.make_graph([node], "r", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 6])], [scales])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)]), path)
    return path


def test_translated_path_says_it_needed_the_canonical_form(isolated_env: Path) -> None:
    pytest.importorskip("torch")
    model = _resize10(isolated_env / "resize10.onnx")
    outs = isolated_env / "o.npz"
    _, rows = _rows(str(model), "--targets", "ort-cpu,inductor-cpu", "--save-outputs", str(outs))
    assert rows["ort-cpu"]["flags"]["model_opset"] == 10  # ORT runs the user's Resize-10
    ind = rows["inductor-cpu"]
    assert ind["status"] == "ok", (ind["stage"], ind["error"])
    assert ind["flags"]["path"] == "translated" and ind["flags"]["model_form"] == "canonical"
    assert ind["flags"]["model_opset"] >= 20 and "Resize (opset 10)" in ind["flags"]["model_form_reason"]
    saved = np.load(outs)
    np.testing.assert_array_equal(saved["inductor-cpu::y"], saved["ort-cpu::y"])


def test_dump_shows_the_stack_the_model_as_written(isolated_env: Path) -> None:
    model = make_mlp(isolated_env / "mlp13.onnx", opset=13)
    proc = run_cli("dump", str(model), "--target", "ort-cpu", "--stage", "onnx")
    assert proc.returncode == 0, proc.stderr
    assert "ai.onnx:13" in proc.stdout.splitlines()[0]
