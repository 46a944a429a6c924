"""Shared fixtures: tiny ONNX models built in code, isolated cache/db folders, a CLI runner."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

TESTS = Path(__file__).parent


def make_mlp(path: Path, opset: int = 17, batch: int = 4) -> Path:
    """MatMul+Add+Relu+MatMul, float32 [batch,16] -> [batch,4], seeded weights."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((16, 8)).astype(np.float32), "w1")
    b1 = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b1")
    w2 = numpy_helper.from_array(rng.standard_normal((8, 4)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
        helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu1"),
        helper.make_node("MatMul", ["h2", "w2"], ["y"], name="fc2"),
    ]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])], [w1, b1, w2])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]), path)
    return path


@pytest.fixture
def mlp_onnx(tmp_path: Path) -> Path:
    return make_mlp(tmp_path / "mlp.onnx")


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Cache and results db inside tmp_path; tests/ importable by worker processes."""
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPSTACK_DB", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def run_cli(*args: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run the real ``compstack`` CLI in a subprocess; returns the completed process."""
    return subprocess.run([sys.executable, "-m", "compstack.cli", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=timeout)
