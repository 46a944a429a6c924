"""The daemon executor: the pool's workers kept alive across commands by a background server.

A warm ``compstack compare`` spends most of its time starting workers and importing stacks
(issue #12, part 7); the in-command :class:`~compstack.run.executors.PoolExecutor` pays that
once per command. :class:`DaemonExecutor` (``--executor daemon``, the default of multi-target
commands) hands each job to a server process that owns a :class:`PoolExecutor`, so the
second command finds every stack already imported. The pattern is Gradle's daemon and
Bazel's server: started on first use, found again through a socket, gone after an idle time.

* **One server per environment.** The socket's name is :func:`daemon_key`: a hash of the
  interpreter, compstack's own files (path, size, mtime), the import path's folders
  (``pip install`` changes them) and the environment minus variables that change per shell
  (:data:`VOLATILE_ENV`). The server is :mod:`compstack.run.daemon_server`. A command whose code, packages, cache root, threads variables or
  ``PYTHONPATH`` differ gets its own server; none is ever served by stale code.
* **Same user only.** The socket lives in :func:`socket_dir` (``$XDG_RUNTIME_DIR/compstack``
  or ``<tmp>/compstack-<uid>``), a folder that must be owned by this user with mode 0700;
  the server also checks each peer's uid (``SO_PEERCRED``). Requests are JSON lines
  (``{"op": "run", "job": {...}, "limits": {...}}``, ``status``, ``stop``), never a pickle.
  The server works in ``/`` and its workers run with ``python -P``: nothing is imported from
  any command's current folder.
* **Jobs that must not be served long-lived** run on a fresh process here instead: a job
  whose model source or custom ops come from a user's file (``/abs/file.py:build``,
  ``file:...``): a worker that imported it once would miss the user's next edit.
* **Same limits, same status words.** The server runs each job with
  :meth:`PoolExecutor.run`: ``timeout``, ``oom`` and ``crashed`` mean what they mean on every
  executor. A client that goes away (Ctrl-C, SIGKILL) closes its connection, and the server
  kills that job's worker. If the server itself dies mid-job, the job is ``crashed``.
* **Idle exit.** The server leaves after :data:`IDLE_S` seconds without a job
  (``COMPSTACK_DAEMON_IDLE_S``), killing its workers. ``compstack daemon status|stop``
  lists and stops servers.
* **Memory.** Every 2 s, while the machine's available memory is under
  :func:`compstack.run.pool.memory_floor_mb` (``COMPSTACK_DAEMON_MEMORY_FLOOR_MB``), the
  server stops its idle workers, the largest first (:func:`compstack.run.pool.shed_idle`):
  a warm worker holds 1 to 3 GB after a real-size model, and each environment has its own
  server.

When the socket folder is unsafe or the server does not start, the command falls back to an
in-command :class:`PoolExecutor` and says so once on stderr.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import socket
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Iterator

from compstack.core.procs import popen, python_module_argv
from compstack.run import events
from compstack.run.executors import EXECUTORS, Executor, Limits, PoolExecutor, ProcessExecutor
from compstack.run.jobs import Job, JobOutcome

__all__ = ["VOLATILE_PREFIXES", "DaemonExecutor", "daemon_key", "keyed_env", "FRAMEWORK_ENV", "socket_dir", "list_daemons", "stop_daemons", "install", "IDLE_S",
           "VOLATILE_ENV"]

#: Default idle seconds before a server exits (``COMPSTACK_DAEMON_IDLE_S`` overrides).
IDLE_S = 600.0
#: Seconds a new server may take to listen on its socket.
START_TIMEOUT_S = 60.0
#: Seconds the server may take to accept a job (else the command runs an in-command pool).
ACCEPT_TIMEOUT_S = 10.0
#: The server sends a heartbeat every :data:`HEARTBEAT_S` seconds while a job runs; after
#: :data:`SILENT_S` seconds without one the job is ``crashed`` (the daemon hung or froze).
#: 30 s lost two real-tier rows (vgg16 on IREE, ghostnet on Inductor) on a 2-core machine
#: loaded far past its cores (load average 6 to 7): a hung server now costs two minutes.
HEARTBEAT_S = 5.0
SILENT_S = 120.0
#: Environment variables that differ between shells and terminals but do not change a
#: job's result (left out of :func:`daemon_key`); plus every ``PYTEST_*``.
VOLATILE_ENV = frozenset({
    "PWD", "OLDPWD", "SHLVL", "_", "TERM", "TERM_PROGRAM", "TERM_PROGRAM_VERSION", "COLORTERM", "COLUMNS",
    "LINES", "PS1", "PS2", "PROMPT_COMMAND", "LS_COLORS", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
    "SSH_AUTH_SOCK", "DISPLAY", "WINDOWID", "TMUX", "TMUX_PANE", "STY", "HISTFILE", "HISTSIZE",
    "MAIL", "LOGNAME", "XDG_SESSION_ID", "XDG_VTNR", "COMPSTACK_DAEMON_IDLE_S", "COMPSTACK_EXECUTOR",
    "COMPSTACK_DAEMON_MEMORY_FLOOR_MB",  # read by a server when it starts, as COMPSTACK_DAEMON_IDLE_S
    "COMPSTACK_DAEMON_IGNORE_ENV", "DBUS_SESSION_BUS_ADDRESS", "DESKTOP_STARTUP_ID", "SECURITYSESSIONID",
    "EDITOR", "VISUAL", "PAGER", "LESS", "LESSOPEN", "LESSCLOSE", "HISTCONTROL", "HISTFILESIZE",
    "PYENV_DIR",  # pyenv's shim sets it to the current folder: the interpreter (in the key) is what counts
})
#: Prefixes of variables set per terminal, editor or prompt (``PYTEST_*``: per test).
VOLATILE_PREFIXES = ("PYTEST_", "TERM_", "ITERM_", "KITTY_", "GNOME_TERMINAL_", "KONSOLE_", "VSCODE_", "WT_",
                     "ALACRITTY_", "WEZTERM_", "STARSHIP_", "SSH_", "XDG_SESSION_", "__CF", "Apple_")
#: Variables frameworks set in their own process when imported (measured: ``import jax``
#: sets the first two; compstack's frontend workers set the Keras and glog ones; the
#: Inductor target sets its cache folder per job; scikit-learn, which TensorFlow imports,
#: sets ``KMP_DUPLICATE_LIB_OK``): left out of :func:`daemon_key` (a
#: program that imported JAX passes them on to the commands it starts), and given to a new
#: server as they were when compstack was imported (:func:`keyed_env`).
FRAMEWORK_ENV = ("TF_CPP_MIN_LOG_LEVEL", "TPU_SKIP_MDS_QUERY", "KERAS_BACKEND", "GLOG_v", "TORCHINDUCTOR_CACHE_DIR",
                 "KMP_DUPLICATE_LIB_OK")
_PKG = Path(__file__).resolve().parents[1]  # the compstack package folder
_RECV = 1 << 16
_LOG_KEEP = 1 << 20  # a server's log is started afresh past 1 MiB
_SUN_PATH_MAX = 107  # sockaddr_un.sun_path is 108 bytes with its NUL (unix(7))


def _idle_s() -> float:
    """``COMPSTACK_DAEMON_IDLE_S`` as seconds (:data:`IDLE_S` when unset).

    Raises:
        UserError: not a non-negative number.
    """
    raw = os.environ.get("COMPSTACK_DAEMON_IDLE_S", "")
    if not raw:
        return IDLE_S
    try:
        value = float(raw)
        if value < 0 or value != value:
            raise ValueError
    except ValueError:
        from compstack.core.errors import UserError

        raise UserError(f"COMPSTACK_DAEMON_IDLE_S: '{raw}' is not a number of seconds >= 0") from None
    return value


def daemon_key(env: dict[str, str] | None = None) -> str:
    """The name of the server that may run this process's jobs (16 hex digits).

    A SHA-256 over the interpreter (path, version), every file of the compstack package
    (relative path, size, mtime in ns), the site-packages folders (path, mtime: installing
    or removing a package changes it) and the environment (``PYTHONPATH`` included)
    without :data:`VOLATILE_ENV`, :data:`VOLATILE_PREFIXES`, :data:`FRAMEWORK_ENV` and the
    names listed in ``COMPSTACK_DAEMON_IGNORE_ENV`` (comma-separated: variables of the
    user's that change no job). Any other variable that differs gets its own daemon: a
    spare server costs memory, a wrong one would cost correct results. Not the current
    folder: workers never import from it.

    Args:
        env: the environment (default ``os.environ``).
    """
    import site
    import sysconfig

    env = dict(os.environ if env is None else env)
    code = []
    for path in sorted(_PKG.rglob("*")):
        if "__pycache__" in path.parts:
            continue
        with contextlib.suppress(OSError):
            st = path.stat()
            if stat.S_ISREG(st.st_mode):
                code.append((str(path.relative_to(_PKG)), st.st_size, st.st_mtime_ns))
    sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}
    with contextlib.suppress(AttributeError):
        sites.add(site.getusersitepackages())
    dirs = []
    for entry in sorted(sites):
        try:
            dirs.append((entry, os.stat(entry).st_mtime_ns))
        except OSError:
            dirs.append((entry, -1))
    ignore = {n.strip() for n in env.get("COMPSTACK_DAEMON_IGNORE_ENV", "").split(",") if n.strip()}
    kept = sorted((k, v) for k, v in env.items() if k not in VOLATILE_ENV and k not in FRAMEWORK_ENV
                  and k not in ignore and not k.startswith(VOLATILE_PREFIXES))
    blob = json.dumps({"python": [sys.executable, sys.version], "pkg": str(_PKG), "code": code, "path": dirs,
                       "env": kept})
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def socket_dir() -> Path:
    """The folder of the servers' sockets: ``$XDG_RUNTIME_DIR/compstack`` when that is set,
    else ``<tmp>/compstack-<uid>``; created with mode 0700.

    Raises:
        OSError: the folder exists but is not a folder owned by this user with no access
            for group or others (someone else could answer as the server).
    """
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    folder = Path(runtime) / "compstack" if runtime else Path(tempfile.gettempdir()) / f"compstack-{os.getuid()}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(f"{folder} is not a folder of this user's with mode 0700; not used for daemon sockets")
    return folder


def _send(conn: socket.socket, msg: dict[str, Any]) -> None:
    conn.sendall((json.dumps(msg, default=str) + "\n").encode())


def _recv_line(conn: socket.socket, buf: bytearray) -> dict[str, Any] | None:
    """The next JSON line on ``conn`` (None at EOF)."""
    while b"\n" not in buf:
        chunk = conn.recv(_RECV)
        if not chunk:
            return None
        buf += chunk
    line, _, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


def _connect(path: Path, timeout: float | None = 5.0) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(timeout)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        raise
    return conn


def keyed_env() -> dict[str, str]:
    """The environment a new server is started with: ``os.environ`` with each of
    :data:`FRAMEWORK_ENV` as it was when compstack was imported
    (:data:`compstack.core.ENV_AT_IMPORT`), so its workers see what a fresh process would
    even when this command imported JAX (say, to export a zoo model)."""
    from compstack.core import ENV_AT_IMPORT

    env = dict(os.environ)
    for name in FRAMEWORK_ENV:
        if name in ENV_AT_IMPORT:
            env[name] = ENV_AT_IMPORT[name]
        else:
            env.pop(name, None)
    return env


def _local_only(job: Job) -> bool:
    """A job whose code comes from a user's file: run it on a fresh process, never on a
    long-lived worker (which would keep the first version of the file imported)."""
    return bool(job.file_source) or any(o.startswith("file:") for o in job.op_origins)


def _absolute(job: Job) -> Job:
    """``job`` with every path made absolute against this process's folder (the server works in ``/``)."""
    def ab(p: str | None) -> str | None:
        return str(Path(p).absolute()) if p else p

    return replace(job, model_path=ab(job.model_path) or "", inputs_path=ab(job.inputs_path) or "",
                   workdir=ab(job.workdir) or "", cache_dir=ab(job.cache_dir), artifact_dir=ab(job.artifact_dir),
                   stages_dir=ab(job.stages_dir), canonical_path=ab(job.canonical_path) or "")


class DaemonExecutor(Executor):
    """Runs jobs on the background server of this environment (see the module docstring),
    starting it when none answers.

    Args:
        idle_s: the idle time of a server this executor starts (default
            ``COMPSTACK_DAEMON_IDLE_S`` or :data:`IDLE_S`; a running server keeps its own);
            0 keeps no server: the jobs run on an in-command pool.
        start_timeout_s: seconds a new server may take to listen.
    """

    name = "daemon"

    def __init__(self, idle_s: float | None = None, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.idle_s = _idle_s() if idle_s is None else idle_s
        from compstack.run.pool import memory_floor_mb

        memory_floor_mb()  # UserError here, in the command: the server reads the same variable
        self.start_timeout_s = start_timeout_s
        self._fallback: Executor | None = None
        self._process: ProcessExecutor | None = None
        self.socket_path: Path | None = None

    def _server(self) -> Path:
        """The socket of this environment's server, started (under a lock, so two commands
        start one) when none answers.

        Raises:
            OSError: unsafe socket folder, or the server did not start in time.
        """
        folder = socket_dir()
        key = daemon_key()
        path = folder / f"{key}.sock"
        if len(os.fsencode(path)) > _SUN_PATH_MAX:
            raise OSError(f"socket path {path} is {len(os.fsencode(path))} bytes, over the {_SUN_PATH_MAX} a Unix "
                          "socket allows; set XDG_RUNTIME_DIR to a shorter folder")
        with contextlib.suppress(OSError):
            _connect(path).close()
            return path
        with open(folder / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with contextlib.suppress(OSError):
                _connect(path).close()
                return path
            path.unlink(missing_ok=True)  # a dead server's socket
            log_path = folder / f"{key}.log"
            big = log_path.exists() and log_path.stat().st_size > _LOG_KEEP
            with open(log_path, "wb" if big else "ab") as log:  # the child keeps its own descriptor
                proc = popen(python_module_argv("compstack.run.daemon_server", "--serve", str(path),
                                                "--idle", repr(self.idle_s)),
                             stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                             env=keyed_env(), detached=True)  # not tied to this command: it outlives it
            deadline = time.monotonic() + self.start_timeout_s
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise OSError(f"daemon exited with status {proc.returncode} while starting "
                                  f"(see {folder / f'{key}.log'})")
                with contextlib.suppress(OSError):
                    _connect(path).close()
                    return path
                time.sleep(0.02)
            proc.kill()
            raise OSError(f"daemon did not listen within {self.start_timeout_s:g} s")

    def _fall_back(self, why: str) -> Executor:
        if self._fallback is None:
            print(f"compstack: daemon executor unavailable ({why}); using an in-command pool", file=sys.stderr)
            self._fallback = PoolExecutor()
        return self._fallback

    def run(self, job: Job, limits: Limits = Limits()) -> JobOutcome:
        if _local_only(job):
            self._process = self._process or ProcessExecutor()
            return self._process.run(job, limits)
        if self._fallback is None and self.idle_s == 0:  # COMPSTACK_DAEMON_IDLE_S=0: keep nothing after the command
            self._fallback = PoolExecutor()
        if self._fallback is not None:
            return self._fallback.run(job, limits)
        conn = None
        for _ in range(2):  # a server may leave (idle) between two jobs: start a new one once
            try:
                self.socket_path = self.socket_path or self._server()
                conn = _connect(self.socket_path)
                break
            except OSError as exc:
                self.socket_path, why = None, str(exc)
        if conn is None:
            return self._fall_back(why).run(job, limits)
        job = _absolute(job)
        with conn:
            reply, error = self._exchange(conn, job, limits)
        if reply == "not accepted":
            self.socket_path = None
            return self._fall_back(error).run(job, limits)
        if not isinstance(reply, dict) or "outcome" not in reply:
            return JobOutcome(target=job.target, status="crashed", stage="import",
                              error=(reply or {}).get("error", error) if isinstance(reply, dict) else error)
        return JobOutcome.from_json(reply["outcome"])

    @staticmethod
    def _exchange(conn: socket.socket, job: Job, limits: Limits) -> tuple[Any, str]:
        """Send the job; wait :data:`ACCEPT_TIMEOUT_S` for the server to accept it, then
        for its outcome, hearing a heartbeat at least every :data:`SILENT_S` seconds (the
        server enforces the job's own limits). Returns ``(reply or None or "not accepted",
        why there is no outcome)``."""
        buf = bytearray()
        accepted = False
        try:
            conn.settimeout(ACCEPT_TIMEOUT_S)
            _send(conn, {"op": "run", "job": asdict(job), "limits": asdict(limits)})
            ack = _recv_line(conn, buf)
            if not (isinstance(ack, dict) and ack.get("accepted")):
                why = ack.get("error", "") if isinstance(ack, dict) else ""
                return "not accepted", why or "the daemon closed the connection before accepting the job"
            accepted = True
            conn.settimeout(SILENT_S)
            reply = _recv_line(conn, buf)
            while isinstance(reply, dict) and reply.get("alive"):
                if isinstance(reply.get("stage"), str):  # the job's stage, for a progress display
                    events.emit(reply["stage"])
                reply = _recv_line(conn, buf)
        except socket.timeout:
            if not accepted:
                return "not accepted", f"the daemon did not accept the job within {ACCEPT_TIMEOUT_S:g} s"
            return None, f"the daemon stopped answering (nothing for {SILENT_S:g} s while the job ran)"
        except OSError as exc:
            return (None if accepted else "not accepted"), f"lost the daemon ({exc})"
        return reply, "the daemon closed the connection without an answer (it died or was stopped)"

    def close(self) -> None:
        """Release this command's side only; the server and its workers stay for the next command."""
        if self._fallback is not None:
            self._fallback.close()
            self._fallback = None


EXECUTORS["daemon"] = DaemonExecutor


def _request(path: Path, msg: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    try:
        with _connect(path, timeout) as conn:
            _send(conn, msg)
            return _recv_line(conn, bytearray())
    except (OSError, ValueError):
        return None


def _sockets() -> Iterator[Path]:
    try:
        folder = socket_dir()
    except OSError:
        return
    yield from sorted(folder.glob("*.sock"))


def install() -> dict[str, str]:
    """What a daemon belongs to: ``python`` (the interpreter, ``sys.executable``), ``prefix``
    (its venv or installation, ``sys.prefix``) and ``compstack`` (the package folder). Two
    processes with the same three are one *install*; their daemons may still differ in key
    (environment variables, see :func:`daemon_key`)."""
    return {"python": sys.executable, "prefix": sys.prefix, "compstack": str(_PKG)}


def list_daemons() -> list[dict[str, Any]]:
    """Every server of this user that answers: its ``status`` (``pid``, ``key``,
    ``uptime_s``, ``idle_s``, ``idle_exit_s``, ``jobs``, ``workers`` (``target_ref``,
    ``threads``, ``pid``, ``rss_mb``, ``busy``), and :func:`install`'s ``python``, ``prefix``,
    ``compstack``, absent from a server older than them) plus ``current``: whether it serves
    this process's environment (:func:`daemon_key`), and ``this_install``: whether it
    belongs to this install (a server that does not say is not)."""
    here, mine = daemon_key(), install()
    found = []
    for path in _sockets():
        status = _request(path, {"op": "status"})
        if status is not None:
            found.append({**status, "current": path.stem == here,
                          "this_install": all(status.get(k) == v for k, v in mine.items())})
    return found


def stop_daemons(current_only: bool = False, scope: str = "all") -> list[dict[str, Any]]:
    """Stop servers of this user; returns the status of each one stopped, once its socket
    is gone (at most 10 s each). A server kills its workers as it leaves.

    Args:
        current_only: only this environment's server (``scope="current"``; kept for callers
            before ``scope``).
        scope: ``all`` (every server of this user), ``install`` (those of this install,
            :func:`install`), ``current`` (this environment's, :func:`daemon_key`).

    Raises:
        ValueError: an unknown ``scope``.
    """
    scope = "current" if current_only else scope
    if scope not in ("all", "install", "current"):
        raise ValueError(f"stop_daemons: scope {scope!r} is not all, install or current")
    here = daemon_key()
    mine = {d["socket"] for d in list_daemons() if d.get("this_install")} if scope == "install" else set()
    stopped = []
    for path in _sockets():
        if (scope == "current" and path.stem != here) or (scope == "install" and str(path) not in mine):
            continue
        status = _request(path, {"op": "stop"})
        if status is not None:
            stopped.append(status)
            deadline = time.monotonic() + 10.0
            while path.exists() and time.monotonic() < deadline:  # it unlinks its socket on the way out
                time.sleep(0.02)
    return stopped
