"""The ``openvino-cpu`` target on the real OpenVINO CPU plugin: numerics vs the float64
reference at f32 and bf16, stages, the blob artifact (lower -o, cache reload, its run
command), kernels mapped to zoo:cnn's nodes, per-kernel time vs end-to-end, and the
message when openvino is missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

pytest.importorskip("openvino")

from compstack.core.errors import UserError
from compstack.core.inputs import input_sets
from compstack.core.ir import graph_inputs
from compstack.core.latency import LatencyConfig
from compstack.frontends.sources import resolve_model
from compstack.targets.openvino.target import OpenVinoCpuTarget, OpenVinoOptions, core
from compstack.targets.reference.target import ReferenceTarget

if not OpenVinoCpuTarget.availability().ok:
    pytest.skip(OpenVinoCpuTarget.availability().reason, allow_module_level=True)

#: compare's default float32 tolerances (compstack.analysis.numerics).
RTOL, ATOL = 1e-3, 1e-5


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ov-cache")


@pytest.fixture(scope="module")
def cnn(cache: Path) -> dict:
    """zoo:cnn, its inputs, the float64 reference outputs, and the f32 compile."""
    source = resolve_model("zoo:cnn", cache_dir=cache)
    feeds = input_sets(graph_inputs(source.model), 2, 0, source.example_inputs or None, source.val_ranges)
    ref = ReferenceTarget().lower(source.model).compile().run(feeds[0])
    lowered = OpenVinoCpuTarget().lower(source.model)
    return {"source": source, "feeds": feeds, "ref": ref, "lowered": lowered,
            "compiled": lowered.compile_with_kernels()}


def _max_abs(got: dict, ref: dict) -> float:
    assert set(got) == set(ref)
    return max(float(np.max(np.abs(got[k].astype(np.float64) - ref[k].astype(np.float64)))) for k in ref)


def test_f32_agrees_with_float64_reference(cnn: dict) -> None:
    got = cnn["compiled"].run(cnn["feeds"][0])
    assert got["logits"].dtype == np.float32 and got["logits"].shape == cnn["ref"]["logits"].shape
    err = _max_abs(got, cnn["ref"])
    assert 0.0 < err < 1e-6  # measured 2.3e-8; bf16 would be ~1e-4
    np.testing.assert_allclose(got["logits"], cnn["ref"]["logits"], rtol=RTOL, atol=ATOL)
    assert cnn["compiled"].compiled_model.get_property("INFERENCE_PRECISION_HINT").to_string() == "f32"


def test_bf16_option_gives_larger_error(cnn: dict) -> None:
    if "BF16" not in core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        pytest.skip("this CPU has no bfloat16 support")
    target = OpenVinoCpuTarget(OpenVinoOptions(precision="bf16"))
    got = target.lower(cnn["source"].model).compile().run(cnn["feeds"][0])
    err_bf16 = _max_abs(got, cnn["ref"])
    err_f32 = _max_abs(cnn["compiled"].run(cnn["feeds"][0]), cnn["ref"])
    assert err_bf16 > 100 * err_f32 and err_bf16 > ATOL  # measured 4.3e-4 vs 2.3e-8
    assert not np.allclose(got["logits"], cnn["ref"]["logits"], rtol=RTOL, atol=ATOL)


def test_stages(cnn: dict) -> None:
    lowered = cnn["lowered"]
    assert lowered.stage_names() == ["onnx", "ov-model", "runtime"]
    ov_model = lowered.as_text("ov-model")
    assert "Convolution-opset1(%image" in ov_model and "BatchNormInference" in ov_model
    runtime = lowered.as_text("runtime")
    # BatchNorm folded: the convolution runs as Multiply_N with the BN and ReLU names
    assert "= Convolution<" in runtime
    assert "node__native_batch_norm_legit_no_training__0,node_relu" in runtime
    assert "f32" in runtime and "Reorder<" in runtime


def test_options_are_checked() -> None:
    with pytest.raises(UserError, match="precision=fp8: expected one of f32, bf16"):
        OpenVinoOptions.from_strings({"precision": "fp8"}, "openvino-cpu")
    opts = OpenVinoOptions.from_strings({"precision": "bf16", "num_threads": "1"}, "openvino-cpu")
    assert opts.config() == {"INFERENCE_PRECISION_HINT": "bf16", "PERFORMANCE_HINT": "LATENCY",
                             "INFERENCE_NUM_THREADS": "1"}


def test_kernels_cover_zoo_cnn(cnn: dict) -> None:
    kmap = cnn["compiled"].kernels()
    assert kmap is not None and kmap.coverage == 1.0 and not kmap.unmapped
    by_node = {n: k for k in kmap.kernels if k.kind != "copy" for n in k.nodes}
    # conv + BN + ReLU in one oneDNN convolution; the conv's own name is lost (inferred)
    first = by_node["node_conv2d"]
    assert first is by_node["node__native_batch_norm_legit_no_training__0"] is by_node["node_relu"]
    assert first.inferred == ["node_conv2d"] and first.detail["layer_type"] == "Convolution"
    # the residual Add and ReLU are fused into the third conv's post-ops, by record
    third = by_node["node_add"]
    assert {"node_conv2d_2", "node_relu_2"} <= set(third.nodes) and "node_add" not in third.inferred
    # Gemm writes the graph output: the layer is renamed to the tensor (logits)
    assert by_node["node_linear"].id == "logits" and not by_node["node_linear"].inferred
    copies = [k for k in kmap.kernels if k.kind == "copy"]
    assert copies and all(k.detail["layer_type"] == "Reorder" for k in copies)
    assert sum(k.flops or 0 for k in kmap.kernels) > 0


@pytest.mark.serial  # a kernel-time sum set beside an end-to-end time: alone on the machine
def test_profile_sum_close_to_end_to_end(cnn: dict) -> None:
    # one thread: on a shared 2-core machine, waits between layers for a preempted worker
    # thread are in the end-to-end time but in no layer's time
    compiled = OpenVinoCpuTarget(OpenVinoOptions(num_threads=1)).lower(cnn["source"].model).compile()
    prof = compiled.profile(cnn["feeds"], LatencyConfig(warmup=3, min_runs=30, min_time_s=0.2),
                            compiled.kernels())
    assert prof is not None and prof.runs >= 30
    ids = {k.id for k in compiled.kernels().kernels}
    timed = {k.id for k in prof.kernels}
    # every timed layer is a kernel of the map: the six convolutions at least (the Gemm
    # can stay under the counters' 1 µs resolution)
    assert timed <= ids and len(timed) >= 6
    ratio = prof.sum_over_e2e
    assert ratio is not None and 0.5 < ratio < 1.2, (prof.kernel_sum, prof.end_to_end)
    assert all(k.p10 is None and k.cv is None and k.median > 0 for k in prof.kernels)


def test_lower_writes_blob_and_stages_and_reloads(cnn: dict, cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "ov"
    proc = run_cli("lower", "zoo:cnn", "--target", "openvino-cpu", "-o", str(out),
                   env={"COMPSTACK_CACHE_DIR": str(cache)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["artifacts"] == ["model.blob"]
    assert manifest["stages"] == ["onnx", "ov-model", "runtime"]
    assert sorted(p.name for p in (out / "stages").iterdir()) == ["00-onnx.txt", "01-ov-model.txt",
                                                                  "02-runtime.txt"]
    blob = out / "model.blob"
    assert blob.stat().st_size > 20_000  # the weights are inside
    loaded = OpenVinoCpuTarget().load_compiled(out, cnn["source"].model)
    np.testing.assert_allclose(loaded.run(cnn["feeds"][0])["logits"], cnn["ref"]["logits"], rtol=RTOL, atol=ATOL)
    assert str(blob.resolve()) in loaded.run_command
    ran = subprocess.run(manifest["run_command"], check=False, shell=True, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0 and ran.stdout.strip().endswith("ms (last of 100 runs)"), ran.stderr[-1000:]


def test_unavailable_without_openvino_is_one_actionable_line() -> None:
    code = ("import sys; sys.modules['openvino'] = None\n"
            "from compstack.targets.openvino.target import OpenVinoCpuTarget\n"
            "a = OpenVinoCpuTarget.availability(); print(a.ok); print(a.reason)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ})
    ok, reason = proc.stdout.strip().splitlines()
    assert ok == "False" and reason.endswith("pip install openvino") and "\n" not in reason


def test_second_compare_loads_the_blob_from_the_cache(cache: Path, tmp_path: Path) -> None:
    env = {"COMPSTACK_CACHE_DIR": str(cache), "COMPSTACK_DB": str(tmp_path / "db.sqlite")}
    rows = []
    for _ in range(2):
        proc = run_cli("compare", "zoo:cnn", "--targets", "openvino-cpu", "--no-latency", "--json", env=env)
        assert proc.returncode == 0, proc.stderr[-2000:]
        rows.append(json.loads(proc.stdout)["results"][0])
    assert [r["cached"] for r in rows] == [False, True]
    for r in rows:
        assert r["status"] == "ok" and r["flags"]["config"]["INFERENCE_PRECISION_HINT"] == "f32"
        assert 0 < r["outputs"][0]["max_abs_err"] < 1e-6  # f32 again after the reload
    assert list((cache / "artifacts" / "openvino-cpu").glob("*/model.blob"))
