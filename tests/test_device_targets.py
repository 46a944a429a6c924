"""IREE's GPU targets: artifacts are produced and checked here; they run where a device exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compstack.targets.iree.gpu import IreeCudaTarget, IreeVulkanTarget
from conftest import run_cli

SPIRV_MAGIC = b"\x03\x02\x23\x07"  # 0x07230203, little-endian (SPIR-V spec, section 2.3)


def test_lower_vulkan_alias_writes_spirv(mlp_onnx: Path, isolated_env: Path) -> None:
    out = isolated_env / "vk"
    proc = run_cli("lower", str(mlp_onnx), "--target", "vulkan", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["target"] == "iree-vulkan" and manifest["device"] == "vulkan"
    assert "--iree-hal-target-device=vulkan" in manifest["flags"]["iree-compile"]
    assert SPIRV_MAGIC in (out / "model.vmfb").read_bytes()
    assert manifest["run_command"].startswith("iree-run-module --device=vulkan ")
    assert "spirv" in (out / "stages" / "10-executable-targets.mlir").read_text()
    if not IreeVulkanTarget.availability().runs:
        assert manifest["runs_here"] is False and "vulkan" in manifest["run_reason"]


@pytest.mark.parametrize("arch", ["sm_80", "sm_86"])
def test_lower_cuda_writes_ptx_for_the_chosen_arch(mlp_onnx: Path, isolated_env: Path, arch: str) -> None:
    out = isolated_env / arch
    proc = run_cli("lower", str(mlp_onnx), "--target", "iree-cuda", "-o", str(out),
                   "--option", f"iree-cuda:gpu_target={arch}")
    assert proc.returncode == 0, proc.stderr
    vmfb = (out / "model.vmfb").read_bytes()
    assert f".target {arch}".encode() in vmfb and b".entry " in vmfb  # PTX inside the .vmfb


@pytest.mark.skipif(IreeCudaTarget.availability().runs, reason="a CUDA device is present")
def test_compare_cuda_without_device_compiles_and_says_why(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--targets", "cuda", "--no-latency", "--json")
    assert proc.returncode == 0, proc.stderr  # unavailable is not a failure
    row = next(r for r in json.loads(proc.stdout)["results"] if r["target"] == "iree-cuda")
    assert row["status"] == "unavailable" and row["stage"] == "run" and row["compile_s"] > 0
    assert "cannot run here" in row["error"] and "cuda" in row["error"]


@pytest.mark.skipif(not IreeCudaTarget.availability().runs, reason="needs an NVIDIA GPU")
def test_compare_cuda_on_gpu(mlp_onnx: Path, isolated_env: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--targets", "iree-cuda", "--json", "--min-runs", "5", "--min-time", "0")
    row = json.loads(proc.stdout)["results"][0]
    assert row["status"] == "ok", row["error"]
    assert row["outputs"][0]["max_abs_err"] < 1e-4


def test_targets_lists_device_targets_and_aliases(isolated_env: Path) -> None:
    rows = {r["name"]: r for r in json.loads(run_cli("targets", "--json").stdout)}
    assert rows["iree-vulkan"]["aliases"] == ["vulkan"] and "cuda" in rows["iree-cuda"]["aliases"]
    for name in ("iree-vulkan", "iree-cuda", "iree-rocm"):
        assert rows[name]["available"]  # the compiler is here
        if not rows[name]["runs"]:
            assert "device" in rows[name]["reason"] or "driver" in rows[name]["reason"]


def test_lower_tvm_cuda_kernels_compile_with_nvcc(mlp_onnx: Path, isolated_env: Path) -> None:
    import shutil
    import subprocess

    out = isolated_env / "tc"
    proc = run_cli("lower", str(mlp_onnx), "--target", "tvm-cuda", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["flags"]["target"]["kind"] == "cuda" and manifest["flags"]["target"]["arch"] == "sm_80"
    source = out / "stages" / "07-cuda.cu"
    kernels = source.read_text().count("__global__")
    assert kernels >= 1 and (out / "model.so").stat().st_size > 1000
    if shutil.which("nvcc") is None:
        pytest.skip("nvcc not installed: the CUDA C was generated but not compiled")
    cubin = isolated_env / "k.cubin"
    done = subprocess.run(["nvcc", "-arch=sm_80", "-cubin", "-o", str(cubin), str(source)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert cubin.read_bytes()[:4] == b"\x7fELF"


def test_tvm_vulkan_says_what_is_missing(isolated_env: Path) -> None:
    rows = {r["name"]: r for r in json.loads(run_cli("targets", "--json").stdout)}
    vk = rows["tvm-vulkan"]
    if not vk["available"]:
        assert "USE_VULKAN" in vk["reason"]
    assert "cuda" in rows["tvm-cuda"]["aliases"]


def test_ort_cuda_needs_the_gpu_build(isolated_env: Path) -> None:
    import onnxruntime as ort

    rows = {r["name"]: r for r in json.loads(run_cli("targets", "--json").stdout)}
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        assert not rows["ort-cuda"]["available"] and "onnxruntime-gpu" in rows["ort-cuda"]["reason"]
    assert "cuda" in rows["ort-cuda"]["aliases"]
