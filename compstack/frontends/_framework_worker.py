"""Standalone worker that runs inside a framework's own Python (TensorFlow, Paddle, MindSpore).

It is started as ``python -P _framework_worker.py COMMAND ...`` by
:mod:`compstack.frontends.from_framework`, in the environment where the framework lives
(which may have neither compstack nor onnxruntime): it imports only the standard library,
numpy and the one framework the user's file imports. ``-P`` keeps the current folder off
``sys.path``; only the user's own file's folder is put there.

Commands (every one writes ``OUTDIR/result.json``: ``{"ok": true, ...}`` or
``{"ok": false, "error": "one line"}``):

* ``probe FRAMEWORK OUTDIR`` — whether the framework and its exporter are installed (found,
  not imported), and their versions.
* ``export FILE FUNC OUTDIR OPSET`` — run ``FILE:FUNC``, export the model it returns to
  ``OUTDIR/model.onnx`` with the framework's own exporter, save the example inputs
  (``OUTDIR/inputs.npz``, positional: ``arr_0``...) and a digest of the weights.
* ``run FILE FUNC OUTDIR INPUTS.npz DIGEST`` — run ``FILE:FUNC`` again, check that the
  weights still have DIGEST (``-`` skips the check), run the model eagerly on the inputs
  (positional: ``arr_0``...) and save ``OUTDIR/outputs.npz`` (``arr_0``...).
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

FRAMEWORK_MODULES = {"tf": "tensorflow", "paddle": "paddle", "mindspore": "mindspore"}
EXPECTED = ("(tf.keras.Model | tf.function, inputs), (paddle.nn.Layer, inputs) or "
            "(mindspore.nn.Cell, inputs), inputs = an array or a tuple/list of arrays")


class WorkerError(Exception):
    """A one-line error about the user's model (reported, never a traceback)."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    line = text.splitlines()[0].strip() if text else ""
    return f"{type(exc).__name__}: {line[:400]}" if line else type(exc).__name__


# ---- the user's file -------------------------------------------------------------------
def call_build(file: str, func: str) -> Any:
    """Import ``file`` (its folder on ``sys.path``) and call ``func()``."""
    path = Path(file).resolve()
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location("_compstack_user_model", path)
    if spec is None or spec.loader is None:
        raise WorkerError(f"{file}: cannot be imported as Python")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise WorkerError(f"{path.name}: import failed: {_first_line(exc)}") from exc
    fn = getattr(module, func, None)
    if fn is None or not callable(fn):
        raise WorkerError(f"{path.name}: no function '{func}'")
    try:
        return fn()
    except (Exception, SystemExit) as exc:
        raise WorkerError(f"{path.name}:{func}: raised {_first_line(exc)}") from exc


def split_result(result: Any, name: str) -> tuple[str, Any, list[Any]]:
    """``(framework, model, inputs)`` from build()'s return value."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise WorkerError(f"{name}: expected build() to return {EXPECTED}, got {_describe(result)}")
    model, inputs = result
    framework = _framework_of(model)
    if framework is None:
        raise WorkerError(f"{name}: expected build() to return {EXPECTED}, got a pair of "
                          f"({type(model).__name__}, {type(inputs).__name__})")
    if isinstance(inputs, dict):
        raise WorkerError(f"{name}: inputs must be an array or a tuple/list of arrays, not a dict")
    items = list(inputs) if isinstance(inputs, (tuple, list)) else [inputs]
    if not items:
        raise WorkerError(f"{name}: no example inputs")
    return framework, model, items


def _describe(obj: Any) -> str:
    if isinstance(obj, (tuple, list)):
        return f"a {type(obj).__name__} of {len(obj)} ({', '.join(type(x).__name__ for x in obj[:4])})"
    return type(obj).__name__


def _framework_of(model: Any) -> str | None:
    tf = sys.modules.get("tensorflow")
    if tf is not None and (isinstance(model, (tf.keras.Model, tf.Module))
                           or hasattr(model, "get_concrete_function")):
        return "tf"
    paddle = sys.modules.get("paddle")
    if paddle is not None and isinstance(model, paddle.nn.Layer):
        return "paddle"
    ms = sys.modules.get("mindspore")
    if ms is not None and isinstance(model, ms.nn.Cell):
        return "mindspore"
    return None


def to_numpy(x: Any) -> np.ndarray:
    """A framework tensor (or array, or scalar) as a numpy array."""
    for attr in ("asnumpy", "numpy"):  # MindSpore, TF / Paddle
        if hasattr(x, attr) and not isinstance(x, np.ndarray):
            return np.asarray(getattr(x, attr)())
    return np.asarray(x)


def input_names(framework: str, model: Any, count: int) -> list[str]:
    """Names for the graph inputs: the parameters of the model's call, else ``input_N``."""
    keras_inputs = _keras_inputs(model) if framework == "tf" else None
    if keras_inputs and len(keras_inputs) == count and count > 1:
        names = [getattr(t, "name", "") or "" for t in keras_inputs]
        if all(n.isidentifier() for n in names) and len(set(names)) == count:
            return names
    if framework == "tf":
        fn = getattr(model, "python_function", None) or getattr(model, "call", None) or model
    elif framework == "paddle":
        fn = model.forward
    else:
        fn = model.construct
    try:
        params = [p.name for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.name != "self"]
    except (TypeError, ValueError):
        params = []
    if len(params) >= count and all(p.isidentifier() for p in params[:count]):
        return params[:count]
    return [f"input_{i}" for i in range(count)]


