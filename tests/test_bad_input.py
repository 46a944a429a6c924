"""Bad input, one row per kind: each must end in one clear line, the right exit status,
no traceback and no hang.

A row is the argv (``{d}`` is the row's temporary folder, ``{mlp}`` a small valid model
in it), a setup that writes the files the argv names, the expected exit status (2 for
bad input), a substring the one-line message must contain, and optionally an
environment. Every row also checks that neither stdout nor stderr holds ``Traceback``
and that the command ends within its time limit. Add a kind by adding a row.

``python tests/test_bad_input.py`` runs the whole table without pytest and prints the
sweep counts (kinds tried, clean one-line errors, tracebacks, hangs, wrong exit codes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).parent))
from conftest import PROGRESS, TESTS, make_mlp  # noqa: E402


@dataclass(frozen=True)
class Row:
    """One kind of bad input.

    Attributes:
        id: short name of the kind (the pytest id).
        argv: the compstack arguments; ``{d}`` and ``{mlp}`` are substituted.
        match: a substring of the one-line message (stderr).
        setup: writes the files the argv needs into the folder (``{d}``).
        code: expected exit status.
        env: extra environment variables (``{d}`` substituted).
        timeout: seconds before the row counts as a hang.
    """

    id: str
    argv: tuple[str, ...]
    match: str
    setup: Callable[[Path], None] | None = None
    code: int = 2
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 120


# ---------------------------------------------------------------------------------------
# setups


def _save(model: onnx.ModelProto, path: Path) -> None:
    path.write_bytes(model.SerializeToString())


def _relu(inp_shape: list, out_shape: list | None = None, opset: int = 20, domain: str = "",
          op: str = "Relu", outputs: bool = True) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], name="n0", domain=domain)
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape or inp_shape)] if outputs else []
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, inp_shape)], outs)
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 10
    return m


def _file(name: str, text: str | bytes) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        p = d / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(text.encode() if isinstance(text, str) else text)
    return setup


def _model(name: str, build: Callable[[], onnx.ModelProto]) -> Callable[[Path], None]:
    return lambda d: _save(build(), d / name)


def _both(*setups: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        for s in setups:
            s(d)
    return setup


def _fifo(name: str) -> Callable[[Path], None]:
    return lambda d: os.mkfifo(d / name)


def _npz(name: str, **arrays: np.ndarray) -> Callable[[Path], None]:
    return lambda d: np.savez(d / name, **arrays)


def _neg_dim() -> onnx.ModelProto:
    return _with_dim(_relu([2, 3]), -5)


def _with_dim(m: onnx.ModelProto, value: int) -> onnx.ModelProto:
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = value
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = value
    return m


def _ext_data(location: str, target: str) -> Callable[[Path], None]:
    """A model whose initializer lives in external data at ``location``; the bytes are
    written to ``target`` (relative to the row folder's parent ``m/``)."""
    def setup(d: Path) -> None:
        folder = d / "m"
        (folder / "sub").mkdir(parents=True)
        w = np.ones((4, 4), np.float32)
        dest = (folder / target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(w.tobytes())
        t = numpy_helper.from_array(w, "w")
        t.ClearField("raw_data")
        t.data_location = TensorProto.EXTERNAL
        for k, v in (("location", location), ("offset", "0"), ("length", str(w.nbytes))):
            t.external_data.add(key=k, value=v)
        node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
        g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [t])
        _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), folder / "m.onnx")
    return setup


def _dyn(d: Path) -> None:
    _save(_relu(["N", 3]), d / "dyn.onnx")


def _matmul(n: int) -> onnx.ModelProto:
    """x[1,n] @ w[n,n] with inline float32 weights (n*n*4 bytes)."""
    w = numpy_helper.from_array(np.ones((n, n), np.float32), "w")
    node = helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def _big_model(d: Path) -> None:
    """A 1 MiB-weight model (for the full-disk row)."""
    _save(_matmul(512), d / "big.onnx")


