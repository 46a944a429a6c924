"""The ``compstack`` command line.

Bad input ends in one line on stderr (``compstack: error: ...``) and exit status 2;
a stack's failure is a row of the result table, never an exit. ``--json`` puts only
JSON on stdout. No compiler stack is imported until a command needs one.
"""

from __future__ import annotations

import inspect
import os
import signal
import sys


def _exit_now(signum: int, frame: object) -> None:
    """SIGINT/SIGTERM while nothing needs cleaning up (importing, exiting): the shell's status now."""
    os.write(2, b"compstack: interrupted\n" if signum == signal.SIGINT else b"compstack: terminated (SIGTERM)\n")
    os._exit(128 + signum)


#: The status an interrupted command exits with (130/143), once it has been handled; None otherwise.
_SIGNAL_STATUS: int | None = None


def _exit_status() -> None:
    """The last exit hook: an interrupted command ends with its 130/143, whatever the interpreter thinks.

    CPython (3.11) marks a KeyboardInterrupt that escapes ``exec``/``eval`` of a string as "unhandled"
    for the whole process, even when it is caught further up (dataclasses, namedtuple and enum run
    such code while a module is imported), and after the exit hooks it then kills itself with SIGINT
    (status -2) instead of returning the 130 that ``sys.exit`` asked for. Every other exit hook has
    run by now (this one is registered first); the standard streams are flushed here.
    """
    if _SIGNAL_STATUS is not None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(_SIGNAL_STATUS)


def _exit_on_signal() -> bool:
    """In the ``compstack`` command: make SIGINT/SIGTERM exit at once (130/143); False elsewhere."""
    if _COMMAND:
        signal.signal(signal.SIGINT, _exit_now)
        signal.signal(signal.SIGTERM, _exit_now)
        return True
    return False


def _as_command() -> bool:
    """True when this process is the ``compstack`` command (console script or ``python -m``)."""
    return sys.argv[:1] == ["-m"] or os.path.basename(sys.argv[0] if sys.argv else "") == "compstack"


#: Whether this process is the command (read once, at import: ``python -m`` later rewrites argv[0]).
_COMMAND = _as_command()
if _COMMAND:
    # Before any other import: a Ctrl-C while the command modules load exits 130, not -2 (killed by
    # the signal). The last exit hook ignores both signals: the interpreter's own finalisation puts
    # back SIG_DFL for Python-level handlers, and a signal there would otherwise kill the process.
    import atexit

    atexit.register(_exit_status)  # registered first: runs last
    atexit.register(signal.signal, signal.SIGTERM, signal.SIG_IGN)
    atexit.register(signal.signal, signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGINT, _exit_now)
    signal.signal(signal.SIGTERM, _exit_now)
from collections.abc import Sequence  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from compstack.core.errors import CompstackError  # noqa: E402

__all__ = ["main", "cli"]


