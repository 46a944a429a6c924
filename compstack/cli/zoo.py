"""``compstack zoo`` and ``compstack frontends``: where models come from."""

from __future__ import annotations

import json

import click

from compstack.cli.options import cache_dir_option, json_option

__all__ = ["frontends", "zoo"]


@click.command()
@json_option()
def frontends(as_json: bool) -> None:
    """List the frontends (onnx, torch, jax, tf, paddle, mindspore): available or not, why, versions.

    Examples:

        \b
        compstack frontends
        compstack frontends --json
    """
    from compstack.frontends.registry import frontend_rows
    from compstack.report.tables import print_frontends

    rows = [r.to_dict() for r in frontend_rows()]
    if as_json:
        click.echo(json.dumps(rows, indent=1))
    else:
        print_frontends(rows)


@click.command()
@json_option()
@cache_dir_option("Cache folder (zoo exports are cached).")
@click.option("--tier", type=click.Choice(["toy", "real", "all"]), default="toy", show_default=True,
              help="toy: the small test models; real: the published-size architectures; all: both. "
                   "Both are listed from metadata: no model is built.")
def zoo(as_json: bool, cache_dir: str | None, tier: str) -> None:
    """List the zoo models with their node and parameter counts (TensorFlow, Paddle and MindSpore
    models only where that framework is available: see `compstack frontends`).

    Examples:

        \b
        compstack zoo
        compstack zoo --json
    """
    from compstack.core.config import settings
    from compstack.frontends import zoo as zoo_mod
    from compstack.report.tables import print_real_zoo, print_zoo

    root = settings(cache_dir=cache_dir).cache_dir
    toys = [] if tier == "real" else zoo_mod.names(available_only=True, tier="toy")
    rows = [zoo_mod.listing(n, cache_dir=root) for n in toys]
    real = [] if tier == "toy" else [zoo_mod.real_info(n) for n in zoo_mod.names(tier="real")]
    if as_json:
        rows += real

        click.echo(json.dumps(rows, indent=1, default=str))
    else:
        if rows:
            print_zoo(rows)
        if real:
            print_real_zoo(real)
