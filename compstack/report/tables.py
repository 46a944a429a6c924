"""Terminal output: result tables, target and zoo listings, and the progress display.

Tables go to stdout, the progress display to stderr, so ``compstack compare > f``
keeps only the table. Everything here is presentation; no measuring happens here.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from compstack.core.results import Report, Result

__all__ = ["Progress", "print_report", "print_outputs", "print_targets", "print_zoo", "target_rows",
           "print_pass_timing", "print_unified"]

_STYLE = {"ok": "green", "mismatch": "red", "unsupported": "yellow", "failed": "red", "crashed": "red bold",
          "timeout": "red", "oom": "red", "unavailable": "dim"}


class Progress:
    """A spinner on stderr naming the job that runs, and a line per finished job."""

    def __init__(self, enabled: bool = True) -> None:
        self.console = Console(stderr=True)
        self.enabled = enabled and self.console.is_terminal
        self.quiet = not enabled
        self._status: Any = None
        self._t0 = 0.0

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._status = self.console.status("starting")
            self._status.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)

    def status(self, text: str) -> None:
        if self._status is not None:
            self._status.update(text)

    def start(self, target: str) -> None:
        self._t0 = time.monotonic()
        self.status(f"running {target}")

    def done(self, result: Result) -> None:
        if self.quiet:
            return
        style = _STYLE.get(result.status, "")
        self.console.print(f"  {result.target:<16} [{style}]{result.status}[/] "
                           f"({time.monotonic() - self._t0:.1f} s)", highlight=False)


def _console() -> Console:
    """stdout console; when piped, wide enough for the tables (rich defaults to 80)."""
    c = Console()
    return c if c.is_terminal else Console(width=200)


def _fmt(x: float | None, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def print_report(report: Report, console: Console | None = None) -> None:
    """The comparison table: one row per target."""
    console = console or _console()
    m = report.model
    ref = report.reference
    ref_text = ref["target"] + (f" ({ref['precision']})" if ref.get("precision") else "")
    if ref.get("fallback_from"):
        ref_text += f", fallback from {ref['fallback_from']}"
    if ref.get("program"):
        ref_text += f", {ref['program']}"
    console.print(f"[bold]{m['name']}[/]  {m['nodes']} nodes, {m['params']:,} params, "
                  f"fingerprint {m['fingerprint']}; reference: {ref_text}", highlight=False)
    table = Table()
    for col, just in (("target", "left"), ("status", "left"), ("compile s", "right"),
                      ("median ms", "right"), ("95% CI ms", "right"), ("p10 ms", "right"), ("p90 ms", "right"),
                      ("cv", "right"), ("iqr/med", "right"), ("threads", "right"),
                      ("max abs err", "right"), ("max rel err", "right")):
        table.add_column(col, justify=just, no_wrap=True)  # type: ignore[arg-type]
    footnotes: list[str] = []
    for r in report.results:
        lat = r.latency_ms or {}
        abs_err = max((o["max_abs_err"] or 0.0 for o in r.outputs), default=None) if r.outputs else None
        rel_err = max((o["max_rel_err"] or 0.0 for o in r.outputs), default=None) if r.outputs else None
        notes = list(r.notes)
        if r.error:
            notes.insert(0, f"{r.stage}: {r.error}" if r.stage else r.error)
        if r.cached:
            notes.append("artifact from cache (compile s is the original compile)")
        if r.flags.get("native_note"):
            notes.append(str(r.flags["native_note"]))
        if r.flags.get("tuned") is False:
            notes.append("untuned: default schedules, no auto-tuning")
        if r.flags.get("model_form_reason"):
            notes.append(str(r.flags["model_form_reason"]))
        footnotes.extend(f"[bold]{r.target}[/]: {n}" for n in notes)
        path = r.flags.get("path")  # XLA/Inductor: native or translated (see targets/_twopath.py)
        form = _form_word(r.flags)
        words = ", ".join(w for w in (path, form) if w)
        label = f"{r.target} [dim]{escape(words)}[/]" if words else r.target
        if r.flags.get("tuned"):
            notes.append(f"tuned: {r.flags.get('tuning', {}).get('summary', 'auto-tuned schedules')}")
        table.add_row(label, f"[{_STYLE.get(r.status, '')}]{r.status}[/]",
                      _fmt(r.compile_s, ".2f"), _fmt(lat.get("median"), ".4g"), _ci(lat), _fmt(lat.get("p10"), ".4g"),
                      _fmt(lat.get("p90"), ".4g"), _fmt(lat["cv"] * 100, ".1f") + "%" if lat else "-",
                      _fmt(lat["iqr_rel"] * 100, ".1f") + "%" if lat.get("iqr_rel") is not None else "-",
                      _threads(r.flags.get("threads")), _fmt(abs_err, ".2e"), _fmt(rel_err, ".2e"))
    console.print(table)
    for pair in report.latency_comparison()["pairs"]:
        verdict = {True: "significant", False: "not significant (95 % CIs overlap)", None: "no CI"}[pair["significant"]]
        footnotes.append(f"{pair['faster']} faster than {pair['slower']}: x{pair['ratio']:.2f}, {verdict}")
    for note in footnotes:
        console.print("  " + note, highlight=False, soft_wrap=True)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False, soft_wrap=True)


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
    ci = lat.get("ci95")
    return f"{ci[0]:.4g}-{ci[1]:.4g}" if ci else "-"


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
        table.add_row(key, str(a.dtype), str(list(a.shape)),
                      _fmt(float(a.min())) if num else "-", _fmt(float(a.max())) if num else "-",
                      _fmt(float(a.mean())) if num else "-")
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
        line = line.rstrip("\n")
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
        if s.available and not s.xfail_file:
            console.print(f"  {s.target}: no XFAIL file for version {s.version} (record one with --update-xfail)",
                          highlight=False)
        for case in s.regressions[:20]:
            row = next(r for r in report.rows if r["target"] == s.target and r["case"] == case)
            console.print(f"  [red]regression[/] {s.target} {case}: {row['status']} at {row['stage']}: "
                          f"{row['error'][:160]}", highlight=False, soft_wrap=True)
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
