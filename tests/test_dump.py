"""`compstack stages` and `compstack dump`: real stage contents, per-pass dumps, timing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import onnx
import pytest

import models
from conftest import run_cli


@pytest.fixture
def mlp_file(tmp_path: Path) -> Path:
    path = tmp_path / "mlp3.onnx"
    onnx.save(models.mlp(), path)  # MatMul -> Add -> Relu
    return path


def test_stages_lists_iree_phases_in_order(isolated_env: Path) -> None:
    proc = run_cli("stages", "--target", "iree-llvm-cpu")
    assert proc.returncode == 0, proc.stderr
    names = [ln.split()[0] for ln in proc.stdout.splitlines()]
    assert names[:3] == ["torch-onnx", "input", "abi"]
    assert names.index("dispatch-creation") < names.index("flow") < names.index("stream") < names.index("vm")
    tvm = run_cli("stages", "--target", "tvm-llvm").stdout
    assert "relax-fused" in tvm and "tir   (after compile)" in tvm


def test_dump_one_stage_to_stdout(mlp_file: Path, isolated_env: Path) -> None:
    proc = run_cli("dump", str(mlp_file), "--target", "iree-llvm-cpu", "--stage", "flow")
    assert proc.returncode == 0, proc.stderr
    executables = re.findall(r"^\s*flow\.executable private @", proc.stdout, re.M)
    dispatches = re.findall(r"flow\.dispatch @", proc.stdout)
    assert len(executables) >= 1 and len(dispatches) == len(executables)
    assert "loc(" not in proc.stdout


def test_dump_unknown_stage_lists_valid_ones(mlp_file: Path, isolated_env: Path) -> None:
    proc = run_cli("dump", str(mlp_file), "--target", "tvm-llvm", "--stage", "flow")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "unknown stage 'flow' (valid: relax, relax-fused" in proc.stderr


def test_ort_optimized_stage_shows_fusion(mlp_file: Path, isolated_env: Path) -> None:
    proc = run_cli("dump", str(mlp_file), "--target", "ort-cpu", "--stage", "optimized")
    assert proc.returncode == 0, proc.stderr
    ops = re.findall(r"= ([\w.:]+)[<(]", proc.stdout)
    assert len(ops) < 3  # MatMul+Add+Relu became fewer nodes
    assert any("Fused" in op or op == "Gemm" for op in ops), ops


def test_dump_all_tvm_keeps_every_pass_with_timing(mlp_file: Path, isolated_env: Path) -> None:
    out = isolated_env / "d"
    proc = run_cli("dump", str(mlp_file), "--target", "tvm-llvm", "--all", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert (out / "00-relax.py").exists() and (out / "01-relax-fused.py").exists()
    index = json.loads((out / "passes" / "index.json").read_text())
    names = [r["name"] for r in index]
    assert "LegalizeOps" in names and "FuseOps" in names and "FuseTIR" in names
    fuse = next(r for r in index if r["name"] == "FuseOps")
    after = (out / "passes" / fuse["file"]).read_text()
    before = (out / "passes" / fuse["before"]).read_text()
    assert "fused_matmul_add_relu" in after and "fused_matmul_add_relu" not in before
    timing = {r["pass"]: r for r in json.loads((out / "passes" / "timing.json").read_text())}
    assert timing["FuseOps"]["wall_s"] > 0 and timing["FuseOps"]["runs"] == 1
    assert "pass timing" in proc.stdout


def test_print_after_change_keeps_fewer_iree_dumps(mlp_file: Path, isolated_env: Path) -> None:
    out_all, out_chg = isolated_env / "all", isolated_env / "chg"
    assert run_cli("dump", str(mlp_file), "--target", "iree-llvm-cpu", "--all", "-o", str(out_all)).returncode == 0
    proc = run_cli("dump", str(mlp_file), "--target", "iree-llvm-cpu", "--print-after-change", "-o", str(out_chg))
    assert proc.returncode == 0, proc.stderr
    every = json.loads((out_all / "passes" / "index.json").read_text())
    changed = json.loads((out_chg / "passes" / "index.json").read_text())
    assert 0 < len(changed) < len(every)
    assert all(r["changed"] for r in changed)
    names = {r["name"] for r in every}
    assert "iree-dispatch-creation-form-dispatch-regions" in names
    timing = json.loads((out_all / "passes" / "timing.json").read_text())
    assert any(r["pass"] == "CanonicalizerPass" and r["wall_s"] > 0 for r in timing)
