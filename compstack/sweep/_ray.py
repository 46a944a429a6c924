"""The Ray executor: each job is a Ray task that runs compstack's own isolated worker.

``import ray`` happens only when a :class:`RayExecutor` is made. Design:

* **Isolation and limits.** A Ray task (``max_calls=1``: a fresh Ray worker process per
  task; ``max_retries=0``: a crash is recorded, never retried) calls
  :class:`compstack.run.executors.ProcessExecutor`, which starts ``python -P -m compstack.run.worker`` under
  the same wall-clock and memory limits as locally and returns the
  :class:`~compstack.run.jobs.JobOutcome` as plain data. Ray's ``memory=`` only reserves for
  scheduling; the limit itself is the runner's. A segfault or hang kills the grandchild,
  not the Ray worker, so it costs one row. The Ray worker imports only compstack, never
  the user's code (which runs, if at all, in the ``-P`` worker, as locally).
* **Data.** The stacks' model file (with its store manifest, so the worker verifies it),
  the canonical model and the input sets travel through Ray's **object store** (``ray.put``
  once per model); a task writes them to a node-local folder
  (``<tmp>/compstack-ray-<sweep>/``) and returns the outputs ``.npz`` as bytes. No shared
  file system is needed. The artifact cache is each node's own ``--cache-dir`` path (shared
  only when that path is on a shared file system). Results are written by the driver.
* **Scheduling.** At most one task per free CPU slot is in flight, so a submitted task
  should start at once: one that has not finished ``timeout + start grace`` seconds after
  submission is cancelled and becomes a ``timeout`` row saying so (a task no node can take
  would otherwise stay pending forever). The ``memory`` reserved is the job's limit capped
  at the largest node's schedulable memory (so the default limit, 75 % of RAM, still
  schedules); with no CPU on any node the rows fail at once. Latency jobs run one at a
  time per node (node affinity).
* **Hygiene.** ``ray.init`` gets ``_temp_dir`` under the system temp folder (not
  ``/tmp/ray``), ``include_dashboard=False``, ``log_to_driver=False``; usage stats are
  off (``RAY_USAGE_STATS_ENABLED=0``).
* **A local cluster is the user's only** (issue #27, class 0). It listens on 127.0.0.1
  only (:func:`_loopback_only`) and requires Ray's token authentication with a fresh
  token in the 0700 session folder, mode 0600 (:func:`_local_auth`; never
  ``~/.ray/auth_token``), so another local user can neither reach it from another host
  nor call its GCS, raylet or workers from this one. An external cluster
  (``--ray-address``) is the user's choice: compstack trusts whoever can submit to it. The driver's current folder is not put on the Ray workers'
  ``sys.path`` (``ray.init`` runs from the temp folder).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from compstack.core.errors import UserError
from compstack.run.executors import Limits
from compstack.run.jobs import Job, JobOutcome

__all__ = ["RAY_EXTRA_HINT", "RayExecutor"]

RAY_EXTRA_HINT = 'the ray executor needs Ray: pip install -e ".[ray]"'

#: Seconds a task may take to start (a fresh Ray worker imports compstack) on top of the job's limit.
START_GRACE_S = 60.0
#: Seconds ``ray.init(address=...)`` may take before the address is called unreachable.
CONNECT_TIMEOUT_S = 10.0
#: Seconds a TCP connection to ``--ray-address`` may take before it is called unreachable.
PROBE_TIMEOUT_S = 3.0
#: The only address a local cluster's GCS, raylet and workers listen on.
LOCAL_HOST = "127.0.0.1"
_AUTH_VARS = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


def _local_auth(folder: Path) -> dict[str, str | None]:
    """Token authentication for a local cluster (issue #27, class 0): a fresh random token
    in ``folder/auth_token`` (mode 0600, in the 0700 session folder), named to Ray by
    ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` (Ray's token-auth settings; its
    processes inherit them); never ``~/.ray/auth_token``. Returns the previous values of
    those variables, which :meth:`RayExecutor.close` restores."""
    import secrets

    path = folder / "auth_token"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_hex(32))
    saved = {k: os.environ.get(k) for k in _AUTH_VARS}
    os.environ.pop("RAY_AUTH_TOKEN", None)  # a token in the environment would win over the file
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(path))
    _refresh_auth()
    return saved


def _refresh_auth() -> None:
    """Make this process's Ray core read the token settings again (its config and token
    are cached at import; Ray's own ``_enable_token_auth`` does the same)."""
    try:
        from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]  # Ray 2.60 has them; its stubs do not
    except ImportError:  # a Ray without token authentication: the cluster refuses to start
        return
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@contextlib.contextmanager
def _loopback_only(ray: Any) -> Iterator[None]:
    """While a local cluster starts: its node address is the loopback one, so its GCS,
    raylet, object manager and workers listen on 127.0.0.1 only (issue #27, class 0).

    ``ray.init(_node_ip_address="127.0.0.1")`` is not enough: Ray turns a loopback
    address into the machine's reachable one (``services.resolve_ip_for_localhost``)
    unless multi-node clusters are off (``ray_constants.ENABLE_RAY_CLUSTER``, Ray's switch
    for single-node macOS/Windows clusters, env ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``),
    which this switches off for the start only.
    """
    constants = ray._private.ray_constants
    saved = constants.ENABLE_RAY_CLUSTER
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UserError(RAY_EXTRA_HINT) from None
    return ray


def _folder_files(path: str) -> dict[str, bytes]:
    """Every file of a model store entry (the model and its manifest)."""
    if not path:
        return {}
    folder = Path(path).parent
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}


def _materialize(root: Path, name: str, files: dict[str, bytes]) -> str:
    """Write a shipped store entry under ``root/models/<name>`` once; returns the model path."""
    folder = root / "models" / name
    if not (folder / "model.onnx").exists():
        staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        for fname, data in files.items():
            (staging / fname).write_bytes(data)
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging, folder)
        except OSError:  # another task of this node wrote it first
            import shutil

            shutil.rmtree(staging, ignore_errors=True)
    return str(folder / "model.onnx")


def ray_job_task(job_data: dict[str, Any], limits_data: dict[str, Any], sweep_id: str,
                 model_files: dict[str, bytes], canonical_files: dict[str, bytes],
                 inputs: bytes) -> tuple[dict[str, Any], bytes | None, str]:
    """The body of a Ray task: rebuild the job on this node, run it isolated, return
    ``(outcome as a dict, outputs .npz bytes or None, the node's host name)``."""
    import shutil
    import socket
    import uuid

    from compstack.run.executors import ProcessExecutor

    root = Path(tempfile.gettempdir()) / f"compstack-ray-{sweep_id}"
    root.mkdir(parents=True, exist_ok=True)
    job = Job(**job_data)
    job.model_path = _materialize(root, Path(job.model_path).parent.name, model_files)
    if job.canonical_path:
        job.canonical_path = _materialize(root, Path(job.canonical_path).parent.name, canonical_files)
    work = root / "jobs" / uuid.uuid4().hex
    work.mkdir(parents=True)
    (work / "inputs.npz").write_bytes(inputs)
    job.inputs_path = str(work / "inputs.npz")
    job.workdir = str(work / "job")
    try:
        t0 = time.monotonic()
        outcome = ProcessExecutor().run(job, Limits(**limits_data))
        outcome.extra["isolated_s"] = time.monotonic() - t0
        outputs = job.outputs_path.read_bytes() if job.outputs_path.exists() else None
        return asdict(outcome), outputs, socket.gethostname()
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Send file descriptor 2 to a temporary file while connecting (Ray's retry logs)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)


def _probe(address: str) -> None:
    """A ``HOST:PORT`` (or ``ray://HOST:PORT``) that accepts no TCP connection within a
    few seconds is unreachable: say so in one line before Ray retries it for long.

    Raises:
        UserError: the address is malformed or refuses/ignores connections.
    """
    import socket

    if address == "auto":
        return
    hostport = address.split("://", 1)[-1]
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(f"--ray-address {address}: expected auto or HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=PROBE_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(f"--ray-address {address}: unreachable ({exc.strerror or type(exc).__name__ or exc})") from None


class RayExecutor:
    """Jobs as Ray tasks (see the module docstring).

    Args:
        address: ``None`` starts a local cluster (``ray.init()``); ``auto`` or
            ``HOST:PORT`` joins an existing one.
        num_cpus: CPUs of a local cluster (default: the machine's).
        temp_root: parent of Ray's session folder (default: the system temp folder).
        sweep_id: names the node-local data folder of the tasks.

    Raises:
        UserError: Ray is not installed (one line naming the extra), or the address
            cannot be reached within :data:`CONNECT_TIMEOUT_S` seconds.
    """

    name = "ray"

    def __init__(self, address: str | None = None, num_cpus: int | None = None, temp_root: Path | None = None,
                 sweep_id: str = "") -> None:
        self.ray = _import_ray()
        self.address = address
        self.sweep_id = sweep_id or f"{os.getpid()}-{os.urandom(4).hex()}"
        self._shipped: dict[str, Any] = {}
        self.hosts: dict[str, int] = {}
        self.round_trips: list[float] = []
        self._memory = 0
        try:
            self._init(num_cpus, temp_root)
        except BaseException:  # a cluster that did not start: its token, folder and settings go
            self.close()
            raise
        self._remote = self.ray.remote(max_calls=1)(ray_job_task)

    def _init(self, num_cpus: int | None, temp_root: Path | None) -> None:
        ray = self.ray
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.temp_dir: Path | None = None
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                                  "ignore_reinit_error": True, "configure_logging": False}
        if self.address is None:
            self.temp_dir = Path(tempfile.mkdtemp(prefix="compstack-ray-", dir=temp_root))
            self._env = _local_auth(self.temp_dir)
            kwargs.update(_temp_dir=str(self.temp_dir), num_cpus=num_cpus or os.cpu_count() or 1,
                          _node_ip_address=LOCAL_HOST)
        else:
            kwargs["address"] = self.address
            _probe(self.address)
        box: dict[str, Any] = {}
        here = os.getcwd()

        def connect() -> None:
            try:
                box["ctx"] = ray.init(**kwargs)
            except BaseException as exc:  # noqa: BLE001 - reported below as one line
                box["error"] = exc

        os.chdir(self.temp_dir or tempfile.gettempdir())  # Ray puts the cwd on its workers' sys.path
        try:
            if self.address is None:
                # in this thread: Ray ties its GCS and raylet to the starting thread (PR_SET_PDEATHSIG)
                with _loopback_only(ray):
                    connect()
                t = None
            else:  # joining starts no process: a thread bounds the wait on an unreachable address
                t = threading.Thread(target=connect, daemon=True)
                with _quiet_stderr():  # Ray's C++ client logs every retry on fd 2
                    t.start()
                    t.join(CONNECT_TIMEOUT_S)
        finally:
            os.chdir(here)
        if t is not None and t.is_alive():
            raise UserError(f"--ray-address {self.address}: no Ray cluster answered within "
                            f"{CONNECT_TIMEOUT_S:g} s")
        if "error" in box:
            exc = box["error"]
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            where = f"--ray-address {self.address}" if self.address else "ray.init()"
            raise UserError(f"{where}: cannot start or reach a Ray cluster ({type(exc).__name__}: {first})")

    def _nodes(self) -> list[dict[str, Any]]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def describe(self) -> dict[str, Any]:
        nodes = self._nodes() if self.ray.is_initialized() else []
        cpus = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in nodes)
        rt = sorted(self.round_trips)
        return {"name": self.name, "address": self.address or "local", "nodes": len(nodes), "slots": cpus,
                "hosts": dict(self.hosts),
                "task_overhead_ms_median": rt[len(rt) // 2] * 1e3 if rt else None}

    def _ship(self, path: str, kind: str) -> Any:
        key = f"{kind}:{path}"
        if key not in self._shipped:
            data: Any = _folder_files(path) if kind != "inputs" else Path(path).read_bytes()
            self._shipped[key] = self.ray.put(data)
        return self._shipped[key]

    def _submit(self, job: Job, limits: Limits, node: str | None) -> Any:
        from dataclasses import asdict as _asdict

        opts: dict[str, Any] = {"num_cpus": 1, "max_retries": 0}
        if self._memory:
            opts["memory"] = self._memory
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            opts["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
        return self._remote.options(**opts).remote(
            _asdict(job), _asdict(limits), self.sweep_id, self._ship(job.model_path, "model"),
            self._ship(job.canonical_path, "canonical") if job.canonical_path else {},
            self._ship(job.inputs_path, "inputs"))

    def _too_big(self, limits: Limits) -> str:
        """Why no node can ever take these tasks (then they are not submitted), or ``""``."""
        if not any(n.get("Resources", {}).get("CPU", 0) >= 1 for n in self._nodes()):
            return "no node of the Ray cluster has a CPU to run a task on"
        return ""

    def _reservation(self, limits: Limits) -> int:
        """Bytes of Ray ``memory`` to reserve: the job's limit, capped at the largest node's
        schedulable memory (a reservation only steers scheduling; the runner enforces the
        limit, and a task asking for more than any node has would stay pending forever)."""
        if not limits.memory_mb:
            return 0
        most = max((n.get("Resources", {}).get("memory", 0) for n in self._nodes()), default=0)
        want = limits.memory_mb * 2**20
        return int(min(want, most)) if most else 0

    def run(self, jobs: list[tuple[Any, Job]], limits: Limits, exclusive: bool,
            on_start: Callable[[Any], None], on_done: Callable[[Any, JobOutcome], None],
            more: Callable[[], list[tuple[Any, Job]] | None] | None = None) -> None:
        """Run ``jobs`` as Ray tasks, at most one per CPU slot (``exclusive``: one per node);
        then those ``more`` returns (see :meth:`compstack.sweep.LocalExecutor.run`), asked
        for whenever a slot is free and nothing waits."""
        ray = self.ray
        too_big = self._too_big(limits)
        if too_big:
            while True:
                for key, job in jobs:
                    on_start(key)
                    on_done(key, JobOutcome(target=job.target, status="failed", stage="import", error=too_big))
                nxt = more() if more is not None else None
                if nxt is None:
                    return
                jobs = nxt
        self._memory = self._reservation(limits)
        nodes = [n["NodeID"] for n in self._nodes()]
        if exclusive:
            free: list[str | None] = list(nodes)
        else:
            slots = sum(int(n.get("Resources", {}).get("CPU", 0)) for n in self._nodes()) or 1
            free = [None] * slots
        todo = list(jobs)
        flying: dict[Any, tuple[Any, Job, float, str | None]] = {}
        deadline_s = limits.timeout_s + START_GRACE_S
        try:
            while todo or flying or more is not None:
                while more is not None and not todo and free:  # prepare the next jobs while these run
                    nxt = more()
                    if nxt is None:
                        more = None
                    todo.extend(nxt or [])
                if not todo and not flying:
                    continue
                while todo and free:
                    key, job = todo.pop(0)
                    node = free.pop()
                    on_start(key)
                    flying[self._submit(job, limits, node)] = (key, job, time.monotonic(), node)
                ready, _ = ray.wait(list(flying), num_returns=1, timeout=0.5)
                for ref in ready:
                    key, job, t0, node = flying.pop(ref)
                    free.append(node)
                    on_done(key, self._collect(ref, job, t0))
                now = time.monotonic()
                for ref, (key, job, t0, node) in list(flying.items()):
                    if now - t0 > deadline_s:
                        ray.cancel(ref, force=True)
                        flying.pop(ref)
                        free.append(node)
                        on_done(key, JobOutcome(
                            target=job.target, status="timeout", stage="import",
                            error=f"Ray task did not finish {deadline_s:g} s after submission (job limit "
                                  f"{limits.timeout_s:g} s + {START_GRACE_S:g} s to start): pending or lost; "
                                  "cancelled (does any node have the resources it asks for?)"))
        except BaseException:
            for ref in flying:
                ray.cancel(ref, force=True)
            raise

    def _collect(self, ref: Any, job: Job, t0: float) -> JobOutcome:
        """The task's outcome; its outputs written where the driver reads them."""
        try:
            data, outputs, host = self.ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - the Ray worker died: the row says so
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
            return JobOutcome(target=job.target, status="crashed", stage="import",
                              error=f"Ray task failed ({type(exc).__name__}): {first}")
        outcome = JobOutcome(**data)
        wall = time.monotonic() - t0
        outcome.extra["ray_host"] = host
        outcome.extra["ray_wall_s"] = wall
        self.hosts[host] = self.hosts.get(host, 0) + 1
        if "isolated_s" in outcome.extra:
            self.round_trips.append(wall - outcome.extra["isolated_s"])
        if outputs is not None:
            Path(job.workdir).mkdir(parents=True, exist_ok=True)
            job.outputs_path.write_bytes(outputs)
        return outcome

    def close(self) -> None:
        """Shut Ray down (and remove a local cluster's session folder)."""
        import shutil

        if self.ray.is_initialized():
            self.ray.shutdown()
        for k, v in getattr(self, "_env", {}).items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if getattr(self, "_env", None):
            _refresh_auth()
        if self.temp_dir is not None:
            shutil.rmtree(self.temp_dir, ignore_errors=True)
        root = Path(tempfile.gettempdir()) / f"compstack-ray-{self.sweep_id}"
        shutil.rmtree(root, ignore_errors=True)