def _keras_inputs(model: Any) -> list[Any] | None:
    """A functional Keras model's ``Input`` tensors (None for subclassed models)."""
    try:
        return list(model.inputs) if getattr(model, "inputs", None) else None
    except (AttributeError, ValueError):
        return None


def call_keras(model: Any, xs: list[Any]) -> Any:
    """Call a Keras model in inference mode: one input as itself, several as the list a
    functional model takes, or positionally for a subclassed ``call(self, a, b)``."""
    if len(xs) == 1:
        return model(xs[0], training=False)
    if _keras_inputs(model):
        return model(xs, training=False)
    return model(*xs, training=False)


# ---- weights digest (a rebuilt model must be the exported one) --------------------------
def weights_digest(framework: str, model: Any) -> str:
    """sha256 over the model's weights, in order, or ``""`` when they are not reachable."""
    h = hashlib.sha256()
    arrays = []
    if framework == "tf":
        variables = getattr(model, "weights", None)
        if variables is None and hasattr(model, "variables"):
            variables = model.variables
        arrays = [to_numpy(v) for v in (variables or [])]
    elif framework == "paddle":
        arrays = [to_numpy(v) for v in model.state_dict().values()]
    else:
        arrays = [to_numpy(p) for p in model.parameters_dict().values()]
    if not arrays:
        return ""
    for a in arrays:
        h.update(str((a.dtype, a.shape)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


# ---- export ------------------------------------------------------------------------------
def export(framework: str, model: Any, arrays: list[np.ndarray], names: list[str], out: Path, opset: int) -> str:
    """Export with the framework's own exporter to ``out/model.onnx``; returns the exporter name."""
    target = out / "model.onnx"
    if framework == "tf":
        _export_tf(model, arrays, names, target, opset)
        return "tf2onnx"
    if framework == "paddle":
        _export_paddle(model, arrays, names, out, opset)
        return "paddle2onnx"
    _export_mindspore(model, arrays, out)
    return "mindspore.onnx"


def _export_tf(model: Any, arrays: list[np.ndarray], names: list[str], target: Path, opset: int) -> None:
    import tensorflow as tf
    import tf2onnx

    sig = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=n) for a, n in zip(arrays, names)]
    if hasattr(model, "get_concrete_function") and not isinstance(model, tf.keras.Model):
        fn = model
        if getattr(fn, "input_signature", None) is None:
            fn = tf.function(fn.python_function if hasattr(fn, "python_function") else fn)
    else:
        # tf2onnx.convert.from_keras fails with Keras 3; tracing the call works for both.
        fn = tf.function(lambda *xs: call_keras(model, list(xs)))
    tf2onnx.convert.from_function(fn, input_signature=sig, opset=opset, output_path=str(target))
    _freeze_captured_constants(fn, sig, target)


def _freeze_captured_constants(fn: Any, sig: list[Any], target: Path) -> None:
    """tf2onnx turns an eager tensor the function captures (``w = tf.constant(...)`` used
    inside it) into a graph input named after its placeholder (``MatMul/b:0``); make each
    such input the initializer it is, with the captured value."""
    import onnx
    import tensorflow as tf
    from onnx import numpy_helper

    concrete = fn.get_concrete_function(*sig)
    captured = {t.name: v for t, v in zip(concrete.graph.internal_captures, concrete.captured_inputs)
                if v.dtype != tf.resource}
    model = onnx.load(str(target))
    extra = [i for i in model.graph.input if i.name in captured]
    if not extra:
        return
    for value in extra:
        model.graph.initializer.append(numpy_helper.from_array(to_numpy(captured[value.name]), value.name))
        model.graph.input.remove(value)
    onnx.save(model, str(target))


def _export_paddle(model: Any, arrays: list[np.ndarray], names: list[str], out: Path, opset: int) -> None:
    import paddle

    model.eval()
    spec = [paddle.static.InputSpec(list(a.shape), str(a.dtype), n) for a, n in zip(arrays, names)]
    # paddle.onnx.export logs its errors instead of raising: the file must exist afterwards.
    paddle.onnx.export(model, str(out / "model"), input_spec=spec, opset_version=opset)


def _export_mindspore(model: Any, arrays: list[np.ndarray], out: Path) -> None:
    import mindspore as ms

    model.set_train(False)
    ms.onnx.export(model, *[ms.Tensor(a) for a in arrays], file_name=str(out / "model"))


