"""``compstack report``: one stored run as one self-contained HTML file."""

from __future__ import annotations

from pathlib import Path

import click

from compstack.cli.common import check_writable_file
from compstack.cli.options import db_option
from compstack.core.errors import UserError

__all__ = ["report"]


@click.command(short_help="Render a stored run as one self-contained HTML file.")
@click.option("--last", is_flag=True, help="The newest run in the database (the default).")
@click.option("--run", "run_id", metavar="ID", help="The run with this id (see `compare --json`: run_id).")
@click.option("--sweep", is_flag=True,
              help="The newest stored sweep: its matrix as the page with -o, else one line naming it.")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False), help="The HTML file to write.")
@db_option()
def report(last: bool, run_id: str | None, sweep: bool, out: str | None, db: str | None) -> None:
    """Render one run of the results database as one HTML file (inline CSS and SVG, no
    script, nothing fetched): targets, latency and compile-time plots, numerics per
    output, versions and flags, the newest conformance run; it names what the database
    does not hold."""
    from compstack.core.config import settings

    cfg = settings(db=db)
    if sweep:
        if not out:
            from compstack.report.html import sweep_line

            click.echo(sweep_line(cfg.db))
            return
        check_writable_file(out, "-o")
        from compstack.report.html import write_sweep_report

        summary, size = write_sweep_report(cfg.db, Path(out))
        click.echo(f"wrote {out} ({size / 1024:.1f} KiB): sweep {summary['sweep_id']} "
                   f"({len(summary['models'])} models x {len(summary['targets'])} targets)")
        return
    if last and run_id:
        raise UserError("--last and --run: give one of them")
    if not out:
        raise UserError("-o FILE.html is required (the page is written there)")
    check_writable_file(out, "-o")
    from compstack.report.html import write_report

    data, size = write_report(cfg.db, Path(out), run_id)
    what = f"{data.rows[0]['model_name']}, {len(data.rows)} targets" if data.rows else "conformance run"
    click.echo(f"wrote {out} ({size / 1024:.1f} KiB): run {data.run_id} ({what})")
