"""A stack that segfaults, aborts, hangs or eats memory costs its own row only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.run.executors import Limits
from compstack.run.session import CompareOptions, compare

for _name, _cls in [("crash-segfault", "SegfaultTarget"), ("crash-abort", "AbortTarget"),
                    ("crash-hang", "HangTarget"), ("crash-hog", "HogTarget"), ("crash-raise", "RaiseTarget")]:
    if _name not in registry.names():
        registry.register(_name, f"crashy:{_cls}")


#: Every executor runs the fault tests; inline shares this process, so a segfault, abort,
#: hang or memory hog there would take the test run with it: those cases skip it.
EXECUTORS = ["process", "pool", "daemon",
             pytest.param("inline", marks=pytest.mark.skip(reason="inline runs in the test process: a segfault, "
                                                                  "abort, hang or hog would kill or stall pytest"))]


def _compare(path: Path, targets: list[str], tmp: Path, limits: Limits, executor: str = "") -> tuple:
    source = SourceModel(name="mlp", model=cir.load(path))
    opts = CompareOptions(targets=targets, latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0),
                          limits=limits, cache=False, executor=executor)
    seen = []
    report = compare(source, opts, settings(cache_dir=tmp / "cache", db=tmp / "db.sqlite"), on_result=seen.append)
    return report, seen


@pytest.mark.parametrize("executor", EXECUTORS)
def test_crashes_cost_only_their_row(mlp_onnx: Path, isolated_env: Path, executor: str) -> None:
    report, seen = _compare(mlp_onnx, ["crash-segfault", "ort-cpu", "crash-abort", "crash-raise", "crash-hang"],
                            isolated_env, Limits(timeout_s=10), executor)
    by = {r.target: r for r in report.results}
    assert by["crash-segfault"].status == "crashed"
    assert "SIGSEGV" in by["crash-segfault"].error and by["crash-segfault"].stage == "run"
    assert by["crash-abort"].status == "crashed" and "SIGABRT" in by["crash-abort"].error
    assert by["crash-raise"].status == "failed" and by["crash-raise"].stage == "run"
    assert by["crash-raise"].error == "RuntimeError: injected stack failure"
    assert by["crash-hang"].status == "timeout" and by["crash-hang"].stage == "run"
    # The healthy stack between the crashes still ran and matched the reference.
    assert by["ort-cpu"].status == "ok"
    assert by["ort-cpu"].outputs[0]["max_abs_err"] < 1e-5
    assert by["ort-cpu"].latency_ms["runs"] >= 3
    # Every finished row was written to the database, in order.
    rows = sqlite3.connect(isolated_env / "db.sqlite").execute("SELECT target, status FROM results").fetchall()
    assert rows == [(r.target, r.status) for r in report.results]
    assert [r.target for r in seen] == [r.target for r in report.results]


@pytest.mark.parametrize("executor", EXECUTORS)
def test_memory_limit_makes_oom_row(mlp_onnx: Path, isolated_env: Path, executor: str) -> None:
    report, _ = _compare(mlp_onnx, ["crash-hog", "ort-cpu"], isolated_env, Limits(timeout_s=60, memory_mb=1200),
                         executor)
    by = {r.target: r for r in report.results}
    assert by["crash-hog"].status == "oom"
    assert "1200 MiB" in by["crash-hog"].error and by["crash-hog"].stage == "run"
    assert by["ort-cpu"].status == "ok"


@pytest.mark.parametrize("executor", ["inline", "process", "pool", "daemon"])
def test_stack_exception_is_its_row_on_every_executor(mlp_onnx: Path, isolated_env: Path, executor: str) -> None:
    """A stack that raises (no crash) is ``failed`` at its stage, the same on every executor."""
    report, _ = _compare(mlp_onnx, ["crash-raise", "ort-cpu"], isolated_env, Limits(timeout_s=60), executor)
    by = {r.target: r for r in report.results}
    assert by["crash-raise"].status == "failed" and by["crash-raise"].stage == "run"
    assert by["crash-raise"].error == "RuntimeError: injected stack failure"
    assert by["ort-cpu"].status == "ok" and by["ort-cpu"].outputs[0]["max_abs_err"] < 1e-5


def test_pool_restarts_a_worker_after_a_crash_and_reuses_a_healthy_one(mlp_onnx: Path, isolated_env: Path) -> None:
    """One pool across two comparisons: the crashed target's worker is replaced, the
    healthy target's worker serves both (one process id, no restart)."""
    from compstack.run.executors import PoolExecutor

    with PoolExecutor() as pool:
        first, _ = _compare(mlp_onnx, ["crash-segfault", "ort-cpu"], isolated_env, Limits(timeout_s=60), pool)
        pids = {w.key[0]: w.proc.pid for w in pool._all if w.proc is not None}
        second, _ = _compare(mlp_onnx, ["crash-segfault", "ort-cpu"], isolated_env, Limits(timeout_s=60), pool)
        after = {w.key[0]: w.proc.pid for w in pool._all if w.proc is not None}
        assert pool.restarts == 2
    for report in (first, second):
        by = {r.target: r for r in report.results}
        assert by["crash-segfault"].status == "crashed" and "SIGSEGV" in by["crash-segfault"].error
        assert by["ort-cpu"].status == "ok"
    ort_ref = registry.entries()[[e.name for e in registry.entries()].index("ort-cpu")].ref
    assert pids[ort_ref] == after[ort_ref]


def test_explain_evaluations_lose_only_their_piece(isolated_env: Path) -> None:
    """Explain's evaluations are pool jobs (task ``evaluate``): a piece that segfaults,
    aborts or hangs is ``crashed``/``timeout`` at its stage, in the words of every other
    job, and the healthy target's worker serves on (one process, no restart)."""
    import models
    from compstack.explain.evaluate import Evaluator, Run

    model = models.mlp()
    feeds = models.inputs_for(model)
    want = models.reference(model, feeds)
    order = ["ort-cpu", "crash-segfault", "crash-abort", "crash-raise", "crash-hang", "ort-cpu"]
    with Evaluator(timeout_s=5) as ev:
        results = [ev.run(Run.of(t), model, feeds) for t in order[:1]]
        pid = ev.pools[Run.of("ort-cpu")]._all[0].proc.pid
        results += [ev.run(Run.of(t), model, feeds) for t in order[1:]]
        assert ev.pools[Run.of("ort-cpu")]._all[0].proc.pid == pid and ev.pools[Run.of("ort-cpu")].restarts == 0
        assert ev.pools[Run.of("crash-segfault")].restarts == 1 and ev.compiles == 6
    first, seg, abort, raised, hang, last = results
    assert seg.status == "crashed" and "SIGSEGV" in seg.error and seg.stage == "run" and not seg.stage_seconds
    assert abort.status == "crashed" and "SIGABRT" in abort.error and abort.stage == "run"
    assert raised.status == "failed" and raised.stage == "run"
    assert raised.error == "RuntimeError: injected stack failure" and "injected" in raised.log
    assert set(raised.stage_seconds) == {"import", "lower", "compile", "run"}
    assert hang.status == "timeout" and hang.stage == "run" and "5 s wall-clock limit" in hang.error
    for ok in (first, last):
        assert ok.status == "ok" and ok.stage == "" and set(ok.outputs) == set(want)
        assert max(float(abs(ok.outputs[k] - want[k]).max()) for k in want) < 1e-5
        assert set(ok.stage_seconds) == {"import", "lower", "compile", "run"}
        assert abs(sum(ok.stage_seconds.values()) - ok.seconds) < 0.01
