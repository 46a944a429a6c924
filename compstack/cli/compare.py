"""``compstack compare`` and ``compstack run``: thin over :func:`compstack.api.compare`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from compstack.cli.common import check_writable_file, compare_options, exit_for, load_source, resolve_one
from compstack.cli.options import (
    ModelFlags,
    RunFlags,
    junit_option,
    model_options,
    run_options,
    target_option,
    targets_option,
)

__all__ = ["compare", "run", "run_compare"]


def run_compare(model: str, targets_spec: str, model_flags: ModelFlags, run_flags: RunFlags) -> Any:
    """Check the flags, import MODEL (progress on stderr) and compare; the Report.

    Raises:
        UserError: bad targets, reference, paths, options or model.
    """
    from compstack import api
    from compstack.report.tables import Progress

    targets = api.resolve_targets(targets_spec)
    if run_flags.reference not in ("auto", "reference"):
        from compstack import targets as registry

        registry.get(run_flags.reference)
    check_writable_file(run_flags.save_inputs, "--save-inputs")
    check_writable_file(run_flags.save_outputs, "--save-outputs")
    options = compare_options(targets, model_flags, run_flags)
    with Progress(enabled=not run_flags.as_json) as progress:
        progress.status(f"importing {model}")
        source = load_source(model, model_flags.cache_dir, run_flags.timeout, run_flags.memory_limit,
                             partial=True)  # a native path may run what does not import
        return api.compare(source, targets_spec, options=options, cache_dir=model_flags.cache_dir,
                           db=run_flags.db, save_inputs=run_flags.save_inputs, save_outputs=run_flags.save_outputs,
                           on_start=progress.start, on_result=progress.done)


@click.command(short_help="Compare targets on a model: numerics, compile time, latency.")
@click.argument("model", required=False)
@targets_option("Comma-separated targets or aliases (cpu, all); see `compstack targets`.")
@model_options
@run_options
@junit_option("Also write JUnit XML here: one testcase per target (mismatch: failure; failed, crashed, "
              "timeout, oom: error; unsupported, unavailable: skipped).")
def compare(model: str | None, targets_spec: str, model_flags: ModelFlags, run_flags: RunFlags,
            junit: str | None) -> None:
    """Compare targets on MODEL (zoo:NAME, file.onnx, file.py:function; default zoo:cnn).

    Exit status: 0 when every row is ok, unsupported or unavailable; 1 when a row is
    mismatch, failed, crashed, timeout or oom; 2 on bad input.
    """
    from compstack.frontends.sources import DEFAULT_MODEL
    from compstack.report.tables import print_report

    check_writable_file(junit, "--junit")
    report = run_compare(model or DEFAULT_MODEL, targets_spec, model_flags, run_flags)
    if junit:
        from compstack.report.junit import compare_junit, write_junit

        write_junit(Path(junit), compare_junit(report))
    if run_flags.as_json:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_report(report)
    exit_for(report)


@click.command(short_help="Run a model on one target: outputs, numerics, latency.")
@click.argument("model")
@target_option()
@model_options
@run_options
def run(model: str, target: str, model_flags: ModelFlags, run_flags: RunFlags) -> None:
    """Run MODEL on one target: outputs summary, numerics against the reference, latency."""
    from compstack.report.tables import print_outputs, print_report

    report = run_compare(model, resolve_one(target), model_flags, run_flags)
    if run_flags.as_json:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_outputs(report)
        print_report(report)
    exit_for(report)
