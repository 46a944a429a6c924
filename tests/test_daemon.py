"""The daemon executor (issue #12 part 7): workers that outlive a command, found again by
the next one, with the same limits and status words as every executor."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compstack.run.daemon import FRAMEWORK_ENV, _local_only, daemon_key, list_daemons, socket_dir, stop_daemons
from compstack.run.jobs import Job
from conftest import PROGRESS, run_cli


@pytest.fixture
def default_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This test's own store, no executor chosen (multi-target commands take the daemon),
    ``tests/`` importable by workers; the test's daemons are stopped at the end."""
    monkeypatch.delenv("COMPSTACK_EXECUTOR", raising=False)
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPSTACK_DB", str(tmp_path / "results.sqlite"))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")]))
    yield dict(os.environ)
    stop_daemons(current_only=True)


def _status(env: dict[str, str]) -> list[dict]:
    p = run_cli("daemon", "status", "--json", env=env)
    assert p.returncode == 0, p.stderr
    return [d for d in json.loads(p.stdout)["daemons"] if d["current"]]


def test_second_command_finds_the_daemon_and_its_warm_workers(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    args = ("compare", str(mlp_onnx), "--targets", "ort-cpu,xla-cpu", "--json", "--min-time", "0", "--min-runs", "3")
    first = run_cli(*args, env=default_env)
    assert first.returncode == 0, first.stderr
    [d1] = _status(default_env)
    pids = {w["target_ref"]: w["pid"] for w in d1["workers"]}
    assert len(pids) == 3 and d1["jobs"] == 3  # the reference and two targets, one worker each
    second = run_cli(*args, env=default_env)
    assert second.returncode == 0, second.stderr
    [d2] = _status(default_env)
    # the second command's reference outputs come from the store (compstack.run.oracle_cache): two more jobs
    assert d2["pid"] == d1["pid"] and d2["jobs"] == 5 and json.loads(second.stdout)["reference"].get("cached") is True
    assert {w["target_ref"]: w["pid"] for w in d2["workers"]} == pids  # the same processes served both commands
    for proc, stages in ((first, ("compile", "run")), (second, ("run",))):  # each job's stages reach its own
        for name in ("ort-cpu", "xla-cpu"):                                     # client (the second compiles nothing)
            for stage in stages:
                assert any(ln.endswith(f"] {name}: {stage}") for ln in proc.stderr.splitlines()), proc.stderr
    rows1 = {r["target"]: r for r in json.loads(first.stdout)["results"]}
    rows2 = {r["target"]: r for r in json.loads(second.stdout)["results"]}
    for name in ("ort-cpu", "xla-cpu"):  # ort-cpu from the store, xla-cpu the program its worker kept
        assert rows1[name]["status"] == rows2[name]["status"] == "ok"
        assert rows2[name]["cached"] is True
        # the same compiled program, so the same numbers against the reference
        assert rows2[name]["outputs"][0]["max_abs_err"] == rows1[name]["outputs"][0]["max_abs_err"]
    assert any("kept in memory" in n for n in rows2["xla-cpu"]["notes"])
    assert rows2["xla-cpu"]["compile_s"] == rows1["xla-cpu"]["compile_s"]  # the original compile's time
    stop = run_cli("daemon", "stop", "--current", "--json", env=default_env)
    assert stop.returncode == 0 and [s["pid"] for s in json.loads(stop.stdout)["stopped"]] == [d1["pid"]]
    assert _status(default_env) == []
    for pid in pids.values():  # its workers went with it
        with pytest.raises(ProcessLookupError):
            for _ in range(50):
                os.kill(pid, 0)
                time.sleep(0.1)


def test_no_cache_compiles_again_even_on_a_warm_worker(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    args = ("compare", str(mlp_onnx), "--targets", "ort-cpu,xla-cpu", "--json", "--no-latency")
    assert run_cli(*args, env=default_env).returncode == 0
    p = run_cli(*args, "--no-cache", env=default_env)
    assert p.returncode == 0, p.stderr
    assert [r["cached"] for r in json.loads(p.stdout)["results"]] == [False, False]


def test_faults_on_the_daemon_keep_their_status_words(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    from compstack import targets as registry
    from compstack.core import ir as cir
    from compstack.core.config import settings
    from compstack.core.latency import LatencyConfig
    from compstack.run.executors import Limits
    from compstack.run.session import CompareOptions, compare

    for name, cls in [("crash-segfault", "SegfaultTarget"), ("crash-hang", "HangTarget")]:
        if name not in registry.names():
            registry.register(name, f"crashy:{cls}")
    source = cir.SourceModel(name="mlp", model=cir.load(mlp_onnx))
    opts = CompareOptions(targets=["crash-segfault", "ort-cpu", "crash-hang"], limits=Limits(timeout_s=10),
                          latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0))
    report = compare(source, opts, settings())
    by = {r.target: r for r in report.results}
    assert by["crash-segfault"].status == "crashed" and "SIGSEGV" in by["crash-segfault"].error
    assert by["crash-hang"].status == "timeout" and by["crash-hang"].stage == "run"
    assert by["ort-cpu"].status == "ok" and by["ort-cpu"].outputs[0]["max_abs_err"] < 1e-5
    [d] = [d for d in list_daemons() if d["current"]]  # it was the daemon that ran them
    assert d["jobs"] == 4


def test_a_killed_client_takes_its_job_worker_with_it(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    """SIGKILL of the command (no cleanup runs) closes its connection: the daemon kills the
    worker of the job it was waiting for, and serves the next command."""
    code = ("import sys; from compstack import targets as r; r.register('crash-hang', 'crashy:HangTarget');"
            "from compstack.cli import main; main(sys.argv[1:])")
    proc = subprocess.Popen([sys.executable, "-c", code, "compare", str(mlp_onnx), "--targets", "ort-cpu,crash-hang",
                             "--no-latency", "--timeout", "300"], env=default_env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    busy = None
    for _ in range(600):
        ds = [d for d in list_daemons() if d["current"]]
        busy = next((w for d in ds for w in d["workers"] if w["busy"] and "Hang" in w["target_ref"]), None)
        if busy:
            break
        time.sleep(0.1)
    assert busy is not None, "the hanging job never reached the daemon"
    time.sleep(0.5)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    for _ in range(100):
        ds = [d for d in list_daemons() if d["current"]]
        if ds and not any("Hang" in w["target_ref"] for w in ds[0]["workers"]) and not ds[0]["active"]:
            break
        time.sleep(0.1)
    [d] = [d for d in list_daemons() if d["current"]]
    assert not any("Hang" in w["target_ref"] for w in d["workers"]) and d["active"] == 0
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(busy["pid"], 0)
            time.sleep(0.1)


def test_unsafe_socket_folder_falls_back_to_an_in_command_pool(mlp_onnx: Path, default_env: dict[str, str],
                                                               tmp_path: Path) -> None:
    runtime = Path(default_env["XDG_RUNTIME_DIR"]) / "open"
    (runtime / "compstack").mkdir(parents=True)
    (runtime / "compstack").chmod(0o777)  # anyone could answer as the server
    env = {**default_env, "XDG_RUNTIME_DIR": str(runtime)}
    p = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm", "--json", "--no-latency", env=env)
    assert p.returncode == 0, p.stderr
    assert "daemon executor unavailable" in p.stderr and "mode 0700" in p.stderr
    assert [r["status"] for r in json.loads(p.stdout)["results"]] == ["ok", "ok"]
    assert not list((runtime / "compstack").glob("*.sock"))
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        with pytest.raises(OSError, match="mode 0700"):
            socket_dir()
    finally:
        os.environ["XDG_RUNTIME_DIR"] = default_env["XDG_RUNTIME_DIR"]


def test_idle_daemon_leaves(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    env = {**default_env, "COMPSTACK_DAEMON_IDLE_S": "1"}
    p = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm", "--no-latency", env=env)
    assert p.returncode == 0, p.stderr
    for _ in range(100):
        if not _status(env):
            break
        time.sleep(0.1)
    assert _status(env) == []
    bad = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm", env={**env, "COMPSTACK_DAEMON_IDLE_S": "soon"})
    assert bad.returncode == 2 and bad.stderr.strip() == \
        "compstack: error: COMPSTACK_DAEMON_IDLE_S: 'soon' is not a number of seconds >= 0"


def test_a_daemon_stops_its_idle_workers_when_memory_runs_short(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    """Under its memory floor the server stops its idle workers (a real-tier export was
    OOM-killed beside three daemons' idle workers); the server itself stays. A floor above
    any machine's memory stands for a machine short of it."""
    env = {**default_env, "COMPSTACK_DAEMON_MEMORY_FLOOR_MB": "1e12"}
    p = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,openvino-cpu", "--no-latency", env=env)
    assert p.returncode == 0, p.stderr
    for _ in range(100):
        [d] = _status(env)
        if not d["workers"]:
            break
        time.sleep(0.1)
    assert d["workers"] == [] and d["jobs"] == 3, d  # the reference and two targets ran; no worker kept
    again = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", "--no-latency", env=env)
    assert again.returncode == 0, again.stderr  # a fresh worker takes the next job
    assert [x["pid"] for x in _status(env)] == [d["pid"]]
    run_cli("daemon", "stop", "--current", env=env)
    for raw in ("lots", "inf"):  # inf stopped every idle worker every 2 s
        bad = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm",
                      env={**env, "COMPSTACK_DAEMON_MEMORY_FLOOR_MB": raw})
        assert bad.returncode == 2 and bad.stderr.strip() == \
            f"compstack: error: COMPSTACK_DAEMON_MEMORY_FLOOR_MB: '{raw}' is not a finite number of MiB >= 0"


def test_setting_the_memory_floor_does_not_start_a_second_daemon(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by review: the floor was part of the daemon's key, so setting it to relieve a
    machine short of memory started another server beside the one holding the workers."""
    from compstack.run.daemon import daemon_key

    before = daemon_key()
    monkeypatch.setenv("COMPSTACK_DAEMON_MEMORY_FLOOR_MB", "4096")
    assert daemon_key() == before


def test_a_frozen_daemon_costs_a_fallback_not_a_hang(mlp_onnx: Path, default_env: dict[str, str]) -> None:
    args = ("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm", "--no-latency", "--json")
    assert run_cli(*args, env=default_env).returncode == 0
    [d] = _status(default_env)
    os.kill(d["pid"], signal.SIGSTOP)  # accepts connections (the kernel does), answers nothing
    try:
        t0 = time.monotonic()
        p = run_cli(*args, env=default_env, timeout=300)
        wall = time.monotonic() - t0
    finally:
        os.kill(d["pid"], signal.SIGCONT)
    assert p.returncode == 0, p.stderr
    assert "did not accept the job within 10 s" in p.stderr and "in-command pool" in p.stderr
    assert [r["status"] for r in json.loads(p.stdout)["results"]] == ["ok", "ok"]
    assert wall < 120  # one accept timeout, then the in-command pool; never the job's 900 s limit


def test_socket_path_too_long_and_idle_zero_mean_an_in_command_pool(mlp_onnx: Path, default_env: dict[str, str],
                                                                   tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    args = ("compare", str(mlp_onnx), "--targets", "ort-cpu,tvm-llvm", "--no-latency", "--json")
    p = run_cli(*args, env={**default_env, "XDG_RUNTIME_DIR": str(deep)})
    assert p.returncode == 0 and "over the 107 a Unix socket allows" in p.stderr, p.stderr
    assert [r["status"] for r in json.loads(p.stdout)["results"]] == ["ok", "ok"]
    p = run_cli(*args, env={**default_env, "COMPSTACK_DAEMON_IDLE_S": "0"})
    said = [ln for ln in p.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]
    assert p.returncode == 0 and said == [], p.stderr  # asked for, not a fallback: nothing to say but progress
    assert _status(default_env) == []


def test_daemon_key_follows_what_changes_results_and_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    base = daemon_key()
    monkeypatch.setenv("PWD", "/somewhere/else")  # another shell folder: same daemon
    monkeypatch.setenv("PYENV_DIR", "/somewhere/else")  # pyenv's shim: the current folder
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "x")
    monkeypatch.setenv("ITERM_SESSION_ID", "w0t0p0")  # a terminal tab's own
    monkeypatch.setenv("COMPSTACK_EXECUTOR", "daemon")  # which executor, not what it computes
    assert daemon_key() == base
    monkeypatch.setenv("MY_UNRELATED", "1")  # unknown to compstack: could matter to a plugin
    assert daemon_key() != base
    monkeypatch.setenv("COMPSTACK_DAEMON_IGNORE_ENV", "MY_UNRELATED, OTHER")  # the user says it does not
    assert daemon_key() == base
    for name in FRAMEWORK_ENV:  # set by a framework's import in this process: as before it
        monkeypatch.setenv(name, "3")
    assert daemon_key() == base
    monkeypatch.setenv("PYTHONPATH", "/other/plugins")  # what workers import: another daemon
    assert daemon_key() != base
    monkeypatch.undo()
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    assert daemon_key() != base


def test_jobs_from_a_users_file_never_go_to_a_long_lived_worker() -> None:
    job = Job(model_path="", fingerprint="", target="t", target_ref="m:C", inputs_path="", workdir="")
    assert not _local_only(job)
    assert not _local_only(Job(**{**vars(job), "source": "zoo:bert"}))
    assert _local_only(Job(**{**vars(job), "source": "/home/me/model.py:build"}))
    assert _local_only(Job(**{**vars(job), "op_origins": ["file:/home/me/ops.py"]}))