# ---- eager run -----------------------------------------------------------------------------
def run_eager(framework: str, model: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Run the model in its framework on the arrays; the outputs' leaves, in order."""
    if framework == "tf":
        import tensorflow as tf

        xs = [tf.constant(a) for a in arrays]
        out = call_keras(model, xs) if isinstance(model, tf.keras.Model) else model(*xs)
        leaves = tf.nest.flatten(out)
    elif framework == "paddle":
        import paddle

        model.eval()
        with paddle.no_grad():
            out = model(*[paddle.to_tensor(a) for a in arrays])
        leaves = _flatten(out)
    else:
        import mindspore as ms

        model.set_train(False)
        leaves = _flatten(model(*[ms.Tensor(a) for a in arrays]))
    return [to_numpy(x) for x in leaves]


def _flatten(out: Any) -> list[Any]:
    if isinstance(out, dict):
        return [y for v in out.values() for y in _flatten(v)]
    if isinstance(out, (tuple, list)):
        return [y for v in out for y in _flatten(v)]
    return [] if out is None else [out]


def _set_device(framework: str) -> None:
    if framework == "mindspore":
        import mindspore as ms

        ms.set_device("CPU")


def _quiet() -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("GLOG_v", "3")  # MindSpore / Paddle C++ logging


# ---- commands --------------------------------------------------------------------------------
#: The modules each framework needs, and the distributions whose versions are reported.
NEEDS = {"tf": (("tensorflow", "tf2onnx"), ("tensorflow-cpu", "tensorflow", "tf2onnx", "keras")),
         "paddle": (("paddle", "paddle2onnx"), ("paddlepaddle", "paddle2onnx", "onnx")),
         "mindspore": (("mindspore",), ("mindspore",))}


def cmd_probe(framework: str) -> dict[str, Any]:
    """Whether the framework and its exporter are installed here, and their versions
    (found from package metadata: nothing is imported, so this takes milliseconds)."""
    import importlib.metadata as md

    modules, dists = NEEDS[framework]
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise WorkerError(f"{', '.join(missing)} not installed in {sys.executable}")
    versions = {}
    for d in dists:
        try:
            versions[d] = md.version(d)
        except md.PackageNotFoundError:
            pass
    versions["python"] = sys.version.split()[0]
    return {"versions": versions}


def cmd_export(file: str, func: str, out: Path, opset: int) -> dict[str, Any]:
    """See the module docstring."""
    name = f"{Path(file).name}:{func}"
    framework, model, items = split_result(call_build(file, func), name)
    _set_device(framework)
    arrays = [to_numpy(x) for x in items]
    names = input_names(framework, model, len(arrays))
    digest = weights_digest(framework, model)
    t0 = time.perf_counter()
    try:
        exporter = export(framework, model, arrays, names, out, opset)
    except Exception as exc:  # the exporter's failure is the user's one line
        raise WorkerError(f"{name}: {framework} export to ONNX failed: {_first_line(exc)}") from exc
    export_s = time.perf_counter() - t0
    if not (out / "model.onnx").is_file():
        raise WorkerError(f"{name}: {framework} export to ONNX wrote no file (the exporter's log is above)")
    np.savez(out / "inputs.npz", *arrays)
    return {"framework": framework, "exporter": exporter, "input_names": names, "digest": digest,
            "export_s": export_s, "versions": cmd_probe(framework)["versions"]}


def cmd_run(file: str, func: str, out: Path, inputs: str, digest: str) -> dict[str, Any]:
    """See the module docstring."""
    name = f"{Path(file).name}:{func}"
    framework, model, _ = split_result(call_build(file, func), name)
    _set_device(framework)
    if digest != "-" and weights_digest(framework, model) != digest:
        raise WorkerError(f"{name}: build() gives different weights each time (unseeded?), so the {framework} "
                          "model run now is not the one that was exported; seed it")
    with np.load(inputs, allow_pickle=False) as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    t0 = time.perf_counter()
    try:
        outs = run_eager(framework, model, arrays)
    except Exception as exc:
        raise WorkerError(f"{name}: the {framework} model raised {_first_line(exc)}") from exc
    run_s = time.perf_counter() - t0
    np.savez(out / "outputs.npz", *outs)
    return {"framework": framework, "run_s": run_s, "outputs": len(outs)}


def main(argv: list[str]) -> int:
    """Dispatch a command; the result (or the one-line error) goes to ``OUTDIR/result.json``."""
    _quiet()
    cmd, args = argv[0], argv[1:]
    out = Path(args[1] if cmd == "probe" else args[2])
    try:
        if cmd == "probe":
            result = cmd_probe(args[0])
        elif cmd == "export":
            result = cmd_export(args[0], args[1], out, int(args[3]))
        elif cmd == "run":
            result = cmd_run(args[0], args[1], out, args[3], args[4])
        else:
            raise WorkerError(f"unknown command {cmd}")
        result["ok"] = True
    except WorkerError as exc:
        result = {"ok": False, "error": str(exc)}
    except ImportError as exc:
        result = {"ok": False, "error": f"import failed: {_first_line(exc)}"}
    except Exception as exc:  # noqa: BLE001 - reported as one line; the traceback goes to stderr
        import traceback

        traceback.print_exc()
        result = {"ok": False, "error": _first_line(exc)}
    (out / "result.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
