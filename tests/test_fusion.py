"""Kernel maps (compstack.kernels) on graphs whose fusion is known, for every CPU target;
fusion comparison and --missed; coverage on zoo:cnn; CLI errors.

The expected partitions are what each stack does with the versions this project pins
(ORT 1.32, TVM 0.27, IREE 3.13, jaxlib 0.10, torch 2.13), checked by hand: a stack upgrade
that changes its fusion shows up here first.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from models import conv_bn_relu, mlp

from compstack import ir as cir
from compstack import targets as registry
from compstack.fusion.analysis import compare_partitions, fusion_groups, missed_fusions
from compstack.kernels import GraphIndex, KernelMap

CPU = ("ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu")


def _maps(proto: object, name: str) -> dict[str, KernelMap]:
    model = cir.canonicalize(proto, source=name)
    out = {}
    for target in CPU:
        cls = registry.get(target)
        if not cls.availability().ok:
            continue
        kmap = cls().lower(model).compile_with_kernels().kernels()
        assert kmap is not None, target
        out[target] = kmap
    return out


@pytest.fixture(scope="module")
def mlp_maps() -> dict[str, KernelMap]:
    return _maps(mlp(), "mlp")


@pytest.fixture(scope="module")
def cbr_maps() -> dict[str, KernelMap]:
    return _maps(conv_bn_relu(), "conv_bn_relu")


def _groups(kmap: KernelMap) -> set[frozenset[str]]:
    return set(fusion_groups(kmap))


#: MatMul -> Add -> Relu: the fusion groups (copy kernels left out) each stack makes.
MLP_GROUPS = {
    "ort-cpu": {frozenset({"matmul", "add", "relu"})},          # MatMulAddFusion -> Gemm + Relu
    "tvm-llvm": {frozenset({"matmul", "add", "relu"})},         # fused_matmul_add_relu
    "iree-llvm-cpu": {frozenset({"matmul", "add", "relu"})},    # one matmul dispatch with the epilogue
    "xla-cpu": {frozenset({"matmul"}), frozenset({"add", "relu"})},        # YNNPACK dot, loop fusion
    "inductor-cpu": {frozenset({"matmul", "add"}), frozenset({"relu"})},   # extern addmm, cpp_fused_relu
}
#: Conv -> BatchNormalization -> Relu.
CBR_GROUPS = {
    "ort-cpu": {frozenset({"conv", "bn", "relu"})},             # BN folded, NCHWc Conv with Relu
    "tvm-llvm": {frozenset({"conv"}), frozenset({"bn", "relu"})},  # FuseOps keeps BN out of conv2d
    "iree-llvm-cpu": {frozenset({"conv", "bn", "relu"})},       # conv dispatch with BN+ReLU consumer
    "inductor-cpu": {frozenset({"conv"}), frozenset({"bn", "relu"})},  # extern conv + cpp kernel
}


@pytest.mark.parametrize("target", CPU)
def test_mlp_kernels(mlp_maps: dict[str, KernelMap], target: str) -> None:
    if target not in mlp_maps:
        pytest.skip(f"{target} unavailable here")
    kmap = mlp_maps[target]
    assert kmap.coverage == 1.0 and not kmap.unmapped
    assert _groups(kmap) == MLP_GROUPS[target]
    assert len(kmap.kernels) == len(MLP_GROUPS[target])
    for k in kmap.kernels:
        assert k.kind in ("generated", "library", "copy") and k.nodes
        assert k.flops is not None and k.bytes and k.bytes > 0
    # FLOPs of the graph end up in the kernels: 2*4*16*32 (MatMul) + 128 (Add) + 128 (Relu)
    assert sum(k.flops for k in kmap.kernels) == 2 * 4 * 16 * 32 + 128 + 128


@pytest.mark.parametrize("target", CPU)
def test_conv_bn_relu_kernels(cbr_maps: dict[str, KernelMap], target: str) -> None:
    if target not in cbr_maps:
        pytest.skip(f"{target} unavailable here")
    kmap = cbr_maps[target]
    assert kmap.coverage == 1.0
    groups = _groups(kmap)
    if target == "xla-cpu":  # the convolution is a library call; BN+ReLU are fused after it
        assert frozenset({"conv"}) in groups and any({"bn", "relu"} <= g for g in groups)
    else:
        assert groups == CBR_GROUPS[target]
    kinds = kmap.kinds()
    if target in ("iree-llvm-cpu", "inductor-cpu", "xla-cpu"):
        assert kinds["copy"] >= 1  # padding / layout copies the stack inserted, given to the conv
        copies = [k for k in kmap.kernels if k.kind == "copy"]
        assert all("conv" in k.nodes for k in copies)


def test_missed_finds_conv_bn(cbr_maps: dict[str, KernelMap]) -> None:
    if not {"tvm-llvm", "iree-llvm-cpu"} <= set(cbr_maps):
        pytest.skip("needs tvm-llvm and iree-llvm-cpu")
    maps = {t: cbr_maps[t] for t in ("tvm-llvm", "iree-llvm-cpu")}
    index = GraphIndex(cir.canonicalize(conv_bn_relu(), source="cbr"))
    pairs = missed_fusions(maps, index)
    found = {(p.producer, p.consumer): p for p in pairs}
    assert ("conv", "bn") in found
    p = found[("conv", "bn")]
    assert p.fused_by == {"iree-llvm-cpu": p.fused_by["iree-llvm-cpu"]} and "tvm-llvm" in p.split_by
    assert p.bytes == 1 * 8 * 16 * 16 * 4  # the conv output TVM writes and reads back
    diff = compare_partitions(maps, index)
    assert diff.common == 0 and any(g["nodes"] == ["conv", "bn", "relu"] for g in diff.groups)


@pytest.fixture(scope="module")
def cnn_fusion(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("fusion-cnn")
    env = {"COMPSTACK_CACHE_DIR": str(root / "cache"), "COMPSTACK_DB": str(root / "db.sqlite")}
    proc = run_cli("fusion", "zoo:cnn", "--targets", ",".join(CPU), "--json", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_zoo_cnn_coverage_every_target(cnn_fusion: dict) -> None:
    rows = {r["target"]: r for r in cnn_fusion["targets"]}
    assert set(rows) == set(CPU)
    for target, row in rows.items():
        if row["status"] == "unavailable":
            continue
        km = row["kernels"]
        assert row["status"] == "ok", (target, row["error"])
        assert km["coverage"] == 1.0 or all(u["reason"] for u in km["unmapped"]), target
        assert km["kernel_count"] == len(km["kernels"]) > 0
    # the partitions differ (TVM keeps BN out of conv, IREE and ORT do not) and are listed
    assert cnn_fusion["partitions"]["groups"]


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    import onnx

    onnx.save(mlp(), model)
    for args, text in ((("fusion", str(model), "--targets", "nope"), "unknown target"),
                       (("fusion", str(model), "--by-node"), "--by-node needs per-kernel times"),
                       (("fusion", str(model), "--targets", "ort-cpu", "--missed"), "at least two"),
                       (("fusion", str(tmp_path / "absent.onnx")), "")):
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("compstack: error:") and text in lines[0], proc.stderr


def test_kernel_modules_import_no_stack() -> None:
    code = ("import sys, compstack.kernels, compstack.fusion.analysis, compstack.fusion.report, "
            "compstack.fusion.roofline, compstack.fusion.explorer, compstack.fusion.run, compstack.fusion.commands; "
            "bad = [m for m in ('torch', 'jax', 'tvm', 'iree', 'onnxruntime') if m in sys.modules]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_xla_native_jax_source_maps_by_source_line(tmp_path: Path) -> None:
    """A JAX-native program (no named_scope per node): HLO stack frames + primitives."""
    if not registry.get("xla-cpu").availability().ok:
        pytest.skip("xla-cpu unavailable here")
    from compstack.native import load_native
    from compstack.sources import resolve_model

    source = resolve_model("zoo:jax-mlp", cache_dir=tmp_path)
    target = registry.get("xla-cpu")()
    target.native = load_native("zoo:jax-mlp", [v.name for v in source.model.graph.inputs if not v.is_initializer()])
    assert target.chosen_path() == "native"
    kmap = target.lower(source.model).compile_with_kernels().kernels()
    assert kmap is not None and kmap.coverage == 1.0
    assert any(k.kind == "library" and any("dot_general" in n for n in k.nodes) for k in kmap.kernels)
