"""The comparison table on a real terminal (issue #28 part 1): the compact table fits 80
columns, ``--wide`` shows every column, and no figure is ever elided, read back from a
pseudo-terminal of 80 and 120 columns."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
from pathlib import Path

import pexpect
import pytest
from rich.console import Console

from compstack.core.results import Report, Result
from compstack.report.compact import duration, ratio
from compstack.report.tables import print_report

FAST = ["--min-runs", "3", "--min-time", "0", "--warmup", "1"]
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _pty(args: list[str], cols: int, env: dict[str, str]) -> tuple[str, int]:
    """Run the CLI on a pseudo-terminal ``cols`` wide; (stdout+stderr without escapes, exit status)."""
    child = pexpect.spawn(sys.executable, ["-m", "compstack.cli", *args], dimensions=(60, cols),
                          env={**os.environ, **env, "TERM": "xterm"}, encoding="utf-8", timeout=600)
    child.expect(pexpect.EOF)
    child.close()
    text = _ANSI.sub("", child.before.replace("\r", ""))
    return text, child.exitstatus


def _rows(db: Path) -> list[dict]:
    con = sqlite3.connect(db)
    con.row_factory = sqlite3.Row
    return [dict(r) for r in con.execute("SELECT target, status, compile_s, latency_median_ms, latency_json, "
                                         "outputs_json FROM results ORDER BY id")]


def _table_lines(text: str) -> list[str]:
    """The lines of the table and what follows it (the progress lines come before)."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("┏"))
    return lines[start:]


def _check(mlp_onnx: Path, isolated_env: Path, cols: int, wide: bool) -> None:
    text, status = _pty(["compare", str(mlp_onnx), "--targets", "ort-cpu,reference", *FAST,
                         *(["--wide"] if wide else [])], cols, {})
    assert status == 0, text
    lines = _table_lines(text)
    assert "…" not in text
    if not wide:
        assert all(len(line) <= cols for line in lines), "\n".join(lines)
    rows = _rows(isolated_env / "results.sqlite")
    assert {r["target"] for r in rows} == {"ort-cpu", "reference"}
    for r in rows:
        line = next(ln for ln in lines if ln.startswith(("│ " + r["target"] + " ", "┃ " + r["target"] + " ")))
        cells = [c.strip() for c in line.strip("│").split("│")]
        err = max(o["max_abs_err"] for o in json.loads(r["outputs_json"]))
        assert cells[1] == r["status"] and f"{err:.2e}" in cells
        assert duration(r["latency_median_ms"]) in cells
        if wide:
            lat = json.loads(r["latency_json"])
            assert duration(r["compile_s"] * 1e3) in cells and duration(lat["p10"]) in cells
    # the speed-up column, compact and wide: against ort-cpu (the baseline role)
    ort, ref = (next(r for r in rows if r["target"] == t) for t in ("ort-cpu", "reference"))
    assert ratio(ort["latency_median_ms"] / ref["latency_median_ms"]) in text
    assert "x1.00" in text


def test_compact_table_fits_80_columns_on_a_tty(mlp_onnx: Path, isolated_env: Path) -> None:
    _check(mlp_onnx, isolated_env, 80, wide=False)


@pytest.mark.slow
def test_compact_table_at_120_columns(mlp_onnx: Path, isolated_env: Path) -> None:
    _check(mlp_onnx, isolated_env, 120, wide=False)


@pytest.mark.slow
def test_wide_table_at_80_columns_elides_nothing(mlp_onnx: Path, isolated_env: Path) -> None:
    _check(mlp_onnx, isolated_env, 80, wide=True)


def test_duration_picks_a_unit_per_value() -> None:
    assert [duration(x) for x in (0.0000123, 0.005809, 0.5, 27.9, 999.0, 1280.0, 65000.0, None)] == \
        ["12.3 ns", "5.81 µs", "500 µs", "27.9 ms", "999 ms", "1.28 s", "65.0 s", "-"]
    assert [ratio(x) for x in (0.000717, 0.43, 1.0, 12.345, 250.0, None)] == \
        ["x0.00072", "x0.43", "x1.00", "x12.35", "x250", "-"]


