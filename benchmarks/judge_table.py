"""Does compare judge right? A table of graphs with known right answers (issue #24, part 4).

Each graph of :mod:`judge_cases` (``oracle``: onnx.reference's known defects and undefined
behaviour; ``imprecise``: float32 cancellation and transcendental chains; ``bug``: real
wrong results from today's XFAIL files) runs through ``compstack compare`` on the real
stacks. Two checks per graph:

* ``ref``: the reference compare used equals the hand-computed answer (``-`` where the
  op is undefined and there is no answer);
* per target: compare's verdict class (``agree`` = ok/imprecise, ``bad`` =
  wrong/nan/shape, ``undefined``, ``suspect`` = reference-suspect) equals what the case
  expects. A target that cannot run the graph (unsupported, failed) is ``n/a``, not
  judged.

Prints one line per graph, then the false alarms (expected agree, got bad), the misses
(expected bad, got agree) and other disagreements; exit 1 when there is one.

    python3 benchmarks/judge_table.py --targets ort-cpu
    python3 benchmarks/judge_table.py --targets ort-cpu,tvm-llvm,iree-llvm-cpu --json out.json
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_cases import JudgeCase, all_cases  # noqa: E402

_CLASS = {"ok": "agree", "mismatch": "bad", "undefined": "undefined", "reference-suspect": "suspect"}


def _ref_matches(case: JudgeCase, arrays: dict[str, np.ndarray], ref_key: str) -> str:
    if case.answer is None:
        return "-"
    for name, want in case.answer.items():
        got = arrays.get(f"{ref_key}::{name}")
        if got is None:
            return "missing"
        got = np.asarray(got)
        if want.dtype.kind in "biu":
            if not np.array_equal(got, want):
                return "WRONG"
        elif got.shape != want.shape or not np.allclose(got.astype(np.float64), want.astype(np.float64),
                                                         rtol=1e-6, atol=1e-7, equal_nan=True):
            return "WRONG"
    return "ok"


def run_table(targets: list[str], db: Path, work: Path, only: str = "") -> list[dict[str, object]]:
    """Every case (whose name contains one of the comma-separated ``only``) through compare on
    ``targets``; one dict per case."""
    import compstack
    from compstack.run.executors import open_executor
    from compstack.run.session import CompareOptions

    executor, _ = open_executor("pool", True, multi=True)
    rows = []
    try:
        wanted = [w for w in only.split(",") if w] or [""]
        for case in (c for c in all_cases() if any(w in c.name for w in wanted)):
            path = work / f"{case.name.replace('*', 'x').replace('/', '_')}.onnx"
            onnx.save(case.model, str(path))
            t0 = time.perf_counter()
            report = compstack.compare(str(path), targets, options=CompareOptions(
                targets=targets, inputs=case.feeds, latency=None, executor=executor), db=db)
            seconds = time.perf_counter() - t0
            row: dict[str, object] = {"case": case.name, "group": case.group, "source": case.source,
                                      "ref": _ref_matches(case, report.arrays, report.reference.get("target", "")),
                                      "seconds": round(seconds, 2), "targets": {}}
            for r in report.results:
                got = _CLASS.get(r.status, "n/a")
                kinds = [o.get("kind", "") for o in r.outputs]
                row["targets"][r.target] = {  # type: ignore[index]
                    "expected": case.expected(r.target), "got": got, "status": r.status, "kinds": kinds,
                    "right": got == "n/a" or got == case.expected(r.target), "error": r.error[:160]}
            rows.append(row)
    finally:
        executor.close()
    return rows


def summary(rows: list[dict[str, object]]) -> dict[str, int]:
    """Counts: graphs, judged (case, target) pairs, false alarms, misses, other wrong, wrong references."""
    out = {"graphs": len(rows), "judged": 0, "false_alarms": 0, "misses": 0, "other": 0, "reference_wrong": 0,
           "not_run": 0}
    for row in rows:
        out["reference_wrong"] += row["ref"] not in ("ok", "-")
        for t in row["targets"].values():  # type: ignore[attr-defined]
            if t["got"] == "n/a":
                out["not_run"] += 1
                continue
            out["judged"] += 1
            if t["right"]:
                continue
            if t["expected"] != "bad" and t["got"] == "bad":
                out["false_alarms"] += 1
            elif t["expected"] == "bad":
                out["misses"] += 1
            else:
                out["other"] += 1
    return out


def print_table(rows: list[dict[str, object]], targets: list[str]) -> None:
    """The table: case, group, reference check, then expected/got per target."""
    head = f"{'case':<34} {'group':<9} {'ref':<5} " + " ".join(f"{t:<26}" for t in targets)
    print(head)
    print("-" * len(head))
    for row in rows:
        cells = []
        for t in targets:
            c = row["targets"].get(t)  # type: ignore[attr-defined]
            if c is None:
                cells.append(f"{'-':<26}")
                continue
            mark = "" if c["right"] else " <-- WRONG"
            kinds = ",".join(sorted(set(k for k in c["kinds"] if k))) or c["status"]
            cells.append(f"{c['expected'] + '/' + c['got'] + ' (' + kinds + ')' + mark:<26}")
        print(f"{row['case']:<34} {row['group']:<9} {row['ref']:<5} " + " ".join(cells))
    s = summary(rows)
    print(f"\n{s['graphs']} graphs, {s['judged']} judged rows, {s['not_run']} not run; false alarms "
          f"{s['false_alarms']}, misses {s['misses']}, other disagreements {s['other']}, references "
          f"not matching the hand answer {s['reference_wrong']}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="ort-cpu", help="comma-separated targets [ort-cpu]")
    ap.add_argument("--json", type=Path, help="also write the rows as JSON here")
    ap.add_argument("--only", default="", help="only the cases whose name contains one of these (comma-separated)")
    args = ap.parse_args(argv)
    targets = [t for t in args.targets.split(",") if t]
    with tempfile.TemporaryDirectory(prefix="judge-table-") as tmp:
        rows = run_table(targets, Path(tmp) / "results.sqlite", Path(tmp), args.only)
    print_table(rows, targets)
    if args.json:
        args.json.write_text(json.dumps({"targets": targets, "rows": rows, "summary": summary(rows)}, indent=1))
    s = summary(rows)
    return 1 if s["false_alarms"] or s["misses"] or s["other"] or s["reference_wrong"] else 0


if __name__ == "__main__":
    sys.exit(main())
