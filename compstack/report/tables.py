"""Terminal output: result tables, target and zoo listings, and the progress display.

Tables go to stdout, the progress display to stderr, so ``compstack compare > f``
keeps only the table. Everything here is presentation; no measuring happens here.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from compstack.analysis.verdict import shown_status
from compstack.core.duration import figure
from compstack.core.results import Report, Result
from compstack.core.sanitize import MAX_SHOWN, terminal, terminal_lines  # model-sourced text: inert (core.sanitize)
from compstack.core.sanitize import rich_text as escape

__all__ = ["Progress", "stdout_console", "print_report", "print_outputs", "print_targets", "print_zoo", "target_rows",
           "print_pass_timing", "print_unified", "print_real_zoo"]

_STYLE = {"ok": "green", "mismatch": "red", "unsupported": "yellow", "failed": "red", "crashed": "red bold",
          "timeout": "red", "oom": "red", "unavailable": "dim", "imprecise": "green dim", "reference-suspect": "magenta",
          "undefined": "yellow"}


class Progress:
    """Progress on stderr: on a terminal a rich spinner naming the target, its stage and
    elapsed time; otherwise (piped, a log, a CI job) one line per event
    (``[ELAPSED s] TARGET: STAGE``), plus a ``still in STAGE`` line every
    :attr:`HEARTBEAT_S` seconds of one stage, so no command is silent for 30 s. A line per
    finished job either way. ``--json`` changes only stdout (issue #23, part 3).

    Args:
        enabled: show anything at all (False: nothing, for callers with their own display).
    """

    #: Seconds between ``still in STAGE`` lines of one long stage.
    HEARTBEAT_S = 25.0

    def __init__(self, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.quiet = not enabled
        self.enabled = enabled and self.console.is_terminal
        self.lines = enabled and not self.console.is_terminal
        self._status: Any = None
        self._t0 = self._stage_t0 = self._c0 = time.monotonic()  # _c0: the command's clock, for event lines
        self._target, self._stage = "", ""
        self._pending: tuple[str, float] | None = None  # a status line not printed yet (see status)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        self._events: Any = None

    def __enter__(self) -> "Progress":
        from compstack.run.events import listening

        if self.enabled:
            self._status = self.console.status("starting")
            self._status.__enter__()
        if not self.quiet:
            self._events = listening(self.stage)
            self._events.__enter__()
            self._beat = threading.Thread(target=self._heartbeat, name="compstack-progress", daemon=True)
            self._beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._events is not None:
            self._events.__exit__(*exc)
        if self._status is not None:
            self._status.__exit__(*exc)

    def status(self, text: str) -> None:
        """Show ``text`` (``importing MODEL``) as what runs now. Off a terminal its line waits
        until the next event, or :attr:`PENDING_S` seconds: a bad input found at once keeps
        its error the one line on stderr."""
        self._update(text)
        self._target, self._stage, self._stage_t0 = text, "", time.monotonic()
        with self._lock:
            self._pending = (text, time.monotonic()) if self.lines else None

    #: Seconds a status line may wait for the next event before it is printed anyway.
    PENDING_S = 10.0

    def _flush(self, older_than: float = 0.0) -> None:
        with self._lock:
            pending = self._pending
            if pending is None or time.monotonic() - pending[1] < older_than:
                return
            self._pending = None
        self._line(pending[0], pending[1])

    def _update(self, text: str) -> None:
        if self._status is not None:
            self._status.update(escape(text))  # a model's path or name: inert on the terminal

    def _line(self, text: str, at: float | None = None) -> None:
        if self.lines:
            since = (time.monotonic() if at is None else at) - self._c0
            self.console.print(f"[{since:7.1f} s] {terminal(text)}", highlight=False,
                               markup=False, soft_wrap=True)  # one line per event, however long: a log is read by line

    def start(self, target: str) -> None:
        self._flush()
        self._t0 = self._stage_t0 = time.monotonic()
        self._target, self._stage = target, "start"
        self._update(f"running {target}")
        self._line(f"{target}: start")

    def stage(self, name: str) -> None:
        """The running job entered stage ``name`` (:func:`compstack.run.events.emit`)."""
        self._flush()
        self._stage, self._stage_t0 = name, time.monotonic()
        self._update(f"running {self._target}: {name}")
        self._line(f"{self._target}: {name}")

    def _heartbeat(self) -> None:
        while not self._stop.wait(min(self.PENDING_S, self.HEARTBEAT_S / 5)):
            self._flush(older_than=self.PENDING_S)
            since = time.monotonic() - self._stage_t0
            if self._target and since >= self.HEARTBEAT_S:
                self._stage_t0 = time.monotonic()
                what = f"{self._target}: {self._stage}" if self._stage else self._target
                self._update(f"{what} ({time.monotonic() - self._t0:.0f} s)")
                self._line(f"{self._target}: still in {self._stage}" if self._stage else f"{what}: still running")

    def done(self, result: Result) -> None:
        self._flush()
        self._target = ""
        if self.quiet:
            return
        from compstack.report.compact import status_cell

        self.console.print(f"  {escape(result.target):<16} {status_cell(result.status, _STYLE)} "
                           f"({time.monotonic() - self._t0:.1f} s)", highlight=False, soft_wrap=True)


def _console(highlight: bool = True) -> Console:
    """stdout console; when piped, wide enough for the tables (rich defaults to 80)."""
    c = Console(highlight=highlight)
    return c if c.is_terminal else Console(width=200, highlight=highlight)


#: The stdout console every command's tables use (public name of :func:`_console`).
stdout_console = _console


def print_report(report: Report, console: Console | None = None, wide: bool = False) -> None:
    """The comparison table: one row per target.

    On a terminal the compact table (:func:`compstack.report.compact.print_compact`: fits
    80 columns); with ``wide`` or on a pipe every column, at the width the table needs
    (never a figure elided: a terminal too narrow wraps the lines instead).
    """
    from compstack.report.compact import duration, max_abs_err, print_compact, ratio, speedups

    console = console or _console()
    m = report.model
    ref = report.reference
    ref_text = ref["target"] + (f" ({ref['precision']})" if ref.get("precision") else "")
    if ref.get("fallback_from"):
        ref_text += f", fallback from {ref['fallback_from']}"
    if ref.get("program"):
        ref_text += f", {ref['program']}"
    forms = {_form_word(r.flags) for r in report.results} - {""}
    common = forms.pop() if len(forms) == 1 else ""  # one form for all: said once, above the table
    console.print(f"[bold]{escape(str(m['name']), MAX_SHOWN)}[/]  {m['nodes']} nodes, {m['params']:,} params, "
                  f"fingerprint {m['fingerprint']}; reference: {escape(ref_text)}"
                  + (f"; every stack got the model {escape(common)}" if common else ""), highlight=False)
    notes = {r.target: _row_notes(r) for r in report.results}
    labels = {r.target: _label(r, common) for r in report.results}
    if not wide and console.is_terminal:
        print_compact(report, notes, labels, console, _STYLE)
        _print_warnings(report, console)
        return
    table = Table()
    for col, just in (("target", "left"), ("status", "left"), ("compile", "right"),
                      ("median", "right"), ("speed-up", "right"), ("95% CI", "right"), ("p10", "right"),
                      ("p90", "right"), ("cv", "right"), ("iqr/med", "right"), ("threads", "right"), ("peak MiB c/r", "right"),
                      ("max abs err", "right"), ("max rel err", "right")):
        table.add_column(col, justify=just, no_wrap=col != "target", overflow="fold")  # type: ignore[arg-type]
    from compstack.report.compact import footnote_marks, status_cell

    table.add_column("notes", overflow="fold")
    marks, texts = footnote_marks(notes)
    _, ups = speedups(report.results)  # as the compact table: the baseline's median / the row's
    for r in report.results:
        lat = r.latency_ms or {}
        table.add_row(labels[r.target], status_cell(shown_status(r.status, r.outputs), _STYLE),
                      duration(None if r.compile_s is None else r.compile_s * 1e3), duration(lat.get("median")),
                      ratio(ups.get(r.target)),
                      _ci(lat), duration(lat.get("p10")), duration(lat.get("p90")),
                      figure(lat["cv"] * 100, ".1f") + "%" if lat else "-",
                      figure(lat["iqr_rel"] * 100, ".1f") + "%" if lat.get("iqr_rel") is not None else "-",
                      _threads(r.flags.get("threads")), _peak(r), figure(max_abs_err(r), ".2e"),
                      figure(max_abs_err(r, "max_rel_err"), ".2e"),
                      marks.get(r.target, ""))
    _print_unsqueezed(console, table)
    for i, text in enumerate(texts, 1):
        console.print(f"  [bold]{i}[/] {escape(text)}", highlight=False, soft_wrap=True)
    for pair in report.latency_comparison()["pairs"]:
        verdict = {True: "significant", False: "not significant (95 % CIs overlap)", None: "no CI"}[pair["significant"]]
        console.print(f"  {pair['faster']} faster than {pair['slower']}: x{pair['ratio']:.2f}, {verdict}",
                      highlight=False, soft_wrap=True)
    _print_warnings(report, console)


def _print_unsqueezed(console: Console, table: Table) -> None:
    """Print ``table`` at the width it needs even when that is wider than ``console``
    (a narrow terminal then wraps its lines; rich would elide cells to fit instead)."""
    need = table.__rich_measure__(console, console.options.update_width(10_000)).maximum
    width = console.width
    console.width = max(width, need)
    try:
        console.print(table)
    finally:
        console.width = width


def _print_warnings(report: Report, console: Console) -> None:
    """What follows the table: the tuning table of a ``--tuned`` run, then the warnings."""
    from compstack.report.tuned import print_tuning

    print_tuning(report, console)  # --tuned: default vs tuned, before the warnings
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


def _row_notes(r: Result) -> list[str]:
    """A row's notes for the table (plain text): its error, the cache, path and tuning remarks."""
    notes = list(r.notes)
    if r.error:
        notes.insert(0, f"{r.stage}: {r.error}" if r.stage else r.error)
    if r.cached:
        notes.append("artifact from cache (its compile time is the original lower + compile)")
    if r.flags.get("native_note"):
        notes.append(str(r.flags["native_note"]))
    if r.flags.get("tuned") is False:
        notes.append("untuned: default schedules, no auto-tuning")
    elif r.flags.get("tuned"):
        notes.append(f"tuned: {r.flags.get('tuning', {}).get('summary', 'auto-tuned schedules')}")
    if r.flags.get("model_form_reason"):
        notes.append(str(r.flags["model_form_reason"]))
    return notes


def _label(r: Result, common_form: str = "") -> str:
    """The target cell: the name and, dim, the path (XLA/Inductor: native or translated, see
    targets/_twopath.py) and the model form (unless it is ``common_form``, said above)."""
    form = _form_word(r.flags)
    words = ", ".join(w for w in (r.flags.get("path"), "" if form == common_form else form) if w)
    return f"{escape(r.target)} [dim]{escape(words)}[/]" if words else escape(r.target)


def _peak(r: Result) -> str:
    """Peak RSS of compile / run, MiB (``-`` where not measured)."""
    if r.peak_rss_compile_mb is None and r.peak_rss_run_mb is None:
        return "-"
    return f"{figure(r.peak_rss_compile_mb, '.0f')}/{figure(r.peak_rss_run_mb, '.0f')}"


def _form_word(flags: dict[str, Any]) -> str:
    """The model form a row ran, for the table: ``as written (opset 13)``, ``opset 20``
    (upgraded with ``--opset``), ``canonical`` (a frontend's graph, or the canonical form
    a translated path needed); empty for rows without the flag (a failed import)."""
    form = flags.get("model_form")
    if not form:
        return ""
    if form == "as-written":
        return f"as written (opset {flags.get('model_opset')})"
    return str(form)


def _ci(lat: dict[str, Any]) -> str:
    from compstack.report.compact import duration

    ci = lat.get("ci95")
    return f"{duration(ci[0])}-{duration(ci[1])}" if ci else "-"


def _threads(info: dict[str, Any] | None) -> str:
    """``requested/observed`` busy threads (``-`` for the stack default or unobserved)."""
    if not info:
        return "-"
    req = info.get("requested") or "dflt"
    seen = info.get("busy_besides_caller") if info.get("caller_waits") else info.get("observed_busy")
    return f"{req}/{'-' if seen is None else seen}"


def print_outputs(report: Report, console: Console | None = None) -> None:
    """Summary of each output of each target (shape, dtype, min, max, mean)."""
    console = console or _console()
    if not report.arrays:
        return
    table = Table(title="outputs")
    for col in ("target::output", "dtype", "shape", "min", "max", "mean"):
        table.add_column(col)
    for key, arr in report.arrays.items():
        a = np.asarray(arr)
        num = a.size and np.issubdtype(a.dtype, np.number)
        table.add_row(escape(key), str(a.dtype), str(list(a.shape)),
                      figure(float(a.min())) if num else "-", figure(float(a.max())) if num else "-",
                      figure(float(a.mean())) if num else "-")
    console.print(table)


def target_rows() -> list[dict[str, Any]]:
    """Every registered target with its availability, reason and versions.

    Imports each stack (in this process) to ask it.
    """
    from compstack import targets as registry

    rows = []
    aliases: dict[str, list[str]] = {}
    for alias in registry.ALIASES:
        for name in registry.resolve(alias):
            aliases.setdefault(name, []).append(alias)
    for e in registry.entries():
        try:
            cls = registry.get(e.name)
            avail = cls.availability()
            row = {"name": e.name, "stack": cls.stack, "device": cls.device, "available": avail.ok,
                   "runs": avail.ok and avail.runs, "reason": avail.reason or avail.run_reason,
                   "versions": dict(avail.versions), "description": cls.description}
        except Exception as exc:  # noqa: BLE001 - a broken stack import is that row's reason
            row = {"name": e.name, "stack": "", "device": e.device, "available": False, "runs": False,
                   "reason": f"cannot load {e.ref}: {type(exc).__name__}: {exc}", "versions": {}, "description": ""}
        row["aliases"] = aliases.get(e.name, [])
        rows.append(row)
    return rows


def print_targets(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title="targets")
    for col in ("target", "device", "available", "versions", "aliases", "description / reason"):
        table.add_column(col)
    for r in rows:
        state = ("[green]yes[/]" if r["runs"] else "[yellow]compile only[/]") if r["available"] else "[red]no[/]"
        text = r["description"] if r["runs"] else f"{r['description']}; {r['reason']}" if r["available"] else r["reason"]
        table.add_row(r["name"], r["device"], state, ", ".join(f"{k} {v}" for k, v in r["versions"].items()),
                      ", ".join(r["aliases"]), escape(text))
    console.print(table)


def print_frontends(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """The ``compstack frontends`` table (rows of :func:`compstack.frontends.registry.frontend_rows`)."""
    console = console or _console()
    table = Table(title="frontends")
    for col in ("frontend", "available", "versions", "exporter", "python", "accepts / reason"):
        table.add_column(col)
    for r in rows:
        state = "[green]yes[/]" if r["available"] else "[red]no[/]"
        text = r["accepts"] if r["available"] else r["reason"]
        table.add_row(r["name"], state, ", ".join(f"{k} {v}" for k, v in r["versions"].items()), r["exporter"],
                      escape(r["python"]), escape(text))
    console.print(table)


def print_zoo(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    console = console or _console()
    table = Table(title="zoo")
    for col in ("model", "framework", "nodes", "params", "inputs", "description"):
        table.add_column(col)
    for r in rows:
        inputs = ", ".join(f"{i['name']}: {str(i['dtype']).lower()}[{','.join(str(d) for d in i['shape'])}]"
                           for i in r.get("inputs", []))
        table.add_row(r["name"], str(r.get("framework", "")), str(r.get("nodes", "")), f"{r.get('params', 0):,}",
                      inputs, str(r.get("description", "")))
    console.print(table)


def print_real_zoo(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """The real tier (rows of :func:`compstack.frontends.zoo.real_info`): model, family,
    parameters in millions, source library and version, inputs, published checkpoint."""
    console = console or _console()
    table = Table(title=f"zoo, tier real ({len(rows)} models)")
    for col, just in (("model", "left"), ("family", "left"), ("params M", "right"), ("source", "left"),
                      ("inputs", "left"), ("published", "left")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:
        inputs = ", ".join(f"{i['name']}: {i['dtype']}[{','.join(str(d) for d in i['shape'])}]" for i in r["inputs"])
        src = r["source"]
        table.add_row(r["name"], r["family"], f"{r['params'] / 1e6:.1f}", f"{src['library']} {src['version']}",
                      inputs, r["published"])
    console.print(table)


def print_pass_timing(rows: list[dict[str, Any]], saved: Any, top: int = 25, console: Console | None = None) -> None:
    """The slowest passes (wall s, share of the total); the full list is in ``saved``."""
    console = console or _console()
    total = sum(r["wall_s"] for r in rows) or 1.0
    table = Table(title=f"pass timing (top {min(top, len(rows))} of {len(rows)}; all in {saved})")
    for col, just in (("pass", "left"), ("wall ms", "right"), ("share", "right"), ("runs", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows[:top]:
        table.add_row(r["pass"], f"{r['wall_s'] * 1e3:.2f}", f"{r['wall_s'] / total:.1%}",
                      "-" if r.get("runs") is None else str(r["runs"]))
    console.print(table)


def print_unified(lines: list[str], color: str = "auto") -> None:
    """A unified diff: coloured on a terminal (or ``color="always"``), plain when piped."""
    import sys

    use = color == "always" or (color == "auto" and sys.stdout.isatty())
    out = sys.stdout
    for line in lines:
        line = terminal_lines(line.rstrip("\n"))  # the IR's names: inert (an ESC in a name is not colour)
        if use and line.startswith(("+++", "---")):
            out.write(f"\x1b[1m{line}\x1b[0m\n")
        elif use and line.startswith("+"):
            out.write(f"\x1b[32m{line}\x1b[0m\n")
        elif use and line.startswith("-"):
            out.write(f"\x1b[31m{line}\x1b[0m\n")
        elif use and line.startswith("@@"):
            out.write(f"\x1b[36m{line}\x1b[0m\n")
        else:
            out.write(line + "\n")


def print_conformance(report: Any, console: Console | None = None) -> None:
    """The conformance funnel: per target, passed and the failures at each stage."""
    from compstack.conformance.suite import FUNNEL

    console = console or _console()
    sel = report.selection
    what = f"{sel.get('cases')} of {sel.get('total_available')} ONNX node tests"
    if sel.get("filter"):
        what += f", filter {sel['filter']!r}"
    if sel.get("sample"):
        what += f", sample {sel['sample']} (seed {sel.get('seed')})"
    table = Table(title=f"conformance: {what}")
    cols = ["target", "version", "passed", *[f"fail@{s}" for s in FUNNEL], "unsupported", "timeout", "crashed",
            "pass rate", "fixed", "regressions", "time s"]
    for col in cols:
        table.add_column(col, justify="left" if col in ("target", "version") else "right")
    for s in report.summaries:
        if not s.available:
            table.add_row(s.target, s.version, *["-"] * (len(cols) - 3), f"unavailable: {s.reason}"[:40])
            continue
        table.add_row(s.target, s.version, str(s.passed), *[str(s.failed_at.get(st, 0)) for st in FUNNEL],
                      str(s.unsupported), str(s.timeout), str(s.crashed), f"{s.pass_rate:.1%}",
                      str(len(s.fixed)) if s.xfail_file else "-", str(len(s.regressions)) if s.xfail_file else "-",
                      f"{s.seconds:.0f}")
    console.print(table)
    console.print(f"  rule: {report.rule}", highlight=False, soft_wrap=True)
    for s in report.summaries:
        if s.faults:  # whose fault the non-passing cases are (compstack.analysis.fault.conformance_fault)
            console.print(f"  {s.target}: faults " + ", ".join(f"{k} {v}" for k, v in sorted(s.faults.items())),
                          highlight=False)
        if s.available and not s.xfail_file:
            console.print(f"  {s.target}: no XFAIL file for version {s.version} (record one with --update-xfail)",
                          highlight=False)
        for case in s.regressions[:20]:
            row = next(r for r in report.rows if r["target"] == s.target and r["case"] == case)
            console.print(f"  [red]regression[/] {s.target} {escape(case)}: {row['status']} at {row['stage']}: "
                          f"{escape(row['error'], 160)} (fault: {row.get('fault') or '?'})", highlight=False,
                          soft_wrap=True)
        for case in s.fixed[:20]:
            console.print(f"  [green]fixed[/] {s.target} {case}", highlight=False)


def print_trend(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """Pass rate per target per stored conformance run."""
    import datetime

    console = console or _console()
    table = Table(title="conformance trend")
    for col in ("run", "date", "target", "version", "cases", "passed", "pass rate"):
        table.add_column(col)
    for r in rows:
        when = datetime.datetime.fromtimestamp(r["created"]).strftime("%Y-%m-%d %H:%M")
        table.add_row(r["run_id"], when, r["target"], r["version"], str(r["total"]), str(r["passed"]),
                      f"{r['pass_rate']:.1%}")
    console.print(table)
