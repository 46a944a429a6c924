"""Conformance: real ONNX node tests on real stacks, the funnel, XFAIL and history."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compstack import targets as registry
from compstack.conformance import suite
from compstack.conformance.cases import cases_path, load_cases, select
from compstack.core.results import ResultsDB
from conftest import gone, run_cli

for _name, _cls in [("crash-segfault", "SegfaultTarget"), ("crash-raise", "RaiseTarget")]:
    if _name not in registry.names():
        registry.register(_name, f"crashy:{_cls}")

#: Cases whose ORT outcome is known: passes / an op ORT lacks (unsupported at compile) / a dtype or
#: a sequence input the harness cannot feed it (unsupported at import).
KNOWN = "^(test_abs|test_relu|test_adagrad|test_cast_FLOAT_to_BFLOAT16|test_sequence_insert_at_back)$"


@pytest.fixture(scope="module")
def cases_env(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list]:
    cache = tmp_path_factory.mktemp("conf-cache")
    return cache, load_cases(cache)


def _run(cases_env: tuple[Path, list], target: str, pattern: str, xfail_dir: Path, **kw) -> suite.SuiteReport:
    cache, cases = cases_env
    chosen = select(cases, pattern)
    cases_file = cases_path(cache)
    return suite.run_suite(chosen, cases_file, [target], workers=kw.pop("workers", 1), timeout=kw.pop("timeout", 60),
                           cache_dir=None, xfail_dir=xfail_dir, **kw)


def test_cases_generated_from_onnx_definitions(cases_env: tuple[Path, list]) -> None:
    _, cases = cases_env
    assert len(cases) > 1800  # about 1,880 for onnx 1.23
    abs_case = next(c for c in cases if c.name == "test_abs")
    assert abs_case.rtol == 1e-3 and abs_case.atol == 1e-7 and abs_case.io_kind == "tensor"
    assert len(select(cases, "resize|pad")) > 40
    assert [c.name for c in select(cases, sample=5, seed=1)] == [c.name for c in select(cases, sample=5, seed=1)]


def test_funnel_on_ort(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    report = _run(cases_env, "ort-cpu", KNOWN, isolated_env)
    rows = {r["case"]: r for r in report.rows}
    assert rows["test_abs"]["status"] == "passed" and rows["test_relu"]["status"] == "passed"
    assert rows["test_adagrad"]["status"] == "unsupported" and rows["test_adagrad"]["stage"] == "compile"
    assert "ai.onnx.preview.training::Adagrad" in rows["test_adagrad"]["error"]
    assert rows["test_cast_FLOAT_to_BFLOAT16"]["status"] == "unsupported"
    assert "bfloat16" in rows["test_cast_FLOAT_to_BFLOAT16"]["error"]
    assert rows["test_sequence_insert_at_back"]["status"] == "unsupported"
    s = report.summaries[0]
    assert (s.total, s.passed, s.unsupported, sum(s.failed_at.values())) == (5, 2, 3, 0)
    assert s.pass_rate == pytest.approx(0.4)
    # whose fault: ORT lacks the op, ORT's declared dtypes lack bfloat16, our harness feeds tensors only
    assert [rows[c]["fault"] for c in ("test_abs", "test_adagrad", "test_cast_FLOAT_to_BFLOAT16",
                                       "test_sequence_insert_at_back")] == ["", "stack", "stack", "compstack"]
    assert "harness" in rows["test_sequence_insert_at_back"]["fault_reason"] and "log" not in rows["test_adagrad"]
    assert s.faults == {"stack": 2, "compstack": 1}


def test_xfail_catches_planted_regression_and_reports_fixed(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    # A baseline where only test_adagrad is known to fail, planted for a target that now
    # breaks every case at run time: the passing cases become regressions.
    version = _run(cases_env, "ort-cpu", "^test_abs$", isolated_env).summaries[0].version
    xdir = isolated_env / "xfail"
    xdir.mkdir()
    (xdir / f"crash-raise@{version}.txt").write_text("# baseline\ntest_adagrad  # failed at compile\ntest_relu  # x\n")
    report = _run(cases_env, "crash-raise", "^(test_abs|test_adagrad)$", xdir)
    s = report.summaries[0]
    assert s.regressions == ["test_abs"]
    assert s.failed_at["run"] == 1 and s.unsupported == 1
    ran = {r["case"]: r for r in report.rows}["test_abs"]  # raised by the test target's run, not by compstack
    assert ran["fault"] == "stack" and "failed in run" in ran["fault_reason"]
    # The same baseline on real ORT: test_relu is listed but passes -> fixed.
    (xdir / f"ort-cpu@{version}.txt").write_text("test_adagrad\ntest_relu\n")
    ort = _run(cases_env, "ort-cpu", "^(test_abs|test_adagrad|test_relu)$", xdir).summaries[0]
    assert ort.fixed == ["test_relu"] and ort.regressions == []


def test_update_xfail_keeps_entries_of_cases_not_run(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    xdir = isolated_env / "xf"
    report = _run(cases_env, "ort-cpu", "^(test_abs|test_adagrad)$", xdir, update_xfail=True)
    path = Path(report.summaries[0].xfail_file)
    assert set(suite.read_xfail(path)) == {"test_adagrad"}
    path.write_text(path.read_text() + "test_other_case  # kept\n")
    _run(cases_env, "ort-cpu", "^test_abs$", xdir, update_xfail=True)
    assert set(suite.read_xfail(path)) == {"test_adagrad", "test_other_case"}


def test_crashing_case_costs_one_cell_and_worker_restarts(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    report = _run(cases_env, "crash-segfault", "^(test_abs|test_relu|test_neg)$", isolated_env, workers=2)
    s = report.summaries[0]
    assert s.crashed == 3 and s.restarts == 3
    assert all("SIGSEGV" in r["error"] and r["stage"] == "run" for r in report.rows)


def test_cli_sample_against_shipped_xfail_files(isolated_env: Path) -> None:
    """CI's fixed sample: the shipped XFAIL files of every CPU target have no regressions."""
    proc = run_cli("conformance", "--targets", "ort-cpu,tvm-llvm,iree-llvm-cpu", "--sample", "24", "--seed", "3",
                   "--json")
    data = json.loads(proc.stdout) if proc.stdout.startswith("{") else {}
    pairs = {(t["target"], n) for t in data.get("targets", []) for n in t["regressions"]}
    regressed = [c for c in data.get("cases", []) if (c["target"], c["case"]) in pairs]  # the rows, when it fails
    assert proc.returncode == 0, (proc.stderr, regressed) if data else proc.stderr + proc.stdout[-2000:]
    by = {t["target"]: t for t in data["targets"]}
    for name in ("ort-cpu", "tvm-llvm", "iree-llvm-cpu"):
        assert by[name]["total"] == 24 and by[name]["xfail_file"], name
        assert by[name]["regressions"] == [], (name, by[name]["regressions"])
    assert by["ort-cpu"]["passed"] > by["tvm-llvm"]["passed"] > 0
    assert "rtol=1e-3, atol=1e-7" in data["rule"]
    trend = run_cli("conformance", "--trend", "--json")
    runs = json.loads(trend.stdout)
    assert {r["target"] for r in runs} == {"ort-cpu", "tvm-llvm", "iree-llvm-cpu"}
    assert all(r["total"] == 24 for r in runs)


