"""``compstack lower``: thin over :func:`compstack.api.lower`."""

from __future__ import annotations

import sys
from typing import Any

import click

from compstack.cli.common import BAD, load_source, parse_target_options, resolve_one, writable_dir
from compstack.cli.options import ModelFlags, memory_limit_option, model_options, target_option, timeout_option
from compstack.core.errors import UserError

__all__ = ["lower"]


@click.command(short_help="Lower and compile for a target: artifact, stages, manifest.json.")
@click.argument("model")
@target_option()
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for the artifact, the stage dumps and manifest.json.")
@model_options
@timeout_option(help="Wall-clock limit of the job, seconds.")
@memory_limit_option("Resident-memory limit of the job, MiB (0: none) [default: 75% of RAM].")
@click.option("--soc", default=None, metavar="SOC",
              help="Processor the artifact is for (cann: ATC --soc_version, e.g. Ascend910B); "
                   "same as --option TARGET:soc=SOC.")
def lower(model: str, target: str, out_dir: str, model_flags: ModelFlags, timeout: float,
          memory_limit: int | None, soc: str | None) -> None:
    """Lower and compile MODEL for TARGET; write artifact, stages and manifest.json to -o.

    Exit status: 0 when the target lowered and compiled, or is unsupported or unavailable (the
    manifest says why); 1 when it failed, crashed, timed out or ran out of memory; 2 on bad
    input; 130 after Ctrl-C, 143 after SIGTERM.

    Examples:

        \b
        compstack lower zoo:mlp --target ort-cpu -o out/
        compstack lower zoo:cnn --target iree-vulkan -o out/
        compstack lower zoo:cnn --target cann --soc Ascend910B -o out/
    """
    from compstack import api

    name = resolve_one(target)
    topts = parse_target_options(model_flags.target_opts)
    if soc is not None:
        _add_soc(topts, name, soc)
    api.validate_target_options(topts)
    out = writable_dir(out_dir, "lower")
    source = load_source(model, model_flags.cache_dir, timeout, memory_limit)
    manifest = api.lower(source, name, out, api.LowerOptions(
        target_options=topts.get(name, {}), seed=model_flags.seed, opset=model_flags.opset, timeout_s=timeout,
        memory_mb=memory_limit, cache_dir=model_flags.cache_dir))
    status = manifest["status"]
    click.echo(f"{name}: {status}" + (f" ({manifest['stage']}: {manifest['error']})" if status != "ok" else ""))
    for f in manifest.get("artifacts", []):
        click.echo(f"  artifact  {f}")
    click.echo(f"  stages    {', '.join(manifest.get('stages', [])) or '(none written)'}")
    if status != "ok":
        _echo_failure(manifest)
    click.echo(f"  manifest  {out / 'manifest.json'}")
    if status in BAD:  # compare's rule: unsupported and unavailable (a coverage report) exit 0
        sys.exit(1)


def _echo_failure(manifest: dict[str, Any]) -> None:
    """The failing stage, the stack's log tail, the command that reproduces it, a hint."""
    if manifest.get("failed_stage"):
        click.echo(f"  failed    at stage {manifest['failed_stage']}")
    log = [ln for ln in (manifest.get("log") or "").splitlines() if ln.strip()]
    if log and manifest.get("command"):  # a tool's stderr (a traceback is in the manifest)
        for ln in log[-6:]:
            click.echo(f"  | {ln[:300]}")
    if manifest.get("command"):
        click.echo(f"  command   {manifest['command']}")
        click.echo(f"            (its input files are in {manifest['temps']})" if manifest.get("temps") else
                   "            (rerun with COMPSTACK_SAVE_TEMPS=DIR to keep the files it reads)")
    if manifest.get("hint"):
        click.echo(f"  hint      {manifest['hint']}")


def _add_soc(topts: dict[str, dict[str, str]], target: str, soc: str) -> None:
    """``--soc SOC``: the target's ``soc`` option, checked with a one-line error."""
    import dataclasses

    from compstack import targets as registry

    options = registry.get(target).Options
    if "soc" not in {f.name for f in dataclasses.fields(options)}:
        raise UserError(f"--soc: target '{target}' has no SoC option (cann has)")
    problem = options(soc=soc).validate()  # type: ignore[call-arg]
    if problem:
        raise UserError(f"--soc {soc}: {problem.partition(': ')[2] or problem}")
    topts.setdefault(target, {})["soc"] = soc
