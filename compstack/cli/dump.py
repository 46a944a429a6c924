"""``compstack dump``: thin over :func:`compstack.api.dump`."""

from __future__ import annotations

import sys

import click

from compstack.cli.common import load_source, parse_target_options, resolve_one, writable_dir
from compstack.cli.options import (
    cache_dir_option,
    memory_limit_option,
    target_option,
    target_opts_option,
    timeout_option,
)
from compstack.core.errors import UserError
from compstack.core.sanitize import terminal, terminal_lines  # model-sourced text: inert (core.sanitize)

__all__ = ["dump"]


@click.command(short_help="Dump the IR of a model at a stage, or at every stage and pass.")
@click.argument("model")
@target_option()
@click.option("--stage", "stage_names", multiple=True, help="A stage to dump (repeatable); see `compstack stages`.")
@click.option("--all", "all_passes", is_flag=True, help="Every stage, and the IR after every pass, with pass timing.")
@click.option("--print-after-change", is_flag=True, help="Every stage, and the IR after each pass that changed it.")
@click.option("-o", "--output", "out_dir", type=click.Path(file_okay=False),
              help="Folder for the dumps (without it, one --stage is printed to stdout).")
@target_opts_option()
@cache_dir_option()
@timeout_option(help="Wall-clock limit of the job, seconds.")
@memory_limit_option("Resident-memory limit of the job, MiB (0: none) [default: 75% of RAM].")
def dump(model: str, target: str, stage_names: tuple[str, ...], all_passes: bool, print_after_change: bool,
         out_dir: str | None, target_opts: tuple[str, ...], cache_dir: str | None, timeout: float,
         memory_limit: int | None) -> None:
    """Dump the IR of MODEL on TARGET: one stage to stdout, or every stage (and pass) to -o.

    Exit status: 0 when every stage asked for was written; 1 when the target stopped before
    (one line on stderr says where and why); 2 on bad input; 130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack dump zoo:mlp --target ort-cpu --stage optimized
        compstack dump zoo:cnn --target tvm-llvm --all -o dumps/
        compstack dump zoo:cnn --target iree-llvm-cpu --all --print-after-change -o dumps/
    """
    from compstack import api
    from compstack.core.procs import run_tempdir
    from compstack.report.tables import print_pass_timing
    from compstack.run.dump import check_stages

    name = resolve_one(target)
    if all_passes and print_after_change:
        raise UserError("--all and --print-after-change: give one of them")
    passes = "all" if all_passes else ("changed" if print_after_change else "")
    if out_dir is None and passes:
        flag = "--all" if all_passes else "--print-after-change"
        raise UserError(f"{flag} writes one file per pass: give -o DIR")
    if out_dir is None and len(stage_names) != 1:
        raise UserError("without -o, give exactly one --stage to print (or -o DIR to write several)")
    topts = parse_target_options(target_opts)
    api.validate_target_options(topts)
    check_stages(name, stage_names)
    folder = writable_dir(out_dir, "dump") if out_dir is not None else run_tempdir("compstack-dump-")
    source = load_source(model, cache_dir, timeout, memory_limit)
    res = api.dump(source, name, folder, stages=list(stage_names) or None, passes=passes,
                   target_options=topts.get(name, {}), cache_dir=cache_dir, timeout_s=timeout,
                   memory_mb=memory_limit)
    o = res.outcome
    if out_dir is None:
        try:
            if o.status == "ok":
                click.echo(terminal_lines(res.stages[stage_names[0]].read_text()), nl=False)  # a model's names: inert
        finally:
            import shutil

            shutil.rmtree(folder, ignore_errors=True)
    else:
        for st, path in res.stages.items():
            click.echo(f"  {st:<28} {path}")
        if res.passes:
            kept = sum(1 for r in res.passes if r["file"])
            click.echo(f"  passes: {len(res.passes)} run, {kept} dumps in {folder / 'passes'}")
            print_pass_timing(res.timing, folder / "passes" / "timing.json")
    if o.status != "ok":
        click.echo(f"compstack: {name} {o.status} in {o.stage}: {terminal(o.error.splitlines()[0]) if o.error else ''}",
                   err=True)
        sys.exit(1)
