"""The ``explain``, ``bisect`` and ``reduce`` commands: inputs, progress, the printed report.

Thin over :func:`compstack.explain.explain`; the CLI module declares the flags.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Callable

import numpy as np

from compstack.core.errors import UserError

__all__ = ["explain_command", "parse_duration", "replay_command"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def parse_duration(text: str | None, flag: str = "--time-budget") -> float:
    """``"10m"``, ``"90s"``, ``"1.5h"`` or plain seconds -> seconds (None: no limit).

    Raises:
        UserError: anything else, naming the flag.
    """
    if text is None:
        return math.inf
    m = _DURATION.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise UserError(f"{flag} {text!r}: expected a positive duration like 90s, 10m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _feeds(source: Any, kw: dict[str, Any]) -> dict[str, np.ndarray]:
    from compstack.core import ir as cir
    from compstack.core.inputs import check_feeds, input_sets, load_npz, parse_shapes, parse_val_ranges

    model_inputs = cir.graph_inputs(source.model)
    ranges = {**source.val_ranges, **parse_val_ranges(kw.get("val_ranges") or ())}
    shapes = parse_shapes(kw.get("input_shapes") or ())
    first = None
    if kw.get("inputs_file"):
        first = load_npz(kw["inputs_file"])
        check_feeds(model_inputs, first, "--inputs")
    elif source.example_inputs and not kw.get("val_ranges") and not shapes:
        first = source.example_inputs
    return input_sets(model_inputs, 1, kw.get("seed", 0), first, ranges, shapes)[0]


def _print(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    con = Console(highlight=False)
    table = Table(title=f"{report['model']}: {report['nodes']} nodes; verdict against float64 and the float32 noise floor")
    for col in ("target", "output", "verdict", "max abs err", "RMSE", "f32 floor", "detail"):
        table.add_column(col)
    for t, st in report.get("status", {}).items():
        verdicts = report.get("verdicts", {}).get(t)
        if not verdicts:
            table.add_row(t, "-", st["status"], "-", "-", "-", escape(f"{st['stage']}: {st['error']}"[:100]))
            continue
        for o, v in verdicts.items():
            table.add_row(t, escape(o), v["kind"], f"{v['max_abs']:.3g}", f"{v['rmse']:.3g}", f"{v['floor']:.3g}",
                          escape(v.get("detail", "")[:100]))
    con.print(table)
    for line in report.get("undefined", []):
        con.print(f"[yellow]undefined behaviour:[/] {escape(line)}")
    if not report.get("found"):
        con.print(escape(report.get("summary", "nothing to explain")))
        return
    if report.get("label") == "undefined":
        con.print("[yellow]the model or its inputs trigger undefined behaviour (above): this discrepancy is not "
                  "evidence of a bug[/]")
    con.print(f"property kept: [bold]{escape(report['keep'])}[/]")
    b = report.get("bisect")
    if b and b.get("node"):
        n = b["node"]
        con.print(f"first divergent node: [bold]{escape(n['name'] or n['op_type'])}[/] ({n['op_type']}, node "
                  f"{n['index']}) — {'wrong alone on the reference inputs: an op bug' if b['kind'] == 'op' else 'right alone, wrong in context: an interaction (fusion, optimisation)'}"
                  f"; {b['compiles']} compiles (bound ⌈log₂ n⌉+2 = {b['bound']}), {b['seconds']:.1f} s")
    r = report.get("reduce")
    if r:
        con.print(f"reduced: {r['nodes_before']} -> {r['nodes_after']} node(s) ({', '.join(map(escape, r['ops']))}) "
                  f"in {r['compiles']} compiles, {r['seconds']:.1f} s" + ("" if r["complete"] else
                                                                           " (time budget reached)"))
    a = report.get("attribution")
    if a:
        con.print(f"attribution: [bold]{a['culprit']}[/] — {escape(a['summary'])}")
        for c in a.get("checks", []):
            state = {True: "still wrong", False: "right"}.get(c["holds"], c["status"])
            con.print(f"  {escape(c['run'])}: {state} ({escape(c['detail'][:120])})")
    if report.get("bundle"):
        bundle = report["bundle"]
        con.print(f"bundle: {escape(bundle['folder'])} ({len(bundle['files'])} files; "
                  f"repros: {', '.join(f'{k}: {v}' for k, v in bundle['repros'].items())})")
    con.print(f"{report['compiles']} compiles in {report['seconds']:.1f} s")


def explain_command(source_loader: Callable[[], Any], targets: list[str], kw: dict[str, Any], steps: str = "all",
                    reduced_out: str | None = None) -> int:
    """Run explain (or its bisect/reduce step) and print or return JSON; the exit status.

    Exit status: 0 when the property was found and explained (or nothing differs), 1
    when the property does not hold on the whole model (nothing to reduce), 2 on bad input.
    """
    import click

    from compstack.core import ir as cir
    from compstack.explain import explain

    source = source_loader()
    feeds = _feeds(source, kw)
    proto = cir.to_proto(source.model)
    from compstack.ops._registry import origins_for

    quiet = kw.get("as_json")
    report = explain(proto, feeds, targets, keep=kw.get("keep"), target_options=kw.get("target_options"),
                     time_budget_s=parse_duration(kw.get("time_budget")),
                     out_dir=Path(kw["out_dir"]) if kw.get("out_dir") else None, steps=steps,
                     model_name=source.name, timeout_s=kw.get("timeout", 300.0), op_origins=origins_for(source.model),
                     rtol=kw.get("rtol") or 1e-3, atol=kw.get("atol") or 1e-5,
                     on_progress=None if quiet else (lambda s: click.echo(s, err=True)))
    reduced = report.pop("reduced", None)
    if reduced_out and reduced is not None:
        import onnx

        try:
            onnx.save(reduced, reduced_out)
        except OSError as exc:
            raise UserError(f"-o {reduced_out}: cannot write ({exc.strerror or exc})") from None
        report["reduced_model"] = reduced_out
    if quiet:
        click.echo(json.dumps(report, indent=1, default=str))
    else:
        _print(report)
        if reduced_out and reduced is not None:
            click.echo(f"wrote {reduced_out}")
    return 0 if report.get("found") or not kw.get("keep") else 1


def replay_command(folder: str, as_json: bool, timeout: float) -> int:
    """``explain --replay DIR``: exit 0 when the discrepancy reproduces, 1 when it does not."""
    import click

    from compstack.explain import replay

    res = replay(Path(folder), timeout)
    if as_json:
        click.echo(json.dumps(res, indent=1, default=str))
    else:
        for t, row in res["targets"].items():
            click.echo(f"{t}: {row['status']}, {'reproduces' if row['reproduces'] else 'does not reproduce'}")
        click.echo(f"{res['target']}: {'the discrepancy reproduces' if res['reproduces'] else 'no longer reproduces'}")
    return 0 if res["reproduces"] else 1
