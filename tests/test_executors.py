"""The job system (issue #12 part 3): one job, three executors, the same outcome."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.run.executors import EXECUTOR_NAMES, Limits, PoolExecutor, make_executor, open_executor
from compstack.run.jobs import Job, JobOutcome, pack_sets
from conftest import relu_job, relu_proto


@pytest.mark.parametrize("name", EXECUTOR_NAMES)
def test_trivial_job_gives_relu_of_its_input_on_every_executor(tmp_path: Path, name: str) -> None:
    job = relu_job(tmp_path, name)
    with make_executor(name) as ex:
        outcome = ex.run(job, Limits(timeout_s=120))
    assert outcome.status == "ok" and outcome.stage == "", outcome.error
    with np.load(job.inputs_path) as data:
        x = data["0::x"]
    with np.load(job.outputs_path) as data:
        y = data["y"]
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert outcome.versions  # the stack's versions came back through result.json
    if name != "inline":  # the one writer: a whole JSON outcome beside the job
        assert JobOutcome.from_json(json.loads(job.result_path.read_text())).status == "ok"


def test_pool_reuses_one_worker_for_jobs_of_one_target(tmp_path: Path) -> None:
    with PoolExecutor() as pool:
        outcomes = [pool.run(relu_job(tmp_path, f"j{i}"), Limits(timeout_s=120)) for i in range(3)]
        assert len(pool._all) == 1 and pool.restarts == 0
    assert [o.status for o in outcomes] == ["ok"] * 3


def test_pool_stops_a_worker_that_ends_a_job_above_its_memory_bound(tmp_path: Path) -> None:
    """A worker above ``recycle_rss_mb`` when its job ends is not kept (real-size models left
    seven 1.6-3 GB idle workers); the next job of that target gets a fresh one."""
    with PoolExecutor(recycle_rss_mb=1) as pool:  # every ORT worker is above 1 MiB
        outcomes = [pool.run(relu_job(tmp_path, f"j{i}"), Limits(timeout_s=120)) for i in range(2)]
        assert pool._count == 2 and pool._all == [] and pool.restarts == 0
    assert [o.status for o in outcomes] == ["ok"] * 2
    with PoolExecutor() as pool:  # the default bound keeps a toy's worker warm
        for i in range(2):
            pool.run(relu_job(tmp_path, f"k{i}"), Limits(timeout_s=120))
        assert pool._count == 1 and len(pool._all) == 1


def test_idle_workers_are_stopped_while_the_machine_is_short_of_memory(tmp_path: Path) -> None:
    """A real-tier export was killed by the OOM killer at 7 GB on 24 GB beside three daemons'
    idle workers (1 to 1.7 GB each). The daemon now stops idle workers, the largest first,
    while MemAvailable is under its floor; a busy worker is never stopped, and the next job
    of a stopped worker's target starts a fresh one."""
    from compstack.run.pool import mem_available_mb, memory_floor_mb, shed_idle

    here = mem_available_mb()
    assert here is not None and here > 0 and memory_floor_mb() >= 2048
    with PoolExecutor() as pool:
        pool.run(relu_job(tmp_path, "a"), Limits(timeout_s=120))
        pool.run(relu_job(tmp_path, "b", threads=1), Limits(timeout_s=120))  # another pool key: a second worker
        assert len(pool._all) == 2
        assert shed_idle(pool, 1000.0, lambda: 5000.0) == 0 and len(pool._all) == 2  # enough memory: kept
        readings = iter([500.0, 3000.0])  # short, then enough once one worker is gone
        assert shed_idle(pool, 1000.0, lambda: next(readings)) == 1 and len(pool._all) == 1
        assert shed_idle(pool, 1000.0, lambda: 500.0) == 1 and pool._all == []  # none idle left: it stops asking
        assert shed_idle(pool, float("inf")) == 0  # the real reading, nothing left to stop
        again = pool.run(relu_job(tmp_path, "c"), Limits(timeout_s=120))
        assert again.status == "ok" and len(pool._all) == 1 and pool._count == 3


