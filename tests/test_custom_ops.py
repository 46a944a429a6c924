"""Custom ops (compstack.ops): registration, the CMake-built kernels, every stack vs the
NumPy reference, the PyTorch/JAX frontends, the CLI, and the CUDA kernels' compile."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from compstack import ops
from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError, UserError
from compstack.ops import Attr, OpDefinitionError, custom_op
from compstack.ops.build import KernelLibrary, ensure_built, source_root
from compstack.run.optest import run_target
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "custom_op_model.py"

pytestmark = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                                reason="no C++ compiler: the custom-op kernels cannot be built")


@pytest.fixture(scope="module")
def kernels(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KernelLibrary]:
    """The kernel library built with CMake from scratch in a fresh cache folder, which
    this module's tests (and the processes they start) then use."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("COMPSTACK_CACHE_DIR", str(cache))
        yield ensure_built(cache_dir=cache)


# ---------------------------------------------------------------------------------------
# the CMake build


def test_cmake_builds_every_flavour_and_caches(kernels: KernelLibrary) -> None:
    assert kernels.cpu.is_file() and kernels.folder.parent.name == "ops"
    assert kernels.iree_objects and all(p.suffix == ".o" for p in kernels.iree_objects)
    assert kernels.xla is not None and kernels.xla.is_file()  # jaxlib ships the FFI headers
    t0 = time.perf_counter()
    again = ensure_built(cache_dir=kernels.folder.parent.parent)
    assert again.folder == kernels.folder and time.perf_counter() - t0 < 2.0  # nothing rebuilt


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm to list the objects' symbols")
def test_iree_objects_are_freestanding(kernels: KernelLibrary) -> None:
    """IREE links these into embedded ELFs: no libc/libm symbol may be left undefined."""
    out = subprocess.run(["nm", "-u", *map(str, kernels.iree_objects)], capture_output=True, text=True, check=True)
    undefined = [ln.split()[-1] for ln in out.stdout.splitlines() if ln.strip() and not ln.endswith(":")]
    assert undefined == []
    defined = subprocess.run(["nm", *map(str, kernels.iree_objects)], capture_output=True, text=True).stdout
    assert "cs_iree__cs_rms_norm" in defined and "cs_iree__cs_bias_gelu" in defined


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found: the CUDA kernels are not compiled")
def test_cuda_kernels_compile_with_nvcc(tmp_path: Path) -> None:
    sources = sorted((source_root() / "csrc" / "cuda").glob("*.cu"))
    assert {p.stem for p in sources} == {"rms_norm", "bias_gelu"}
    for src in sources:
        obj = tmp_path / f"{src.stem}.o"
        done = subprocess.run(["nvcc", "-std=c++17", "-arch=sm_80", "-I", str(source_root() / "csrc" / "include"),
                               "-c", str(src), "-o", str(obj)], capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        symbols = subprocess.run(["nm", str(obj)], capture_output=True, text=True).stdout if shutil.which("nm") else ""
        assert not symbols or f"cs_{src.stem}_cuda" in symbols


# ---------------------------------------------------------------------------------------
# registration


def _ref2(x: Any, y: Any) -> Any:
    return x


def _declare(**changes: Any) -> None:
    fields: dict[str, Any] = dict(inputs=["x: T", "w: T"], outputs=["y: T"], dtypes={"T": ["float32"]},
                                  shape=lambda x, w: x, attrs=None)
    name = changes.pop("name", "testlib::op")
    reference = changes.pop("reference", _ref2)
    fields.update(changes)
    custom_op(name, **fields)(reference)


@pytest.mark.parametrize("changes, message", [
    ({"name": "rms_norm"}, "name must be 'domain::op'"),
    ({"name": "my.lib::op"}, "must be a Python identifier"),
    ({"name": "testlib::1op"}, "op name '1op' must be a Python identifier"),
    ({"inputs": []}, "inputs must be a non-empty list"),
    ({"inputs": ["x", "w: T"]}, "must be 'name: TYPE'"),
    ({"inputs": ["x: float8", "w: T"]}, "unknown dtype or type variable 'float8'"),
    ({"inputs": ["x: T", "x: T"]}, "used twice"),
    ({"outputs": ["y: U"], "dtypes": {"T": ["float32"], "U": ["int64"]}}, "which no input binds"),
    ({"dtypes": {"T": ["float32"], "V": ["int64"]}}, "declared but unused: V"),
    ({"attrs": {"eps": "1e-6"}}, "is not int, float or bool"),
    ({"attrs": {"eps": Attr(float, "big")}}, "default 'big' is not float"),
    ({"attrs": {"x": 1.0}}, "also used as a tensor name"),
    ({"reference": lambda x: x}, "cannot be called with 2 positional inputs"),
    ({"shape": lambda x, w, *, k: x, "attrs": {}}, "shape rule"),
    ({"kernels": {"tpu": "f"}}, "kernel device 'tpu'"),
    ({"kernels": {"cpu": "1bad"}}, "not a C identifier"),
    ({"sources": ["missing_kernel.cc"]}, "does not exist"),
    ({"test_shapes": [((3,),)]}, "one shape per input"),
    ({"name": "compstack::rms_norm"}, "already registered with another signature"),
])
def test_registration_errors_are_one_clear_line(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(OpDefinitionError) as info:
        _declare(**changes)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_attribute_values_are_checked() -> None:
    op = ops.get("compstack::rms_norm")
    assert op.attr_values({}) == {"epsilon": 1e-6}
    assert op.attr_values({"epsilon": 1}) == {"epsilon": 1.0}
    for bad, message in (({"epsilon": "x"}, "must be float"), ({"eps": 1.0}, r"unknown attribute\(s\) eps")):
        with pytest.raises(OpDefinitionError, match=message):
            op.attr_values(bad)


def test_same_name_registered_again_is_accepted() -> None:
    """A module imported twice (file.py:function models are) registers its ops again."""
    op = ops.get("compstack::rms_norm")
    assert ops.register(dataclasses.replace(op)) is not None
    assert ops.get("compstack::rms_norm").signature_key() == op.signature_key()


# ---------------------------------------------------------------------------------------
# ONNX: schema, checker, shape inference, reference


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: dict[str, list[int]],
           dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(k, dtype, v) for k, v in inputs.items()],
                              [helper.make_tensor_value_info(k, dtype, v) for k, v in outputs.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("compstack", 1)])