def test_compact_table_prints_any_status_whole() -> None:
    """Long and future statuses (the verdict engineer's ``reference-suspect``) and long
    target names fold or fit; figures stay whole at 80 columns."""
    results = [Result(target=t, status=s, compile_s=1.5, latency_ms={"median": m, "cv": 0.01},
                      outputs=[{"max_abs_err": e, "max_rel_err": e}], notes=[f"note of {t}"] * 2)
               for t, s, m, e in (("torchscript-cpu", "reference-suspect", 27.9, 1.5e-3),
                                  ("ort-cpu", "ok", 0.020, 1.2e-7), ("iree-llvm-cpu", "unsupported", 1234.5, 3e-2))]
    report = Report(model={"name": "m", "nodes": 3, "params": 10, "fingerprint": "f" * 16},
                    reference={"target": "reference", "precision": "float64"}, results=results)
    console = Console(width=80, force_terminal=True, record=True, color_system=None)
    print_report(report, console=console)
    text = console.export_text()
    assert "…" not in text and all(len(line) <= 80 for line in text.splitlines())
    for status in ("reference-suspect", "unsupported", "27.9 ms", "20.0 µs", "1.23 s", "x0.00072", "x1.00",
                   "1.50e-03", "note of torchscript-cpu"):
        assert status in text, status
    assert text.count("note of ort-cpu") == 1  # the same note twice: one footnote


def test_wide_table_has_the_speed_up_and_no_figure_for_a_shape_mismatch() -> None:
    """Found by a new-user trial: ``--wide`` (and a pipe) had no speed-up column though the
    docs say it adds columns to the compact table's, and a row whose output shape differed
    showed a max rel err of 0.00e+00 (its outputs' figures are None: nothing was compared)."""
    results = [Result(target="ort-cpu", status="ok", compile_s=0.1, latency_ms={"median": 2.0, "cv": 0.01},
                      outputs=[{"max_abs_err": 1e-7, "max_rel_err": 2e-7}]),
               Result(target="tvm-llvm", status="mismatch", compile_s=0.2, latency_ms={"median": 1.0, "cv": 0.01},
                      outputs=[{"max_abs_err": None, "max_rel_err": None, "kind": "shape"}])]
    report = Report(model={"name": "m", "nodes": 1, "params": 0, "fingerprint": "f" * 16},
                    reference={"target": "reference", "precision": "float64"}, results=results)
    console = Console(width=300, force_terminal=False, record=True, color_system=None)
    print_report(report, console=console, wide=True)
    lines = console.export_text().splitlines()
    header = [c.strip() for c in next(ln for ln in lines if "target" in ln and "speed-up" in ln).strip("┃").split("┃")]
    tvm = [c.strip() for c in next(ln for ln in lines if ln.startswith("│ tvm-llvm")).strip("│").split("│")]
    row = dict(zip(header, tvm))
    assert row["speed-up"] == "x2.00" and row["max abs err"] == "-" and row["max rel err"] == "-"


def test_sweep_matrix_shows_sub_millisecond_medians_in_microseconds() -> None:
    from compstack.sweep._matrix import _cell

    assert _cell({"status": "ok", "latency_ms": 0.00829}, baseline=True) == "[green]ok[/] 8.29 µs"
    assert _cell({"status": "ok", "latency_ms": 27.9}, baseline=True) == "[green]ok[/] 27.9 ms"


def _fuzz_record(attribution: str) -> dict:
    return {"campaign": "c", "graphs": 150, "seconds": 60.0, "graphs_per_min": 150.0, "rejected": 0,
            "outcomes": {"tvm-llvm": {"ok": 149, "wrong": 1}}, "stage_seconds": {"tvm-llvm": {"compile": 30.0}},
            "versions": {"tvm-llvm": "0.27.0"}, "own_seconds": {},
            "findings": [{"number": 1, "target": "tvm-llvm", "stage": "run", "kind": "wrong", "label": "bug",
                          "known": False, "repeats": 2, "graph": "Gemm -> Relu -> ReduceMean", "attribution": attribution}]}


@pytest.mark.parametrize("width", [80, 200])
def test_fuzz_findings_are_never_cut(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from rich.console import Console

    from compstack.cli.fuzz import print_record
    from compstack.report import tables

    buf = io.StringIO()
    monkeypatch.setattr(tables, "stdout_console", lambda highlight=True: Console(file=buf, width=width,
                                                                                 highlight=highlight))
    text = ("tvm-llvm's pass AnnotateTIROpPattern (disabled_passes=AnnotateTIROpPattern): with it off the result "
            "agrees with the reference; TVM 0.27.0, opt_level 3, checked on 2 reduced graphs.")
    print_record(_fuzz_record(text))
    out = buf.getvalue()
    if width < 120:  # blocks: the sentence whole, wrapped on words
        assert text in " ".join(line.strip() for line in out.splitlines()), out
    else:  # the table: every word of it is there, and its last one
        cells = " ".join(out.replace("│", " ").split())
        assert all(word in cells for word in ("AnnotateTIROpPattern", "agrees", "reduced", "graphs.")), out
