"""Finding and running external compiler tools (``iree-compile``, ``iree-import-onnx``...).

The pattern is IREE's ``compiler/bindings/python/iree/compiler/tools/binaries.py`` and
``debugging.py``: a tool is looked up once (environment override, the copy bundled
with its Python package, then ``PATH``); a failed run raises :class:`ToolError` carrying
the command line, exit status and the tail of stderr; and one environment variable,
``COMPSTACK_SAVE_TEMPS=DIR``, keeps every tool's inputs and outputs plus a
``DIR/commands.txt`` of the command lines that ran, so a failure can be replayed by hand.

Environment (read once, by :func:`tool_settings`):

* ``COMPSTACK_TOOL_<NAME>``: path of the tool ``<name>`` (upper case, ``-`` -> ``_``),
  e.g. ``COMPSTACK_TOOL_IREE_COMPILE=/opt/iree/bin/iree-compile``.
* ``COMPSTACK_SAVE_TEMPS``: folder where :class:`Scratch` folders are created and kept.

No compiler stack is imported at module import time.
"""

from __future__ import annotations

import functools
import importlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

from compstack.core.errors import ToolError, ToolTimeoutError, UnavailableError, UserError
from compstack.core.procs import kill_escaped, kill_group, popen

__all__ = [
    "ToolSettings",
    "ToolTimeoutError",
    "Scratch",
    "tool_settings",
    "find_tool",
    "run_tool",
    "format_command",
]

_ENV_PREFIX = "COMPSTACK_TOOL_"

#: The pip package that ships each known tool (named in "not found" errors).
_PACKAGES: Mapping[str, str] = {
    **{t: "iree-base-compiler" for t in ("iree-compile", "iree-opt", "iree-link", "iree-lld",
                                         "iree-import-onnx", "iree-ir-tool", "iree-build")},
    **{t: "iree-base-runtime" for t in ("iree-run-module", "iree-benchmark-module",
                                        "iree-benchmark-executable", "iree-dump-module",
                                        "iree-profile", "iree-cpuinfo", "iree-run-replay")},
}


@dataclass(frozen=True)
class ToolSettings:
    """The tool-related environment, read once.

    Attributes:
        save_temps: ``COMPSTACK_SAVE_TEMPS`` as a path, or None when unset.
        overrides: tool name -> path, from the ``COMPSTACK_TOOL_<NAME>`` variables
            (keys are the variable suffix: ``IREE_COMPILE``).
    """

    save_temps: Path | None = None
    overrides: Mapping[str, Path] = field(default_factory=dict)


@functools.cache
def tool_settings() -> ToolSettings:
    """Read ``COMPSTACK_SAVE_TEMPS`` and ``COMPSTACK_TOOL_*`` from the environment, once.

    Tests that change the environment call ``tool_settings.cache_clear()``.

    Raises:
        UserError: ``COMPSTACK_SAVE_TEMPS`` names a file or a folder that cannot be written.
    """
    temps = os.environ.get("COMPSTACK_SAVE_TEMPS")
    overrides = {k[len(_ENV_PREFIX):]: Path(v).expanduser()
                 for k, v in os.environ.items() if k.startswith(_ENV_PREFIX) and v}
    folder = Path(temps).expanduser().resolve() if temps else None
    if folder is not None:
        _check_temps(folder, temps or "")
    return ToolSettings(folder, overrides)


def _check_temps(folder: Path, raw: str) -> None:
    """``COMPSTACK_SAVE_TEMPS`` must name a folder compstack can create and write.

    Raises:
        UserError: it is a file, or it cannot be created or written.
    """
    if folder.exists() and not folder.is_dir():
        raise UserError(f"COMPSTACK_SAVE_TEMPS={raw}: not a folder")
    from compstack.core.integrity import probe_dir

    probe_dir(folder, f"COMPSTACK_SAVE_TEMPS={raw}: folder not writable")


