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
              help="The newest stored sweep: its dashboard as the page with -o, else one line naming it.")
@click.option("--baseline", metavar="TARGET", default=None,
              help="With --sweep: the target speed-ups are against (default: the sweep's baseline, ort-cpu).")
@click.option("-o", "--output", "out", type=click.Path(dir_okay=False),
              help="The HTML file to write (required, but with --sweep: without it, one line names the sweep).")
@db_option()
def report(last: bool, run_id: str | None, sweep: bool, baseline: str | None, out: str | None,
           db: str | None) -> None:
    """Render one run of the results database as one HTML file (inline CSS and SVG, no
    script, nothing fetched): targets, latency and compile-time plots, numerics per
    output, versions and flags, the newest conformance run; it names what the database
    does not hold. With --sweep -o, the newest sweep as the cross-stack dashboard: per
    stack pass rate, geomean speed-up, compile time, peak memory and failure funnel; per
    model every stack's cell; what changed since earlier sweeps of the same models.

    Examples:

        \b
        compstack report --last -o report.html
        compstack report --run RUN_ID -o report.html
        compstack report --sweep --baseline openvino-cpu -o dash.html
    """
    from compstack.core.config import settings

    if out is not None and not out.strip():
        raise UserError(f"-o {out!r}: an empty path; give the FILE.html to write")
    cfg = settings(db=db)
    if not sweep and not run_id:
        from compstack.report.html import newest_is_sweep

        sweep = newest_is_sweep(cfg.db)  # the newest run is a sweep's: its matrix, not its last sub-run
    if sweep:
        if out is None:
            from compstack.report.html import sweep_line

            click.echo(sweep_line(cfg.db))
            return
        check_writable_file(out, "-o")
        from compstack.report.dashboard import write_dashboard

        dash, size = write_dashboard(cfg.db, Path(out), baseline=baseline)
        click.echo(f"wrote {out} ({size / 1024:.1f} KiB): sweep {dash['sweep']['sweep_id']} "
                   f"({_n(len(dash['models']), 'model')} x {_n(len(dash['targets']), 'target')}, baseline {dash['baseline']})")
        return
    if baseline:
        raise UserError("--baseline: only with --sweep (a sweep's dashboard)")
    if last and run_id:
        raise UserError("--last and --run: give one of them")
    if out is None:
        raise UserError("-o FILE.html is required (the page is written there)")
    check_writable_file(out, "-o")
    from compstack.report.html import write_report

    data, size = write_report(cfg.db, Path(out), run_id)
    what = f"{data.rows[0]['model_name']}, {len(data.rows)} targets" if data.rows else "conformance run"
    click.echo(f"wrote {out} ({size / 1024:.1f} KiB): run {data.run_id} ({what})")


def _n(count: int, noun: str) -> str:
    """``1 target``, ``7 targets``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