def test_cli_bad_filter(isolated_env: Path) -> None:
    proc = run_cli("conformance", "--targets", "ort-cpu", "--filter", "no_such_case_anywhere")
    assert proc.returncode == 2 and "matches none" in proc.stderr and "Traceback" not in proc.stderr


def test_compile_failures_are_cached_for_warm_runs(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    cache, cases = cases_env
    chosen = select(cases, "^(test_adagrad|test_abs)$")
    cases_file = cases_path(cache)
    runs = [suite.run_suite(chosen, cases_file, ["ort-cpu"], workers=1, timeout=60, cache_dir=isolated_env / "c",
                            xfail_dir=isolated_env) for _ in range(2)]
    first, second = ({r["case"]: (r["status"], r["stage"], r["error"], r["fault"], r["fault_reason"])
                      for r in rep.rows} for rep in runs)  # a warm run blames whom the cold one did
    assert first == second and first["test_adagrad"][:2] == ("unsupported", "compile")
    recorded = list((isolated_env / "c" / "artifacts" / "conformance-failures" / "ort-cpu").glob("*.json"))
    assert len(recorded) == 1 and json.loads(recorded[0].read_text())["stage"] == "compile"


def _db_rows(db: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(db)  # a second connection, as another process would read it
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


def test_case_rows_are_in_the_database_before_the_run_ends(cases_env: tuple[Path, list], isolated_env: Path) -> None:
    db_path = isolated_env / "rows.sqlite"
    seen: list[tuple[str, list[tuple], list[tuple]]] = []

    def on_result(target: str, row: dict) -> None:  # the pool's callback: the row must already be stored
        seen.append((row["case"], _db_rows(db_path, "SELECT name, status, stage FROM conformance_cases"),
                     _db_rows(db_path, "SELECT command, status, ended FROM runs")))

    db = ResultsDB(db_path)
    try:
        report = _run(cases_env, "ort-cpu", "^(test_abs|test_adagrad|test_relu)$", isolated_env, db=db,
                      on_result=on_result)
    finally:
        db.close()
    assert len(seen) == 3
    for i, (case, stored, runs) in enumerate(seen):
        assert len(stored) == i + 1 and case in {name for name, _, _ in stored}
        assert runs == [("conformance", "running", None)]
        assert _db_rows(db_path, "SELECT COUNT(*) FROM conformance_runs") == [(1,)]  # written once its target ends
    rows = {r["case"]: (r["case"], r["status"], r["stage"]) for r in report.rows}
    assert sorted(_db_rows(db_path, "SELECT name, status, stage FROM conformance_cases")) == sorted(rows.values())
    assert rows["test_adagrad"][1:] == ("unsupported", "compile") and rows["test_abs"][1] == "passed"
    ((status, ended),) = _db_rows(db_path, "SELECT status, ended FROM runs")
    assert status == "done" and ended is not None
    (t,) = suite.trend(db_path)
    assert (t["run_id"], t["target"], t["total"], t["passed"]) == (report.run_id, "ort-cpu", 3, 2)


#: ``compstack`` with tests/crashy.py's hanging target registered (the CLI in a subprocess).
_CLI_HANG = ("import sys\nfrom compstack import targets as r\nr.register('crash-hang', 'crashy:HangTarget')\n"
             "from compstack.cli import main\nmain(sys.argv[1:])\n")


@pytest.mark.parametrize("sig,status", [(signal.SIGKILL, "running"), (signal.SIGTERM, "interrupted")])
def test_killed_run_keeps_its_finished_cases(isolated_env: Path, sig: int, status: str) -> None:
    """A conformance run killed while a later target hangs: the finished target's cases and
    summary are in the database; the run is ``running`` after SIGKILL (nothing could mark
    it) and ``interrupted`` after SIGTERM; the hanging worker goes with it."""
    db_path = isolated_env / "killed.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _CLI_HANG, "conformance", "--targets", "ort-cpu,crash-hang",
                             "--filter", "^(test_abs|test_relu)$", "--workers", "1", "--timeout", "300",
                             "--no-cache", "--db", str(db_path), "--json"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None and not workers:
            if db_path.exists() and _db_rows(db_path, "SELECT name FROM sqlite_master WHERE name='conformance_runs'") \
                    and _db_rows(db_path, "SELECT target FROM conformance_runs"):
                workers = [int(c) for t in Path(f"/proc/{proc.pid}/task").iterdir()
                           for c in (t / "children").read_text().split()]  # crash-hang's worker
            time.sleep(0.2)
        assert proc.poll() is None and workers, proc.stderr.read() if proc.stderr else ""
    finally:
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-9 if sig == signal.SIGKILL else 143), err
    cases = sorted(_db_rows(db_path, "SELECT target, name, status FROM conformance_cases"))
    assert cases == [("ort-cpu", "test_abs", "passed"), ("ort-cpu", "test_relu", "passed")]
    ((command, got, ended),) = _db_rows(db_path, "SELECT command, status, ended FROM runs")
    assert (command, got, ended is None) == ("conformance", status, status == "running")
    (t,) = suite.trend(db_path)
    assert (t["target"], t["total"], t["passed"]) == ("ort-cpu", 2, 2)
    assert all(gone(w, 20) for w in workers), "the hanging worker outlived the run"
