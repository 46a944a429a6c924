"""One thread default for every command that times (issue #28 part 2): compare and sweep
rows of the same model and target ask the stack for the same threads, by the same knob."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import run_cli

FAST = ["--warmup", "1", "--min-runs", "3", "--min-time", "0"]


def _threads_of(db: Path) -> dict[str, dict]:
    """command -> the ort-cpu row's flags (the newest row of each command's run)."""
    con = sqlite3.connect(db)
    rows = con.execute("SELECT r.flags_json, COALESCE(NULLIF(r.sweep_id, ''), '') FROM results r "
                       "WHERE r.target = 'ort-cpu' ORDER BY r.id").fetchall()
    return {("sweep" if sweep else "compare"): json.loads(flags) for flags, sweep in rows}


def test_compare_and_sweep_record_the_same_thread_settings(mlp_onnx: Path, isolated_env: Path) -> None:
    from compstack.core.threads import default_threads

    p = run_cli("compare", str(mlp_onnx), "--targets", "ort-cpu", "--json", *FAST)
    assert p.returncode == 0, p.stderr
    p = run_cli("sweep", str(mlp_onnx), "--targets", "ort-cpu", "--json", *FAST)
    assert p.returncode == 0, p.stderr
    flags = _threads_of(isolated_env / "results.sqlite")
    assert set(flags) == {"compare", "sweep"}
    compare, sweep = flags["compare"], flags["sweep"]
    assert compare["threads"]["requested"] == sweep["threads"]["requested"] == default_threads()
    assert compare["threads"]["knob"] == sweep["threads"]["knob"]
    assert compare["intra_op_num_threads"] == sweep["intra_op_num_threads"] == default_threads()
