"""``--threads``: every CPU stack asked for 1 thread runs on 1 busy thread, as observed
from the worker's own per-thread CPU times; and the observation itself can see 2 threads."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compstack.core.threads import ThreadSampler, physical_cores, thread_env
from conftest import run_cli, said

CPU_TARGETS = ("ort-cpu", "tvm-llvm", "iree-llvm-cpu", "xla-cpu", "inductor-cpu")


def _gemm_model(path: Path, m: int = 64, k: int = 256, layers: int = 3) -> Path:
    """``layers`` x (MatMul k x k, Relu): enough work per run for a thread pool to split."""
    rng = np.random.default_rng(0)
    nodes, inits, prev = [], [], "x"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((k, k)) / k).astype(np.float32), f"w{i}"))
        nodes += [helper.make_node("MatMul", [prev, f"w{i}"], [f"h{i}"], name=f"mm{i}"),
                  helper.make_node("Relu", [f"h{i}"], [f"r{i}"], name=f"relu{i}")]
        prev = f"r{i}"
    graph = helper.make_graph(nodes, "gemms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [m, k])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _burn(seconds: float) -> None:
    """CPU work that releases the GIL (hashlib on large buffers), so threads run in parallel."""
    import time

    data = b"x" * (1 << 20)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        hashlib.sha256(data).digest()


def test_sampler_sees_one_and_two_busy_threads() -> None:
    with ThreadSampler() as one:
        _burn(0.6)
    assert one.use is not None
    assert one.use.busy == 1
    assert one.use.caller_cpu_per_wall > 0.0
    done = threading.Event()

    def worker() -> None:
        _burn(0.6)
        done.wait()  # a thread that has exited leaves /proc/self/task: keep it until sampled

    t = threading.Thread(target=worker)
    t.start()
    with ThreadSampler() as two:
        _burn(0.6)
    done.set()
    t.join()
    assert two.use is not None
    assert two.use.busy == 2
    assert two.use.busy_besides_caller == 1
    assert two.use.alive >= 1


def test_thread_env_and_default() -> None:
    assert thread_env(0) == {}
    env = thread_env(3)
    assert env["OMP_NUM_THREADS"] == "3" and env["TVM_NUM_THREADS"] == "3"
    assert 1 <= physical_cores() <= len(__import__("os").sched_getaffinity(0))


@pytest.mark.serial  # CPU time per wall second and a latency: alone on the machine
def test_every_cpu_stack_honours_one_thread(isolated_env: Path) -> None:
    model = _gemm_model(isolated_env / "gemms.onnx")
    proc = run_cli("compare", str(model), "--targets", ",".join(CPU_TARGETS), "--threads", "1", "--json",
                   "--min-time", "0.6", "--min-runs", "20")
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = {r["target"]: r for r in json.loads(proc.stdout)["results"]}
    assert set(rows) == set(CPU_TARGETS)
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["error"])
        th = row["flags"]["threads"]
        assert th["requested"] == 1, (name, th)
        assert th["honoured"] is True, (name, th)
        if th.get("bound") == "cpus":  # XLA: the knob is the affinity mask
            assert th["cpus_allowed"] == 1, (name, th)
        else:
            computing = th["busy_besides_caller"] if th.get("caller_waits") else th["observed_busy"]
            assert computing == 1, (name, th, row["latency_ms"]["threads"])
        assert th["cpu_per_wall"] <= (1 + bool(th.get("caller_waits"))) * 1.1 + 0.05, (name, th)
        assert th["consistent"] is True, (name, th)
        lat = row["latency_ms"]
        assert lat["ci95"][0] <= lat["median"] <= lat["ci95"][1], (name, lat)
        assert lat["load_before"] is not None and lat["cpus"] >= 1


def test_bad_threads_value_is_one_line_exit_2(isolated_env: Path) -> None:
    proc = run_cli("compare", "zoo:mlp", "--threads", "-1")
    assert proc.returncode == 2
    assert len(said(proc.stderr)) == 1
    assert "--threads" in proc.stderr


@pytest.mark.parametrize("n", [1])
def test_profile_rows_record_threads(isolated_env: Path, n: int) -> None:
    model = _gemm_model(isolated_env / "gemms.onnx", layers=1)
    proc = run_cli("profile", str(model), "--target", "ort-cpu", "--threads", str(n), "--json", "--min-time", "0.3")
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    row = next(r for r in doc["targets"] if r["target"] == "ort-cpu") if "targets" in doc else None
    assert row is not None, list(doc)
    assert row["flags"]["threads"]["requested"] == n
    assert row["flags"]["threads"]["observed_busy"] == 1


def test_a_stack_without_a_knob_says_so(isolated_env: Path, mlp_onnx: Path) -> None:
    proc = run_cli("compare", str(mlp_onnx), "--targets", "reference", "--threads", "1", "--json", "--no-latency")
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = json.loads(proc.stdout)["results"][0]
    assert row["flags"]["threads"]["requested"] == 1 and row["flags"]["threads"]["honoured"] is False
    assert any("--threads 1 not applied" in n for n in row["notes"])
