"""Shared fixtures: tiny ONNX models built in code, isolated cache/db folders, a CLI runner."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
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

#: Progress on a stderr that is not a terminal (compstack.report.tables.Progress): one line per
#: event (``[  12.3 s] TARGET: STAGE``) and one per finished job (``  TARGET  STATUS (4.5 s)``).
#: Not part of an error message: "bad input is one line" is about the lines besides these.
PROGRESS = re.compile(r"^\[\s*\d+\.\d s\] |^  \S+\s+\S+ \(\d+\.\d s\)$")


def said(text: str) -> list[str]:
    """The non-empty lines of a command's output that are not progress (:data:`PROGRESS`)."""
    return [ln for ln in text.strip().splitlines() if ln.strip() and not PROGRESS.match(ln)]


def gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process ``pid`` ends within ``within_s`` seconds: it no longer exists, or it is
    a zombie (dead, not yet reaped: a killed command's orphans are re-parented to the nearest
    child subreaper, which may be this pytest process once a test has started a worker in it,
    and nothing here reaps them)."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)

# Jobs run on a fresh process each unless a test asks for another executor: the default of
# multi-target commands, the daemon (compstack.run.daemon), would leave one background
# server per test's environment (each test has its own cache folder). tests/test_daemon.py
# and the executor-parametrised fault tests run the daemon; their servers live in a socket
# folder of this session's own, stopped at the end (_daemons).
# Tests never depend on the caller's environment: every COMPSTACK_* and XDG_* variable of the
# shell that started pytest is dropped here, once, before any test (or compstack) reads one
# (a user's COMPSTACK_CACHE_DIR made test_store see the user's cache: issue #29). Kept: the two
# variables that name another framework's interpreter (the paddle/mindspore-marked tests run
# only where the user set one up); they change no setting of compstack's own.
_KEEP = ("COMPSTACK_PADDLE_PYTHON", "COMPSTACK_MINDSPORE_PYTHON")
for _name in [n for n in os.environ if n.startswith(("COMPSTACK_", "XDG_")) and n not in _KEEP]:
    del os.environ[_name]
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


# Under pytest-xdist (the README's test command runs ``-n 2``) two tests share the machine. A
# test marked ``serial`` (a latency, a kernel-time sum, a deadline measured against the clock)
# runs alone: every test holds a shared lock on one file of this run, a serial test an exclusive
# one. A second lock, the gate, gives the exclusive one priority: a serial test holds the gate
# while it waits, so the other worker's next test waits at the gate instead of starving it
# (the readers-writer lock of flock(2), with writer preference).
_RUN_ID = os.environ.get("PYTEST_XDIST_TESTRUNUID")


@pytest.fixture(autouse=True)
def _share_the_machine(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold this run's machine lock for the test: exclusive for ``serial``, shared otherwise."""
    if _RUN_ID is None:
        yield
        return
    import fcntl

    base = Path(tempfile.gettempdir()) / f"compstack-tests-{_RUN_ID}"
    serial = request.node.get_closest_marker("serial") is not None
    with open(f"{base}.gate", "a+") as gate, open(f"{base}.lock", "a+") as lock:
        if serial:
            fcntl.flock(gate, fcntl.LOCK_EX)
            fcntl.flock(lock, fcntl.LOCK_EX)
        else:
            fcntl.flock(gate, fcntl.LOCK_SH)
            fcntl.flock(lock, fcntl.LOCK_SH)
            fcntl.flock(gate, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            if serial:
                fcntl.flock(gate, fcntl.LOCK_UN)


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
