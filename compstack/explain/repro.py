"""Standalone reproducers: one ``repro_<target>.py`` per stack, using only that stack's API.

The script sits in the bundle beside ``model.onnx``, ``inputs.npz`` and
``test_data_set_0/output_*.pb`` (the float64 reference's outputs). It runs the model the
way compstack ran it (the flags recorded in the bundle), compares every output with
the reference (``|a-b| <= atol + rtol*|b|``), prints the largest error, and exits 1 when
the mismatch reproduces, 0 when it does not. No compstack import: an upstream
maintainer needs only the stack, numpy and onnx.

A stack without a template (a vendor SDK, a test-only target) gets none; the bundle's
ISSUE.md says so.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["repro_script"]

_PRELUDE = '''#!/usr/bin/env python3
"""Reproduce: {title}

Needs only {needs}, numpy and onnx. Exit status 1 when the mismatch reproduces, 0 when
it does not, 2 when the script could not run (a stack missing, an exception).
"""
import glob
import os
import sys

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]


def _could_not_run(kind, exc, tb):  # exit 2, not Python's 1: 1 means the mismatch reproduced
    print(f"could not run: {{kind.__name__}}: {{exc}}", flush=True)
    os._exit(2)


sys.excepthook = _could_not_run

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = {rtol!r}, {atol!r}
model_path = os.path.join(HERE, "model.onnx")
model = onnx.load(model_path)
with np.load(os.path.join(HERE, "inputs.npz")) as data:
    feeds = {{k: data[k] for k in data.files}}
input_names = [i.name for i in model.graph.input if i.name not in {{t.name for t in model.graph.initializer}}]
output_names = [o.name for o in model.graph.output]
expected = [numpy_helper.to_array(onnx.load_tensor(p))
            for p in sorted(glob.glob(os.path.join(HERE, "test_data_set_0", "output_*.pb")),
                            key=lambda p: int(p.rsplit("_", 1)[1].split(".")[0]))]

'''

_CHECK = '''
bad = False
for name, got, want in zip(output_names, outputs, expected):
    got = np.asarray(got)
    if got.shape != want.shape:
        print(f"{name}: shape {list(got.shape)} != expected {list(want.shape)}")
        bad = True
        continue
    g, w = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(g - w)
    ok = bool(np.all((err <= ATOL + RTOL * np.abs(w)) | (np.isnan(g) & np.isnan(w))))
    print(f"{name}: max abs error {np.nanmax(err) if err.size else 0.0:.4g} "
          f"({'ok' if ok else 'MISMATCH'}; rtol={RTOL}, atol={ATOL})")
    bad = bad or not ok
print("mismatch reproduced" if bad else "no mismatch: the outputs agree with the reference")
sys.exit(1 if bad else 0)
'''

_RUN = {
    "onnxruntime": ("onnxruntime", '''import re

import onnx.helper
import onnxruntime as ort

# the newest IR version this onnxruntime reads, from its own error on an IR-99 probe (as
# compstack's ort-cpu target does): an older release refuses the bundle's IR version otherwise
probe = onnx.helper.make_model(onnx.helper.make_graph(
    [onnx.helper.make_node("Relu", ["x"], ["y"])], "probe",
    [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
    [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])]),
    opset_imports=[onnx.helper.make_opsetid("", 7)])
probe.ir_version = 99
try:
    ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
except Exception as exc:
    top = re.search(r"max supported IR version: (\\d+)", str(exc))
    if top and model.ir_version > int(top.group(1)):
        model.ir_version = int(top.group(1))
so = ort.SessionOptions()
so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, {level!r})
sess = ort.InferenceSession(model.SerializeToString(), so, providers={providers!r})
outputs = sess.run(output_names, {{n: feeds[n] for n in input_names}})
'''),
    "tvm": ("apache-tvm", '''import tvm
from tvm import relax
from tvm.relax.frontend.onnx import from_onnx

mod = from_onnx(model, keep_params_in_input=False)
target = tvm.target.Target({target!r})
with tvm.transform.PassContext(opt_level={opt_level!r}):
    ex = tvm.compile(mod, target=target, relax_pipeline=relax.get_default_pipeline(target))
vm = relax.VirtualMachine(ex, tvm.cpu())
res = vm["main"](*[tvm.runtime.tensor(feeds[n]) for n in input_names])
res = res if isinstance(res, (list, tuple)) or type(res).__name__ == "Array" else [res]
outputs = [r.numpy() for r in res]
'''),
    "iree": ("iree-base-compiler, iree-base-runtime", '''import subprocess
import tempfile

import iree.compiler as ic
import iree.runtime as rt

tmp = tempfile.mkdtemp()
mlir = os.path.join(tmp, "model.mlir")
subprocess.run(["iree-import-onnx", model_path, "-o", mlir], check=True)
vmfb = ic.compile_file(mlir, extra_args={flags!r})
config = rt.Config({driver!r})
ctx = rt.SystemContext(config=config)
vm_module = rt.VmModule.copy_buffer(config.vm_instance, vmfb)
ctx.add_vm_module(vm_module)
# the synchronous entry point (not the "$async" one, not "__init")
fn = ctx.modules[vm_module.name][[f for f in vm_module.function_names if "$" not in f and not f.startswith("__")][0]]
res = fn(*[feeds[n] for n in input_names])
res = res if isinstance(res, (list, tuple)) else [res]
outputs = [np.asarray(r.to_host() if hasattr(r, "to_host") else r) for r in res]
'''),
    "openvino": ("openvino", '''import openvino as ov

compiled = ov.Core().compile_model(ov.Core().read_model(model_path), {device!r}, {config!r})
res = compiled([feeds[n] for n in input_names])
outputs = [np.asarray(res[compiled.output(i)]) for i in range(len(output_names))]
'''),
    "xla": ("jax and jaxlib", '''import jax
from jax import export

jax.config.update("jax_enable_x64", True)
with open(os.path.join(HERE, "artifact", "model.jax_export"), "rb") as f:
    exported = export.deserialize(bytearray(f.read()))   # the program XLA compiled (StableHLO)
outputs = [np.asarray(o) for o in exported.call(*[feeds[n] for n in input_names])]
'''),
}


def repro_script(stack: str, flags: dict[str, Any], title: str, rtol: float | None, atol: float | None) -> str | None:
    """The reproducer for ``stack`` (a target class's ``stack``), or None without a template.

    Args:
        stack: ``onnxruntime``, ``tvm``, ``iree``, ``openvino`` or ``xla``.
        flags: the target's ``flags()`` as recorded by the worker that ran it.
        title: one line for the docstring.
        rtol: the relative tolerance the script applies (None: float32's default,
            :data:`compstack.analysis.verdict.DEFAULT_TOLERANCES`).
        atol: the absolute tolerance (None: float32's default).
    """
    if stack not in _RUN:
        return None
    needs, body = _RUN[stack]
    if stack == "onnxruntime":
        body = body.format(level=flags.get("graph_optimization_level", "ORT_ENABLE_ALL"),
                           providers=list(flags.get("providers", ["CPUExecutionProvider"])))
    elif stack == "tvm":
        body = body.format(target=json.loads(json.dumps(flags.get("target", {"kind": "llvm"}))),
                           opt_level=int(flags.get("opt_level", 3)))
    elif stack == "openvino":
        body = body.format(device=flags.get("device", "CPU"), config=dict(flags.get("config", {})))
    elif stack == "iree":
        body = body.format(flags=list(flags.get("iree-compile", [])), driver=flags.get("driver", "local-task"))
    from compstack.analysis.verdict import DEFAULT_TOLERANCES
    from compstack.core.sanitize import python_text

    f32 = DEFAULT_TOLERANCES["float32"]  # the per-dtype default when the user gave none
    rtol, atol = f32.rtol if rtol is None else rtol, f32.atol if atol is None else atol
    return _PRELUDE.format(title=python_text(title), needs=needs, rtol=rtol, atol=atol) + body + _CHECK
