"""The ``tvm-llvm`` target: stages, fusion, numerics vs the ONNX reference, artifact round trip."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import models as M
from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError

pytest.importorskip("tvm")

from compstack.targets.relax.target import TvmLlvmTarget, TvmOptions  # noqa: E402

if not TvmLlvmTarget.availability().ok:
    pytest.skip(TvmLlvmTarget.availability().reason, allow_module_level=True)

BUILDERS = {"mlp": M.mlp, "conv_bn_relu": M.conv_bn_relu, "embedding": M.embedding,
            "two_outputs": M.two_outputs}
#: A fused kernel each model must produce (FuseOps/FuseTIR ran).
FUSED = {"mlp": "fused_matmul_add_relu", "conv_bn_relu": "fused_conv2d_add",
         "embedding": "fused_", "two_outputs": "fused_add_relu"}
PRE_COMPILE = ["relax", "relax-fused"]
POST_COMPILE = ["relax-final", "tir", "tir-lowered", "llvm", "asm"]


@pytest.fixture(scope="module")
def built() -> dict:
    """name -> (proto, lowered, compiled): each model lowered and compiled once."""
    target = TvmLlvmTarget()
    out = {}
    for name, build in BUILDERS.items():
        proto = build()
        lowered = target.lower(cir.from_proto(proto, source=name))
        assert lowered.stage_names() == PRE_COMPILE
        out[name] = (proto, lowered, lowered.compile())
    return out


def _assert_close(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k, ref in want.items():
        assert got[k].shape == ref.shape and got[k].dtype == ref.dtype, k
        np.testing.assert_allclose(got[k], ref, atol=1e-5, rtol=1e-4, err_msg=k)


@pytest.mark.parametrize("name", list(BUILDERS))
def test_stages(built: dict, name: str) -> None:
    _, lowered, compiled = built[name]
    assert lowered.stage_names() == PRE_COMPILE + POST_COMPILE
    assert "def main(" in lowered.as_text("relax") and "fused_" not in lowered.as_text("relax")
    assert FUSED[name] in lowered.as_text("relax-fused")
    final = lowered.as_text("relax-final")
    assert FUSED[name] in final and "vm.builtin" in final  # VM-lowered main
    assert "prim_func" in lowered.as_text("tir") and "def main(" not in lowered.as_text("tir")
    assert "define" in compiled.as_text("llvm")
    assert compiled.compile_s > 0


def test_fused_stage_before_compile_matches_compile() -> None:
    """The lazily computed ``relax-fused`` (no compile) names the same kernels."""
    lowered = TvmLlvmTarget().lower(cir.from_proto(M.conv_bn_relu()))
    before = lowered.as_text("relax-fused")
    lowered.compile()
    assert "fused_conv2d_add" in before and "fused_batch_norm_relu" in before
    assert before == lowered.as_text("relax-fused")


@pytest.mark.parametrize("name", list(BUILDERS))
def test_numerics_vs_reference(built: dict, name: str) -> None:
    proto, _, compiled = built[name]
    feeds = M.inputs_for(proto, seed=3)
    _assert_close(compiled.run(feeds), M.reference(proto, feeds))


@pytest.mark.parametrize("name", ["mlp", "two_outputs"])
def test_save_load_roundtrip(built: dict, name: str, tmp_path: Path) -> None:
    proto, lowered, compiled = built[name]
    feeds = M.inputs_for(proto, seed=4)
    first = compiled.run(feeds)
    files = compiled.save(tmp_path)
    assert files == [tmp_path / "model.so"] and files[0].stat().st_size > 0
    loaded = TvmLlvmTarget().load_compiled(tmp_path, lowered.model)
    again = loaded.run(feeds)
    for k in first:
        np.testing.assert_array_equal(again[k], first[k])
    loaded.save(tmp_path / "copy")  # a loaded artifact can be saved again
    assert (tmp_path / "copy" / "model.so").read_bytes() == files[0].read_bytes()


def test_prepare_runs_without_conversion(built: dict) -> None:
    proto, _, compiled = built["mlp"]
    feeds = M.inputs_for(proto, seed=5)
    call = compiled.prepare(feeds)
    out = call()
    np.testing.assert_allclose(out.numpy(), compiled.run(feeds)["y"], rtol=0, atol=0)


def test_flags() -> None:
    target = TvmLlvmTarget(TvmOptions(opt_level=2, num_cores=3, mcpu="x86-64"))
    flags = target.flags()
    assert flags["tuned"] is False and flags["opt_level"] == 2
    assert flags["target"] == {"kind": "llvm", "num-cores": 3, "mcpu": "x86-64"}
    assert "get_default_pipeline" in flags["pipeline"]
    host = TvmLlvmTarget().flags()["target"]
    assert host["mcpu"] and host["num-cores"] >= 1


def test_options_from_strings() -> None:
    opts = TvmOptions.from_strings({"opt_level": "1", "mcpu": "znver4", "pass_stages": "true"})
    assert opts == TvmOptions(opt_level=1, mcpu="znver4", pass_stages=True)


def test_pass_stages() -> None:
    lowered = TvmLlvmTarget(TvmOptions(pass_stages=True)).lower(cir.from_proto(M.mlp()))
    compiled = lowered.compile()
    names = lowered.stage_names()
    per_pass = [n for n in names if n.startswith("relax.")]
    assert any(n.endswith(".FuseOps") for n in per_pass) and any(n.endswith(".FuseTIR") for n in per_pass)
    assert "FuseOps" in compiled.pass_names
    assert names.index(per_pass[-1]) < names.index("relax-final")


def test_unsupported_ops_all_at_once() -> None:
    model = cir.from_proto(M.with_ops("Det", "Relu", "MelWeightMatrix"))
    target = TvmLlvmTarget()
    assert target.unsupported_ops(model) == ["Det", "MelWeightMatrix"]
    with pytest.raises(UnsupportedError) as info:
        target.lower(model)
    assert info.value.ops == ["Det", "MelWeightMatrix"]
    assert target.unsupported_ops(cir.from_proto(M.mlp())) == []


def test_module_import_loads_no_stack() -> None:
    code = ("import sys, compstack.targets.relax.target, compstack.targets.iree.target, compstack.core.tools; "
            "bad = [m for m in ('tvm', 'iree') if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_local_functions_are_inlined_and_checked() -> None:
    proto = M.with_function()
    model = cir.from_proto(proto)
    assert model.functions  # the common IR keeps the function; the target inlines a copy
    feeds = M.inputs_for(proto)
    out = TvmLlvmTarget().lower(model).compile().run(feeds)
    np.testing.assert_allclose(out["y"], M.reference(proto, feeds)["y"], atol=1e-5, rtol=1e-4)
    assert model.functions and [n.op_type for n in model.graph] == ["Block", "Block"]
    assert TvmLlvmTarget().unsupported_ops(cir.from_proto(M.with_function("Det", (3, 3), 1))) == ["Det"]