def _tiny_fs(folder: Path) -> None:
    """A full disk: a 64 KiB tmpfs at ``folder`` (needs root; the row is skipped otherwise).
    :func:`run_row` unmounts it."""
    folder.mkdir(parents=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


_PROFILE = json.dumps([{"count": 10}, {"name": "fc1", "timeMs": 1.0, "averageMs": 0.1, "percentage": 100.0}])
_LAYER_OUTPUTS_5 = json.dumps({"Layers": [{"Name": "zz", "LayerType": "X", "Outputs": 5}]})
_PROFILE_ZZ = json.dumps([{"count": 10}, {"name": "zz", "timeMs": 1.0, "averageMs": 0.1, "percentage": 100.0}])

_TORCH_FAILS = """
import torch

class M(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:          # data-dependent control flow: torch.export refuses it
            return x + 1
        return x - 1

def build():
    return M(), (torch.ones(2, 3),)
"""

#: torch logs 19 lines of a fake-tensor traceback before raising (seen on torch 2.9).
_TORCH_LOGS = """
import torch

class M(torch.nn.Module):
    def forward(self, x):
        return x @ torch.ones(4, 4)

def build():
    return M(), (torch.ones(3, 3),)
"""


def _py(name: str, body: str) -> Callable[[Path], None]:
    return _file(name, body)


# ---------------------------------------------------------------------------------------
# the table

T = "ort-cpu"
FAST = ("--no-latency",)

ROWS: list[Row] = [
    # --- the model argument: files ---------------------------------------------------
    Row("missing-file", ("compare", "{d}/missing.onnx"), "missing.onnx: no such file"),
    Row("folder-as-model", ("compare", "{d}"), "is a folder"),
    Row("empty-onnx", ("compare", "{d}/e.onnx"), "empty file", _file("e.onnx", b"")),
    Row("text-as-onnx", ("compare", "{d}/t.onnx"), "t.onnx: ", _file("t.onnx", "just text\n")),
    Row("truncated-onnx", ("compare", "{d}/cut.onnx"), "cut.onnx: ",
        lambda d: (d / "cut.onnx").write_bytes(make_mlp(d / "full.onnx").read_bytes()[:300])),
    Row("fifo-as-model", ("compare", "{d}/p.onnx"), "not a regular file", _fifo("p.onnx"), timeout=30),
    Row("dev-zero-as-model", ("compare", "/dev/zero"), "not a regular file", timeout=30),
    Row("unknown-zoo", ("compare", "zoo:resnet9000"), "resnet9000"),
    Row("non-python-file-spec", ("compare", "{d}/notes.txt:build"), "not a .py file",
        _file("notes.txt", "hello\n")),
    Row("py-without-function", ("compare", "{d}/m.py"), "needs a function", _py("m.py", "x = 1\n")),
    # --- the model's content -----------------------------------------------------------
    Row("checker-ssa", ("compare", "{d}/ssa.onnx"), "ONNX checker", _model("ssa.onnx", lambda: _ssa())),
    Row("unknown-domain", ("compare", "{d}/acme.onnx"), "unknown op domain 'acme'",
        _model("acme.onnx", lambda: _relu([2], domain="acme", op="Frob"))),
    Row("unknown-com-microsoft-op", ("compare", "{d}/ms.onnx", "--targets", T, *FAST),
        "com.microsoft::NoSuchOp", _model("ms.onnx", lambda: _relu([2], domain="com.microsoft", op="NoSuchOp"))),
    Row("unknown-onnx-op", ("compare", "{d}/op.onnx", "--targets", T, *FAST), "NoSuchOp",
        _model("op.onnx", lambda: _relu([2], op="NoSuchOp"))),
    Row("opset-99", ("compare", "{d}/o99.onnx", "--targets", T, *FAST), "opset 99",
        _model("o99.onnx", lambda: _relu([2], opset=99))),
    Row("no-outputs", ("compare", "{d}/noout.onnx", "--targets", T, *FAST), "no outputs",
        _model("noout.onnx", lambda: _relu([2], outputs=False))),
    Row("negative-dim", ("compare", "{d}/neg.onnx", "--targets", T, *FAST), "-5",
        _model("neg.onnx", _neg_dim)),
    Row("ext-data-escapes", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "outside the model's folder",
        _ext_data("sub/../../ext/ok.bin", "../ext/ok.bin")),
    Row("ext-data-dotdot-back-inside", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "points outside",
        _ext_data("sub/../../m/w.bin", "w.bin")),
    Row("ext-data-absolute", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "outside the model's folder",
        _ext_data("/etc/hostname", "w.bin")),
    Row("ext-data-missing", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "is missing",
        lambda d: (_ext_data("w.bin", "w.bin")(d), (d / "m" / "w.bin").unlink())),
    Row("ext-data-short", ("compare", "{d}/m/m.onnx", "--targets", T, *FAST), "external data",
        lambda d: (_ext_data("w.bin", "w.bin")(d), (d / "m" / "w.bin").write_bytes(b"\0" * 8))),
    Row("initializer-bytes-short", ("compare", "{d}/short.onnx", "--targets", T, *FAST), "short.onnx: initializer 'w' holds 1000 bytes",
        _model("short.onnx", lambda: _short_weights())),
    Row("dynamic-dim-no-shape", ("compare", "{d}/dyn.onnx", "--targets", T, *FAST), "--input-shape x:<n>x3", _dyn),
    # --- file.py:function ---------------------------------------------------------------
    Row("py-missing-function", ("compare", "{d}/m.py:nothere"), "no function 'nothere'",
        _py("m.py", "def build():\n    return 42\n")),
    Row("py-wrong-return", ("compare", "{d}/m.py:build"), "expected the function to return",
        _py("m.py", "def build():\n    return 42\n")),
    Row("py-syntax-error", ("compare", "{d}/m.py:build"), "import failed: SyntaxError",
        _py("m.py", "def build(:\n")),
    Row("py-raises", ("compare", "{d}/m.py:build"), "raised ValueError: nope",
        _py("m.py", "def build():\n    raise ValueError('nope')\n")),
    Row("py-raises-baseexception", ("compare", "{d}/m.py:build"), "raised Boom",
        _py("m.py", "class Boom(BaseException):\n    pass\n\ndef build():\n    raise Boom('x')\n")),
    Row("py-import-raises-baseexception", ("compare", "{d}/m.py:build"), "import failed: Boom",
        _py("m.py", "class Boom(BaseException):\n    pass\n\nraise Boom('x')\n")),
    Row("py-sys-exit", ("compare", "{d}/m.py:build"), "raised SystemExit",
        _py("m.py", "import sys\ndef build():\n    sys.exit(3)\n")),
    Row("py-os-exit", ("compare", "{d}/m.py:build"), "exited with status 5",
        _py("m.py", "import os\ndef build():\n    os._exit(5)\n")),
    Row("py-needs-args", ("compare", "{d}/m.py:build"), "must take no arguments",
        _py("m.py", "def build(a):\n    return a\n")),
    Row("py-not-callable", ("compare", "{d}/m.py:build"), "not a function", _py("m.py", "build = 3\n")),
    Row("py-function-loops", ("compare", "{d}/m.py:build", "--timeout", "5"),
        "--timeout 5) in ",  # the phase it cut depends on the machine's load: see test_cli_messages
        _py("m.py", "def build():\n    while True:\n        pass\n"), timeout=60),
    Row("py-import-loops", ("compare", "{d}/m.py:build", "--timeout", "5"), "--timeout 5) in ",
        _py("m.py", "while True:\n    pass\n"), timeout=60),
    Row("py-memory-hog", ("compare", "{d}/m.py:build", "--memory-limit", "400"), "--memory-limit 400",
        _py("m.py", "def build():\n    xs = []\n    while True:\n        xs.append(bytearray(2**24))\n"),
        timeout=60),
    Row("py-torch-export-logs-traceback", ("compare", "{d}/m.py:build", "--targets", T),
        "a and b must have same reduction dim", _py("m.py", _TORCH_LOGS), timeout=300),
    Row("py-torch-export-fails", ("compare", "{d}/m.py:build", "--targets", T), "export failed",
        _py("m.py", _TORCH_FAILS), timeout=300),
    # --- --inputs -----------------------------------------------------------------------
    Row("inputs-missing", ("compare", "{mlp}", "--inputs", "{d}/none.npz"), "none.npz: no such file"),
    Row("inputs-empty", ("compare", "{mlp}", "--inputs", "{d}/e.npz"), "empty file", _file("e.npz", b"")),
    Row("inputs-text", ("compare", "{mlp}", "--inputs", "{d}/t.npz"), "t.npz: not a .npz (zip) file;",
        _file("t.npz", "hello")),
    Row("inputs-fifo", ("compare", "{mlp}", "--inputs", "{d}/p.npz"), "not a regular file", _fifo("p.npz"),
        timeout=30),
    Row("inputs-npy", ("compare", "{mlp}", "--inputs", "{d}/x.npy"), "single .npy array",
        lambda d: np.save(d / "x.npy", np.zeros((4, 16), np.float32))),
    Row("inputs-wrong-name", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), "no array for input 'x'",
        _npz("i.npz", z=np.zeros((4, 16), np.float32))),
    Row("inputs-wrong-shape", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), "shape [4, 15]",
        _npz("i.npz", x=np.zeros((4, 15), np.float32))),
    Row("inputs-wrong-dtype", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), "is float64",
        _npz("i.npz", x=np.zeros((4, 16)))),
    Row("inputs-extra-array", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), "z match no model input",
        _npz("i.npz", x=np.zeros((4, 16), np.float32), z=np.zeros(3))),
    Row("inputs-bad-bits-dtype", ("compare", "{mlp}", "--inputs", "{d}/i.npz"), "nosuchdtype",
        lambda d: np.savez(d / "i.npz", **{"x@bits:nosuchdtype": np.zeros((4, 16), np.uint16)})),
    Row("inputs-with-input-shape", ("compare", "{mlp}", "--inputs", "{d}/i.npz", "--input-shape", "x:4x16"),
        "no effect with --inputs", _npz("i.npz", x=np.zeros((4, 16), np.float32))),
    # --- --val-range / --input-shape ----------------------------------------------------
    Row("val-range-malformed", ("compare", "{mlp}", "--val-range", "x:3"), "--val-range x:3"),
    Row("val-range-inverted", ("compare", "{mlp}", "--val-range", "x:3,1"), "LO must be below HI"),
    Row("val-range-inf", ("compare", "{mlp}", "--val-range", "x:0,inf"), "--val-range x:0,inf"),
    Row("val-range-nan", ("compare", "{mlp}", "--val-range", "x:nan,1"), "--val-range x:nan,1"),
    Row("val-range-huge", ("compare", "{mlp}", "--val-range", "x:-1e308,1e308", "--targets", T, *FAST),
        "outside what input 'x' (float32) can hold"),
    Row("val-range-huge-int", ("compare", "{d}/int.onnx", "--val-range", "x:0,1e30", "--targets", T, *FAST),
        "--val-range", _model("int.onnx", lambda: _int_model())),
    Row("val-range-unknown-input", ("compare", "{mlp}", "--val-range", "q:0,1", "--targets", T, *FAST),
        "match no input"),
    Row("input-shape-malformed", ("compare", "{dyn}", "--input-shape", "x:axb"), "--input-shape x:axb", _dyn),
    Row("input-shape-overflow", ("compare", "{dyn}", "--input-shape", "x:9999999999999999999999x3"),
        "--input-shape x:9999999999999999999999x3", _dyn),
    Row("input-shape-too-big", ("compare", "{dyn}", "--input-shape", "x:100000000000x3", "--targets", T, *FAST),
        "memory", _dyn),
    Row("input-shape-wrong-rank", ("compare", "{dyn}", "--input-shape", "x:2x3x4", "--targets", T, *FAST),
        "does not fit", _dyn),
    # --- flags and options --------------------------------------------------------------
    Row("unknown-target", ("compare", "{mlp}", "--targets", "ort-cpu,tvm-lvm"), "unknown target 'tvm-lvm'"),
    Row("run-several-targets", ("run", "{mlp}", "--target", "cpu"), "give one"),
    Row("option-malformed", ("compare", "{mlp}", "--option", "ort-cpu"), "expected TARGET:KEY=VALUE"),
    Row("option-unknown-key", ("compare", "{mlp}", "--option", "ort-cpu:bogus=1"), "unknown option"),
    Row("option-bad-value", ("compare", "{mlp}", "--option", "ort-cpu:opt_level=bogus"), "opt_level=bogus"),
    Row("option-int-huge", ("compare", "{mlp}", "--option", "ort-cpu:intra_op_threads=1e20", "--targets", T, *FAST),
        "intra_op_threads"),
    Row("option-int-overflow", ("compare", "{mlp}", "--option", "ort-cpu:intra_op_threads=99999999999999999999",
                                "--targets", T, *FAST), "intra_op_threads"),
    Row("min-time-nan", ("compare", "{mlp}", "--min-time", "nan"), "'--min-time'"),
    Row("timeout-inf", ("compare", "{mlp}", "--timeout", "inf"), "'--timeout'"),
    Row("rtol-negative", ("compare", "{mlp}", "--rtol", "-1"), "'--rtol'"),
    Row("reference-unknown", ("compare", "{mlp}", "--reference", "nosuch"), "--reference 'nosuch': unknown target 'nosuch'"),
    Row("usage-missing-o", ("lower", "zoo:mlp", "--target", T), "Missing option '-o'"),
    Row("unknown-command", ("frobnicate",), "No such command"),
    Row("soc-on-ort", ("lower", "{mlp}", "--target", T, "-o", "{d}/out", "--soc", "x"), "has no SoC option"),
    # --- where results go ---------------------------------------------------------------
    # the one line names the input and its size (new-user trial: it named neither, and a flag not given)
    Row("input-too-large", ("compare", "{d}/huge.onnx", "--targets", T, "--no-latency"),
        "input x [3000000, 1000000] alone is 11,175.9 GiB (the model declares that shape)",
        _model("huge.onnx", lambda: _with_dim(_relu([3000000, 3]), 1000000))),
    Row("lower-empty-target", ("lower", "{mlp}", "--target", "", "-o", "{d}/out"), "--target: no target given"),
    Row("o-not-writable", ("lower", "{mlp}", "--target", T, "-o", "{d}/afile/out"), "not writable",
        _file("afile", "")),
    Row("cache-dir-is-file", ("compare", "{mlp}", "--targets", T, *FAST), "not writable", _file("afile", ""),
        env={"COMPSTACK_CACHE_DIR": "{d}/afile"}),
    # a zoo model is cached as it is imported: that import's warning was a second line (new-user trial)
    Row("cache-dir-under-file-zoo", ("compare", "zoo:mlp", "--targets", T, "--no-latency"), "afile is a file, not a folder",
        _file("afile", ""), env={"COMPSTACK_CACHE_DIR": "{d}/afile/cache"}),
    Row("cache-dir-empty", ("compare", "{mlp}", "--targets", T, *FAST, "--cache-dir", ""), "--cache-dir: empty"),
    Row("executor-env-dump", ("dump", "{mlp}", "--target", T, "-o", "{d}/dd"), "COMPSTACK_EXECUTOR",
        env={"COMPSTACK_EXECUTOR": "bogus"}),
    Row("executor-env-fusion", ("fusion", "{mlp}", "--targets", T), "COMPSTACK_EXECUTOR",
        env={"COMPSTACK_EXECUTOR": "bogus"}),
    Row("negative-seed", ("compare", "{mlp}", "--targets", T, *FAST, "--seed", "-1"), "--seed"),
    Row("fuzz-seed-too-big", ("fuzz", "--graphs", "1", "--targets", T, "--seed", "99999999999999999999999"),
        "--seed"),
    Row("fuzz-no-spec-matches", ("fuzz", "--graphs", "1", "--targets", T, "--ops", "NoSuchOp"), "no op spec matches"),
    Row("save-inputs-unwritable", ("compare", "{mlp}", "--save-inputs", "{d}/afile/x.npz"), "not writable",
        _file("afile", "")),
    Row("save-temps-is-file", ("compare", "{mlp}", "--targets", T, *FAST), "COMPSTACK_SAVE_TEMPS",
        _file("afile", ""), env={"COMPSTACK_SAVE_TEMPS": "{d}/afile"}),
    Row("own-memory-limit", ("compare", "{d}/big64.onnx", "--targets", T, *FAST, "--memory-limit", "150"),
        "compstack itself used", lambda d: _save(_matmul(4096), d / "big64.onnx")),
    Row("lower-full-disk", ("lower", "{d}/big.onnx", "--target", T, "-o", "{d}/out"), "-o {d}/out",
        _both(_big_model, lambda d: _tiny_fs(d / "out")), timeout=120),
    # --- dump / diff ---------------------------------------------------------------------
    Row("dump-no-stage", ("dump", "{mlp}", "--target", T), "exactly one --stage"),
    Row("dump-all-no-out", ("dump", "{mlp}", "--target", T, "--all", "--stage", "optimized"),
        "--all writes one file per pass: give -o DIR"),
    Row("dump-unknown-stage", ("dump", "{mlp}", "--target", T, "--stage", "nosuch"), "nosuch"),
    Row("dump-all-and-changed", ("dump", "{mlp}", "--target", T, "-o", "{d}/o", "--all", "--print-after-change"),
        "give one of them"),
    Row("diff-missing", ("diff", "{d}/a.txt", "{d}/b.txt"), "a.txt"),
    Row("diff-binary", ("diff", "{d}/a.bin", "{d}/b.bin"), "binary",
        _both(_file("a.bin", bytes(range(256)) * 4), _file("b.bin", bytes(range(255, -1, -1)) * 4))),
    # --- profiles -----------------------------------------------------------------------
    Row("import-profile-missing", ("import-profile", "{mlp}", "--profile", "{d}/p.json"), "no such file"),
    Row("import-profile-not-json", ("import-profile", "{mlp}", "--profile", "{d}/p.json"), "not valid JSON",
        _file("p.json", "{")),
    Row("import-profile-deep", ("import-profile", "{mlp}", "--profile", "{d}/p.json"), "p.json",
        _file("p.json", _nested(100000))),
    Row("import-profile-fifo", ("import-profile", "{mlp}", "--profile", "{d}/p.json"), "not a regular file",
        _fifo("p.json"), timeout=30),
    Row("import-profile-no-layers", ("import-profile", "{mlp}", "--profile", "{d}/p.json"), "no layers",
        _file("p.json", "[]")),
    Row("layer-info-outputs-5", ("import-profile", "{mlp}", "--profile", "{d}/p.json", "--layer-info", "{d}/l.json"),
        "Outputs", _both(_file("p.json", _PROFILE_ZZ), _file("l.json", _LAYER_OUTPUTS_5))),
    Row("layer-info-deep", ("import-profile", "{mlp}", "--profile", "{d}/p.json", "--layer-info", "{d}/l.json"),
        "l.json", _both(_file("p.json", _PROFILE), _file("l.json", '{"Layers": ' + _nested(100000) + "}"))),
    Row("profile-trt-deep", ("profile", "{mlp}", "--targets", T, "--trt-profile", "{d}/p.json"), "p.json",
        _file("p.json", _nested(100000))),
    Row("profile-trt-bad-checked-first", ("profile", "{mlp}", "--targets", "tvm-llvm", "--trt-profile",
                                          "{d}/p.json"), "not valid JSON", _file("p.json", "{"), timeout=20),
    Row("profile-trt-layer-info-only", ("profile", "{mlp}", "--targets", T, "--trt-layer-info", "{d}/l.json"),
        "needs --trt-profile", _file("l.json", "{}")),
    Row("fusion-trt-outputs-5", ("fusion", "{mlp}", "--targets", T, "--trt-profile", "{d}/p.json",
                                 "--trt-layer-info", "{d}/l.json"), "Outputs",
        _both(_file("p.json", _PROFILE_ZZ), _file("l.json", _LAYER_OUTPUTS_5))),
    Row("profile-target-and-targets", ("profile", "{mlp}", "--target", T, "--targets", T), "give one of them"),
    Row("fusion-by-node", ("fusion", "{mlp}", "--by-node"), "--by-node needs per-kernel times"),
    Row("profile-explorer-unwritable", ("profile", "{mlp}", "--export-model-explorer", "{d}/afile/x"),
        "not writable", _file("afile", "")),
    # --- conformance ---------------------------------------------------------------------
    Row("conformance-trend-not-sqlite", ("conformance", "--trend", "--db", "{d}/x.db"), "x.db",
        _file("x.db", "this is not a database\n" * 100)),
    Row("conformance-db-not-sqlite", ("conformance", "--filter", "test_relu$", "--targets", T, "--db", "{d}/x.db"),
        "x.db", _file("x.db", "this is not a database\n" * 100), timeout=300),
    Row("conformance-bad-regex", ("conformance", "--filter", "("), "not a regular expression"),
    Row("conformance-cache-unwritable", ("conformance", "--filter", "test_relu$", "--targets", T), "afile",
        _file("afile", ""), env={"COMPSTACK_CACHE_DIR": "{d}/afile"}),
    # --- ops ------------------------------------------------------------------------------
    Row("ops-load-no-module", ("ops", "list", "--load", "no_such_module_xyz"), "no_such_module_xyz"),
    Row("ops-load-missing-file", ("ops", "list", "--load", "{d}/none.py"), "none.py"),
    Row("ops-load-raises", ("ops", "list", "--load", "{d}/bad.py"), "bad.py",
        _py("bad.py", "raise RuntimeError('broken declarations')\n")),
    Row("ops-test-unknown-op", ("ops", "test", "acme::nope"), "acme::nope"),
    Row("ops-test-bad-attr", ("ops", "test", "compstack::rms_norm", "--attr", "epsilon"), "expected NAME=VALUE"),
    Row("targets-ops-unknown", ("targets", "--ops", "nosuch"), "unknown target 'nosuch'"),
]


