"""The ``explain``, ``bisect`` and ``reduce`` commands: inputs, progress, the printed report.

Thin over :func:`compstack.api.explain_model`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import check_writable_file, load_source, parse_target_options, probe_dir
from compstack.cli.options import ExplainFlags, ModelFlags, explain_options, model_options
from compstack.core.duration import parse_duration
from compstack.core.errors import UserError
from compstack.core.sanitize import terminal  # a model's names in progress lines: inert

__all__ = ["bisect", "explain", "explain_command", "parse_duration", "reduce", "replay_command"]

def _feeds(source: Any, model: ModelFlags) -> dict[str, Any]:
    from compstack.api import explain_feeds
    from compstack.core.inputs import load_npz, parse_shapes, parse_val_ranges

    return explain_feeds(source, inputs=load_npz(model.inputs_file) if model.inputs_file else None,
                         val_ranges=parse_val_ranges(model.val_ranges), shapes=parse_shapes(model.input_shapes),
                         seed=model.seed)


def _print(report: dict[str, Any]) -> None:
    from rich.table import Table

    from compstack.core.duration import figure
    from compstack.core.sanitize import rich_text as escape  # model-sourced text: inert
    from compstack.report.tables import stdout_console

    con = stdout_console(highlight=False)  # a pipe gets the whole table, not 80 columns
    table = Table(title=f"{escape(report['model'])}: {report['nodes']} nodes; verdict against float64 and the float32 noise floor")
    for col in ("target", "output", "verdict", "max abs err", "RMSE", "f32 floor", "detail"):
        table.add_column(col, overflow="fold")  # wrap text, never elide a figure
    for t, st in report.get("status", {}).items():
        verdicts = report.get("verdicts", {}).get(t)
        if not verdicts:
            table.add_row(t, "-", st["status"], "-", "-", "-", escape(f"{st['stage']}: {st['error']}"))
            continue
        for o, v in verdicts.items():
            table.add_row(t, escape(o), v["kind"], figure(v.get("max_abs")), figure(v.get("rmse")),
                          figure(v.get("floor")),
                          escape(v.get("detail", "")))
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
        from compstack.explain.bundle import op_cause

        n = b["node"]
        con.print(f"first divergent node: [bold]{escape(n['name'] or n['op_type'])}[/] ({escape(n['op_type'])}, node "
                  f"{n['index']}) — {'wrong alone on the reference inputs: ' + op_cause(report.get('attribution') or {}) if b['kind'] == 'op' else 'right alone, wrong in context: an interaction (fusion, optimisation)'}"
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
            con.print(f"  {escape(c['run'])}: {state} ({escape(c['detail'])})")
    if report.get("bundle"):
        bundle = report["bundle"]
        con.print(f"bundle: {escape(bundle['folder'])} ({len(bundle['files'])} files; "
                  f"repros: {', '.join(f'{k}: {v}' for k, v in bundle['repros'].items())})")
    if report.get("versions"):  # --versions: bisect-versions on the bundle
        con.print(f"releases: {escape(report['versions']['summary'])}")
    con.print(f"{report['compiles']} compiles in {report['seconds']:.1f} s")


def explain_command(source_loader: Callable[[], Any], targets: list[str], flags: ExplainFlags, model: ModelFlags,
                    target_options: dict[str, dict[str, str]], steps: str = "all", out_dir: str | None = None,
                    reduced_out: str | None = None, versions: dict[str, list[str]] | None = None) -> int:
    """Run explain (or its bisect/reduce step) and print or return JSON; the exit status.
    ``versions``: ``--versions RANGE`` (:func:`compstack.cli.bisect_versions.version_ranges`),
    the releases over which the bundle's finding is bisected, its answer in ISSUE.md.

    Exit status: 0 when the property was found and explained (or nothing differs), 1
    when the property does not hold on the whole model (nothing to reduce), 2 on bad input.
    """
    from compstack.api import explain_model

    source = source_loader()
    feeds = _feeds(source, model)
    quiet = flags.as_json
    report = explain_model(source, targets, keep=flags.keep, target_options=target_options,
                           time_budget_s=parse_duration(flags.time_budget), out_dir=out_dir, steps=steps,
                           timeout_s=flags.timeout, rtol=flags.rtol, atol=flags.atol, feeds=feeds,
                           on_progress=None if quiet else (lambda s: click.echo(terminal(s), err=True)))
    reduced = report.pop("reduced", None)
    if versions and report.get("found") and report.get("bundle"):
        from compstack.cli.bisect_versions import bisect_bundle

        base = report["target"].partition("@")[0]
        report["versions"] = (bisect_bundle(Path(report["bundle"]["folder"]), base, versions[base],
                                            options=target_options.get(report["target"], {}), timeout_s=flags.timeout,
                                            say=None if quiet else (lambda s: click.echo(terminal(s), err=True)),
                                            rtol=flags.rtol, atol=flags.atol)
                              if base in versions else {"answer": "not searched",
                                                        "summary": f"{report['target']}: no releases to search"})
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
    return 0 if report.get("found") or not flags.keep else 1


def replay_command(folder: str, as_json: bool, timeout: float, trust_flags: bool = False) -> int:
    """``explain --replay DIR``: exit 0 when the discrepancy reproduces, 1 when it does not.

    The bundle's flags that its stacks' replay allowlists refuse are dropped (or, with
    ``trust_flags``, applied) and listed in one line on stderr."""
    from compstack.explain import replay

    res = replay(Path(folder), timeout, trust_flags)
    if res["refused"]:
        what = "; ".join(res["refused"])
        click.echo(f"compstack: warning: --trust-bundle-flags: applying bundle flags off the replay allowlist: {what}"
                   if trust_flags else f"compstack: refused bundle flags (dropped; --trust-bundle-flags applies "
                   f"them): {what}", err=True)
    if as_json:
        click.echo(json.dumps(res, indent=1, default=str))
    else:
        for t, row in res["targets"].items():
            click.echo(f"{t}: {row['status']}, {'reproduces' if row['reproduces'] else 'does not reproduce'}")
        click.echo(f"{res['target']}: {'the discrepancy reproduces' if res['reproduces'] else 'no longer reproduces'}")
    return 0 if res["reproduces"] else 1


def _explain_run(model: str | None, flags: ExplainFlags, model_flags: ModelFlags, steps: str,
                 out_dir: str | None = None, reduced_out: str | None = None, versions: str | None = None) -> int:
    from compstack import api

    if not model:
        raise UserError("missing MODEL (zoo:NAME, file.onnx or file.py:function)")
    if not flags.targets_spec:
        raise UserError("--targets is required: the target(s) whose disagreement to explain")
    targets = api.resolve_targets(flags.targets_spec, model_flags.cache_dir)
    parse_duration(flags.time_budget)  # bad input before any work
    if flags.keep:
        from compstack.explain.keep import parse_keep

        parse_keep(flags.keep, targets)
    topts = parse_target_options(model_flags.target_opts)
    api.validate_target_options(topts)
    ranges, made = None, False
    if versions is not None:
        if not out_dir:
            raise UserError(f"--versions {versions}: needs -o DIR (the bundle whose finding is bisected)")
        from compstack.cli.bisect_versions import version_ranges

        ranges = version_ranges(targets, versions)
    if out_dir:
        from compstack.explain.bundle import check_bundle_dir

        check_bundle_dir(Path(out_dir))  # never a folder with the user's own files in it
        made = not Path(out_dir).exists()
        probe_dir(Path(out_dir), f"-o {out_dir}: folder not writable")
    if reduced_out:
        check_writable_file(reduced_out, "-o")
    try:
        return explain_command(lambda: load_source(model, model_flags.cache_dir), targets, flags, model_flags, topts,
                               steps, out_dir, reduced_out, ranges)
    finally:  # nothing to explain (or an error): no empty bundle folder left behind that --replay would refuse
        if out_dir and made and Path(out_dir).is_dir() and not any(Path(out_dir).iterdir()):
            Path(out_dir).rmdir()


@click.command(short_help="Why a target disagrees: verdict, first divergent node, reduced model, whose fault, bundle.")
@click.argument("model", required=False)
@explain_options
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False),
              help="Write an upstream-ready bundle (reduced model, test data, repro_<target>.py, ISSUE.md) here.")
@click.option("--replay", "replay_dir", type=click.Path(file_okay=False),
              help="Rerun a bundle written by -o: does the discrepancy still reproduce?")
@click.option("--trust-bundle-flags", is_flag=True,
              help="With --replay: also apply the bundle's flags that its stacks' replay allowlists refuse "
                   "(they may name programs or libraries to run).")
@click.option("--versions", "versions", metavar="FIRST..LAST",
              help="With -o: bisect the finding over the explained stack's releases in this range "
                   "(bisect-versions); the answer goes into ISSUE.md.")
@model_options
def explain(model: str | None, explain_flags: ExplainFlags, out_dir: str | None, replay_dir: str | None,
            trust_bundle_flags: bool, versions: str | None, model_flags: ModelFlags) -> None:
    """Explain why the targets disagree with the float64 reference (or each other) on MODEL:
    verdict with the float32 noise floor, the first divergent node (bisecting graph
    prefixes), a delta-debugged reduced model, the culprit (compstack's translation, the
    stack's optimiser, or the stack), and with -o a bundle to attach to an upstream issue.

    Exit status: 0 explained (or nothing differs; with --replay: still reproduces), 1 the
    --keep property does not hold (with --replay: no longer reproduces), 2 bad input.

    Examples:

        \b
        compstack explain model.onnx --targets iree-llvm-cpu
        compstack explain --replay bug/
        compstack explain model.onnx --targets ort-cpu@1.16.3 -o bug/ --versions 1.16.0..1.17.1
    """
    if replay_dir:
        if model:
            raise UserError("--replay takes the bundle folder only, not MODEL")
        sys.exit(replay_command(replay_dir, explain_flags.as_json, explain_flags.timeout, trust_bundle_flags))
    sys.exit(_explain_run(model, explain_flags, model_flags, "all", out_dir=out_dir, versions=versions))


@click.command(short_help="Delta-debug MODEL down to the nodes that keep a target's disagreement.")
@click.argument("model", required=False)
@explain_options
@click.option("-o", "--out", "reduced_out", type=click.Path(dir_okay=False), help="Write the reduced model here.")
@model_options
def reduce(model: str | None, explain_flags: ExplainFlags, reduced_out: str | None, model_flags: ModelFlags) -> None:
    """Reduce MODEL (ddmin over nodes, cut tensors fed with the reference's values) while
    the --keep property holds; prints nodes before -> after, compiles and time.

    Exit status: 0 when the property held and MODEL was reduced (or nothing differs); 1 when
    the property does not hold on the whole model; 2 on bad input; 130 after Ctrl-C, 143
    after SIGTERM.

    Examples:

        \b
        compstack reduce model.onnx --targets tvm-llvm -o small.onnx
        compstack reduce model.onnx --targets xla-cpu,ort-cpu --keep 'xla-cpu!=ref,ort-cpu==ref' --time-budget 10m
    """
    sys.exit(_explain_run(model, explain_flags, model_flags, "reduce", reduced_out=reduced_out))


@click.command(short_help="The first node where a target diverges from the reference (bisecting graph prefixes).")
@click.argument("model", required=False)
@explain_options
@model_options
def bisect(model: str | None, explain_flags: ExplainFlags, model_flags: ModelFlags) -> None:
    """Binary-search graph prefixes of MODEL (each compiled with its frontier as outputs)
    for the first divergent node, then run that node alone on the reference's inputs.

    Exit status: 0 when the first divergent node was found (or nothing differs); 1 when the
    property does not hold on the whole model; 2 on bad input; 130 after Ctrl-C, 143 after
    SIGTERM.

    Examples:

        \b
        compstack bisect model.onnx --targets iree-llvm-cpu
        compstack bisect zoo:bert --targets tvm-llvm --inputs in.npz --json
    """
    sys.exit(_explain_run(model, explain_flags, model_flags, "bisect"))
