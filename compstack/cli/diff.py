"""``compstack diff``: two IR dumps, normalised and compared."""

from __future__ import annotations

import json
import sys

import click

from compstack.cli.common import memory_limit
from compstack.cli.options import cache_dir_option, json_option, timeout_option

__all__ = ["diff"]


@click.command(short_help="Diff two IR dumps (files or MODEL@TARGET:STAGE specs).")
@click.argument("a")
@click.argument("b")
@click.option("--stat", is_flag=True, help="Only the structural summary (op histogram, fused/split nodes).")
@json_option("The summary as JSON on stdout.")
@click.option("--strip-locations/--no-strip-locations", default=True, show_default=True,
              help="Drop source locations and debug metadata.")
@click.option("--rename/--no-rename", default=True, show_default=True,
              help="Rename SSA values and symbols canonically by position.")
@click.option("--elide-constants/--no-elide-constants", default=True, show_default=True,
              help="Replace large constants by shape, dtype and a short hash.")
@click.option("--sort/--no-sort", "sort_unordered", default=True, show_default=True,
              help="Sort what has no order (attribute dicts, top-level functions).")
@click.option("--color", type=click.Choice(["auto", "always", "never"]), default="auto", show_default=True)
@cache_dir_option()
@timeout_option(help="Wall-clock limit of each dump job, seconds.")
def diff(a: str, b: str, stat: bool, as_json: bool, strip_locations: bool, rename: bool, elide_constants: bool,
         sort_unordered: bool, color: str, cache_dir: str | None, timeout: float) -> None:
    """Diff two IR dumps: files or MODEL@TARGET:STAGE specs. Exit 0 equal, 1 different, 2 error.

    Examples:

        \b
        compstack diff dumps/a.mlir dumps/b.mlir
        compstack diff zoo:cnn@iree-llvm-cpu:flow zoo:bert@iree-llvm-cpu:flow --stat
        compstack diff zoo:cnn@tvm-llvm:pass:FuseOps- zoo:cnn@tvm-llvm:pass:FuseOps+
    """
    from compstack.analysis.irtext.irdiff import diff_texts
    from compstack.analysis.irtext.normalize import NormalizeOptions
    from compstack.core.config import settings
    from compstack.core.sanitize import terminal_lines
    from compstack.report.tables import print_unified
    from compstack.run.dump import resolve_text
    from compstack.run.runner import Limits

    cfg = settings(cache_dir=cache_dir)
    limits = Limits(timeout_s=timeout, memory_mb=memory_limit(None))
    text_a, label_a = resolve_text(a, cfg.cache_dir, limits)
    text_b, label_b = resolve_text(b, cfg.cache_dir, limits)
    options = NormalizeOptions(strip_locations=strip_locations, rename=rename, elide_constants=elide_constants,
                               sort_unordered=sort_unordered)
    result = diff_texts(text_a, text_b, a_name=label_a, b_name=label_b, options=options)
    if as_json:
        click.echo(json.dumps(result.to_json(), indent=1, default=str))
    else:
        if not stat:
            print_unified(result.unified, color)
        click.echo(terminal_lines("\n".join(result.stat_text())))  # the IR's op and node names: inert
    sys.exit(0 if result.equal else 1)