def test_checker_and_shape_inference_accept_the_op() -> None:
    nodes = [helper.make_node("bias_gelu", ["x", "b"], ["y", "pre"], domain="compstack"),
             helper.make_node("rms_norm", ["y", "w"], ["z"], domain="compstack", epsilon=1e-5)]
    proto = _model(nodes, {"x": [2, 8], "b": [8], "w": [8]}, {"z": [2, 8], "pre": [2, 8]})
    cir.check(proto, "m")
    onnx.checker.check_model(proto, full_check=True)
    model = cir.canonicalize(proto)
    y = next(v for n in model.graph for v in n.outputs if v.name == "y")
    assert y.dtype == onnx_ir_float() and list(y.shape) == [2, 8]
    text = cir.to_text(model)
    assert "compstack::bias_gelu" in text and "compstack::rms_norm<epsilon=" in text


def onnx_ir_float() -> Any:
    import onnx_ir as ir

    return ir.DataType.FLOAT


def test_shape_rule_errors_surface_in_shape_inference() -> None:
    proto = _model([helper.make_node("rms_norm", ["x", "w"], ["y"], domain="compstack")],
                   {"x": [2, 8], "w": [7]}, {"y": [2, 8]})
    with pytest.raises(UserError, match="weight has 7 elements but x's last dim is 8"):
        cir.canonicalize(proto)


def test_unknown_domain_is_still_rejected() -> None:
    proto = _model([helper.make_node("rms_norm", ["x", "w"], ["y"], domain="nolib")], {"x": [2, 8], "w": [8]},
                   {"y": [2, 8]})
    with pytest.raises(UserError, match="unknown op domain 'nolib'"):
        cir.check(proto, "m")


# ---------------------------------------------------------------------------------------
# kernels and stacks vs the reference


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_c_kernels_match_the_reference(kernels: KernelLibrary, dtype: str) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 5, 33)).astype(dtype)
    w = rng.standard_normal(33).astype(dtype)
    tol = {"float32": 2e-6, "float16": 4e-3}[dtype]
    y = ops.run_kernel("compstack::rms_norm", x, w, epsilon=1e-5)
    ref = ops.get("compstack::rms_norm")(x.astype(np.float64), w.astype(np.float64), epsilon=1e-5)
    assert y.dtype == x.dtype and np.allclose(y, ref, rtol=tol, atol=tol)
    for approximate in (0, 1):
        act, pre = ops.run_kernel("compstack::bias_gelu", x, w, approximate=approximate)
        r_act, r_pre = ops.get("compstack::bias_gelu")(x.astype(np.float64), w.astype(np.float64),
                                                       approximate=approximate)
        assert np.allclose(act, r_act, rtol=tol, atol=tol) and np.allclose(pre, r_pre, rtol=tol, atol=tol)
    # non-contiguous input: made contiguous by the adapter
    xt = np.swapaxes(x, 0, 1)
    assert np.allclose(ops.run_kernel("compstack::rms_norm", xt, w), ops.get("compstack::rms_norm")(xt, w),
                       rtol=tol, atol=tol)