def _fail(message: str) -> None:
    click.echo(f"compstack: error: {message}", err=True)
    sys.exit(2)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``finally`` runs (workers are
    killed, temporary folders removed, the run is marked ``interrupted``)."""


#: The signal whose exception waits for the import in progress to end (see :func:`_on_signal`).
_PENDING: int | None = None


def _importing(frame: Any) -> bool:
    """True when ``frame`` (a signal handler's) runs inside an ``import``: importlib's frames are on its stack."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _on_signal(signum: int, frame: Any) -> None:
    """SIGINT/SIGTERM in a command: KeyboardInterrupt / :class:`Terminated` in the main thread, so that
    every ``finally`` runs (workers are killed, temporary folders removed, the run marked ``interrupted``).

    Never inside an import: an exception raised while a C extension initialises (onnx's pybind11 module
    builds enums in Python) leaves it half made, and the interpreter then aborts or segfaults at exit
    (seen as status -6 and -11 instead of 130). There the exception waits, re-checked every 10 ms
    (SIGALRM, unused elsewhere in compstack), until the import stack is empty.
    """
    global _PENDING
    if signum == signal.SIGALRM:
        if _PENDING is None:
            return
        signum = _PENDING
    if _importing(frame):
        _PENDING = signum
        signal.signal(signal.SIGALRM, _on_signal)
        signal.setitimer(signal.ITIMER_REAL, 0.01)
        return
    _PENDING = None
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _interrupted(exc: BaseException) -> None:
    """One line and the shell's status for a signal: 130 (SIGINT), 143 (SIGTERM)."""
    _exit_on_signal()  # a second Ctrl-C while this line is written is still 130
    term = isinstance(exc, Terminated) or isinstance(exc.__cause__ or exc.__context__, Terminated)
    click.echo(f"compstack: {'terminated (SIGTERM)' if term else 'interrupted'}", err=True)
    global _SIGNAL_STATUS
    _SIGNAL_STATUS = 143 if term else 130
    sys.exit(_SIGNAL_STATUS)


class _Group(click.Group):
    """Turns :class:`CompstackError` into one line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except CompstackError as exc:
            from compstack.core.sanitize import terminal

            # one line, whatever a file name in it holds (a newline, an escape sequence)
            _fail(terminal(str(exc).strip()) if str(exc).strip() else type(exc).__name__)
        except KeyboardInterrupt as exc:
            _interrupted(exc)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="compstack")
@click.option("--shared-store", is_flag=True,
              help="The cache folder is shared with other users: load no native code from it (recompile), "
                   "read its data entries whoever wrote them [env COMPSTACK_SHARED_STORE=1].")
def cli(shared_store: bool) -> None:
    """Compare ML compiler stacks on one model: numerics, compile time, latency, IR.

    Each command has its own --help; the documentation site (docs/) has a guide per job.

    Exit status: 0 ok; 1 a row failed (each command's --help says which); 2 on bad input;
    130 after Ctrl-C, 143 after SIGTERM (128 + the signal number, as shells report).

    Examples:

        \b
        compstack compare zoo:mlp --targets ort-cpu,reference --no-latency
        compstack targets
        compstack compare --help
    """
    from compstack.core.tools import tool_settings

    if shared_store:  # workers inherit it
        os.environ["COMPSTACK_SHARED_STORE"] = "1"

    tool_settings()  # a bad COMPSTACK_SAVE_TEMPS fails here, before any job


# ---------------------------------------------------------------------------------------
# one module per command; each declares its flags (shared groups in cli/options.py) and calls
# compstack.api


def _add_commands() -> None:
    from compstack.cli import (
        bisect_versions,
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
        versions,
        zoo,
    )

    for command in (compare.compare, compare.run, lower.lower, targets.targets, targets.stages, zoo.frontends,
                    zoo.zoo, dump.dump, diff.diff, conformance.conformance, report.report, sweep.sweep,
                    import_profile.import_profile, ops.ops, fusion.fusion, fusion.profile, explain.explain,
                    explain.reduce, explain.bisect, fuzz.fuzz, cache.cache, daemon.daemon, versions.versions,
                    bisect_versions.bisect_versions):
        cli.add_command(command)
    _say_exit_status(cli)


#: The exit status of a command that has no failing row to report (listing, cache, daemon, report...).
_PLAIN_EXIT = ("Exit status: 0 done; 2 on bad input; 130 after Ctrl-C, 143 after SIGTERM (128 + the signal "
               "number, as shells report).")


def _say_exit_status(group: click.Group) -> None:
    """Every command's ``--help`` states its exit status (docs/reference/exit-status.md): a
    command whose docstring does not state one (it has no failing row to report) gets
    :data:`_PLAIN_EXIT`; groups' subcommands too."""
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _say_exit_status(command)
        text = inspect.cleandoc(command.help or "")  # the docstring's indent off, as click shows it
        if "Exit status" not in text:  # before the examples (they end the help: tests/test_cli_help.py)
            head, sep, examples = text.partition("\nExamples:")
            command.help = f"{head.rstrip()}\n\n{_PLAIN_EXIT}\n{sep}{examples}"


_add_commands()


def main(argv: Sequence[str] | None = None) -> None:
    """Console entry point. Usage errors are one line too, like every other bad input.

    Exit status: 0 ok, 1 a row failed (see each command), 2 bad input, 130 interrupted
    by Ctrl-C, 143 terminated by SIGTERM (128 + the signal number, as shells report).
    """
    global _PENDING
    previous = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGALRM)
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    try:
        cli.main(args=list(argv) if argv is not None else None, prog_name="compstack", standalone_mode=False)
        _flush_stdout()
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
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        _unwritable(exc)
    finally:  # from here on nothing needs cleaning up: a signal is the shell's status at once
        pending, _PENDING = _PENDING, None
        if signal.getsignal(signal.SIGALRM) is _on_signal:  # a deferred signal's timer: off, the caller's again
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous[2])
        if _exit_on_signal():
            if pending is not None:  # it came during the command's last import: its status, now
                _exit_now(pending, None)
        else:
            signal.signal(signal.SIGINT, previous[0])  # called in-process (tests): give back the caller's
            signal.signal(signal.SIGTERM, previous[1])


#: errno values of an output that cannot take more bytes: full device, quota, broken pipe, I/O error.
_FULL = {28, 122, 32, 5}  # ENOSPC, EDQUOT, EPIPE, EIO


def _flush_stdout() -> None:
    """Flush stdout now, inside the error handling (``--json > /dev/full``), not at exit."""
    sys.stdout.flush()


def _unwritable(exc: OSError) -> None:
    """One line for an output that cannot be written, then exit 2; stdout is pointed at
    /dev/null so that the interpreter's own flush at exit adds no second message."""
    where = exc.filename or ("stdout" if exc.errno != 32 else "stdout (closed pipe)")
    with open(os.devnull, "wb") as null:
        os.dup2(null.fileno(), sys.stdout.fileno())
    _fail(f"cannot write {where}: {exc.strerror or exc}")


if __name__ == "__main__":
    main()
