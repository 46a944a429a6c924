"""The job system (issue #12 part 3): one job, three executors, the same outcome."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.inputs import input_sets, save_npz
from compstack.run.executors import EXECUTOR_NAMES, Limits, PoolExecutor, make_executor, open_executor
from compstack.run.jobs import Job, JobOutcome, pack_sets
from compstack.run.session import model_file


def _relu_job(tmp: Path, name: str) -> Job:
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = cir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]))
    source = cir.SourceModel(name="relu", model=model)
    path = model_file(source, tmp / "cache")
    inputs = save_npz(tmp / "inputs.npz", pack_sets(input_sets(cir.graph_inputs(model), 1, 0)))
    ref = next(e.ref for e in registry.entries() if e.name == "reference")
    return Job(model_path=str(path), fingerprint=source.fingerprint, target="reference", target_ref=ref,
               inputs_path=str(inputs), workdir=str(tmp / name))


@pytest.mark.parametrize("name", EXECUTOR_NAMES)
def test_trivial_job_gives_relu_of_its_input_on_every_executor(tmp_path: Path, name: str) -> None:
    job = _relu_job(tmp_path, name)
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
        outcomes = [pool.run(_relu_job(tmp_path, f"j{i}"), Limits(timeout_s=120)) for i in range(3)]
        assert len(pool._all) == 1 and pool.restarts == 0
    assert [o.status for o in outcomes] == ["ok"] * 3


def test_job_is_json_and_unknown_names_are_errors(tmp_path: Path) -> None:
    job = _relu_job(tmp_path, "j")
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
