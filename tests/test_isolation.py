"""A stack that segfaults, aborts, hangs or eats memory costs its own row only."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.run.runner import Limits
from compstack.run.session import CompareOptions, compare

for _name, _cls in [("crash-segfault", "SegfaultTarget"), ("crash-abort", "AbortTarget"),
                    ("crash-hang", "HangTarget"), ("crash-hog", "HogTarget"), ("crash-raise", "RaiseTarget")]:
    if _name not in registry.names():
        registry.register(_name, f"crashy:{_cls}")


def _compare(path: Path, targets: list[str], tmp: Path, limits: Limits) -> tuple:
    source = SourceModel(name="mlp", model=cir.load(path))
    opts = CompareOptions(targets=targets, latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0),
                          limits=limits, cache=False)
    seen = []
    report = compare(source, opts, settings(cache_dir=tmp / "cache", db=tmp / "db.sqlite"), on_result=seen.append)
    return report, seen


def test_crashes_cost_only_their_row(mlp_onnx: Path, isolated_env: Path) -> None:
    report, seen = _compare(mlp_onnx, ["crash-segfault", "ort-cpu", "crash-abort", "crash-raise", "crash-hang"],
                            isolated_env, Limits(timeout_s=10))
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


def test_memory_limit_makes_oom_row(mlp_onnx: Path, isolated_env: Path) -> None:
    report, _ = _compare(mlp_onnx, ["crash-hog", "ort-cpu"], isolated_env, Limits(timeout_s=60, memory_mb=1200))
    by = {r.target: r for r in report.results}
    assert by["crash-hog"].status == "oom"
    assert "1200 MiB" in by["crash-hog"].error and by["crash-hog"].stage == "run"
    assert by["ort-cpu"].status == "ok"