# ---- finding tools ----------------------------------------------------------------


def _env_key(name: str) -> str:
    return name.upper().replace("-", "_").replace(".", "_")


def _is_exe(path: Path | None) -> bool:
    return path is not None and path.is_file() and os.access(path, os.X_OK)


def _bundled_iree_compiler(name: str) -> Path | None:
    """``iree-compile`` & co. inside the ``iree-base-compiler`` wheel (``_mlir_libs/``)."""
    try:
        binaries = importlib.import_module("iree.compiler.tools.binaries")
        return Path(binaries.find_tool(name))
    except (ImportError, ValueError):  # not installed / a tool it does not know
        return None


def _bundled_iree_runtime(name: str) -> Path | None:
    """``iree-run-module`` & co. inside the ``iree-base-runtime`` wheel (``_runtime_libs/``)."""
    try:
        libs = importlib.import_module("iree._runtime_libs")
    except ImportError:
        return None
    return Path(libs.__path__[0]) / name


_BUNDLED: Mapping[str, Callable[[str], Path | None]] = {
    "iree-base-compiler": _bundled_iree_compiler,
    "iree-base-runtime": _bundled_iree_runtime,
}


@functools.cache
def find_tool(name: str) -> Path:
    """The absolute path of the tool ``name``.

    Search order: the ``COMPSTACK_TOOL_<NAME>`` variable; the binary bundled with the
    installed Python package (IREE's ``iree.compiler.tools.binaries.find_tool``, the
    runtime wheel's ``_runtime_libs``); a console script next to ``sys.executable``
    (the active virtual environment); then ``PATH``. Results are cached.

    Args:
        name: the executable name without extension (``iree-compile``).

    Raises:
        UnavailableError: not found, or the override is not an executable file; the
            message names the pip package to install and the variable to set.
    """
    key = _ENV_PREFIX + _env_key(name)
    override = tool_settings().overrides.get(_env_key(name))
    if override is not None:
        if not _is_exe(override):
            raise UnavailableError(f"{key}={override}: not an executable file")
        return override.resolve()
    package = _PACKAGES.get(name, "")
    bundled = _BUNDLED[package](name) if package in _BUNDLED else None
    if _is_exe(bundled):
        return bundled.resolve()  # type: ignore[union-attr]
    beside = Path(sys.executable).parent / name
    if _is_exe(beside):
        return beside
    on_path = shutil.which(name)
    if on_path:
        return Path(on_path)
    hint = f"pip install {package}" if package else "install it"
    raise UnavailableError(f"tool '{name}' not found ({hint}, put it on PATH, or set {key})")


# ---- temps --------------------------------------------------------------------------


#: The running job's scratch root (:func:`scratch_root`); empty: the system's temp folder.
_SCRATCH_ROOT: list[Path] = []


def scratch_root(path: Path | None) -> None:
    """Put the :class:`Scratch` folders made from now on under ``path`` (``None``: the
    system's temp folder again). A worker sets its job's ``tmp`` folder and removes it when
    the job ends (:attr:`compstack.run.jobs.Job.tmp_path`)."""
    _SCRATCH_ROOT[:] = [path] if path is not None else []