def test_kernel_status_is_an_error_not_a_crash(kernels: KernelLibrary) -> None:
    from compstack.ops._kernel import KernelError, call_kernel

    op = ops.get("compstack::rms_norm")
    x = np.ones((2, 4), np.float32)
    with pytest.raises(KernelError, match="status 3: shapes that do not fit the op"):
        call_kernel(op, [(x.ctypes.data, (2, 4), "float32"), (x.ctypes.data, (3,), "float32")],
                    [(x.ctypes.data, (2, 4), "float32")], {})


@pytest.mark.parametrize("target", ["reference", "ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu",
                                    "torchscript-cpu"])
def test_every_stack_runs_rms_norm_like_the_reference(kernels: KernelLibrary, target: str) -> None:
    """Each declared dtype x 5 shapes (size-1 and odd sizes), random inputs."""
    rows = run_target(target, ops.get("compstack::rms_norm"), {"epsilon": 1e-5}, seed=3)
    assert len(rows) == 10 and {tuple(r.dtypes) for r in rows} == {("float32",) * 2, ("float16",) * 2}
    bad = [(r.dtypes, r.shapes, r.status, r.error) for r in rows if r.status != "pass"]
    assert bad == []
    worst = {r.dtypes[0]: 0.0 for r in rows}
    for r in rows:
        worst[r.dtypes[0]] = max(worst[r.dtypes[0]], r.max_abs_err or 0.0)
    assert worst["float32"] < 1e-5 and worst["float16"] < 1e-2


def test_user_op_with_its_own_source_and_an_integer_input(kernels: KernelLibrary,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    import custom_ops_user  # noqa: F401 - declares mylib::gather_rows (sources=[...]) and mylib::ref_only
    from compstack.run.optest import run_matrix

    op = ops.get("mylib::gather_rows")
    assert op.origin == "module:custom_ops_user" and op.sources[0].endswith("custom_ops_user.cc")
    table = np.arange(20, dtype=np.float32).reshape(10, 2)
    got = ops.run_kernel("mylib::gather_rows", table, np.array([3, -1, 0], np.int64))  # rebuilds with the source
    assert got.tolist() == [[6, 7], [18, 19], [0, 1]]
    # in new processes (as `compstack ops test --load` runs them), which import the module again
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).parent))
    report = run_matrix(op, ["ort-cpu", "iree-llvm-cpu"])
    assert report.ok and [r.status for r in report.results] == ["pass"] * 18, report.results


def test_op_without_kernel_runs_on_the_reference_only(kernels: KernelLibrary) -> None:
    import custom_ops_user  # noqa: F401

    op = ops.get("mylib::ref_only")
    assert [r.status for r in run_target("reference", op, {})] == ["pass"] * 1
    for target in ("ort-cpu", "tvm-llvm", "iree-llvm-cpu"):
        rows = run_target(target, op, {})
        assert rows[0].status == "unsupported", (target, rows[0])
    assert "no CPU kernel" in run_target("ort-cpu", op, {})[0].error


def test_gpu_backends_say_why_they_cannot_take_the_op(kernels: KernelLibrary) -> None:
    from compstack.targets import get

    proto = _model([helper.make_node("rms_norm", ["x", "w"], ["y"], domain="compstack")],
                   {"x": [2, 8], "w": [8]}, {"y": [2, 8]})
    model = cir.canonicalize(proto)
    with pytest.raises(UnsupportedError, match="linked into llvm-cpu dispatches only"):
        get("iree-vulkan")().lower(model)


# ---------------------------------------------------------------------------------------
# frontends


