"""Tuning options: TVM MetaSchedule (records kept and reused, tuning time apart from the
compile time) and Inductor's max-autotune; every row's flags say what was done."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from compstack.core.results import Report, Result
from compstack.report.tuned import print_tuning
from compstack.targets.relax.tuning import metaschedule_problem
from conftest import run_cli, said
from test_threads import _gemm_model


def _row(proc, target: str) -> dict:
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return next(r for r in json.loads(proc.stdout)["results"] if r["target"] == target)


@pytest.mark.slow  # 3-4 min of MetaSchedule on 2 cores (issue #26); scripts/run_slow.py runs it
def test_tvm_tuning_is_kept_and_reused_or_refused_with_the_reason(isolated_env: Path) -> None:
    model = _gemm_model(isolated_env / "gemms.onnx", layers=1)
    args = ("compare", str(model), "--targets", "tvm-llvm", "--option", "tvm-llvm:tune_trials=2", "--json",
            "--min-time", "0.2", "--threads", "1")
    first = _row(run_cli(*args), "tvm-llvm")
    assert first["flags"]["tuned"] is True and first["flags"]["tuning"]["trials_per_task"] == 2
    problem = metaschedule_problem()
    if problem:  # this TVM install cannot serialise modules: the row says so, nothing crashes
        assert first["status"] == "unsupported"
        assert "MetaSchedule cannot run" in first["error"] and "save_json" in first["error"]
        return
    assert first["status"] == "ok", first["error"]
    tuning = first["flags"]["tuning"]
    assert tuning["reused_records"] is False and tuning["records"] > 0 and tuning["tune_s"] > 0
    assert Path(tuning["work_dir"]).is_relative_to(isolated_env / "cache")
    shutil.rmtree(isolated_env / "cache" / "artifacts")  # force a compile: the records must be reused
    second = _row(run_cli(*args), "tvm-llvm")
    assert second["status"] == "ok"
    assert second["flags"]["tuning"]["reused_records"] is True
    assert second["flags"]["tuning"]["records"] == tuning["records"]
    assert second["flags"]["tuning"]["tune_s"] < tuning["tune_s"]


def test_tvm_tuning_budget_gives_a_tuned_row_then_reuses_its_records(isolated_env: Path) -> None:
    """``tune=20s`` (issue #26): MetaSchedule tunes zoo:mlp's tasks, heaviest first, within
    the budget (a task's first round always runs), the row is ok and tuned, every task is
    tuned or named with why, the tuning time is reported apart from the compile time, and
    a second run reuses the records."""
    args = ("compare", "zoo:mlp", "--targets", "tvm-llvm", "--option", "tvm-llvm:tune=20s", "--json",
            "--no-latency")
    first = _row(run_cli(*args), "tvm-llvm")
    if metaschedule_problem():
        assert first["status"] == "unsupported" and "MetaSchedule cannot run" in first["error"]
        return
    assert first["status"] == "ok", first["error"]
    tuning = first["flags"]["tuning"]
    assert first["flags"]["tuned"] is True and tuning["budget_s"] == 20.0 and tuning["trials_per_task"] is None
    assert tuning["reused_records"] is False and tuning["records"] > 0 and tuning["tasks"] > 0
    assert tuning["tasks_tuned"] >= 1 and tuning["tasks_tuned"] + tuning["tasks_untuned"] == tuning["tasks"]
    assert all("budget was spent" in u["why"] for u in tuning["untuned"]), tuning["untuned"]
    assert tuning["records"] == tuning["trials"]
    # the search (tasks, builds, runs) kept to the budget, but for one task's first round
    assert 0 < tuning["search_s"] < 20 + 120, tuning
    assert tuning["tune_s"] >= tuning["search_s"] and first["compile_s"] is not None
    assert "a 20 s budget" in tuning["summary"]
    # the tuning curve: estimated latency against trials, from the records, never rising
    pts = tuning["curve"]["points"]
    assert pts and all(a["trials"] < b["trials"] and a["est_ms"] >= b["est_ms"] for a, b in zip(pts, pts[1:]))
    used = [t for t in tuning["per_task"] if t["best_us"] is not None]
    assert pts[-1]["trials"] == sum(t["trials"] for t in used) <= tuning["records"]
    assert pts[-1]["est_ms"] == pytest.approx(sum(t["weight"] * t["best_us"] for t in used) / 1e3, rel=1e-4)
    # every task is listed; those the budget never reached have no trial and are left out of the curve
    assert len(tuning["per_task"]) == tuning["tasks_tuned"] + len(tuning["untuned"])
    assert tuning["curve"]["tasks_left_out"] == len(tuning["per_task"]) - len(used)
    shutil.rmtree(isolated_env / "cache" / "artifacts")  # force a compile: the records must be reused
    second = _row(run_cli(*args), "tvm-llvm")
    assert second["status"] == "ok" and second["flags"]["tuning"]["reused_records"] is True
    assert second["flags"]["tuning"]["records"] == tuning["records"]
    assert second["flags"]["tuning"]["tune_s"] < tuning["tune_s"]
    assert second["flags"]["tuning"]["curve"] == tuning["curve"]  # kept with the records


@pytest.mark.slow
def test_a_task_whose_tuning_raises_keeps_the_default_schedule(isolated_env: Path) -> None:
    """Issue #26 part 3 on its own example: tuning zoo:bert (2 trials a task), MetaSchedule raises a
    ScheduleError on one task (reverse-compute-at); that task keeps TVM's default schedule,
    the others are tuned, and the row is ok and names the task and the error."""
    if metaschedule_problem():
        pytest.skip(metaschedule_problem())
    # trials, not a budget: every task gets its turn whatever the machine's load
    proc = run_cli("compare", "zoo:bert", "--targets", "tvm-llvm", "--option", "tvm-llvm:tune_trials=2", "--json",
                   "--no-latency")
    row = _row(proc, "tvm-llvm")
    assert row["status"] == "ok", row["error"]
    tuning = row["flags"]["tuning"]
    raised = [u for u in tuning["untuned"] if "ScheduleError" in u["why"]]
    assert raised and tuning["tasks_tuned"] >= 1, tuning["untuned"]
    assert tuning["tasks_tuned"] + tuning["tasks_untuned"] == tuning["tasks"] > tuning["tasks_tuned"]
    assert len(raised) == tuning["tasks_untuned"]  # no budget: only the tasks that raised stay untuned
    assert raised[0]["task"] in tuning["summary"] and "ScheduleError" in tuning["summary"]


def test_tuning_curve_takes_the_same_share_of_every_task() -> None:
    from compstack.analysis.tuning_curve import TaskTrials, curve

    a = TaskTrials("a", 2, [50.0, None, 40.0, 45.0, 30.0, 35.0, 36.0, 37.0, 38.0, 20.0])
    b = TaskTrials("b", 1, [9.0, 8.0, 7.0, 6.0, 5.0])
    dead = TaskTrials("c", 1, [None, None])
    got = curve([a, b, dead], points=5)
    assert got["tasks_left_out"] == 1
    # point k takes ceil(k/5 * n) of each task: a 2, 4, 6, 8, 10; b 1, 2, 3, 4, 5
    assert [p["trials"] for p in got["points"]] == [3, 6, 9, 12, 15]
    assert [p["est_ms"] for p in got["points"]] == [0.109, 0.088, 0.067, 0.066, 0.045]
    assert curve([dead])["points"] == []


def test_the_job_limit_grows_by_the_tuning_budget() -> None:
    from compstack.run.executors import Limits, tuning_limits
    from compstack.run.jobs import Job

    job = Job(model_path="", fingerprint="", target="tvm-llvm", target_ref="tvm-llvm", inputs_path="", workdir="",
              options={"tune": "5m"})
    assert tuning_limits(job, Limits(timeout_s=900.0, memory_mb=7)) == Limits(timeout_s=1200.0, memory_mb=7)
    job.options = {"tune_trials": "4"}
    assert tuning_limits(job, Limits(timeout_s=900.0)) == Limits(timeout_s=900.0)


def test_untuned_tvm_says_so(isolated_env: Path) -> None:
    model = _gemm_model(isolated_env / "gemms.onnx", layers=1)
    row = _row(run_cli("compare", str(model), "--targets", "tvm-llvm", "--json", "--no-latency"), "tvm-llvm")
    assert row["status"] == "ok" and row["flags"]["tuned"] is False and "tuning" not in row["flags"]


def test_inductor_max_autotune_is_in_the_flags(isolated_env: Path) -> None:
    model = _gemm_model(isolated_env / "gemms.onnx", layers=1)
    row = _row(run_cli("compare", str(model), "--targets", "inductor-cpu", "--option",
                       "inductor-cpu:mode=max-autotune", "--json", "--min-time", "0.2"), "inductor-cpu")
    assert row["status"] == "ok", row["error"]
    assert row["flags"]["mode"] == "max-autotune" and row["flags"]["tuned"] is True
    assert row["flags"]["tuning"]["inductor_config"]["max_autotune"] is True


def test_bad_tuning_values_are_one_line_exit_2(isolated_env: Path) -> None:
    for opt in ("tvm-llvm:tune_trials=-3", "tvm-llvm:tune_trials=many", "inductor-cpu:mode=fastest",
                "tvm-llvm:tune=soon", "tvm-llvm:tune=0s"):
        proc = run_cli("compare", "zoo:mlp", "--option", opt)
        assert proc.returncode == 2, opt
        assert len(said(proc.stderr)) == 1 and opt.split(":")[1].split("=")[0] in proc.stderr


def test_the_cheap_stack_gives_inspect_stacks_frames_and_code_context() -> None:
    """What TVMScript's prim_func decorator reads of ``inspect.stack()`` (frames, their
    lines of code) is the same from the scan-free stand-in."""
    import inspect

    from compstack.targets.relax.tuning import _frames

    def inner() -> tuple[list, list]:
        return inspect.stack(), _frames()

    std, cheap = inner()
    assert len(std) == len(cheap) > 3
    # the first entry is where each was called (the same line), then the same frames
    assert [f.frame for f in std[1:]] == [f.frame for f in cheap[1:]]
    assert [(f.filename, f.lineno, f.function, f.code_context) for f in std[1:]] == \
        [(f.filename, f.lineno, f.function, f.code_context) for f in cheap[1:]]
    assert std[0].code_context == cheap[0].code_context and "inspect.stack(), _frames()" in cheap[0].code_context[0]


@pytest.mark.slow  # the ordinary import takes minutes: that is why the stand-in exists
def test_tensor_intrinsics_imported_the_cheap_way_are_the_same() -> None:
    import subprocess
    import sys

    code = ("import sys, hashlib, tvm, tvm_ffi\n"
            "if sys.argv[1] == 'cheap':\n"
            "    from compstack.targets.relax.tuning import _tensor_intrinsics; _tensor_intrinsics()\n"
            "import tvm.s_tir.tensor_intrin as ti\n"
            "from tvm.s_tir import TensorIntrin\n"
            "names = sorted({getattr(m, k) for m in (ti.cuda, ti.x86, ti.arm_cpu) for k in dir(m)\n"
            "                if k.endswith('_INTRIN') and isinstance(getattr(m, k), str)})\n"
            "h = hashlib.sha256()\n"
            "for n in names:\n"
            "    t = TensorIntrin.get(n, allow_missing=True)\n"
            "    h.update(f'{n}:{t and tvm_ffi.structural_hash(t.desc)}:{t and tvm_ffi.structural_hash(t.impl)}'.encode())\n"
            "print(len(names), h.hexdigest())\n")
    out = {how: subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, timeout=1800,
                               check=True).stdout.split() for how in ("cheap", "inspect")}
    assert int(out["cheap"][0]) > 50 and out["cheap"] == out["inspect"]


def test_tuning_workers_never_import_from_the_current_folder(isolated_env: Path) -> None:
    """MetaSchedule's builder and runner are TVM's ``python -m`` workers: a ``tvm/`` folder in
    the current folder must not run in them (PYTHONSAFEPATH while tuning)."""
    work = isolated_env / "here"
    (work / "tvm").mkdir(parents=True)
    marker = isolated_env / "ran.txt"
    (work / "tvm" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    model = _gemm_model(isolated_env / "gemms.onnx", layers=1)
    import subprocess
    import sys

    # -P: as the installed `compstack` script starts, without the current folder on the path
    proc = subprocess.run([sys.executable, "-P", "-m", "compstack.cli", "compare", str(model), "--targets", "tvm-llvm",
                           "--option", "tvm-llvm:tune=5s", "--json", "--no-latency"], capture_output=True, text=True,
                          cwd=work, timeout=900, check=False)
    row = _row(proc, "tvm-llvm")
    if metaschedule_problem():
        pytest.skip("MetaSchedule cannot run with this TVM install")
    assert not marker.exists(), ("a tvm/ package of the current folder ran", proc.stderr[-3000:])
    assert row["status"] == "ok" and row["flags"]["tuning"]["records"] > 0, row


def test_tuned_options_per_stack_and_the_users_win() -> None:
    """``--tuned`` (issue #26 part 4): each CPU stack's "best" comes from its own target class;
    a user's --option value wins over the tuned one and the meaning says so."""
    from compstack.run.tuned import tuned_target_options

    user = {"iree-llvm-cpu": {"target_cpu": "znver4"}, "ort-cpu": {"opt_level": "basic"}}
    names = ["tvm-llvm", "inductor-cpu", "iree-llvm-cpu", "openvino-cpu", "ort-cpu", "xla-cpu", "torchscript-cpu",
             "reference"]
    options, meaning = tuned_target_options(names, user, 120.0)
    assert options["tvm-llvm"] == {"tune": "120s"} and "MetaSchedule within a 120 s budget" in meaning["tvm-llvm"]
    assert options["inductor-cpu"] == {"mode": "max-autotune"}
    assert options["iree-llvm-cpu"] == {"target_cpu": "znver4", "tune": "120s"}
    assert "flag search within 120 s" in meaning["iree-llvm-cpu"]
    assert options["openvino-cpu"] == {"performance_hint": "latency"}
    assert options["ort-cpu"] == {"opt_level": "basic"}
    assert meaning["ort-cpu"].endswith("except your --option opt_level=basic (instead of all)"), meaning["ort-cpu"]
    for name in ("xla-cpu", "torchscript-cpu", "reference"):
        assert name not in options and meaning[name].startswith("nothing to tune: "), meaning[name]
    from compstack.api import validate_target_options

    validate_target_options(options)  # every tuned value passes the checks --option values do


def test_a_tuned_job_gets_the_budget_on_its_limit() -> None:
    from compstack.run.executors import Limits, tuning_limits
    from compstack.run.jobs import Job

    job = Job(model_path="", fingerprint="", target="inductor-cpu", target_ref="inductor-cpu", inputs_path="",
              workdir="", options={"mode": "max-autotune"}, tuning_budget_s=120.0)
    assert tuning_limits(job, Limits(timeout_s=900.0)) == Limits(timeout_s=1020.0)
    job.options, job.target = {"tune": "5m"}, "tvm-llvm"  # the larger of the two, not their sum
    assert tuning_limits(job, Limits(timeout_s=900.0)) == Limits(timeout_s=1200.0)


def test_compare_tuned_rows_say_what_tuned_meant(isolated_env: Path) -> None:
    proc = run_cli("compare", "zoo:mlp", "--targets", "ort-cpu,iree-llvm-cpu,xla-cpu", "--tuned", "--budget", "20s",
                   "--min-time", "0.2", "--json")
    rows = {t: _row(proc, t) for t in ("ort-cpu", "iree-llvm-cpu", "xla-cpu")}
    assert all(r["status"] == "ok" for r in rows.values()), {t: r["error"] for t, r in rows.items()}
    iree = rows["iree-llvm-cpu"]
    assert iree["flags"]["tuned_as"].startswith("iree-compile flag search within 20 s")
    search = iree["flags"]["tuning"]
    # the default flags are always timed first; each candidate says what became of it
    assert search["candidates"][0]["name"] == "default" and search["candidates"][0]["status"] == "ok"
    timed = [c for c in search["candidates"] if c["status"] == "ok"]
    assert search["trials"] == len(timed) >= 1 and all(c["median_ms"] > 0 and c["runs"] >= 5 for c in timed)
    assert all(c["status"] in ("ok", "failed to compile", "failed to run", "not tried: the budget was spent")
               for c in search["candidates"])
    from compstack.targets.iree.tuning import KEEP_MARGIN

    fastest = timed[0]  # a later candidate replaces the best only when faster by the margin
    for c in timed[1:]:
        fastest = c if c["median_ms"] < fastest["median_ms"] * KEEP_MARGIN else fastest
    assert search["kept"] == fastest["name"] and search["kept_flags"] == fastest["flags"]
    # the row's own flags are the command that built the kept artifact
    assert iree["flags"]["iree-compile"] == search["iree-compile"]
    assert search["iree-compile"][len(search["iree-compile"]) - len(fastest["flags"]):] == fastest["flags"]
    pts = search["curve"]["points"]
    assert pts[-1]["est_ms"] == fastest["median_ms"] and all(a["est_ms"] >= b["est_ms"] for a, b in zip(pts, pts[1:]))
    assert iree["flags"]["tuning"]["tune_s"] > 0
    assert rows["ort-cpu"]["flags"]["tuned_as"].startswith("ORT_ENABLE_ALL")
    assert rows["xla-cpu"]["flags"]["tuned_as"].startswith("nothing to tune: XLA:CPU has no tuning step")
    assert any(n.startswith("--tuned: ") for n in iree["notes"])
    # default and tuned side by side: IREE also ran with its default flags, ORT's tuned is its default
    default = iree["flags"]["default"]
    assert default["status"] == "ok" and default["latency_ms"]["median"] > 0 and default["compile_s"] > 0
    speedup = iree["flags"]["tuned_speedup"]
    assert speedup["ratio"] == pytest.approx(default["latency_ms"]["median"] / iree["latency_ms"]["median"])
    assert speedup["significant"] in (True, False, None)
    assert "default" not in rows["ort-cpu"]["flags"] and "default" not in rows["xla-cpu"]["flags"]
    assert "--tuned: this stack's tuned configuration is its default one; it ran once" in rows["ort-cpu"]["notes"]
    assert not any("ran once" in n for n in rows["xla-cpu"]["notes"])  # nothing to tune is not "tuned"
    page = isolated_env / "page.html"
    assert run_cli("report", "--last", "-o", str(page)).returncode == 0
    html = page.read_text(encoding="utf-8")
    assert 'id="tuning-table"' in html and 'data-target="iree-llvm-cpu"' in html
    assert html.count('class="plot plot-curve"') == 1  # IREE's search has a curve; ORT and XLA do not
    assert html.count('class="point"') == len(pts)
    console = Console(record=True, width=200, file=io.StringIO())
    fields = set(Result.__dataclass_fields__)
    print_tuning(Report(model={}, reference={}, results=[Result(**{k: v for k, v in r.items() if k in fields})
                                                         for r in rows.values()]), console)
    lines = {ln.split()[1]: ln for ln in console.export_text().splitlines() if ln.startswith("│ ")}
    assert f"x{speedup['ratio']:.2f}" in lines["iree-llvm-cpu"] and "ran once" in lines["ort-cpu"]
    assert "xla-cpu" not in lines
    plain = _row(run_cli("compare", "zoo:mlp", "--targets", "iree-llvm-cpu", "--no-latency", "--json"),
                 "iree-llvm-cpu")
    assert "tuned_as" not in plain["flags"] and plain["flags"]["tuning"]["tuner"] == "none"


def test_budget_without_tuned_and_bad_budgets_are_one_line_exit_2(isolated_env: Path) -> None:
    for args in (("--budget", "5m"), ("--tuned", "--budget", "soon"), ("--tuned", "--budget", "0s"),
                 ("--tuned", "--budget", ""), ("--tuned", "--budget", "25h")):
        proc = run_cli("compare", "zoo:mlp", "--targets", "ort-cpu", *args)
        assert proc.returncode == 2, args
        assert len(said(proc.stderr)) == 1 and "--budget" in proc.stderr, proc.stderr


def test_default_runs_are_the_stacks_as_they_come() -> None:
    from compstack.run.tuned import default_runs, tuned_target_options

    targets = ["tvm-llvm", "ort-cpu", "iree-llvm-cpu", "openvino-cpu", "inductor-cpu", "xla-cpu"]
    options, _ = tuned_target_options(targets, {}, 20.0)
    # ORT's and OpenVINO's tuned configuration is their default one; XLA has nothing to tune
    assert default_runs(targets, {}, options) == {"tvm-llvm": {}, "iree-llvm-cpu": {}, "inductor-cpu": {}}
    # the user's own tuning keys are not part of the default run; their other options are
    user = {"tvm-llvm": {"tune": "1m", "tune_trials": "4", "opt_level": "3"}}
    options, _ = tuned_target_options(["tvm-llvm"], user, 20.0)
    assert options["tvm-llvm"]["tune"] == "1m"
    assert default_runs(["tvm-llvm"], user, options) == {"tvm-llvm": {"opt_level": "3"}}
    # a value the user gave that is not a search is in both runs: no default run that drops it
    # (ORT's tuned is its default: with the user's opt_level both runs would be the same)
    user = {"ort-cpu": {"opt_level": "disable"}, "inductor-cpu": {"mode": "max-autotune"}}
    options, _ = tuned_target_options(["ort-cpu", "inductor-cpu"], user, 20.0)
    assert default_runs(["ort-cpu", "inductor-cpu"], user, options) == {"inductor-cpu": {}}


def test_a_tuned_row_without_a_default_says_why_and_a_wrong_one_gets_no_speedup() -> None:
    from compstack.core.results import Result
    from compstack.run.session import CompareOptions
    from compstack.run.tuned import attach_default, tuned_target_options

    options, meaning = tuned_target_options(["tvm-llvm", "ort-cpu"], {}, 20.0)
    sweep = CompareOptions(targets=["tvm-llvm", "ort-cpu"], target_options=options, tuned=meaning)  # a sweep --tuned
    tvm = attach_default(Result(target="tvm-llvm", status="ok"), None, sweep)
    ort = attach_default(Result(target="ort-cpu", status="ok"), None, sweep)
    assert tvm.flags["no_default"].startswith("no default run here (sweep --tuned")
    assert ort.flags["no_default"].startswith("this stack's tuned configuration is its default one")
    lat = {"median": 2.0, "ci95": [1.9, 2.1]}
    wrong = attach_default(Result(target="tvm-llvm", status="mismatch", latency_ms={"median": 1.0, "ci95": [0.9, 1.1]}),
                           Result(target="tvm-llvm", status="ok", latency_ms=lat), sweep)
    assert "tuned_speedup" not in wrong.flags and wrong.flags["default"]["status"] == "ok"
    right = attach_default(Result(target="tvm-llvm", status="ok", latency_ms={"median": 1.0, "ci95": [0.9, 1.1]}),
                           Result(target="tvm-llvm", status="ok", latency_ms=lat), sweep)
    assert right.flags["tuned_speedup"] == {"ratio": 2.0, "significant": True}
