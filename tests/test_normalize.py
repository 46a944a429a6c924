"""compstack.analysis.irtext.normalize on real stage texts: dialects, determinism, idempotence,
renaming, constant elision and order-insensitivity."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import models as M
from compstack.analysis.irtext.normalize import (
    NormalizeOptions,
    detect_dialect,
    name_stem,
    normalize,
)
from compstack.core import ir as cir

TESTS = Path(__file__).parent


def _target(module: str, cls: str) -> Any:
    """The target class, or skip when its stack is missing here."""
    mod = pytest.importorskip(module)
    target = getattr(mod, cls)
    if not target.availability().ok:
        pytest.skip(target.availability().reason)
    return target


def _scaled_mlp(factor: float) -> onnx.ModelProto:
    """The test MLP with its weight W multiplied by ``factor`` (only a constant differs)."""
    model = M.mlp()
    for i, t in enumerate(model.graph.initializer):
        if t.name == "W":
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t) * np.float32(factor), "W"))
    return model


def _lower(target: Any, proto: onnx.ModelProto) -> Any:
    return target().lower(cir.from_proto(proto))


@pytest.fixture(scope="module")
def iree_mlp() -> dict[str, str]:
    """IREE stage texts of the MLP, plus the raw ``input.mlir`` (with locations) as ``raw-input``."""
    lowered = _lower(_target("compstack.targets.iree.target", "IreeLlvmCpuTarget"), M.mlp())
    texts = {s: lowered.as_text(s) for s in ("torch-onnx", "input", "flow", "stream", "hal", "vm")}
    texts["raw-input"] = (lowered.scratch.path / "input.mlir").read_text()
    return texts


@pytest.fixture(scope="module")
def tvm_cbr() -> dict[str, str]:
    lowered = _lower(_target("compstack.targets.relax.target", "TvmLlvmTarget"), M.conv_bn_relu())
    return {s: lowered.as_text(s) for s in ("relax", "relax-fused")}


@pytest.fixture(scope="module")
def ort_mlp() -> dict[str, str]:
    lowered = _lower(_target("compstack.targets.ort.target", "OrtCpuTarget"), M.mlp())
    return {"onnx": lowered.as_text("onnx"), "optimized": lowered.compile().as_text("optimized")}


# ---- dialects ------------------------------------------------------------------------------

def test_detect_dialect_of_real_stages(iree_mlp: dict[str, str], tvm_cbr: dict[str, str],
                                       ort_mlp: dict[str, str]) -> None:
    assert {detect_dialect(t) for t in iree_mlp.values()} == {"mlir"}
    assert {detect_dialect(t) for t in tvm_cbr.values()} == {"tvmscript"}
    assert {detect_dialect(t) for t in ort_mlp.values()} == {"onnx-text"}
    assert detect_dialect(tvm_cbr["relax"], "relax.py") == "tvmscript"
    assert detect_dialect("import os\n\ndef f():\n    pass\n", "tool.py") == "python"
    assert detect_dialect(ort_mlp["onnx"], "graph.txt") == "onnx-text"
    assert detect_dialect("anything", "flow.mlir") == "mlir"
    assert detect_dialect("anything", "kernel.ll") == "llvm"
    assert detect_dialect("anything", "kernel.s") == "asm"
    assert detect_dialect("HloModule m\n\nENTRY main {\n  ROOT p = f32[] parameter(0)\n}\n") == "hlo"
    assert detect_dialect("; ModuleID = 'x'\ndefine void @f() {\n  ret void\n}\n") == "llvm"
    assert detect_dialect("\t.text\n\t.globl\tf\nf:\n\tret\n") == "asm"
    assert detect_dialect("hello world\n", "notes.txt") == "text"


def test_unknown_dialect_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown dialect 'cobol'"):
        normalize("x", "cobol")


# ---- determinism and idempotence ----------------------------------------------------------------

_SUBPROCESS = """
import sys
sys.path.insert(0, {tests!r})
import models as M
from compstack.core import ir as cir
from compstack.analysis.irtext.normalize import normalize
from compstack.targets.iree.target import IreeLlvmCpuTarget
from compstack.targets.relax.target import TvmLlvmTarget
iree = IreeLlvmCpuTarget().lower(cir.from_proto(M.mlp()))
tvm = TvmLlvmTarget().lower(cir.from_proto(M.conv_bn_relu()))
sys.stdout.write(normalize(iree.as_text("flow")) + "\\0" + normalize(tvm.as_text("relax-fused")))
"""


def test_same_model_normalises_identically_across_lowerings_and_processes(
        iree_mlp: dict[str, str], tvm_cbr: dict[str, str]) -> None:
    iree_t = _target("compstack.targets.iree.target", "IreeLlvmCpuTarget")
    tvm_t = _target("compstack.targets.relax.target", "TvmLlvmTarget")
    again_flow = normalize(_lower(iree_t, M.mlp()).as_text("flow"))
    again_fused = normalize(_lower(tvm_t, M.conv_bn_relu()).as_text("relax-fused"))
    assert again_flow == normalize(iree_mlp["flow"])
    assert again_fused == normalize(tvm_cbr["relax-fused"])
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", _SUBPROCESS.format(tests=str(TESTS))], capture_output=True,
                         text=True, env=env, timeout=300, check=True).stdout
    flow, fused = out.split("\0")
    assert flow.encode() == again_flow.encode()
    assert fused.encode() == again_fused.encode()


def test_normalize_is_idempotent_on_every_stage(iree_mlp: dict[str, str], tvm_cbr: dict[str, str],
                                               ort_mlp: dict[str, str]) -> None:
    for name, text in [*iree_mlp.items(), *tvm_cbr.items(), *ort_mlp.items()]:
        once = normalize(text)
        assert normalize(once) == once, name
        assert once.endswith("\n") and "\n\n\n" not in once, name


# ---- MLIR ------------------------------------------------------------------------------------

def test_raw_mlir_with_locations_normalises_like_the_stage_text(iree_mlp: dict[str, str]) -> None:
    raw = iree_mlp["raw-input"]
    assert 'loc("matmul")' in raw and re.search(r'"0x[0-9A-F]{256,}"', raw)
    out = normalize(raw)
    assert "loc(" not in out and "#loc" not in out
    assert "%v0" in out and "^b0(" in out and "%arg0" not in out and "^bb0" not in out
    # The stage text had its locations and big blobs removed by the target; both agree.
    assert out == normalize(iree_mlp["input"])
    kept = normalize(raw, options=NormalizeOptions(strip_locations=False))
    assert 'loc("matmul")' in kept


def test_mlir_symbols_renamed_by_kind(iree_mlp: dict[str, str]) -> None:
    out = normalize(iree_mlp["flow"])
    assert "@mlp$async" not in out and "@__device_0" not in out
    assert "flow.executable private @executable0 {" in out
    assert "flow.dispatch @executable0::@export0(" in out
    assert "util.global private @global" in out and "util.func public @func0(" in out
    plain = normalize(iree_mlp["flow"], options=NormalizeOptions(rename=False))
    assert "@mlp$async_dispatch_0" in plain and "%arg0" in plain


def test_mlir_names_and_order_do_not_matter(iree_mlp: dict[str, str]) -> None:
    flow = iree_mlp["flow"]
    renamed = flow.replace("mlp$async", "other_name").replace("__device_0", "__dev")
    renamed = renamed.replace("%cst", "%konst")
    assert renamed != flow and normalize(renamed) == normalize(flow)
    # Move the entry wrapper `util.func public @mlp(...)` to the top of the module and
    # reorder an attribute dictionary.
    lines = flow.split("\n")
    start = next(i for i, ln in enumerate(lines) if ln.startswith("  util.func public @mlp("))
    end = next(i for i in range(start, len(lines)) if lines[i] == "  }")
    moved = [lines[0]] + lines[start:end + 1] + lines[1:start] + lines[end + 1:]
    reordered = "\n".join(moved).replace(
        '{inlining_policy = #util.inline.never, iree.abi.model = "coarse-fences", iree.abi.stub}',
        '{iree.abi.stub, iree.abi.model = "coarse-fences", inlining_policy = #util.inline.never}')
    assert reordered != flow and normalize(reordered) == normalize(flow)


def test_models_differing_in_one_constant_differ_only_in_its_hash(iree_mlp: dict[str, str]) -> None:
    other = _lower(_target("compstack.targets.iree.target", "IreeLlvmCpuTarget"), _scaled_mlp(2.0))
    for stage in ("torch-onnx", "input", "flow"):
        a, b = normalize(iree_mlp[stage]), normalize(other.as_text(stage))
        changed = [ln for ln in difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
                   if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        assert len(changed) == 2, (stage, changed)
        assert re.sub(r"#[0-9a-f]{8}", "#H", changed[0][1:]) == re.sub(r"#[0-9a-f]{8}", "#H", changed[1][1:])
        assert "bytes #" in changed[0]


def test_small_constants_are_kept_and_the_limit_is_an_option(iree_mlp: dict[str, str]) -> None:
    text = iree_mlp["input"]  # bias b: 32 values printed as dense<[...]>
    assert "dense<[...<32 elements #" in normalize(text)
    assert "dense<[-0.54395771" in normalize(text, options=NormalizeOptions(max_elements=32))
    assert "dense<[-0.54395771" in normalize(text, options=NormalizeOptions(elide_constants=False))


# ---- TVMScript -----------------------------------------------------------------------------------

def test_tvmscript_locals_canonical_and_metadata_note_dropped(tvm_cbr: dict[str, str]) -> None:
    out = normalize(tvm_cbr["relax"])
    assert "Metadata omitted" not in out
    # Bindings named after ONNX nodes (N_<node>) stay; TVM's own `lv` locals are
    # renumbered by position: lv2 -> lv_2 as the third `lv`; skipped numbers are closed up.
    assert "lv_2: R.Tuple(" in out and "= R.nn.batch_norm(N_conv, " in out
    assert "N_bn_1: R.Tensor((8,)" in out
    gapped = re.sub(r"\blv2\b", "lv17", tvm_cbr["relax"])
    assert normalize(gapped) == out


def test_tvmscript_functions_sorted_and_global_digits_dropped(tvm_cbr: dict[str, str]) -> None:
    fused = tvm_cbr["relax-fused"]
    out = normalize(fused)
    assert "def fused_conv2d_add(" in out and "R.call_tir(cls.fused_conv2d_add," in out
    # TVM's numeric suffix on a global is a uniqueness counter: dropped.
    assert normalize(fused.replace("fused_conv2d_add", "fused_conv2d_add3")) == out
    # The order of the module's functions does not matter.
    lines = fused.split("\n")
    starts = [i for i, ln in enumerate(lines) if ln.startswith("    @")]
    first, second = lines[starts[0]:starts[1]], lines[starts[1]:starts[2]]
    swapped = lines[:starts[0]] + second + first + lines[starts[2]:]
    assert swapped != lines and normalize("\n".join(swapped)) == out
    assert compile(out, "<normalised>", "exec")  # still valid Python


# ---- ONNX text and HLO -----------------------------------------------------------------------------

def test_onnx_text_renamed_and_node_names_stripped(ort_mlp: dict[str, str]) -> None:
    out = normalize(ort_mlp["optimized"])
    assert "%v3 = com.microsoft::FusedGemm<activation='Relu'" in out and "(%v0, %v1, %v2)" in out
    assert "MatMulAddFusion" not in out
    assert "init   %v1: FLOAT[16,32] #b3b6e54f" in out


def test_hlo_from_jax() -> None:
    jax = pytest.importorskip("jax")
    weights = np.random.default_rng(0).standard_normal((16, 32)).astype(np.float32)

    def f(x: Any) -> Any:
        return jax.nn.relu(x @ weights + 1.0)

    lowered = jax.jit(f).lower(np.zeros((4, 16), np.float32))
    hlo = lowered.as_text("hlo")
    optimized = lowered.compile().as_text()
    for text in (hlo, optimized):
        assert detect_dialect(text) == "hlo"
        out = normalize(text)
        assert normalize(out) == out
        assert "metadata=" not in out and "stack_frame_id" not in out and "FileNames" not in out
        assert re.search(r"\bROOT %?v\d+ = ", out)
    assert re.search(r"constant\(\{\.\.\.<512 elements #[0-9a-f]{8}>\}\)", normalize(hlo))
    renamed = re.sub(r"\bmain\.(\d+)", r"entry_fn.\1", hlo)
    assert normalize(renamed).replace("entry_fn", "main") == normalize(hlo)


def test_name_stem() -> None:
    cases: dict[str, str] = {"lv3": "lv", "lv": "lv", "T_add_1": "T_add", "param_0_1": "param",
                             "fused_conv2d_add1": "fused_conv2d_add", "fused_conv2d": "fused_conv2d", "7": "7"}
    assert {k: name_stem(k) for k in cases} == cases
    assert name_stem("fused_computation.12", ".") == "fused_computation"