def test_job_is_json_and_unknown_names_are_errors(tmp_path: Path) -> None:
    job = relu_job(tmp_path, "j")
    job.save(tmp_path / "job.json")
    assert Job.load(tmp_path / "job.json") == job
    with pytest.raises(ValueError, match="unknown executor 'thread'"):
        open_executor("thread")
    from compstack.run.tasks import task

    with pytest.raises(ValueError, match="unknown job kind"):
        task("nope")


def test_bad_executor_environment_variable_is_a_user_error(tmp_path: Path, mlp_onnx: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from compstack.core.config import settings
    from compstack.core.errors import UserError
    from compstack.run.session import CompareOptions, compare

    monkeypatch.setenv("COMPSTACK_EXECUTOR", "thread")
    source = cir.SourceModel(name="mlp", model=cir.load(mlp_onnx))
    with pytest.raises(UserError, match="COMPSTACK_EXECUTOR: unknown executor 'thread'"):
        compare(source, CompareOptions(targets=["ort-cpu"], cache=False),
                settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite"))


def _evaluate_job(tmp: Path, name: str, target: str, request: str = "run", env: dict | None = None) -> Job:
    """An ``evaluate`` job (explain's task) of a Relu model on ``target``: a plain ONNX
    file and one input set, as :class:`compstack.explain.evaluate.Evaluator` writes them."""
    import onnx

    from compstack.core.inputs import encode_arrays
    from compstack.run.tasks.evaluate import Params

    work = tmp / name
    work.mkdir(parents=True)
    onnx.save(relu_proto(), str(work / "model.onnx"))
    x = np.array([[-1.5, 0.0, 2.0], [3.0, -0.25, 0.5]], dtype=np.float32)
    np.savez(work / "inputs.npz", **encode_arrays(pack_sets([{"x": x}])))
    ref = next(e.ref for e in registry.entries() if e.name == target)
    return Job(model_path=str(work / "model.onnx"), fingerprint="", target=target, target_ref=ref,
               inputs_path=str(work / "inputs.npz"), workdir=str(work), kind="evaluate", env=dict(env or {}),
               params=Params("compile", request).to_json())


@pytest.mark.parametrize("name", EXECUTOR_NAMES)
def test_evaluate_job_gives_relu_and_its_stage_times_on_every_executor(tmp_path: Path, name: str) -> None:
    from compstack.run.tasks.evaluate import Result

    job = _evaluate_job(tmp_path, name, "reference")
    with make_executor(name) as ex:
        outcome = ex.run(job, Limits(timeout_s=120))
    assert outcome.status == "ok" and outcome.stage == "", outcome.error
    with np.load(job.outputs_path) as data:
        np.testing.assert_array_equal(data["y"], np.array([[0.0, 0.0, 2.0], [3.0, 0.0, 0.5]], dtype=np.float32))
    result = Result.from_json(outcome.result)
    assert set(result.stage_seconds) == {"import", "lower", "compile", "run"} and result.passes is None
    assert all(s >= 0 for s in result.stage_seconds.values())


@pytest.mark.parametrize("name", ["process", "pool"])
def test_job_env_reaches_the_worker(tmp_path: Path, isolated_env: Path, name: str) -> None:
    """``Job.env`` is in the worker's environment (``env-echo`` reports it in its flags);
    the pool keeps workers with another env apart and reuses one with the same env."""
    if "env-echo" not in registry.names():
        registry.register("env-echo", "crashy:EnvEchoTarget")
    with make_executor(name) as ex:
        out = [ex.run(_evaluate_job(tmp_path, f"j{i}", "env-echo", "info", env), Limits(timeout_s=120))
               for i, env in enumerate([{"COMPSTACK_TEST_ENV": "42"}, {}, {"COMPSTACK_TEST_ENV": "42"}])]
    assert [o.status for o in out] == ["ok"] * 3, [o.error for o in out]
    assert [o.flags["test_env"] for o in out] == ["42", "", "42"]
    pids = [o.flags["pid"] for o in out]
    assert pids[0] != pids[1]
    assert (pids[0] == pids[2]) == (name == "pool")
