"""TensorFlow/Keras, PaddlePaddle and MindSpore models: ``file.py:build`` exported by the
framework's own exporter, in the framework's own process.

``build()`` returns ``(tf.keras.Model | tf.function, inputs)``, ``(paddle.nn.Layer, inputs)``
or ``(mindspore.nn.Cell, inputs)``, ``inputs`` an array or a tuple/list of arrays. These
frameworks cannot share a process with each other (TensorFlow then Paddle segfaults; Paddle
then MindSpore fails to load oneDNN), and Paddle's exporter pins an old onnx, so compstack
never imports them: :mod:`compstack.frontends._framework_worker` runs in the framework's
Python (``python -P``: the current folder is not on ``sys.path``, only the user's file's
folder is), with a time limit, and hands back ONNX + example inputs as files.

Which Python: TensorFlow runs in compstack's own (``pip install 'compstack[tensorflow]'``);
Paddle and MindSpore in their own environments, named by ``COMPSTACK_PADDLE_PYTHON`` /
``COMPSTACK_MINDSPORE_PYTHON`` (see :mod:`compstack.core.config`; created by
``scripts/setup_paddle_env.sh`` / ``scripts/setup_mindspore_env.sh``).

The framework is detected from the file's own ``import`` statements (read, not run):
``tensorflow``/``keras``/``tf_keras`` → ``tf``, ``paddle`` → ``paddle``, ``mindspore`` →
``mindspore``.

Provenance: each exporter names nodes after the framework's ops (tf2onnx:
``sequential/conv2d/convolution``, the Keras layer path; paddle2onnx: ``Conv.0``;
MindSpore: ``1Gemm``, op index and type, no cell path); the name is kept as
``compstack.source`` (``tf:sequential/conv2d/convolution``) and, for TensorFlow, its scope
as ``namespace``.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.core.procs import popen

__all__ = [
    "EXPORT_TIMEOUT_S",
    "FRAMEWORKS",
    "FrameworkInfo",
    "WorkerResult",
    "detect",
    "import_framework",
    "probe",
    "python_for",
    "run_framework",
]

#: Time limit of one export (framework import + build() + export), seconds.
EXPORT_TIMEOUT_S = 600.0
#: Opset asked of the exporters that take one (MindSpore always writes opset 11).
EXPORT_OPSET = 17

_WORKER = Path(__file__).with_name("_framework_worker.py")
#: Informational log lines of the frameworks' C++ (glog: ``I0000 00:00:...``), never the error.
_GLOG = re.compile(r"^\s*([IW]\d{4} \d\d:\d\d:|WARNING: All log messages before absl)")


@dataclass(frozen=True)
class FrameworkInfo:
    """One foreign framework.

    Attributes:
        name: ``tf``, ``paddle`` or ``mindspore`` (also the eager target's name).
        title: the display name.
        modules: top-level import names that mark a file as this framework's.
        env_var: the setting naming its Python, or ``""`` (runs in compstack's own).
        setup: how to get it, for the one-line message when it is missing.
    """

    name: str
    title: str
    modules: tuple[str, ...]
    env_var: str
    setup: str


FRAMEWORKS: dict[str, FrameworkInfo] = {
    "tf": FrameworkInfo("tf", "TensorFlow", ("tensorflow", "keras", "tf_keras"), "COMPSTACK_TF_PYTHON",
                        "pip install 'compstack[tensorflow]' (tensorflow-cpu, tf2onnx)"),
    "paddle": FrameworkInfo("paddle", "PaddlePaddle", ("paddle",), "COMPSTACK_PADDLE_PYTHON",
                            "scripts/setup_paddle_env.sh DIR, then export COMPSTACK_PADDLE_PYTHON=DIR/bin/python"),
    "mindspore": FrameworkInfo("mindspore", "MindSpore", ("mindspore",), "COMPSTACK_MINDSPORE_PYTHON",
                               "scripts/setup_mindspore_env.sh DIR, then export "
                               "COMPSTACK_MINDSPORE_PYTHON=DIR/bin/python"),
}


def detect(path: Path) -> str | None:
    """The foreign framework ``path`` imports (``tf``, ``paddle``, ``mindspore``), or None.

    Only the file's own ``import`` statements count (the file is parsed, not run); a file
    that does not parse is left to the in-process importer, which reports the error.
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (SyntaxError, ValueError, OSError):
        return None
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            roots.add(node.module.split(".")[0])
    for info in FRAMEWORKS.values():
        if roots.intersection(info.modules):
            return info.name
    return None


def python_for(framework: str) -> str:
    """The Python interpreter that runs ``framework``.

    Raises:
        UserError: Paddle or MindSpore without its setting, or the setting names no file
            (one line: what to set and how to create the environment).
    """
    from compstack.core.config import framework_pythons

    info = FRAMEWORKS[framework]
    configured = framework_pythons().get(framework, "")
    if not configured:
        if framework == "tf":  # TensorFlow coexists with compstack's own stacks
            return sys.executable
        raise UserError(f"{info.title} runs in its own environment: {info.setup}")
    if not Path(configured).is_file():
        raise UserError(f"{info.env_var}={configured}: no such file; {info.setup}")
    return configured


@dataclass
class WorkerResult:
    """What one worker command handed back.

    Attributes:
        data: the worker's ``result.json`` (``ok`` true).
        folder: where its files are (the caller removes it).
        wall_s: wall time of the worker process, seconds.
    """

    data: dict[str, Any]
    folder: Path
    wall_s: float
    log: str = field(default="", repr=False)


def _worker_env() -> dict[str, str]:
    """The environment of a worker: ours, less ``PYTHONPATH`` entries that are the current
    folder (``-P`` already keeps it off ``sys.path``)."""
    env = dict(os.environ)
    cwd = os.path.realpath(os.getcwd())
    keep = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
            if p and os.path.realpath(p) != cwd and p != "."]
    if keep:
        env["PYTHONPATH"] = os.pathsep.join(keep)
    else:
        env.pop("PYTHONPATH", None)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env.setdefault("KERAS_BACKEND", "tensorflow")
    return env


def run_worker(framework: str, args: list[str], timeout_s: float, what: str) -> WorkerResult:
    """Run one worker command in ``framework``'s Python, in its own process group.

    Args:
        framework: ``tf``, ``paddle`` or ``mindspore``.
        args: the command and its arguments, the output folder last but one is added here.
        timeout_s: wall-clock limit; the whole process group is killed past it.
        what: for messages (``zoo:tf-cnn``, ``model.py:build``).

    Raises:
        UserError: the worker reported an error, timed out, or died (one line each).
    """
    python = python_for(framework)
    folder = Path(tempfile.mkdtemp(prefix=f"compstack-{framework}-"))
    cmd, rest = args[0], args[1:]
    argv = [python, "-P", str(_WORKER), cmd, *(rest[:1] if cmd == "probe" else rest[:2]), str(folder),
            *(rest[1:] if cmd == "probe" else rest[2:])]
    t0 = time.perf_counter()
    proc = popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_worker_env())
    try:
        log, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        shutil.rmtree(folder, ignore_errors=True)
        raise UserError(f"{what}: {FRAMEWORKS[framework].title} {cmd} timed out after {timeout_s:g} s") from None
    wall = time.perf_counter() - t0
    text = log.decode("utf-8", "replace")
    result_file = folder / "result.json"
    if not result_file.is_file():
        shutil.rmtree(folder, ignore_errors=True)
        tail = _death_line(text)
        why = f"signal {-proc.returncode}" if proc.returncode < 0 else f"exit code {proc.returncode}"
        raise UserError(f"{what}: the {FRAMEWORKS[framework].title} process died ({why}): {tail[:300]}")
    data = json.loads(result_file.read_text())
    if not data.get("ok"):
        shutil.rmtree(folder, ignore_errors=True)
        raise UserError(str(data.get("error", "failed")))
    return WorkerResult(data, folder, wall, text)