def _ssa() -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["y"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


def _short_weights() -> onnx.ModelProto:
    """A 4 MiB-by-its-dims initializer holding 1000 bytes."""
    m = _matmul(1024)
    m.graph.initializer[0].raw_data = b"\0" * 1000
    return m


def _int_model() -> onnx.ModelProto:
    node = helper.make_node("Neg", ["x"], ["y"], name="neg")
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [3])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])


@dataclass
class Outcome:
    """What one row did."""

    row: Row
    code: int | None
    stdout: str
    stderr: str

    @property
    def hung(self) -> bool:
        return self.code is None

    @property
    def traceback(self) -> bool:
        return "Traceback" in self.stdout or "Traceback" in self.stderr

    def problem(self, d: Path) -> str:
        """Why the row fails, or ``""``."""
        if self.hung:
            return f"hung (> {self.row.timeout:g} s)"
        if self.traceback:
            return f"traceback:\n{self.stderr[-3000:]}"
        if self.code != self.row.code:
            return f"exit {self.code}, expected {self.row.code}:\n{self.stdout[-2000:]}\n{self.stderr[-2000:]}"
        lines = [ln for ln in self.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]
        if self.row.code == 2 and len(lines) != 1:
            return f"{len(lines)} lines on stderr:\n{self.stderr[-3000:]}"
        match = self.row.match.replace("{d}", str(d))
        if match not in self.stderr:
            return f"{match!r} not in the message: {self.stderr[-2000:]}"
        return ""


