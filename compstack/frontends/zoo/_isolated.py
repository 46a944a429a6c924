"""A real-tier zoo model built and exported in a worker process (issue #23, parts 4 and 6).

:func:`compstack.frontends.zoo.load` calls :func:`export_zoo_isolated` on a cache miss: the
worker (:func:`main`, started by :func:`compstack.frontends._pyworker.supervise` with the
current folder off ``sys.path``) runs the library constructor, ``torch.export`` and the ONNX
exporter, and writes the zoo cache entry; the caller then reads that entry. torch's memory
for a 100 M-parameter build and export (several GB, which torch's allocator does not give
back) leaves with the worker, so a sweep of the tier holds one exported model at a time, and
the command's own process never imports torch for it.
"""

from __future__ import annotations

import json
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from compstack.core.errors import ExportError, UserError
from compstack.frontends._pyworker import supervise

__all__ = ["ZOO_EXPORT_TIMEOUT_S", "export_zoo_isolated", "main"]

#: Wall-clock limit of one real-tier export in its worker, seconds: a 500 M-parameter
#: decoder's build and export takes minutes on a loaded 2-core machine.
ZOO_EXPORT_TIMEOUT_S = 3600.0

_BOOT = ("import sys; del sys.path[0]; from compstack.frontends.zoo._isolated import main; "
         "sys.exit(main(sys.argv[1:]))")


def export_zoo_isolated(short: str, cache_root: Path, timeout_s: float = ZOO_EXPORT_TIMEOUT_S,
                        rebuild: bool = False) -> int:
    """Build and export the real-tier zoo model ``short`` into the zoo cache under
    ``cache_root`` in a worker process (:func:`compstack.frontends.zoo.load` with
    ``isolated=False`` there, and ``rebuild``); the caller reads the entry the worker wrote.

    Returns:
        The worker's peak resident memory (its process tree), bytes.

    Raises:
        ExportError: the builder, ``torch.export`` or the ONNX exporter failed (the stage
            and one line, from the worker; status ``failed``), or the worker passed
            ``timeout_s`` (status ``timeout``), exited without a word or died by a signal
            (status ``crashed``; stage ``build``).
    """
    out = Path(tempfile.mkdtemp(prefix="compstack-zoo-export-"))
    try:
        status, rc, peak = supervise(f"zoo:{short}", out, timeout_s, 0, 0.2, extra=[str(cache_root), *(["--rebuild"] if rebuild else [])], boot=_BOOT)
        if (out / "error.json").exists():
            err = json.loads((out / "error.json").read_text())
            raise ExportError(err["error"], err.get("stage", "build"))
        if status == "timeout":
            raise ExportError(f"zoo:{short}: the export was still running after {timeout_s:g} s", "build", "timeout")
        if rc != 0 or not (out / "done").exists():
            how = f"died by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}"
            if rc == -signal.SIGKILL:
                how += " (possibly the kernel's OOM killer)"
            tail = " ".join((out / "worker.log").read_text(errors="replace").split()[-30:])
            raise ExportError(f"zoo:{short}: the export worker {how} (peak {peak / 2**20:.0f} MiB): {tail}", "build",
                              "crashed")
        return peak
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str]) -> int:
    """The worker: ``zoo:NAME OUT CACHE_ROOT [--rebuild]``; writes ``OUT/done``, or
    ``OUT/error.json`` with the error's line and stage."""
    from compstack.frontends import zoo

    spec, out, cache_root = argv[0], Path(argv[1]), Path(argv[2])
    try:
        zoo.load(spec.removeprefix("zoo:"), cache_dir=cache_root, isolated=False, rebuild="--rebuild" in argv[3:])
    except UserError as exc:
        line = str(exc).splitlines()[0] if str(exc) else "error"
        stage = exc.stage if isinstance(exc, ExportError) else "build"
        (out / "error.json").write_text(json.dumps({"error": line, "stage": stage}))
        return 0
    except Exception as exc:  # noqa: BLE001 - whose code raised decides the stage, hence the fault
        (out / "error.json").write_text(json.dumps(_unexpected(spec, exc)))
        return 0
    (out / "done").write_text("ok")
    return 0


def _unexpected(spec: str, exc: BaseException) -> dict[str, str]:
    """An exception no stage caught: ``import`` (compstack's, :mod:`compstack.analysis.fault`)
    when its innermost traceback frame is in compstack's own code outside the model builders
    (``frontends/zoo/_real_build.py`` holds model code), else ``build`` (the libraries'
    constructors and exporters)."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = frames[-1] if frames else None
    ours = where is not None and "/compstack/" in where.filename.replace("\\", "/") \
        and not where.filename.endswith("_real_build.py")
    at = f" (at {where.filename.rsplit('/compstack/', 1)[-1]}:{where.lineno})" if where is not None and ours else ""
    msg = (str(exc).splitlines() or [""])[0][:300]
    return {"error": f"{spec}: {type(exc).__name__}: {msg}{at}", "stage": "import" if ours else "build"}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
