"""``compstack conformance``: thin over :func:`compstack.api.run_conformance`."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from compstack.cli.common import parse_target_options
from compstack.cli.options import (
    cache_dir_option,
    db_option,
    json_option,
    junit_option,
    seed_option,
    target_opts_option,
    targets_option,
    timeout_option,
)

__all__ = ["conformance"]


@click.command(short_help="Run the ONNX node tests on each target (funnel, XFAIL, trend).")
@targets_option("Comma-separated targets or aliases; see `compstack targets`.")
@click.option("--filter", "pattern", help="Only cases whose name matches this regex (e.g. 'resize|pad').")
@click.option("--sample", type=click.IntRange(min=1), help="A fixed random sample of N cases (after --filter).")
@seed_option("Seed of --sample.")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="Worker processes per target [default: cores].")
@timeout_option(120, "Wall-clock limit per case (import to compare), seconds.")
@json_option("Every case's outcome as JSON on stdout.")
@click.option("--update-xfail", is_flag=True, help="Record this run's failures as each target's XFAIL file.")
@click.option("--xfail-dir", type=click.Path(file_okay=False), help="Folder of XFAIL files [default: shipped ones].")
@click.option("--trend", "show_trend", is_flag=True, help="Print the pass rate per target over earlier runs, and exit.")
@target_opts_option()
@click.option("--no-cache", is_flag=True, help="Compile every case anew.")
@db_option()
@cache_dir_option()
@junit_option("Also write JUnit XML here: a testsuite per target, a testcase per case (failure not in the "
              "XFAIL file: failure; in it, or unsupported: skipped).")
def conformance(targets_spec: str, pattern: str | None, sample: int | None, seed: int, workers: int | None,
                timeout: float, as_json: bool, update_xfail: bool, xfail_dir: str | None, show_trend: bool,
                target_opts: tuple[str, ...], no_cache: bool, db: str | None, cache_dir: str | None,
                junit: str | None) -> None:
    """Run the ONNX node tests on each target: funnel table, XFAIL check, history.

    Exit status 1 when a case listed nowhere in the target's XFAIL file fails (a regression).

    Examples:

        \b
        compstack conformance --targets ort-cpu --filter 'relu|sigmoid'
        compstack conformance --targets tvm-llvm,iree-llvm-cpu --junit conformance.xml
        compstack conformance --trend
    """
    from compstack import api
    from compstack.conformance import suite
    from compstack.core.config import settings
    from compstack.report.tables import print_conformance, print_trend

    cfg = settings(cache_dir=cache_dir, db=db)
    if show_trend:
        rows = suite.trend(cfg.db)
        click.echo(json.dumps(rows, indent=1)) if as_json else print_trend(rows)
        return
    api.resolve_targets(targets_spec, cache_dir)  # bad targets before bad options, as always
    topts = parse_target_options(target_opts)
    progress = _ConformanceProgress(enabled=not as_json)
    with progress:
        report = api.run_conformance(targets_spec, pattern=pattern, sample=sample, seed=seed, workers=workers,
                                     timeout_s=timeout, xfail_dir=xfail_dir, update_xfail=update_xfail,
                                     target_options=topts, cache=not no_cache, cache_dir=cache_dir, db=db,
                                     junit=junit, on_result=progress.row, on_target=progress.target)
    for warning in report.warnings:
        print(f"compstack: {warning}", file=sys.stderr)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=1))
    else:
        print_conformance(report)
    if any(s.regressions for s in report.summaries):
        sys.exit(1)


class _ConformanceProgress:
    """A progress bar per target on stderr (only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        from rich.console import Console
        from rich.progress import Progress

        console = Console(stderr=True)
        self.enabled = enabled and console.is_terminal
        self.bar = Progress(console=console, transient=True) if self.enabled else None
        self.task: Any = None

    def __enter__(self) -> _ConformanceProgress:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def target(self, name: str, n: int) -> None:
        if self.bar is not None:
            self.task = self.bar.add_task(name, total=n)

    def row(self, target: str, row: dict[str, Any]) -> None:
        if self.bar is not None and self.task is not None:
            self.bar.advance(self.task)