def _death_line(log: str) -> str:
    """The line of a dead worker's log that says why: the exporter's own ``[ERROR]`` line
    (paddle2onnx aborts after one), else the last ``...Error:`` line, else the last line
    that is not framework chatter."""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in log.splitlines()]
    lines = [ln for ln in lines if ln and not _GLOG.match(ln)]
    for pick in (lambda ln: "[ERROR]" in ln,
                 lambda ln: re.match(r"^\w*(Error|Exception)\b", ln) is not None and not ln.startswith("FatalError")):
        found = [ln for ln in lines if pick(ln)]
        if found:
            return found[-1][:300]
    return lines[-1][:300] if lines else "no error message"


_PROBED: dict[str, tuple[bool, str, dict[str, str]]] = {}


def probe(framework: str, timeout_s: float = 60.0) -> tuple[bool, str, dict[str, str]]:
    """Whether ``framework`` is installed where it runs: ``(ok, reason, versions)``.

    Nothing is imported: the framework's Python looks its packages up in their metadata
    (milliseconds; in compstack's own Python no process is started). The answer is kept
    for the life of this process. A broken install shows when the model runs.
    """
    if framework in _PROBED:
        return _PROBED[framework]
    info = FRAMEWORKS[framework]
    try:
        python = python_for(framework)
        if python == sys.executable and framework == "tf":  # no process: TensorFlow beside compstack
            from compstack.frontends import _framework_worker as worker

            try:
                versions = worker.cmd_probe(framework)["versions"]
            except worker.WorkerError as exc:
                raise UserError(f"{str(exc).split(' not installed')[0]} not installed: {info.setup}") from None
        else:
            try:
                res = run_worker(framework, ["probe", framework], timeout_s, info.title)
            except UserError as exc:  # not the environment the setup script makes
                why = str(exc).split(": ", 1)[-1]
                raise UserError(f"{info.env_var}={python}: {why}; create it with {info.setup}") from None
            shutil.rmtree(res.folder, ignore_errors=True)
            versions = res.data["versions"]
        out = (True, "", {k: str(v) for k, v in versions.items()})
    except UserError as exc:
        out = (False, str(exc), {})
    _PROBED[framework] = out
    return out