class Scratch:
    """A folder for one job's tool inputs and outputs.

    Under ``COMPSTACK_SAVE_TEMPS=DIR`` it is a fresh ``DIR/<label>-XXXX`` that is kept;
    otherwise a private temporary folder (under the job's scratch root, :func:`scratch_root`)
    removed by :meth:`cleanup`, by leaving the ``with`` block, when the object is
    garbage-collected, or with the job's scratch root.

    Attributes:
        path: the folder.
        kept: True when it survives (``COMPSTACK_SAVE_TEMPS``).
    """

    def __init__(self, label: str) -> None:
        root = tool_settings().save_temps
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if root is not None:
            try:
                root.mkdir(parents=True, exist_ok=True)
                self.path = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=root))
            except OSError as exc:
                raise UserError(f"COMPSTACK_SAVE_TEMPS={root}: not writable ({exc.strerror or exc})") from None
            self.kept = True
        else:
            root_dir = _SCRATCH_ROOT[0] if _SCRATCH_ROOT else None
            if root_dir is not None:
                root_dir.mkdir(parents=True, exist_ok=True)
            self._tmp = tempfile.TemporaryDirectory(prefix=f"compstack-{label}-", dir=root_dir,
                                                    ignore_cleanup_errors=True)
            self.path = Path(self._tmp.name)
            self.kept = False

    def cleanup(self) -> None:
        """Remove the folder now (a kept folder stays)."""
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


# ---- running tools -------------------------------------------------------------------

_LOG_LOCK = threading.Lock()


def format_command(argv: Sequence[str | os.PathLike[str]]) -> str:
    """A shell-quoted command line (``shlex.join``) for logs and messages."""
    return shlex.join(str(a) for a in argv)


def log_command(argv: Sequence[str], temps: Scratch | None = None) -> None:
    """Append ``argv`` to ``COMPSTACK_SAVE_TEMPS``'s ``commands.txt``, as :func:`run_tool` does,
    for a step compstack runs in its own process (a Python API standing in for a tool)."""
    _log_command([str(a) for a in argv], None, temps.path if temps is not None and temps.kept else None)


def _log_command(argv: Sequence[str], cwd: Path | None, temps: Path | None) -> None:
    root = tool_settings().save_temps
    if root is None:
        return
    root.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    where = f" (temps: {temps})" if temps is not None else ""
    line = format_command(argv)
    if cwd is not None:
        line = f"cd {shlex.quote(str(cwd))} && {line}"
    with _LOG_LOCK, open(root / "commands.txt", "a", encoding="utf-8") as f:
        f.write(f"# {stamp}{where}\n{line}\n")


def run_tool(
    argv: Sequence[str | os.PathLike[str]],
    *,
    timeout: float | None = None,
    stdin: bytes | None = None,
    cwd: Path | None = None,
    temps: Scratch | None = None,
) -> subprocess.CompletedProcess[bytes]:
    """Run a tool to completion, capturing stdout and stderr as bytes.

    The tool runs in its own process group; on timeout the whole group is killed.
    Under ``COMPSTACK_SAVE_TEMPS`` the command line is appended to
    ``DIR/commands.txt`` before it runs.

    Args:
        argv: the command line; ``argv[0]`` is usually from :func:`find_tool`.
        timeout: wall-clock limit in seconds (None: no limit).
        stdin: bytes fed to the tool's stdin (None: no stdin).
        cwd: working folder of the tool.
        temps: the :class:`Scratch` holding its inputs/outputs, named in errors when kept.

    Returns:
        The completed process (``returncode == 0``).

    Raises:
        ToolError: non-zero exit status (argv, status, stderr tail, kept temps folder).
        ToolTimeoutError: the tool ran past ``timeout`` and was killed.
        UnavailableError: ``argv[0]`` cannot be executed.
    """
    args = [str(a) for a in argv]
    kept = temps.path if temps is not None and temps.kept else None
    _log_command(args, cwd, kept)
    try:
        proc = popen(args, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd)
    except OSError as exc:
        raise UnavailableError(f"cannot run {args[0]}: {exc.strerror or exc}") from None
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        raise ToolTimeoutError(args, float(timeout or 0), err.decode(errors="replace"), kept) from None
    except BaseException:  # KeyboardInterrupt: do not leave the tool running
        kill_group(proc)
        proc.wait()
        raise
    kill_escaped()  # what the tool left running outside its group
    if proc.returncode != 0:
        raise ToolError(args, proc.returncode, err.decode(errors="replace"), kept)
    return subprocess.CompletedProcess(args, proc.returncode, out, err)
