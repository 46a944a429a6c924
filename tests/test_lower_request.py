"""A typed lower request instead of attributes set after construction (issue #12, part 2):
``Target(options, LowerRequest(...))``, read-only attributes, and the worker building the
target once, after the model and its source."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import compstack
from compstack import targets as registry
from compstack.targets.base import LowerRequest, Target

FIELDS = ("example_inputs", "native", "native_note", "source_framework", "record_stages", "threads", "cache_root")

SOURCE = '''
import torch


def build():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return net, (torch.randn(2, 8),)
'''


def test_target_exposes_its_request_and_has_no_setters(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    request = LowerRequest(example_inputs={"x": x}, native_note="n", source_framework="torch",
                           record_stages=True, threads=3, cache_root=tmp_path)
    cls = registry.get("ort-cpu")
    target = cls(cls.Options(), request)
    assert target.request is request
    assert target.example_inputs is not None and target.example_inputs["x"] is x
    assert (target.native, target.native_note, target.source_framework) == (None, "n", "torch")
    assert (target.record_stages, target.threads, target.cache_root) == (True, 3, tmp_path)
    for name in (*FIELDS, "request"):
        with pytest.raises(AttributeError):
            setattr(target, name, getattr(target, name))
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.threads = 1  # type: ignore[misc]
    bare = cls()  # no request: an empty one, the stack's own defaults
    assert (bare.threads, bare.cache_root, bare.native, bare.record_stages) == (0, None, None, False)
    variant = cls(target.options, dataclasses.replace(request, record_stages=False))
    assert variant.record_stages is False and target.record_stages is True
    with pytest.raises(TypeError, match="request must be LowerRequest"):
        cls(None, {"threads": 1})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="threads=-1"):
        LowerRequest(threads=-1)
    assert compstack.LowerRequest is LowerRequest and issubclass(cls, Target)


@pytest.fixture(scope="module")
def torch_source(tmp_path_factory: pytest.TempPathFactory) -> compstack.SourceModel:
    pytest.importorskip("torch")
    folder = tmp_path_factory.mktemp("src")
    (folder / "tiny_net.py").write_text(SOURCE)
    return compstack.load_model(f"{folder / 'tiny_net.py'}:build", cache_dir=folder / "cache")


@pytest.mark.parametrize("name", ["inductor-cpu", "torchscript-cpu"])
def test_inline_worker_gives_the_native_path_for_a_torch_source(tmp_path: Path, name: str,
                                                                 torch_source: compstack.SourceModel,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    if not registry.get(name).availability().ok:
        pytest.skip(f"{name} unavailable here")
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPSTACK_DB", str(tmp_path / "results.sqlite"))
    opts = compstack.CompareOptions(targets=[], latency=None, executor="inline", threads=0,
                                    target_options={"inductor-cpu": {"backend": "aot_eager"}})
    row = compstack.compare(torch_source, name, options=opts).results[0]
    assert row.status == "ok", (row.stage, row.error)
    assert row.flags["path"] == "native"  # the rebuilt torch module ran, from the request
    errs = [o["max_abs_err"] for o in row.outputs]
    assert errs and all(0 <= e < 1e-4 for e in errs), row.outputs  # float32 torch vs the float64 reference


def test_dump_builds_its_target_with_record_stages(tmp_path: Path, torch_source: compstack.SourceModel) -> None:
    """Inductor's FX graph cache is warm (compiles with the store as cache root), yet the
    dump job's target, built by the worker with ``record_stages`` in its request, compiles
    with the caches off: the post-grad graph is recorded (a cache hit runs no pass)."""
    cls = registry.get("inductor-cpu")
    if not cls.availability().ok:
        pytest.skip("inductor-cpu unavailable here")
    from torch._dynamo.utils import counters

    from compstack.run.dump import dump

    cache = tmp_path / "cache"
    warm = LowerRequest(cache_root=cache)
    cls(None, warm).lower(torch_source.model).compile()  # fills Inductor's cache under the store
    counters.clear()
    again = cls(None, warm).lower(torch_source.model).compile()
    assert counters["inductor"]["fxgraph_cache_hit"] == 1
    assert again.as_text("post-grad").startswith("(not recorded")  # a cache hit records no pass
    counters.clear()
    result = dump(torch_source, "inductor-cpu", tmp_path / "out", stages=["post-grad", "output-code"],
                  cache_dir=cache, executor="inline")
    assert result.outcome.status == "ok", (result.outcome.stage, result.outcome.error)
    assert counters["inductor"]["fxgraph_cache_hit"] == 0 and counters["inductor"]["fxgraph_cache_miss"] == 0
    post = result.stages["post-grad"].read_text()
    assert not post.startswith("(not recorded") and "graph" in post, post[:300]
    assert "def call(" in result.stages["output-code"].read_text()


def test_a_model_that_fails_verification_still_gets_the_targets_flags(tmp_path: Path) -> None:
    """The worker loads the model before building the target; when the store entry was
    altered the row fails at ``import`` and still says how the stack would have run."""
    from compstack.run.worker import execute
    from conftest import relu_job

    job = relu_job(tmp_path, "job", "ort-cpu", options={"opt_level": "basic"})
    path = Path(job.model_path)
    Path(job.workdir).mkdir()
    ok = execute(job)
    assert ok.status == "ok", ok.error
    path.chmod(0o644)
    path.write_bytes(path.read_bytes() + b"\0")  # altered after the parent published it
    bad = execute(job)
    assert bad.status == "failed" and bad.stage == "import" and "failed verification" in bad.error
    assert bad.flags == ok.flags  # the options and thread knob, as the run that went through
