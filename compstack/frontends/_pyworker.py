"""Run a user's ``file.py:function`` in a worker process, under the run's time and memory
limits, and bring the imported model back.

The user's module import and function call (and the torch/JAX export after it) run in
a worker (:func:`main` with ``SPEC OUT``, the current folder off ``sys.path``) in a new
session, polled like a target's job (:mod:`compstack.run.runner`): past ``--timeout`` or
``--memory-limit`` the worker's process group is killed. The worker writes into the folder ``OUT``:

* ``model.onnx`` (the canonical common IR; external data beside it when large),
  ``examples.npz`` (the example inputs) and ``source.json`` (name, origin, framework,
  value ranges), or
* ``error.json``: the one-line :class:`~compstack.core.errors.UserError` it raised.

Whatever the user's code prints goes to ``OUT/worker.log``, not to the terminal (so
``--json`` stdout stays clean and a framework's own traceback never precedes
compstack's line). A worker that loops, eats memory, calls ``os._exit`` or dies by a
signal becomes one :class:`~compstack.core.errors.UserError` naming ``file.py:function``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from compstack.core import ir as cir
from compstack.core.errors import UserError

__all__ = ["import_isolated", "supervise"]

_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the compstack package


#: The worker's entry: the current folder leaves ``sys.path`` first (like ``python -P``,
#: which Python 3.10 lacks), so nothing there shadows compstack or a library.
_BOOT = ("import sys; del sys.path[0]; from compstack.frontends._pyworker import main; "
         "sys.exit(main(sys.argv[1:]))")


def _display(spec: str) -> str:
    path, _, func = spec.rpartition(":")
    return f"{Path(path).name}:{func}"


def import_isolated(spec: str, timeout_s: float, memory_mb: int, poll_s: float = 0.05,
                    partial: bool = False) -> cir.SourceModel:
    """Import ``spec`` (``file.py:function``) in a worker process.

    Args:
        spec: ``path/to/file.py:function``.
        timeout_s: wall-clock limit of the import, seconds (``--timeout``).
        memory_mb: resident-memory limit of the worker and its children, MiB (0: none).
        partial: see :func:`compstack.frontends.sources.resolve_model`.

    Returns:
        The :class:`~compstack.core.ir.SourceModel` the worker imported (``native`` is None:
        a framework program does not cross processes; target workers rebuild it).

    Raises:
        UserError: what the in-process import would raise, or the function (or its
            module's import) passed the time or memory limit, exited, or crashed.
    """
    out = Path(tempfile.mkdtemp(prefix="compstack-pyfile-"))
    keep = False
    try:
        status, rc, peak = supervise(spec, out, timeout_s, memory_mb, poll_s, partial)
        name = _display(spec)
        if status == "timeout":
            phase = ((out / "phase").read_text() if (out / "phase").exists() else
                     f"the worker's start, before {Path(spec.rpartition(':')[0]).name} ran")
            raise UserError(f"{name}: still running after {timeout_s:g} s (--timeout {timeout_s:g}) in {phase}")
        if status == "oom":
            raise UserError(f"{name}: used {peak / 2**20:.0f} MiB of resident memory, past --memory-limit "
                            f"{memory_mb} (MiB) while it was imported")
        if (out / "error.json").exists():
            raise UserError(json.loads((out / "error.json").read_text())["error"])
        if not (out / "source.json").exists():
            if rc < 0:
                raise UserError(f"{name}: the process importing it died by {signal.Signals(-rc).name}")
            raise UserError(f"{name}: exited with status {rc} before returning a model (os._exit or sys.exit in "
                            "a thread, or a crash in native code)")
        source, keep = _read(out)
        return source
    finally:
        if keep:  # the model's external data is memory-mapped from here
            atexit.register(shutil.rmtree, out, True)
        else:
            shutil.rmtree(out, ignore_errors=True)


def supervise(spec: str, out: Path, timeout_s: float, memory_mb: int, poll_s: float,
              partial: bool = False, extra: list[str] | None = None, boot: str = _BOOT) -> tuple[str, int, int]:
    """Run the worker (``python -c boot SPEC OUT [--partial] [extra...]``, output in
    ``OUT/worker.log``) until it exits or passes a limit: ``(status, returncode, peak_rss)``
    (``exited``, ``timeout`` or ``oom``; the peak of the worker's process tree, bytes,
    sampled every ``poll_s`` seconds)."""
    from compstack.core.procs import kill_escaped, kill_group, popen, tree_rss_bytes

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (_ROOT, env.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-c", boot, spec, str(out), *(["--partial"] if partial else []), *(extra or [])]
    limit = memory_mb * 2**20
    peak, status = 0, "exited"
    with open(out / "worker.log", "wb") as log:
        # own session, death signal, recorded as ours (issue #27 class 5: SIGKILL on
        # compstack used to leave this worker running the user's code)
        proc = popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        t0 = time.monotonic()
        try:
            while proc.poll() is None:
                peak = max(peak, tree_rss_bytes(proc.pid))
                if time.monotonic() - t0 > timeout_s:
                    status = "timeout"
                elif limit and peak > limit:
                    status = "oom"
                if status != "exited":
                    break
                time.sleep(poll_s)
        finally:  # a limit, Ctrl-C or a bug here: never leave the user's code running
            kill_group(proc)
            proc.wait()
            kill_escaped()  # what build() started outside the worker's group (setsid, double fork)
    return status, proc.returncode, peak


def _read(out: Path) -> tuple[cir.SourceModel, bool]:
    """The SourceModel the worker wrote, and whether its external data lives in ``out``."""
    import onnx_ir as ir

    meta = json.loads((out / "source.json").read_text())
    model = ir.load(str(out / "model.onnx"))
    if meta.get("origins"):
        # the custom-op declarations the user's own file.py registered in the worker (the
        # file the user named), re-imported here; never read from the model's metadata
        from compstack.ops._registry import load_origins

        load_origins([str(o) for o in meta["origins"]])
    as_written = ir.load(str(out / "as_written.onnx")) if (out / "as_written.onnx").exists() else None
    examples: dict[str, np.ndarray] = {}
    if (out / "examples.npz").exists():
        from compstack.core.inputs import decode_arrays

        with np.load(out / "examples.npz", allow_pickle=False) as data:
            examples = decode_arrays({k: data[k] for k in data.files})
        examples = {k: (v.astype(object) if v.dtype.kind == "U" else v) for k, v in examples.items()}
    source = cir.SourceModel(name=meta["name"], model=model, example_inputs=examples,
                             val_ranges={k: (float(a), float(b)) for k, (a, b) in meta["val_ranges"].items()},
                             origin=meta["origin"], framework=meta["framework"], as_written=as_written,
                             import_error=str(meta.get("import_error", "")))
    return source, any(out.glob("model.onnx.data*"))


def _write(source: cir.SourceModel, out: Path) -> None:
    """What :func:`_read` reads (written by the worker)."""
    from compstack.core.inputs import save_npz
    from compstack.ops._registry import origins_for

    if source.as_written is not None:
        cir.save(source.as_written, out / "as_written.onnx")
    cir.save(source.model, out / "model.onnx", external_data=cir.prefers_external_data(source.model) or None)
    save_npz(out / "examples.npz", {k: (v.astype(str) if v.dtype == object else v)
                                    for k, v in source.example_inputs.items()})
    meta = {"name": source.name, "origin": source.origin, "framework": source.framework,
            "val_ranges": {k: list(v) for k, v in source.val_ranges.items()},
            "origins": origins_for(source.model), "import_error": source.import_error}
    tmp = out / "source.json.tmp"
    tmp.write_text(json.dumps(meta))
    os.replace(tmp, out / "source.json")


def main(argv: list[str]) -> int:
    """Worker entry point: ``python -m compstack.frontends._pyworker SPEC OUT``."""
    from compstack.frontends.from_pyfile import import_pyfile

    spec, out = argv[0], Path(argv[1])
    try:
        source = import_pyfile(spec, partial="--partial" in argv[2:],
                               on_phase=lambda what: (out / "phase").write_text(what))
        source.example_inputs = {k: np.asarray(v) for k, v in source.example_inputs.items()}
        _write(source, out)
    except UserError as exc:
        (out / "error.json").write_text(json.dumps({"error": str(exc).splitlines()[0] if str(exc) else "error"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
