"""Conformance: real ONNX node tests on real stacks, the funnel, XFAIL and history."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compstack import targets as registry
from compstack.conformance import suite
from compstack.conformance.cases import cases_path, load_cases, select
from conftest import run_cli

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
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    data = json.loads(proc.stdout)
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
    first, second = ({r["case"]: (r["status"], r["stage"], r["error"]) for r in rep.rows} for rep in runs)
    assert first == second and first["test_adagrad"][:2] == ("unsupported", "compile")
    recorded = list((isolated_env / "c" / "artifacts" / "conformance-failures" / "ort-cpu").glob("*.json"))
    assert len(recorded) == 1 and json.loads(recorded[0].read_text())["stage"] == "compile"
