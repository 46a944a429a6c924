"""benchmarks/judge_table.py: graphs with known right answers through compare on the real
stacks (issue #24, part 4). One test takes one graph of each kind on ort-cpu; the other runs the whole table on ort-cpu, tvm-llvm and iree-llvm-cpu: 0 false alarms,
0 misses, every reference equal to the hand-computed answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "judge_table.py"

#: One graph per kind (the default suite's budget): an onnx.reference defect, undefined
#: behaviour, a float32 round trip, a real ORT bug (xfail).
SAMPLE = "hardmax11_axis1_3d,cast_nan_to_int,sqrt(x)*sqrt(x)-x,resize_linear_align_corners_down"


def _table(tmp: Path, targets: str, only: str = "") -> dict:
    out = tmp / "table.json"
    args = [sys.executable, str(SCRIPT), "--targets", targets, "--json", str(out)] + (["--only", only] if only else [])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=1800,
                          env={**os.environ, "COMPSTACK_CACHE_DIR": str(tmp / "cache")})
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    table = json.loads(out.read_text())
    assert proc.returncode == 0, proc.stdout[-4000:]
    return table


@pytest.mark.slow  # measured 100-190 s on this shared 2-core machine: over the default suite's 60 s budget
def test_sample_on_ort_is_judged_right(tmp_path: Path) -> None:
    table = _table(tmp_path, "ort-cpu", SAMPLE)
    s = table["summary"]
    assert s["graphs"] == 4 and s["judged"] == 4, s
    assert s["false_alarms"] == s["misses"] == s["other"] == s["reference_wrong"] == 0, s
    got = {r["case"]: r["targets"]["ort-cpu"] for r in table["rows"]}
    assert got["resize_linear_align_corners_down"]["got"] == "bad"
    assert got["cast_nan_to_int"]["got"] == "undefined" and got["hardmax11_axis1_3d"]["got"] == "agree"
    assert "imprecise" in got["sqrt(x)*sqrt(x)-x"]["kinds"]


@pytest.mark.slow
def test_whole_table_on_three_stacks(tmp_path: Path) -> None:
    table = _table(tmp_path, "ort-cpu,tvm-llvm,iree-llvm-cpu")
    s = table["summary"]
    groups = [r["group"] for r in table["rows"]]
    assert s["graphs"] >= 30 and groups.count("bug") >= 10 and groups.count("imprecise") >= 10
    assert groups.count("oracle") >= 10
    caught = [r["case"] for r in table["rows"] for t in r["targets"].values() if t["expected"] == "bad"
              and t["got"] == "bad"]
    assert len(caught) >= 10, caught  # every real bug was run and judged, not just not missed
    assert s["false_alarms"] == s["misses"] == s["other"] == s["reference_wrong"] == 0, s