def test_torch_model_exports_the_op_in_its_domain(kernels: KernelLibrary) -> None:
    from compstack.frontends.from_pyfile import import_pyfile

    source = import_pyfile(f"{EXAMPLE}:build")
    custom = [(n.domain, n.op_type, {k: a.value for k, a in n.attributes.items()}) for n in source.model.graph
              if n.domain == "compstack"]
    assert custom == [("compstack", "rms_norm", {"epsilon": pytest.approx(1e-5)}),
                      ("compstack", "bias_gelu", {"approximate": 0})]
    assert source.model.opset_imports["compstack"] == 1
    # the exported graph, on the reference evaluator, matches the eager module
    import torch

    from compstack.targets import get

    module, (x,) = _example()
    with torch.no_grad():
        want = [t.numpy() for t in module(x)]
        # the torch.library op takes non-contiguous tensors (made contiguous for the kernel)
        xt, w = x.transpose(0, 1), module.norm_weight
        got_t = ops.torch_op("compstack::rms_norm")(xt, w, epsilon=1e-5).numpy()
    assert np.allclose(got_t, ops.get("compstack::rms_norm")(xt.numpy(), w.detach().numpy(), epsilon=1e-5),
                       rtol=1e-5, atol=1e-6)
    got = get("reference")().lower(source.model).compile().run({"x": x.numpy()})
    assert all(np.allclose(g, w, rtol=1e-4, atol=1e-5) for g, w in zip(got.values(), want))


def _example() -> Any:
    import runpy

    return runpy.run_path(str(EXAMPLE))["build"]()


def test_jax_function_calls_the_kernel(kernels: KernelLibrary) -> None:
    import jax

    from compstack.ops._jax import op_of_ffi_call

    rms, bias_gelu = ops.jax_call("compstack::rms_norm"), ops.jax_call("compstack::bias_gelu")

    def f(x: Any, w: Any, b: Any) -> Any:
        act, pre = bias_gelu(rms(x, w, epsilon=1e-5), b, approximate=1)
        return act + pre

    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((4, 9), (9,), (9,)))
    got = np.asarray(jax.jit(f)(x, w, b))
    r = ops.get("compstack::rms_norm")(x.astype(np.float64), w.astype(np.float64), epsilon=1e-5)
    act, pre = ops.get("compstack::bias_gelu")(r, b.astype(np.float64), approximate=1)
    assert np.allclose(got, act + pre, rtol=1e-5, atol=1e-5)
    # a JAX frontend maps the custom call back to the op and its attributes
    eqns = jax.make_jaxpr(f)(x, w, b).jaxpr.eqns
    found = [op_of_ffi_call(e.params["target_name"], e.params["attributes"]) for e in eqns
             if e.primitive.name == "ffi_call"]
    assert [(op.qualname, attrs) for op, attrs in found] == [("compstack::rms_norm", {"epsilon": 1e-5}),
                                                             ("compstack::bias_gelu", {"approximate": 1})]
    # ... and the JAX frontend does so: the imported graph has the ops in their domain
    from compstack.frontends.from_jax import import_jax
    from compstack.targets import get

    source = import_jax(f, (x, w, b), name="f")
    assert [(n.domain, n.op_type) for n in source.model.graph if n.domain] == [("compstack", "rms_norm"),
                                                                               ("compstack", "bias_gelu")]
    out = get("reference")().lower(source.model).compile().run(dict(zip(["x", "w", "b"], (x, w, b))))
    assert np.allclose(next(iter(out.values())), got, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# the CLI


def test_cli_ops_list_and_test(kernels: KernelLibrary) -> None:
    done = run_cli("ops", "list", "--json")
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert {"compstack::rms_norm", "compstack::bias_gelu"} <= set(rows)
    assert rows["compstack::bias_gelu"]["kernels"] == {"cpu": "cs_bias_gelu", "cuda": "cs_bias_gelu_cuda"}
    assert rows["compstack::rms_norm"]["stacks"]["iree-llvm-cpu"].startswith("yes")
    done = run_cli("ops", "test", "compstack::bias_gelu", "--targets", "ort-cpu", "--attr", "approximate=1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "float16/float16 1x3x1x129 129" in done.stdout and "ort-cpu: 10/10 pass" in done.stdout
    bad = run_cli("ops", "test", "compstack::nope")
    assert bad.returncode == 2 and "no custom op 'compstack::nope'" in bad.stderr


def test_compare_runs_a_model_using_the_ops(kernels: KernelLibrary, isolated_env: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(kernels.folder.parent.parent))  # the kernels built above
    targets = "ort-cpu,tvm-llvm,iree-llvm-cpu,xla-cpu,inductor-cpu"
    done = run_cli("compare", f"{EXAMPLE}:build", "--targets", targets, "--no-latency", "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    status = {r["target"]: (r["status"], r["flags"].get("path")) for r in report["results"]}
    assert status == {"ort-cpu": ("ok", None), "tvm-llvm": ("ok", None), "iree-llvm-cpu": ("ok", None),
                      "xla-cpu": ("ok", "translated"), "inductor-cpu": ("ok", "native")}
    assert report["reference"]["target"] == "reference"
    for row in report["results"]:
        assert all(o["max_abs_err"] < 1e-5 for o in row["outputs"]), row
