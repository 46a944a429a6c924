"""``compstack targets`` and ``compstack stages``: what each target is and does."""

from __future__ import annotations

import json

import click

from compstack.cli.common import resolve_one
from compstack.cli.options import json_option, target_option
from compstack.core.errors import UserError

__all__ = ["stages", "targets"]


def _print_ops(name: str, as_json: bool) -> None:
    """``compstack targets --ops NAME``: the op list and where it comes from."""
    from compstack import targets as registry

    cls = registry.get(name)
    try:
        ops = cls.supported_ops()
    except ImportError as exc:
        raise UserError(f"--ops {name}: the stack is not installed ({exc})") from None
    if as_json:
        click.echo(json.dumps({"target": name, "source": cls.ops_note, "ops": ops}, indent=1))
        return
    if ops is None:
        click.echo(f"{name}: no op list: {cls.ops_note}")
        return
    click.echo(f"{name}: {len(ops)} ops ({cls.ops_note})")
    width = max(len(o) for o in ops) + 2 if ops else 1
    per_line = max(1, 100 // width)
    for i in range(0, len(ops), per_line):
        click.echo("".join(o.ljust(width) for o in ops[i:i + per_line]).rstrip())


@click.command()
@json_option()
@click.option("--ops", "ops_of", metavar="TARGET", help="List the ONNX ops TARGET takes, as the stack lists them.")
def targets(as_json: bool, ops_of: str | None) -> None:
    """List every known target: available or not, and why; versions.

    Examples:

        \b
        compstack targets
        compstack targets --json
        compstack targets --ops xla-cpu
    """
    from compstack.api import target_rows
    from compstack.report.tables import print_targets

    if ops_of is not None:
        _print_ops(resolve_one(ops_of), as_json)
        return
    rows = target_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_targets(rows)


@click.command()
@target_option()
def stages(target: str) -> None:
    """List the stage names of TARGET, in pipeline order.

    Examples:

        \b
        compstack stages --target ort-cpu
        compstack stages --target iree-llvm-cpu
    """
    from compstack import targets as registry

    name = resolve_one(target)
    cls = registry.get(name)
    for st in cls.stage_names:
        click.echo(st + ("   (after compile)" if st in cls.compiled_stages else ""))
