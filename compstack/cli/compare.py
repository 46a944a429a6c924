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
    wide_option,
)
from compstack.core.errors import ExportError

__all__ = ["compare", "run", "run_compare"]


def run_compare(model: str, targets_spec: str, model_flags: ModelFlags, run_flags: RunFlags) -> Any:
    """Check the flags, import MODEL (progress on stderr) and compare; the Report.

    Raises:
        UserError: bad targets, reference, paths, options or model.
    """
    from compstack import api
    from compstack.report.tables import Progress

    targets = api.resolve_targets(targets_spec, model_flags.cache_dir)
    from compstack.run.session import check_reference

    check_reference(run_flags.reference, model_flags.cache_dir)
    _check_paths(model, model_flags, run_flags)
    check_writable_file(run_flags.save_inputs, "--save-inputs")
    check_writable_file(run_flags.save_outputs, "--save-outputs")
    options = compare_options(targets, model_flags, run_flags)
    with Progress() as progress:  # stderr, also under --json
        progress.status(f"importing {model}")
        try:
            source = load_source(model, model_flags.cache_dir, run_flags.timeout, run_flags.memory_limit,
                                 partial=True)  # a native path may run what does not import
        except ExportError as exc:  # torch.export / the ONNX exporter / a zoo builder failed: rows, not exit 2
            from compstack.core.config import settings
            from compstack.run.export_rows import export_failed

            cfg = settings(cache_dir=model_flags.cache_dir, db=run_flags.db)
            return export_failed(model, exc, targets, cfg, on_result=progress.done)
        return api.compare(source, targets_spec, options=options, cache_dir=model_flags.cache_dir,
                           db=run_flags.db, save_inputs=run_flags.save_inputs, save_outputs=run_flags.save_outputs,
                           on_start=progress.start, on_result=progress.done)


def _check_paths(model: str, model_flags: ModelFlags, run_flags: RunFlags, junit: str | None = None) -> None:
    """No two of MODEL, --inputs, --save-inputs, --save-outputs, --db, --junit name one file."""
    from compstack.core.outdir import check_distinct

    check_distinct({"MODEL": model if Path(model).is_file() else None, "--inputs": model_flags.inputs_file,
                    "--save-inputs": run_flags.save_inputs, "--save-outputs": run_flags.save_outputs,
                    "--db": run_flags.db, "--junit": junit})


@click.command(short_help="Compare targets on a model: numerics, compile time, latency.")
@click.argument("model", required=False)
@targets_option("Comma-separated targets or aliases (cpu, all); see `compstack targets`.")
@model_options
@run_options
@junit_option("Also write JUnit XML here: one testcase per target (mismatch: failure; failed, crashed, "
              "timeout, oom: error; unsupported, unavailable: skipped).")
@wide_option()
@click.option("--bundle-faults", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="For each row whose fault is the stack's, write an explain bundle (reduced model, repro per "
                   "stack) into DIR/TARGET.")
def compare(model: str | None, targets_spec: str, model_flags: ModelFlags, run_flags: RunFlags,
            junit: str | None, wide: bool, bundle_faults: str | None) -> None:
    """Compare targets on MODEL (zoo:NAME, file.onnx, file.py:function; default zoo:cnn).

    Exit status: 0 when every row is ok, unsupported or unavailable; 1 when a row is
    mismatch, failed, crashed, timeout or oom, or its timing failed (latency_error); 2 on
    bad input; 130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack compare zoo:mlp --targets ort-cpu,reference --no-latency
        compstack compare model.onnx --targets ort-cpu,tvm-llvm,iree-llvm-cpu --json
        compstack compare zoo:cnn --targets cpu --option ort-cpu:opt_level=basic --junit results.xml
    """
    from compstack.frontends.sources import DEFAULT_MODEL
    from compstack.report.tables import print_report

    model = DEFAULT_MODEL if model is None else model  # "" is the user's (empty) MODEL: refused
    _check_paths(model, model_flags, run_flags, junit)
    check_writable_file(junit, "--junit")
    report = run_compare(model, targets_spec, model_flags, run_flags)
    if bundle_faults:
        _bundle_faults(report, model, Path(bundle_faults), model_flags, run_flags)
    if junit:
        from compstack.report.junit import compare_junit, write_junit

        write_junit(Path(junit), compare_junit(report))
    if run_flags.as_json:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_report(report, wide=wide)
    exit_for(report)


@click.command(short_help="Run a model on one target: outputs, numerics, latency.")
@click.argument("model")
@target_option()
@model_options
@run_options
@wide_option()
def run(model: str, target: str, model_flags: ModelFlags, run_flags: RunFlags, wide: bool) -> None:
    """Run MODEL on one target: outputs summary, numerics against the reference, latency.

    Exit status: 0 when the row is ok, unsupported or unavailable; 1 when it is mismatch, failed,
    crashed, timeout or oom, or its timing failed (latency_error); 2 on bad input; 130 after
    Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack run zoo:mlp --target ort-cpu --no-latency
        compstack run zoo:cnn --target tvm-llvm --threads 1
        compstack run model.onnx --target iree-llvm-cpu --inputs in.npz --save-outputs out.npz
    """
    from compstack.report.tables import print_outputs, print_report

    report = run_compare(model, resolve_one(target), model_flags, run_flags)
    if run_flags.as_json:
        click.echo(json.dumps(report.to_json(), indent=1, default=str))
    else:
        print_outputs(report)
        print_report(report, wide=wide)
    exit_for(report)


def _bundle_faults(report: Any, model: str, folder: Path, model_flags: ModelFlags, run_flags: RunFlags) -> None:
    """``--bundle-faults``: an explain bundle per ``stack`` fault (:func:`compstack.run.faults.bundle_faults`)."""
    from compstack.cli.common import fault_explainer
    from compstack.run.faults import bundle_faults

    bundle_faults(report, model, folder, fault_explainer(model_flags, run_flags))
