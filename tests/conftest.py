"""Shared fixtures: tiny ONNX models built in code, isolated cache/db folders, a CLI runner."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

if TYPE_CHECKING:
    from compstack.run.jobs import Job

TESTS = Path(__file__).parent

# Jobs run on a fresh process each unless a test asks for another executor: the default of
# multi-target commands, the daemon (compstack.run.daemon), would leave one background
# server per test's environment (each test has its own cache folder). tests/test_daemon.py
# and the executor-parametrised fault tests run the daemon; their servers live in a socket
# folder of this session's own, stopped at the end (_daemons).
os.environ.setdefault("COMPSTACK_EXECUTOR", "process")
os.environ.setdefault("COMPSTACK_DAEMON_IDLE_S", "60")
_RUNTIME = tempfile.mkdtemp(prefix="cs-rt-")  # short: a Unix socket path has at most 107 bytes
os.environ["XDG_RUNTIME_DIR"] = _RUNTIME


@pytest.fixture(scope="session", autouse=True)
def _daemons() -> Iterator[None]:
    """Stop every daemon the session started (their workers with them), then remove
    their socket folder."""
    yield
    from compstack.run.daemon import stop_daemons

    os.environ["XDG_RUNTIME_DIR"] = _RUNTIME
    stop_daemons()
    shutil.rmtree(_RUNTIME, ignore_errors=True)


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


def relu_proto() -> onnx.ModelProto:
    """One Relu node, float32 [2,3] -> [2,3], opset 21."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def relu_job(tmp: Path, name: str, target: str = "reference", **fields: Any) -> "Job":
    """A ``compare`` job of :func:`relu_proto` on ``target``: the model published in the store
    under ``tmp/cache``, one seeded input set in ``tmp/inputs.npz``, the job folder ``tmp/name``;
    ``fields`` are further :class:`~compstack.run.jobs.Job` fields."""
    from compstack import targets as registry
    from compstack.core import ir as cir
    from compstack.core.inputs import input_sets, save_npz
    from compstack.run.jobs import Job, pack_sets
    from compstack.run.session import model_file

    model = cir.from_proto(relu_proto())
    source = cir.SourceModel(name="relu", model=model)
    path = model_file(source, tmp / "cache")
    inputs = save_npz(tmp / "inputs.npz", pack_sets(input_sets(cir.graph_inputs(model), 1, 0)))
    ref = next(e.ref for e in registry.entries() if e.name == target)
    return Job(model_path=str(path), fingerprint=source.fingerprint, target=target, target_ref=ref,
               inputs_path=str(inputs), workdir=str(tmp / name), **fields)


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
