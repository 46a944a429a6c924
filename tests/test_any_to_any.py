"""Any model to any stack: PyTorch models on XLA (translated), JAX models on Inductor
(translated), both on ORT/TVM/IREE through the common IR; native and translated paths of
the same model agree."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

pytest.importorskip("jax")
pytest.importorskip("torch")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("any2any")
    return {"COMPSTACK_CACHE_DIR": str(root / "cache"), "COMPSTACK_DB": str(root / "db.sqlite")}


def _compare(model: str, targets: str, env: dict[str, str], out: Path, *options: str) -> dict[str, dict]:
    args = ["compare", model, "--targets", targets, "--json", "--no-latency", "--save-outputs", str(out)]
    for opt in options:
        args += ["--option", opt]
    proc = run_cli(*args, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["target"]: r for r in json.loads(proc.stdout)["results"]}
    for name, row in rows.items():
        assert row["status"] == "ok", (model, name, row["stage"], row["error"])
        for o in row["outputs"]:
            assert o["ok"] and o["max_abs_err"] < 1e-4, (model, name, o)
    return rows


def _same(a: Path, b: Path, key_a: str, key_b: str) -> None:
    xa, xb = dict(np.load(a)), dict(np.load(b))
    outs_a = {k.split("::", 1)[1]: v for k, v in xa.items() if k.startswith(key_a + "::")}
    outs_b = {k.split("::", 1)[1]: v for k, v in xb.items() if k.startswith(key_b + "::")}
    assert outs_a and outs_a.keys() == outs_b.keys()
    for name in outs_a:
        np.testing.assert_allclose(outs_a[name], outs_b[name], rtol=1e-4, atol=1e-5, err_msg=name)


# one model per frontend in CI (cnn, jax-mlp, jax-cnn); the transformers are slow (scripts/run_slow.py)
@pytest.mark.parametrize("model", ["zoo:cnn", pytest.param("zoo:bert", marks=pytest.mark.slow)])
def test_torch_model_on_xla_and_inductor_both_paths(model: str, env: dict[str, str], tmp_path: Path) -> None:
    native = _compare(model, "inductor-cpu,xla-cpu", env, tmp_path / "a.npz")
    assert native["inductor-cpu"]["flags"]["path"] == "native"
    assert native["xla-cpu"]["flags"]["path"] == "translated"  # a PyTorch model on XLA
    translated = _compare(model, "inductor-cpu", env, tmp_path / "b.npz", "inductor-cpu:path=translated")
    assert translated["inductor-cpu"]["flags"]["path"] == "translated"
    _same(tmp_path / "a.npz", tmp_path / "b.npz", "inductor-cpu", "inductor-cpu")
    _same(tmp_path / "a.npz", tmp_path / "a.npz", "inductor-cpu", "xla-cpu")


@pytest.mark.parametrize("model", ["zoo:jax-mlp", pytest.param("zoo:jax-transformer", marks=pytest.mark.slow),
                                   "zoo:jax-cnn"])
def test_jax_model_on_inductor_and_xla_both_paths(model: str, env: dict[str, str], tmp_path: Path) -> None:
    targets = "xla-cpu,inductor-cpu" + (",ort-cpu,tvm-llvm,iree-llvm-cpu" if model == "zoo:jax-transformer" else "")
    native = _compare(model, targets, env, tmp_path / "a.npz")
    assert native["xla-cpu"]["flags"]["path"] == "native"
    assert native["inductor-cpu"]["flags"]["path"] == "translated"  # a JAX model on Inductor
    translated = _compare(model, "xla-cpu", env, tmp_path / "b.npz", "xla-cpu:path=translated")
    assert translated["xla-cpu"]["flags"]["path"] == "translated"
    _same(tmp_path / "a.npz", tmp_path / "b.npz", "xla-cpu", "xla-cpu")
    _same(tmp_path / "a.npz", tmp_path / "a.npz", "xla-cpu", "inductor-cpu")
