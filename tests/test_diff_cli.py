"""`compstack diff`: files and MODEL@TARGET:STAGE specs, exit codes, --stat/--json."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest

import models
from conftest import run_cli


@pytest.fixture
def two_models(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(models.mlp(), a)  # MatMul, Add, Relu
    onnx.save(models.conv_bn_relu(), b)  # Conv, BatchNormalization, Relu
    return a, b


def test_diff_two_models_reports_real_op_count_differences(two_models: tuple[Path, Path], isolated_env: Path) -> None:
    a, b = two_models
    proc = run_cli("diff", f"{a}@ort-cpu:onnx", f"{b}@ort-cpu:onnx", "--json")
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)
    hist = {op: (row["a"], row["b"]) for op, row in data["histogram"].items()}
    assert hist["MatMul"] == (1, 0) and hist["Add"] == (1, 0)
    assert hist["Conv"] == (0, 1) and hist["BatchNormalization"] == (0, 1) and hist["Relu"] == (1, 1)
    assert data["equal"] is False


def test_diff_same_spec_twice_is_equal_exit_0(two_models: tuple[Path, Path], isolated_env: Path) -> None:
    a, _ = two_models
    proc = run_cli("diff", f"{a}@iree-llvm-cpu:flow", f"{a}@iree-llvm-cpu:flow")
    assert proc.returncode == 0, proc.stderr
    assert "+++" not in proc.stdout


def test_diff_files_and_fusion_of_ort(two_models: tuple[Path, Path], isolated_env: Path) -> None:
    a, _ = two_models
    d1, d2 = isolated_env / "onnx.txt", isolated_env / "opt.txt"
    d1.write_text(run_cli("dump", str(a), "--target", "ort-cpu", "--stage", "onnx").stdout)
    d2.write_text(run_cli("dump", str(a), "--target", "ort-cpu", "--stage", "optimized").stdout)
    proc = run_cli("diff", str(d1), str(d2), "--color", "never")
    assert proc.returncode == 1
    assert "-  %v2 = MatMul(" in proc.stdout or "MatMul" in proc.stdout
    assert "fused" in proc.stdout and "matmul [MatMul], add [Add], relu [Relu]" in proc.stdout


def test_diff_before_after_fuseops(two_models: tuple[Path, Path], isolated_env: Path) -> None:
    a, _ = two_models
    proc = run_cli("diff", f"{a}@tvm-llvm:pass:FuseOps-", f"{a}@tvm-llvm:pass:FuseOps+", "--stat")
    assert proc.returncode == 1, proc.stderr
    assert "call:fused_matmul_add_relu" in proc.stdout
    assert "+++" not in proc.stdout  # --stat prints only the summary


@pytest.mark.parametrize("args, message", [
    (["nothere.mlir", "nothere2.mlir"], "nothere.mlir: no such file"),
    (["zoo:mlp@tvm-llvm:flow", "zoo:mlp@tvm-llvm:relax"], "unknown stage 'flow'"),
    (["zoo:mlp@nosuch:flow", "zoo:mlp@tvm-llvm:relax"], "unknown target 'nosuch'"),
    (["zoo:mlp@tvm-llvm:pass:NoSuchPass+", "zoo:mlp@tvm-llvm:relax"], "no pass named 'NoSuchPass'"),
])
def test_diff_errors_exit_2(args: list[str], message: str, isolated_env: Path) -> None:
    proc = run_cli("diff", *args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert message in proc.stderr and "Traceback" not in proc.stderr
