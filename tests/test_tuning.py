"""Tuning options: TVM MetaSchedule (records kept and reused, tuning time apart from the
compile time) and Inductor's max-autotune; every row's flags say what was done."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from compstack.targets.relax.tuning import metaschedule_problem
from conftest import run_cli
from test_threads import _gemm_model


def _row(proc, target: str) -> dict:
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return next(r for r in json.loads(proc.stdout)["results"] if r["target"] == target)


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
    for opt in ("tvm-llvm:tune_trials=-3", "tvm-llvm:tune_trials=many", "inductor-cpu:mode=fastest"):
        proc = run_cli("compare", "zoo:mlp", "--option", opt)
        assert proc.returncode == 2, opt
        assert len(proc.stderr.strip().splitlines()) == 1 and opt.split(":")[1].split("=")[0] in proc.stderr
