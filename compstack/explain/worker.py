"""A long-lived evaluation worker: one target, many small models, one process.

``python -P -m compstack.explain.worker SPEC.json`` loads the target once, then reads
one JSON request a line on stdin, ``{"model": PATH, "inputs": NPZ, "outputs": NPZ,
"stages": DIR or null, "artifact": DIR or null}`` (or ``{"model": PATH, "passes": true}``:
the names of the passes that change the model, ``Target.applied_passes``), and answers on a private pipe with ``{"progress": STAGE}``
lines and one ``{"result": {"status", "stage", "error"}}`` (the protocol of
:mod:`compstack.run.worker` ``--serve``, so :class:`compstack.run.pool.WorkerProcess`
drives it, restarting it after a crash or hang). Explain compiles dozens of pieces of
one model; paying the stack's import once per target is what makes that affordable.

Modes (``spec["mode"]``):

* ``compile``: lower, compile and run on the target as a comparison would;
* ``eager``: for a target with a translated path (``table_module``), run compstack's
  translated JAX or FX program without the compiler (``jax.disable_jit()``; the FX
  ``GraphModule`` called directly): if that is already wrong, the bug is compstack's
  translation, not the stack's.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

__all__ = ["evaluate", "main"]


def evaluate(target: Any, request: dict[str, Any], mode: str, progress: Callable[[str], None]) -> dict[str, Any]:
    """Run one request (see the module docstring); never raises for the stack's sake."""
    import onnx_ir as ir

    from compstack.core.errors import UnavailableError, UnsupportedError
    from compstack.core.inputs import decode_arrays, encode_arrays
    from compstack.run.jobs import _first_line, write_stages

    stage = "import"
    try:
        progress(stage)
        model = ir.load(request["model"])
        if request.get("passes"):  # which passes change this model (Target.applied_passes)
            stage = "lower"
            progress(stage)
            return {"status": "ok", "stage": "", "error": "", "passes": target.applied_passes(model)}
        with np.load(request["inputs"], allow_pickle=False) as data:
            feeds = decode_arrays({k: data[k] for k in data.files})
        if mode == "eager":
            stage = "run"
            progress(stage)
            if not hasattr(target, "run_eager"):
                raise UnsupportedError(f"{target.name} has no translated program to run eagerly")
            outs = target.run_eager(model, feeds)
        else:
            stage = "lower"
            progress(stage)
            if request.get("stages"):  # the same target, built to record stages
                import dataclasses

                target = type(target)(target.options, dataclasses.replace(target.request, record_stages=True))
            lowered = target.lower(model)
            stage = "compile"
            progress(stage)
            compiled = lowered.compile()
            if request.get("stages"):
                write_stages(lowered, Path(request["stages"]), [], compiled)
            if request.get("artifact"):
                Path(request["artifact"]).mkdir(parents=True, exist_ok=True)
                compiled.save(Path(request["artifact"]))
            stage = "run"
            progress(stage)
            outs = compiled.run(feeds)
        np.savez(request["outputs"], **encode_arrays(outs))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
        return {"status": "ok", "stage": "", "error": ""}
    except UnsupportedError as exc:
        return {"status": "unsupported", "stage": stage, "error": str(exc)}
    except UnavailableError as exc:
        return {"status": "unavailable", "stage": stage, "error": str(exc)}
    except Exception as exc:  # noqa: BLE001 - the stack's failure is this request's outcome
        return {"status": "failed", "stage": stage, "error": _first_line(exc),
                "log": traceback.format_exc(limit=6)[-4000:]}


def main(argv: list[str] | None = None) -> int:
    """Worker entry point (see the module docstring)."""
    from compstack.run.jobs import load_target_class, prepare_worker

    spec = json.loads(Path((argv or sys.argv[1:])[0]).read_text())
    proto = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol pipe
    os.dup2(2, 1)  # whatever the stacks print goes to stderr
    sys.stdout = sys.stderr
    if spec.get("op_origins"):
        from compstack.ops._registry import load_origins

        load_origins(spec["op_origins"])
    cls = load_target_class(spec["target_ref"])
    prepare_worker(cls)
    avail = cls.availability()
    target = cls(cls.Options.from_strings(spec["options"]))
    proto.write(json.dumps({"ready": True, "versions": dict(avail.versions), "available": avail.ok,
                            "reason": avail.reason, "runs": avail.runs, "flags": target.flags()},
                           default=str) + "\n")

    def progress(stage: str) -> None:
        proto.write(json.dumps({"progress": stage}) + "\n")

    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            result = evaluate(target, json.loads(line), spec.get("mode", "compile"), progress)
        except Exception:  # noqa: BLE001 - compstack's own bug: report it for this request, keep serving
            result = {"status": "failed", "stage": "import", "error": "compstack error: " + traceback.format_exc(limit=3)}
        proto.write(json.dumps({"result": result}) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
