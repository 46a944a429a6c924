"""``compstack daemon status|stop``: the background servers that keep workers warm.

Multi-target commands run their jobs on a daemon (:mod:`compstack.run.daemon`): a server
per environment that keeps one worker per target alive between commands and leaves after
``COMPSTACK_DAEMON_IDLE_S`` seconds (default 600) without a job.

* ``status``: every server of this user that answers: pid, uptime, idle time, jobs run and
  its workers (target, threads, pid, resident MiB, busy); ``*`` marks the one this shell's
  environment uses. ``--json``: ``{"daemons": [...]}``.
* ``stop``: stop this install's daemons (same interpreter, venv and compstack folder;
  ``--current``: only this environment's; ``--all``: every daemon of this user, other
  venvs and projects too); their workers are killed.
"""

from __future__ import annotations

import json

import click

__all__ = ["daemon"]

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout, nothing else.")


@click.group(short_help="The background servers that keep stack workers warm between commands.")
def daemon() -> None:
    """List or stop the daemons that keep one worker per target alive between commands
    (the default executor of multi-target commands; COMPSTACK_EXECUTOR=process runs
    every job on a fresh process instead).

    Examples:

        \b
        compstack daemon status
        compstack daemon stop
        compstack daemon stop --current
    """


@daemon.command(short_help="Running daemons and their workers.")
@_JSON
def status(as_json: bool) -> None:
    """Every daemon of this user that answers, with its workers.

    Examples:

        \b
        compstack daemon status
        compstack daemon status --json
    """
    from compstack.run.daemon import list_daemons

    found = list_daemons()
    if as_json:
        click.echo(json.dumps({"daemons": found}, indent=1))
        return
    if not found:
        click.echo("no daemon running")
        return
    for d in found:
        mark = "*" if d["current"] else " "
        click.echo(f"{mark} daemon {d['pid']} ({d['key']}): up {d['uptime_s']:.0f} s, idle {d['idle_s']:.0f} s "
                   f"of {d['idle_exit_s']:g}, {d['jobs']} job(s) run, {len(d['workers'])} worker(s)")
        whose = "this install" if d.get("this_install") else "another install (stop it with --all)"
        click.echo(f"    {whose}: python {d.get('python', '?')}, venv {d.get('prefix', '?')}, "
                   f"compstack {d.get('compstack', '?')}")
        for w in d["workers"]:
            click.echo(f"    {w['target_ref'].rpartition(':')[2]:<24} threads {w['threads']:<3} pid {w['pid']}  "
                       f"{w['rss_mb']:.0f} MiB{'  busy' if w['busy'] else ''}")


@daemon.command(short_help="Stop this install's daemons (their workers are killed).")
@click.option("--current", is_flag=True, help="Only the daemon of this environment.")
@click.option("--all", "every", is_flag=True, help="Every daemon of this user, other venvs and projects too.")
@_JSON
def stop(current: bool, every: bool, as_json: bool) -> None:
    """Stop the daemons of this install (interpreter, venv, compstack folder), or with
    --current only this environment's, or with --all every daemon of this user.

    Examples:

        \b
        compstack daemon stop
        compstack daemon stop --current --json
        compstack daemon stop --all
    """
    from compstack.core.errors import UserError
    from compstack.run.daemon import stop_daemons

    if current and every:
        raise UserError("daemon stop: --current and --all: give one of them")
    gone = stop_daemons(scope="current" if current else "all" if every else "install")
    if as_json:
        click.echo(json.dumps({"stopped": gone}, indent=1))
        return
    click.echo(f"stopped {len(gone)} daemon(s)" + (": " + ", ".join(str(d["pid"]) for d in gone) if gone else ""))
