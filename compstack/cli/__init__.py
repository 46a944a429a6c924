"""The ``compstack`` command line.

Bad input ends in one line on stderr (``compstack: error: ...``) and exit status 2;
a stack's failure is a row of the result table, never an exit. ``--json`` puts only
JSON on stdout. No compiler stack is imported until a command needs one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import click

from compstack.core.errors import CompstackError

__all__ = ["main", "cli"]


def _fail(message: str) -> None:
    click.echo(f"compstack: error: {message}", err=True)
    sys.exit(2)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` runs (workers are
    killed, temporary folders removed, the run is marked ``interrupted``)."""


def _on_sigterm(signum: int, frame: Any) -> None:
    raise Terminated()


def _interrupted(exc: BaseException) -> None:
    """One line and the shell's status for a signal: 130 (SIGINT), 143 (SIGTERM)."""
    term = isinstance(exc, Terminated) or isinstance(exc.__cause__ or exc.__context__, Terminated)
    click.echo(f"compstack: {'terminated (SIGTERM)' if term else 'interrupted'}", err=True)
    sys.exit(143 if term else 130)


class _Group(click.Group):
    """Turns :class:`CompstackError` into one line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CompstackError as exc:
            _fail(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        except KeyboardInterrupt as exc:
            _interrupted(exc)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="compstack")
def cli() -> None:
    """Compare ML compiler stacks on one model: numerics, compile time, latency, IR."""
    from compstack.core.tools import tool_settings

    tool_settings()  # a bad COMPSTACK_SAVE_TEMPS fails here, before any job


# ---------------------------------------------------------------------------------------
# one module per command; each declares its flags (shared groups in cli/options.py) and calls
# compstack.api


def _add_commands() -> None:
    from compstack.cli import (
        cache,
        compare,
        conformance,
        daemon,
        diff,
        dump,
        explain,
        fusion,
        fuzz,
        import_profile,
        lower,
        ops,
        report,
        sweep,
        targets,
        zoo,
    )

    for command in (compare.compare, compare.run, lower.lower, targets.targets, targets.stages, zoo.frontends,
                    zoo.zoo, dump.dump, diff.diff, conformance.conformance, report.report, sweep.sweep,
                    import_profile.import_profile, ops.ops, fusion.fusion, fusion.profile, explain.explain,
                    explain.reduce, explain.bisect, fuzz.fuzz, cache.cache, daemon.daemon):
        cli.add_command(command)


_add_commands()


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Usage errors are one line too, like every other bad input.

    Exit status: 0 ok, 1 a row failed (see each command), 2 bad input, 130 interrupted
    by Ctrl-C, 143 terminated by SIGTERM (128 + the signal number, as shells report).
    """
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="compstack", standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort as exc:
        _interrupted(exc)
    except KeyboardInterrupt as exc:
        _interrupted(exc)
    except click.UsageError as exc:
        where = f" ({exc.ctx.command_path})" if exc.ctx is not None else ""
        _fail(f"{exc.format_message()}{where}")
    except click.ClickException as exc:
        _fail(exc.format_message())


if __name__ == "__main__":
    main()