def run_row(row: Row, d: Path) -> Outcome:
    """Set up and run one row in folder ``d`` (its own cache and database)."""
    d.mkdir(parents=True, exist_ok=True)
    make_mlp(d / "mlp.onnx")
    _dyn(d)
    if row.setup is not None:
        row.setup(d)
    sub = {"{d}": str(d), "{mlp}": str(d / "mlp.onnx"), "{dyn}": str(d / "dyn.onnx")}

    def fill(s: str) -> str:
        for k, v in sub.items():
            s = s.replace(k, v)
        return s

    env = {**os.environ, "COMPSTACK_CACHE_DIR": str(d / "cache"), "COMPSTACK_DB": str(d / "results.sqlite"),
           "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    env.pop("COMPSTACK_SAVE_TEMPS", None)
    env.update({k: fill(v) for k, v in row.env.items()})

    proc = subprocess.Popen([sys.executable, "-m", "compstack.cli", *map(fill, row.argv)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=d,
                            start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, err = proc.communicate(timeout=row.timeout)
        return Outcome(row, proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return Outcome(row, None, out, err)
    finally:
        for sub_dir in d.iterdir():
            if os.path.ismount(sub_dir):
                subprocess.run(["umount", str(sub_dir)], check=False)


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input(row: Row, tmp_path: Path) -> None:
    outcome = run_row(row, tmp_path)
    problem = outcome.problem(tmp_path)
    assert not problem, problem


def test_rows_have_unique_ids() -> None:
    assert len({r.id for r in ROWS}) == len(ROWS)


def sweep(only: list[str] | None = None) -> int:
    """Run every row (or those named) and print per-row results and the counts."""
    import tempfile
    import time

    counts = {"kinds": 0, "clean": 0, "tracebacks": 0, "hangs": 0, "wrong exit": 0, "other": 0}
    root = Path(tempfile.mkdtemp(prefix="compstack-bad-"))
    for row in ROWS:
        if only and row.id not in only:
            continue
        t0 = time.monotonic()
        d = root / row.id
        o = run_row(row, d)
        problem = o.problem(d)
        counts["kinds"] += 1
        key = ("hangs" if o.hung else "tracebacks" if o.traceback else "wrong exit" if o.code != row.code
               else "other" if problem else "clean")
        counts[key] += 1
        first = problem.splitlines()[0] if problem else (o.stderr.strip().splitlines() or [""])[-1]
        print(f"{'ok  ' if not problem else 'FAIL'} {row.id:<34} {time.monotonic() - t0:5.1f}s  {first[:150]}",
              flush=True)
    print(json.dumps(counts))
    return 0 if counts["clean"] == counts["kinds"] else 1


if __name__ == "__main__":
    raise SystemExit(sweep(sys.argv[1:] or None))
