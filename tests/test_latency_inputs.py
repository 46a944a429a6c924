"""Latency runs on the user's inputs, and a failure while timing keeps the row's numerics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.run.runner import Limits
from compstack.run.session import CompareOptions, compare
from conftest import run_cli

if "crash-latency" not in registry.names():
    registry.register("crash-latency", "crashy:LatencySegfaultTarget")

FAST = ["--min-runs", "3", "--min-time", "0", "--warmup", "1"]
ROWS = 5  # fewer rows than generated integers reach ([0, 10)): a generated index goes out of range


def _gather_model(path: Path) -> Path:
    """``y = table[idx]``: a float table of ROWS rows, int64 indices from the user."""
    table = numpy_helper.from_array(np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3), "table")
    node = helper.make_node("Gather", ["table", "idx"], ["y"], axis=0, name="lookup")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("idx", TensorProto.INT64, [6])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 3])], [table])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), path)
    return path


def _user_inputs(folder: Path) -> Path:
    path = folder / "idx.npz"
    np.savez(path, idx=np.array([4, 0, 3, 3, 1, 2], np.int64))
    return path


def test_latency_runs_on_the_users_indices(isolated_env: Path) -> None:
    model, ins = _gather_model(isolated_env / "gather.onnx"), _user_inputs(isolated_env)
    proc = run_cli("compare", str(model), "--targets", "ort-cpu", "--inputs", str(ins), "--json", *FAST)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "ok", (row["stage"], row["error"])
    assert row["latency_error"] == "" and row["latency_ms"]["runs"] >= 3
    assert row["outputs"][0]["ok"] and row["outputs"][0]["max_abs_err"] == 0.0


def test_failure_while_timing_keeps_the_numerics_verdict(isolated_env: Path) -> None:
    # The user's own indices are in range; --val-range asks latency to draw indices up to 100,
    # which ORT's Gather rejects while timing. The compared outputs must survive that.
    model, ins = _gather_model(isolated_env / "gather.onnx"), _user_inputs(isolated_env)
    outs = isolated_env / "outs.npz"
    proc = run_cli("compare", str(model), "--targets", "ort-cpu", "--inputs", str(ins), "--val-range", "idx:0,100",
                   "--save-outputs", str(outs), "--json", *FAST)
    assert proc.returncode == 1, proc.stderr[-2000:]  # timing broke: not a clean run
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "ok" and row["stage"] == "", (row["stage"], row["error"])
    assert row["outputs"] and row["outputs"][0]["ok"] and row["outputs"][0]["max_abs_err"] == 0.0
    assert row["latency_ms"] is None and "Gather" in row["latency_error"]
    assert any(n.startswith("latency failed") for n in row["notes"])
    got = np.load(outs)["ort-cpu::y"]
    np.testing.assert_array_equal(got, np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)[[4, 0, 3, 3, 1, 2]])


def test_crash_while_timing_keeps_the_compared_outputs(isolated_env: Path) -> None:
    # A real segfault in the worker once timing starts: the outputs it wrote before still count.
    model, ins = _gather_model(isolated_env / "gather.onnx"), _user_inputs(isolated_env)
    source = SourceModel(name="gather", model=cir.load(model))
    feeds = dict(np.load(ins))
    opts = CompareOptions(targets=["crash-latency"], inputs=feeds, cache=False, limits=Limits(timeout_s=60),
                          latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0))
    report = compare(source, opts, settings(cache_dir=isolated_env / "cache", db=isolated_env / "db.sqlite"))
    (row,) = report.results
    assert row.status == "ok" and row.outputs and row.outputs[0]["ok"], (row.status, row.stage, row.error)
    assert row.latency_ms is None and row.latency_error.startswith("crashed:") and "SIGSEGV" in row.latency_error
    import sqlite3

    (saved,) = sqlite3.connect(isolated_env / "db.sqlite").execute("SELECT status, latency_json FROM results "
                                                                   "WHERE target='crash-latency'").fetchall()
    assert saved[0] == "ok" and "SIGSEGV" in json.loads(saved[1])["error"]
