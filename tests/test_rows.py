"""Every row keeps what it measured, says whose fault it is, and records peak memory
(issue #23, parts 2-4), on real stacks (ORT, XLA) and the test-only faulty targets."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from compstack import targets as registry
from compstack.analysis.fault import attribute
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.core.results import Result
from compstack.run.executors import Limits
from compstack.run.session import CompareOptions, compare
from conftest import run_cli

for _name, _ref in [("crash-latency", "crashy:LatencySegfaultTarget"), ("crash-latency-hang", "crashy:LatencyHangTarget"),
                    ("crash-slow", "crashy:SlowTarget"), ("crash-raise", "crashy:RaiseTarget"),
                    ("faulty-sin", "faulty:WrongSinTarget"), ("faulty-xla-translation", "faulty:WrongTranslationTarget")]:
    if _name not in registry.names():
        registry.register(_name, _ref)


def _run(path: Path, targets: list[str], tmp: Path, limits: Limits = Limits(timeout_s=120),
         latency: LatencyConfig | None = None):  # noqa: ANN202
    source = SourceModel(name=path.stem, model=cir.load(path))
    opts = CompareOptions(targets=targets, latency=latency, limits=limits, cache=False)
    return compare(source, opts, settings(cache_dir=tmp / "cache", db=tmp / "db.sqlite"))


def _sin_model(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Sin", ["x"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "sin",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def _assert_kept(report, how: str) -> None:  # noqa: ANN001
    for row in report.results:
        assert row.status == "ok", (row.target, row.error)  # the outputs were compared
        assert row.outputs and row.outputs[0]["max_abs_err"] < 1e-5
        assert row.compile_s is not None and row.compile_s > 0, row.target
        assert row.peak_rss_compile_mb is not None and row.peak_rss_compile_mb > 50  # ORT + numpy in the worker
        assert row.peak_rss_run_mb is not None and row.peak_rss_run_mb > 0
        assert row.latency_ms is None and row.latency_error.startswith(how)


def test_latency_lost_to_a_crash_keeps_compile_time_numerics_and_memory(mlp_onnx: Path, isolated_env: Path) -> None:
    report = _run(mlp_onnx, ["crash-latency"], isolated_env, latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0))
    _assert_kept(report, "crashed")
    db = sqlite3.connect(isolated_env / "db.sqlite")
    got = db.execute("SELECT target, compile_s, peak_rss_compile_mb, peak_rss_run_mb FROM results").fetchall()
    assert [(t, c is not None, p is not None, q is not None) for t, c, p, q in got] == [("crash-latency", True, True,
                                                                                          True)]


@pytest.mark.slow
def test_latency_killed_at_the_time_limit_keeps_compile_time(mlp_onnx: Path, isolated_env: Path) -> None:
    report = _run(mlp_onnx, ["crash-latency-hang"], isolated_env, Limits(timeout_s=20),
                  LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0))
    _assert_kept(report, "timeout")


def test_a_slow_model_gets_three_runs_within_its_latency_budget(mlp_onnx: Path, isolated_env: Path) -> None:
    report = _run(mlp_onnx, ["crash-slow"], isolated_env, Limits(timeout_s=60),
                  LatencyConfig(warmup=3, min_runs=20, min_time_s=1.0, budget_s=1.0))
    (row,) = report.results
    assert row.status == "ok"
    lat = row.latency_ms
    assert lat["runs"] == 3 and lat["cut"] == "budget" and lat["warmup_runs"] == 1
    assert lat["median"] >= 400 and lat["ci95"][0] <= lat["median"] <= lat["ci95"][1]
    assert any("latency budget" in n for n in row.notes)


@pytest.mark.slow
def test_each_non_ok_row_says_whose_fault_it_is(tmp_path: Path, isolated_env: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    report = _run(_sin_model(tmp_path / "sin.onnx"), ["ort-cpu", "faulty-sin", "faulty-xla-translation", "crash-raise"],
                  isolated_env)
    by = {r.target: r for r in report.results}
    assert by["ort-cpu"].status == "ok" and by["ort-cpu"].fault == ""
    assert by["faulty-sin"].status == "mismatch" and by["faulty-sin"].fault == "stack"
    # the translated program, run eagerly without XLA, is already wrong: our translation
    wrong = by["faulty-xla-translation"]
    assert wrong.status == "mismatch" and wrong.flags.get("path") == "translated"
    assert wrong.fault == "compstack" and "eagerly" in wrong.fault_reason
    assert by["crash-raise"].status == "failed" and by["crash-raise"].fault == "stack"
    assert "injected stack failure" in by["crash-raise"].fault_reason
    rows = sqlite3.connect(isolated_env / "db.sqlite").execute(
        "SELECT target, fault, fault_reason FROM results ORDER BY id").fetchall()
    assert [(t, f) for t, f, _ in rows] == [(r.target, r.fault) for r in report.results]
    assert all(reason for t, f, reason in rows if f)
    assert json.loads(json.dumps(report.to_json()))["results"][2]["fault"] == "compstack"
    # --bundle-faults: an explain bundle for each stack fault (faulty-sin, crash-raise), none for ours
    from compstack import api
    from compstack.run.faults import bundle_faults

    made = bundle_faults(report, str(tmp_path / "sin.onnx"), tmp_path / "bundles",
                         lambda m, t, out: api.explain_model(m, t, out_dir=out, time_budget_s=30))
    assert set(made) == {"faulty-sin", "crash-raise"}
    assert (Path(made["faulty-sin"]) / "ISSUE.md").is_file()
    assert any(n.startswith("explain bundle: ") for n in by["faulty-sin"].notes)


@pytest.mark.slow
def test_json_run_still_reports_progress_on_stderr(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", "--no-latency", "--json")
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["results"][0]  # stdout still holds only the JSON
    assert row["peak_rss_compile_mb"] > 0 and row["fault"] == ""
    lines = proc.stderr.splitlines()
    assert any(ln.endswith("ort-cpu: start") for ln in lines), proc.stderr  # "[   0.0 s] ort-cpu: start"
    assert any("importing" in ln for ln in lines), proc.stderr
    assert "ort-cpu" in lines[-1] and "ok" in lines[-1], proc.stderr  # the done line


def _row(**fields) -> Result:  # noqa: ANN003
    return Result(**{"target": "xla-cpu", "status": "failed", "flags": {"path": "translated"}, **fields})


def test_fault_rules_name_compstack_for_its_own_code_and_the_stack_for_the_rest() -> None:
    ours = 'Traceback:\n  File "/x/compstack/translate/jax/nn.py", line 3, in f\n  File "/y/site-packages/jax/a.py", line 9, in g'
    assert attribute(_row(stage="lower", log=ours, error="TypeError: x")).fault == "compstack"
    assert attribute(_row(stage="lower", log=ours, flags={"path": "native"})).fault == "stack"
    assert attribute(_row(stage="import", error="export failed")).fault == "compstack"
    killed = _row(status="crashed", stage="import", error="worker died by SIGKILL (possibly the kernel's OOM killer)")
    assert attribute(killed).fault == "unknown"  # killed loading the model: neither a stack's code nor ours
    assert attribute(_row(status="unsupported", unsupported_ops=["Foo"])).fault == "compstack"
    assert attribute(_row(status="unsupported", unsupported_ops=["Foo"], flags={})).fault == "stack"
    assert attribute(_row(status="timeout", stage="compile", error="killed")).fault == "stack"
    # the whole-tier run: IREE's worker (11.7 GB) taken by the kernel's OOM killer while TVM compiled beside it
    oom_killed = _row(status="crashed", stage="lower", flags={},
                      error="worker died by SIGKILL (possibly the kernel's OOM killer) in stage lower")
    assert attribute(oom_killed).fault == "unknown" and "from outside" in attribute(oom_killed).reason
    assert attribute(_row(status="crashed", stage="run", error="worker died by SIGSEGV in stage run")).fault == "stack"
    assert attribute(_row(status="mismatch", stage="compare"), eager_agrees=True).fault == "stack"
    assert attribute(_row(status="mismatch", stage="compare"), eager_agrees=False).fault == "compstack"
    assert attribute(_row(status="mismatch", stage="compare")).fault == "unknown"
    assert attribute(_row(status="ok")).fault == ""


def test_conformance_rows_get_the_same_fault_rules() -> None:
    from compstack import targets as registry
    from compstack.analysis.fault import conformance_fault

    def fault(target: str, row: dict) -> str:  # as the suite calls it: the registry's declared stack
        return conformance_fault(target, row, registry.get(target).stack).fault

    ours = 'File "/x/compstack/translate/jax/nn.py", line 3\nFile "/y/site-packages/jax/a.py", line 9\n'
    row = {"status": "failed", "stage": "lower", "error": "TypeError: x", "log": ours}
    assert fault("xla-cpu", row) == "compstack"  # our converter raised
    theirs = 'File "/x/compstack/targets/ort/target.py", line 3\nFile "/y/site-packages/onnxruntime/s.py", line 9\n'
    assert fault("ort-cpu", {**row, "log": theirs}) == "stack"
    # iree-compile exiting non-zero is raised as ToolError by core/tools.py: IREE's failure, not ours
    tool = ('File "/x/compstack/targets/iree/lowered.py", line 3\nFile "/x/compstack/core/tools.py", line 9\n')
    failed = {**row, "error": "ToolError: iree-compile exited with status 1: error: failed to legalize", "log": tool}
    assert fault("iree-llvm-cpu", failed) == "stack"
    wrong = {"status": "failed", "stage": "compare", "error": "output 0: not close"}
    assert fault("ort-cpu", wrong) == "stack"  # ORT read the case's own ONNX file
    assert fault("inductor-cpu", wrong) == "unknown"  # translated; no eager check per case
    assert fault("tvm-llvm@0.27.0", {"status": "crashed", "stage": "run", "error": "SIGSEGV"}) == "stack"
    assert fault("ort-cpu", {"status": "passed", "stage": "passed", "error": ""}) == ""


def test_a_model_the_reference_cannot_run_is_not_blamed_on_the_stacks(tmp_path: Path, isolated_env: Path) -> None:
    """Found by a new-user trial: a Transpose whose ``perm`` names an axis the input does not
    have failed on ORT and on the reference, and both rows said fault ``stack``. The model is
    invalid (the spec's rule for ``perm``): when the reference itself failed on it, no stack is
    blamed (``unknown``, naming the reference's error). A reference that was lost (a timeout on
    a large model) says nothing of the model: the stack keeps its fault."""
    from compstack.run.jobs import JobOutcome
    from compstack.run.refchoice import reference_note, refused

    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5])], "bad",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), tmp_path / "bad.onnx")
    report = _run(tmp_path / "bad.onnx", ["ort-cpu", "reference"], isolated_env)
    assert report.reference.get("error", "").startswith("reference reference failed")
    for r in report.results:
        assert r.status == "failed" and r.fault == "unknown", (r.target, r.fault, r.fault_reason)
        assert "the reference could not run this model either" in r.fault_reason and "axis" in r.fault_reason
    lost = reference_note("reference", JobOutcome(target="reference", status="timeout", stage="run", error="killed"))
    assert not refused(lost) and refused(reference_note("reference", JobOutcome(target="reference", status="failed",
                                                                                 stage="run", error="AxisError")))
    from compstack.run.faults import finish_row

    ort = JobOutcome(target="ort-cpu", status="failed", stage="lower", error="boom")
    assert finish_row(_row(stage="lower", flags={}), ort, None, lost).fault == "stack"