def _stamp_provenance(model: Any, framework: str) -> None:
    """Keep the exporter's node names as ``compstack.source`` (and the TF scope as
    ``namespace``), so kernels trace back to the framework's layers."""
    for node in model.graph:
        name = node.name or ""
        if not name:
            continue
        node.metadata_props.setdefault("compstack.source", f"{framework}:{name}")
        if framework == "tf" and "/" in name:
            node.metadata_props.setdefault("namespace", name.rsplit("/", 1)[0])


def import_framework(path: Path, func: str, framework: str, name: str,
                     timeout_s: float = EXPORT_TIMEOUT_S) -> cir.SourceModel:
    """Run ``path:func`` in ``framework``'s Python and import the ONNX its exporter wrote.

    Args:
        path: the user's file (its folder is the only one put on the worker's ``sys.path``).
        func: the function returning ``(model, inputs)``.
        framework: ``tf``, ``paddle`` or ``mindspore`` (see :func:`detect`).
        name: the display name (``file.py:build``).
        timeout_s: time limit of the whole export.

    Returns:
        A :class:`compstack.core.ir.SourceModel` with ``origin`` and ``framework`` = the
        framework, example inputs by graph-input name, and ``meta`` about the export
        (exporter, its versions, seconds, weights digest) in the model's metadata
        (``compstack.framework.*``).

    Raises:
        UserError: the environment is missing, build() returns something else, the
            exporter fails or writes no file, the export times out or crashes.
    """
    ok, reason, _ = probe(framework)
    if not ok:  # say what to install, not the ImportError the worker would hit
        raise UserError(reason if reason.startswith(FRAMEWORKS[framework].title) else f"{name}: {reason}")
    res = run_worker(framework, ["export", str(path.resolve()), func, str(EXPORT_OPSET)], timeout_s, name)
    try:
        import onnx

        proto = onnx.load(str(res.folder / "model.onnx"))
        try:
            onnx.checker.check_model(proto)
        except onnx.checker.ValidationError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UserError(f"{name}: {res.data['exporter']} wrote an invalid ONNX graph "
                            f"(an op it could not convert?): {first[:300]}") from None
        cir.check(proto, name)
        model = cir.from_proto(proto, source=name)
        with np.load(res.folder / "inputs.npz", allow_pickle=False) as data:
            arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    finally:
        shutil.rmtree(res.folder, ignore_errors=True)
    graph_inputs = [v for v in model.graph.inputs if not v.is_initializer()]
    if len(graph_inputs) != len(arrays):
        raise UserError(f"{name}: the exported graph has {len(graph_inputs)} inputs but build() gave "
                        f"{len(arrays)} example inputs")
    _stamp_provenance(model, framework)
    meta = res.data
    props = model.metadata_props
    props["compstack.framework"] = framework
    props["compstack.framework.exporter"] = meta["exporter"]
    props["compstack.framework.digest"] = meta.get("digest") or "-"
    props["compstack.framework.export_s"] = f"{meta['export_s']:.3f}"
    props["compstack.framework.versions"] = json.dumps(meta.get("versions", {}), sort_keys=True)
    examples = {str(v.name): a for v, a in zip(graph_inputs, arrays)}
    return cir.SourceModel(name=name, model=model, example_inputs=examples, origin=framework, framework=framework)


def run_framework(framework: str, spec: str, inputs: list[np.ndarray], digest: str = "-",
                  timeout_s: float = EXPORT_TIMEOUT_S) -> tuple[list[np.ndarray], dict[str, Any]]:
    """Run the model of ``spec`` (``/abs/file.py:func``) eagerly in its framework.

    Args:
        framework: ``tf``, ``paddle`` or ``mindspore``.
        spec: the file and function that build the model.
        inputs: positional inputs, in graph-input order.
        digest: the weights digest recorded at export (``-``: do not check).
        timeout_s: time limit of the run (framework import + build() + run).

    Returns:
        The outputs' leaves in order, and the worker's report (``run_s``, ...).

    Raises:
        UserError: as :func:`import_framework`, or the weights changed since export.
    """
    path, _, func = spec.rpartition(":")
    with tempfile.TemporaryDirectory(prefix="compstack-inputs-") as tmp:
        feeds = Path(tmp) / "inputs.npz"
        np.savez(feeds, *[np.asarray(a) for a in inputs])
        res = run_worker(framework, ["run", path, func, str(feeds), digest or "-"], timeout_s,
                         f"{Path(path).name}:{func}")
    try:
        with np.load(res.folder / "outputs.npz", allow_pickle=False) as data:
            outs = [data[f"arr_{i}"] for i in range(len(data.files))]
    finally:
        shutil.rmtree(res.folder, ignore_errors=True)
    return outs, {**res.data, "wall_s": res.wall_s}
