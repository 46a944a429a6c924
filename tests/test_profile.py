"""Per-kernel timing (Compiled.profile) on every CPU target, attribution to nodes, the
roofline, the profile CLI with --by-node/--json/--export-model-explorer (checked against
Model Explorer's own node-data classes), and GPU targets skipping cleanly.

Stated factor: on the conv_bn_relu test graph (1x3x32x32 -> 16 channels), the median
per-run sum of kernel times is within a factor of 5 of the median end-to-end latency
(profiler off), both ways. What the factor holds on this 2-core machine (measured): ORT
(its profiler adds ~4 us per node) above 1; IREE, Inductor and TVM below 1 where the
runtime's own per-call work is not in any kernel.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from compstack import targets as registry
from compstack.analysis.fusion.analysis import by_node
from compstack.analysis.fusion.roofline import Peak, machine_peak, place
from compstack.analysis.kernels import GraphIndex, ProfileSamples
from compstack.core import ir as cir
from compstack.core.latency import LatencyConfig
from conftest import run_cli, said
from models import conv_bn_relu, inputs_for, mlp

CPU = ("ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu")
FACTOR = 5.0
PROTOCOL = LatencyConfig(warmup=2, min_runs=8, min_time_s=0.05, input_sets=2)


@pytest.fixture(scope="module")
def graph() -> tuple:
    proto = conv_bn_relu(n=1, c=3, hw=32, k=16)
    model = cir.canonicalize(proto, source="cbr")
    return model, inputs_for(proto)


def _alone(cls: type, model: object, feeds: dict) -> tuple:
    """Compile and profile again with one thread, up to three times, keeping the first profile
    whose kernel sum lies within FACTOR of its end-to-end time (else the last one)."""
    from compstack.targets.request import LowerRequest

    for _ in range(3):
        compiled = cls(request=LowerRequest(threads=1)).lower(model).compile_with_kernels()
        prof = compiled.profile([feeds, feeds], PROTOCOL, compiled.kernels())
        if prof is not None and 1 / FACTOR < (prof.sum_over_e2e or 0.0) < FACTOR:
            break
    return compiled, prof


@pytest.mark.serial  # a kernel-time sum set beside an end-to-end time: alone on the machine
@pytest.mark.parametrize("target", CPU)
def test_kernel_times_sum_near_end_to_end(graph: tuple, target: str) -> None:
    model, feeds = graph
    cls = registry.get(target)
    if not cls.availability().ok:
        pytest.skip(f"{target} unavailable here")
    compiled = cls().lower(model).compile_with_kernels()
    kmap = compiled.kernels()
    prof = compiled.profile([feeds, feeds], PROTOCOL, kmap)
    assert prof is not None
    if not 1 / FACTOR < (prof.sum_over_e2e or 0.0) < FACTOR:
        # A busy machine can make one measurement disagree with the other. What holds at any
        # load: a kernel sum above the end-to-end time is flagged to the user, and the same
        # program measured alone (one thread, retried) gives a consistent sum.
        if (prof.sum_over_e2e or 0.0) >= FACTOR:
            assert not prof.consistent, (target, prof.sum_over_e2e, prof.inconsistencies())
        compiled, prof = _alone(cls, model, feeds)
        kmap = compiled.kernels()
    assert prof.runs >= PROTOCOL.min_runs and prof.warmup == PROTOCOL.warmup
    assert [k.id for k in prof.kernels] == [k.id for k in kmap.kernels]  # every kernel timed, map order
    assert all(k.median >= 0 and k.p10 <= k.median <= k.p90 for k in prof.kernels)
    assert sum(k.median for k in prof.kernels) > 0
    ratio = prof.sum_over_e2e
    print(f"{target}: kernel sum {prof.kernel_sum['median']:.4f} ms, end-to-end {prof.end_to_end['median']:.4f} ms, "
          f"ratio {ratio:.2f}")
    assert ratio is not None and 1 / FACTOR < ratio < FACTOR, (target, ratio, prof.kernel_sum, prof.end_to_end)
    print(f"{target}: kernel sum / profiled run {prof.sum_over_profiled_run}; {prof.inconsistencies()}")
    if target == "inductor-cpu":  # what explains an Inductor profile on a busy machine
        assert any(n.startswith("torch intra-op threads: ") for n in prof.notes), prof.notes
    # by-node attribution spends exactly the time of the kernels that compute nodes
    index = GraphIndex(model)
    rows = by_node({target: kmap}, {target: prof}, index)
    spent = sum(r.ms[target] or 0.0 for r in rows)
    expect = sum(prof.time_of(k.id).median for k in kmap.kernels if any(n in index.compute_set for n in k.nodes))
    assert spent == pytest.approx(expect, rel=1e-9)
    conv = next(r for r in rows if r.node == "conv")
    assert conv.method[target] in ("flops", "mixed", "even") and conv.ms[target] > 0


def test_roofline_place_and_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    peak = Peak(gflops=100.0, gbs=10.0, gemm_n=64, copy_mib=1, threads=1, measured_at=0.0)
    assert peak.ridge == 10.0
    hi = place(flops=2_000_000, nbytes=10_000, time_ms=0.1, peak=peak)  # 200 FLOP/B: compute-bound
    assert hi["bound"] == "compute" and hi["gflops"] == pytest.approx(20.0) and hi["fraction"] == pytest.approx(0.2)
    lo = place(flops=1_000, nbytes=1_000_000, time_ms=1.0, peak=peak)  # 0.001 FLOP/B: memory-bound
    assert lo["bound"] == "memory" and lo["gbs"] == pytest.approx(1.0)
    assert lo["fraction"] == pytest.approx(1e-3 / (1e-3 * 10.0))
    copy = place(flops=0, nbytes=2_000_000, time_ms=1.0, peak=peak)
    assert copy["fraction"] == pytest.approx(0.2)
    calls = []

    def fake() -> Peak:
        calls.append(1)
        return peak

    monkeypatch.setattr("compstack.analysis.fusion.roofline.measure_peak", fake)
    assert machine_peak(tmp_path) == peak and machine_peak(tmp_path) == peak
    assert len(calls) == 1  # measured once, then read from the cache
    assert machine_peak(tmp_path, refresh=True) == peak and len(calls) == 2


def _check_model_explorer(files: list[str], onnx_path: Path, graph_id: str, nodes: set[str]) -> None:
    """Parse our node data with Model Explorer's own classes (and its ONNX adapter's ids)."""
    ndb = pytest.importorskip("model_explorer.node_data_builder")
    dacite = pytest.importorskip("dacite")
    data_files = [f for f in files if f.endswith((".time.json", ".kernel.json"))]
    assert data_files
    for f in data_files:
        doc = json.loads(Path(f).read_text())
        assert list(doc) == [graph_id]
        parsed = {g: dacite.from_dict(ndb.GraphNodeData, body, config=dacite.Config(strict=True))
                  for g, body in doc.items()}
        again = json.loads(ndb.ModelNodeData(graphsData=parsed).to_json_string())
        for g, body in doc.items():  # nothing of ours is outside Model Explorer's schema
            assert {k: again[g][k] for k in body} == body
        assert set(doc[graph_id]["results"]) <= nodes and doc[graph_id]["results"]
    try:
        from model_explorer_onnx.main import ONNXAdapter
    except ImportError:
        return
    graph = ONNXAdapter().convert(str(onnx_path), {})["graphs"][0]
    assert graph.id == graph_id
    ids = {n.id for n in graph.nodes}
    for f in data_files:
        assert set(json.loads(Path(f).read_text())[graph_id]["results"]) <= ids


def test_profile_cli_by_node_json_and_model_explorer(isolated_env: Path) -> None:
    proto = mlp()
    path = isolated_env / "mlp.onnx"
    model = cir.canonicalize(proto, source="mlp")
    cir.save(model, path)
    out = isolated_env / "me"
    proc = run_cli("profile", str(path), "--target", "ort-cpu", "--by-node", "--json", "--min-runs", "5",
                   "--min-time", "0", "--warmup", "1", "--export-model-explorer", str(out))
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    row = doc["targets"][0]
    assert row["status"] == "ok" and row["profile"]["runs"] >= 5
    assert doc["peak"]["gflops"] > 0 and doc["peak"]["gbs"] > 0
    if row["profile"]["consistent"]:  # throughput only from a profile that describes the runs
        assert set(row["roofline"]) == {k["id"] for k in row["profile"]["kernels"]}
    else:
        assert row["roofline"] == {} and row["profile"]["inconsistencies"], row["profile"]
    nodes = {r["node"] for r in doc["by_node"]}
    assert nodes == {"matmul", "add", "relu"}
    assert all(r["ms"]["ort-cpu"] is not None and r["ms"]["ort-cpu"] >= 0 for r in doc["by_node"])
    _check_model_explorer(doc["model_explorer_files"], path, model.graph.name, {n.name for n in model.graph})
    text = run_cli("profile", str(path), "--target", "ort-cpu", "--by-node", "--min-runs", "3", "--min-time", "0")
    assert text.returncode == 0 and "kernel sum / end-to-end" in text.stdout and "time per source node" in text.stdout


def test_gpu_target_skips_cleanly_and_cli_errors(isolated_env: Path) -> None:
    path = isolated_env / "mlp.onnx"
    onnx.save(mlp(), path)
    gpu = run_cli("profile", str(path), "--target", "ort-cuda", "--by-node", "--min-runs", "2", "--min-time", "0")
    avail = registry.get("ort-cuda").availability()
    if avail.ok and avail.runs:
        pytest.skip("a CUDA device is present: ort-cuda profiles")
    assert gpu.returncode == 1, gpu.stderr
    assert "unavailable" in gpu.stdout and "Traceback" not in gpu.stderr
    assert said(gpu.stderr)[-1].startswith("compstack: --by-node: no target produced")
    for args, text in ((("--target", "nope"), "unknown target"),
                       (("--target", "ort-cpu", "--targets", "tvm-llvm"), "give one of them"),
                       (("--target", "cpu"), "give one")):
        proc = run_cli("profile", str(path), *args)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = said(proc.stderr)
        assert len(lines) == 1 and lines[0].startswith("compstack: error:") and text in lines[0], proc.stderr
    assert np.isfinite(FACTOR)


def _row_with(samples: ProfileSamples, e2e_ms: float) -> tuple:
    """A profiled row of the mlp graph (one kernel per node) built from given samples."""
    from compstack.analysis.kernels import Kernel, build_map, make_profile
    from compstack.fusion.run import TargetKernels

    model = cir.canonicalize(mlp(), source="mlp")
    kmap = build_map(model, "t", [Kernel(n, "generated", [n]) for n in ("matmul", "add", "relu")])
    e2e = {"median": e2e_ms, "p10": e2e_ms, "p90": e2e_ms, "cv": 0.01, "runs": 10}
    prof = make_profile("t", samples, e2e, warmup=1, order=[k.id for k in kmap.kernels])
    return TargetKernels(target="t", status="ok", kernels=kmap, profile=prof), model


@pytest.mark.parametrize("case", ["consistent", "per_thread", "slow_window", "fast_window"])
def test_profile_cross_checks_and_no_throughput_when_inconsistent(case: str) -> None:
    """Issue #13 item 15: a profile whose kernel sum exceeds its runs' wall time (counted per
    thread), exceeds the end-to-end latency, or comes from runs far slower or faster than the
    end-to-end ones is flagged, and then no GFLOP/s, GB/s or roofline is printed or returned."""
    import io

    from rich.console import Console

    from compstack.analysis.fusion.report import print_profile, roofline_rows
    runs = 6
    per_kernel = {"matmul": 0.050, "add": 0.010, "relu": 0.010}  # ms per run
    copies = 2 if case == "per_thread" else 1  # two threads' events summed into one kernel
    slow = 100.0 if case == "slow_window" else 1.0  # e.g. a thread pool stalled while profiling
    samples = ProfileSamples(profiler="test", kernels={k: [v * copies * slow] * runs for k, v in per_kernel.items()},
                             run_ms=[0.075 * slow] * runs)
    e2e = 0.075 * (200.0 if case == "fast_window" else 1.0)  # fast_window: the end-to-end runs stalled
    row, _ = _row_with(samples, e2e)
    prof = row.profile
    peak = Peak(gflops=100.0, gbs=10.0, gemm_n=64, copy_mib=1, threads=1, measured_at=0.0)
    problems = prof.inconsistencies()
    buf = io.StringIO()
    print_profile(row, peak, Console(file=buf, width=400))
    text = buf.getvalue()
    assert "kernel sum / end-to-end" in text and "kernel sum / profiled run" in text
    if case == "consistent":
        assert problems == [] and prof.consistent
        assert set(roofline_rows(row, peak)) == set(per_kernel) and "roofline: peak" in text
        assert prof.to_json()["consistent"] is True
        return
    assert problems and not prof.consistent, (case, prof.kernel_sum, prof.profiled_run, prof.end_to_end)
    if case == "per_thread":
        assert "counted more than once" in problems[0]
    if case in ("slow_window", "fast_window"):
        assert any("different machine states" in p for p in problems)
    assert roofline_rows(row, peak) == {}
    assert "inconsistent profile" in text and "roofline: peak" not in text and "no throughput" in text
    doc = prof.to_json()
    assert doc["consistent"] is False and doc["inconsistencies"] == problems
    gflops_col = [line.split("│")[10].strip() for line in text.splitlines() if line.startswith("│")]
    assert gflops_col and set(gflops_col) == {"-"}, gflops_col  # no throughput printed
