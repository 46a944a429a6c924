"""Tests of compstack.frontends.zoo: real architectures, offline, cached, reproducible."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.frontends import zoo

torch = pytest.importorskip("torch")
ort = pytest.importorskip("onnxruntime")

ZOO_DIR = Path(zoo.__file__).resolve().parent


def _session(source: cir.SourceModel) -> ort.InferenceSession:
    return ort.InferenceSession(cir.to_proto(source.model).SerializeToString(),
                                providers=["CPUExecutionProvider"])


def _run_ort(source: cir.SourceModel, inputs: dict[str, np.ndarray] | None = None) -> np.ndarray:
    return _session(source).run(None, inputs if inputs is not None else source.example_inputs)[0]


def _run_native(source: cir.SourceModel) -> np.ndarray:
    assert source.native is not None
    with torch.no_grad():
        kwargs = {k: torch.from_numpy(v) for k, v in source.example_inputs.items()}
        return source.native(**kwargs).numpy()


def _ops(source: cir.SourceModel) -> list[str]:
    return [n.op_type for n in source.model.graph]


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("zoo-cache")


@pytest.fixture(scope="module")
def bert(cache) -> cir.SourceModel:
    return zoo.load("bert", cache)


@pytest.fixture(scope="module")
def minilm(cache) -> cir.SourceModel:
    return zoo.load("minilm", cache)


def test_load_leaves_the_callers_rng_alone(tmp_path) -> None:
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    zoo.load("mlp", tmp_path)
    assert torch.equal(torch.rand(3), expected)


def test_names_and_unknown() -> None:
    assert zoo.names() == ["mlp", "cnn", "bert", "gpt2", "llama", "vit", "minilm",
                           "jax-mlp", "jax-transformer", "jax-cnn", "tf-cnn", "paddle-mlp", "ms-mlp"]
    assert "GQA" in zoo.describe("zoo:llama")
    with pytest.raises(UserError, match=r"^unknown zoo model 'resnet9000' \(known: mlp, cnn, "
                                        r"bert, gpt2, llama, vit, minilm, jax-mlp, jax-transformer, jax-cnn, tf-cnn, "
                                        r"paddle-mlp, ms-mlp; \d+ real-tier models: compstack zoo --tier real\)$"):
        zoo.load("resnet9000")


def test_mlp_provenance_points_into_the_zoo(cache) -> None:
    source = zoo.load("mlp", cache)
    assert source.name == "zoo:mlp" and source.origin == "zoo"
    assert _ops(source) == ["Gemm", "Relu", "Gemm"]
    vision = ZOO_DIR / "_vision.py"
    lines = vision.read_text().splitlines()
    located = [cir.source_of(n) for n in source.model.graph]
    for where in located:
        path, _, rest = where.partition(":")
        assert path == str(vision), where
        lineno = int(rest.split()[0])
        assert "self.fc" in lines[lineno - 1] or "self.act" in lines[lineno - 1], where
    np.testing.assert_allclose(_run_ort(source), _run_native(source), atol=1e-5, rtol=0)


def test_mlp_info(cache) -> None:
    info = zoo.info("mlp", cache)
    assert info["nodes"] == 3
    assert info["params"] == 64 * 128 + 128 + 128 * 10 + 10
    assert info["ops"] == {"Gemm": 2, "Relu": 1}
    assert info["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": [8, 64]}]
    assert info["outputs"] == [{"name": "logits", "dtype": "FLOAT", "shape": [8, 10]}]
    assert info["val_ranges"] == {"x": [-1.0, 1.0]}
    json.dumps(info)  # JSON-ready for the CLI


def test_cnn_keeps_batchnorm_and_residual(cache) -> None:
    source = zoo.load("cnn", cache)
    ops = _ops(source)
    assert ops.count("BatchNormalization") == 6 and ops.count("Conv") == 6
    assert ops.count("Add") == 2  # two residual joins
    assert "ReduceMean" in ops and "Gemm" in ops and "Constant" not in ops
    x = source.example_inputs["image"]
    assert x.shape == (2, 3, 32, 32) and x.dtype == np.float32
    assert -1.0 <= x.min() and x.max() < 1.0
    np.testing.assert_allclose(_run_ort(source), _run_native(source), atol=1e-5, rtol=0)


def test_fingerprint_stable_and_cache_round_trip(tmp_path) -> None:
    first = zoo.load("cnn", tmp_path / "a")
    second = zoo.load("cnn", tmp_path / "b")  # fresh cache: a second, independent build
    assert first.native is not None and second.native is not None
    assert first.fingerprint == second.fingerprint
    cached = zoo.load("cnn", tmp_path / "a")
    assert cached.native is None  # came from the cache
    assert cached.fingerprint == first.fingerprint
    assert cached.val_ranges == first.val_ranges
    provenance = [cir.source_of(n) for n in first.model.graph]
    assert all(provenance) and [cir.source_of(n) for n in cached.model.graph] == provenance
    assert list(cached.example_inputs) == list(first.example_inputs)
    for k, v in first.example_inputs.items():
        np.testing.assert_array_equal(cached.example_inputs[k], v)
    (entry,) = (tmp_path / "a" / "zoo").iterdir()  # no temp folders left behind
    assert entry.name.startswith("cnn-")
    assert sorted(p.name for p in entry.iterdir()) == ["inputs.npz", "meta.json", "model.onnx"]
    meta = json.loads((entry / "meta.json").read_text())
    assert meta["fingerprint"] == first.fingerprint and "torch" in meta["versions"]


def test_damaged_cache_entry_is_rebuilt(tmp_path) -> None:
    good = zoo.load("mlp", tmp_path)
    (entry,) = (tmp_path / "zoo").iterdir()
    (entry / "model.onnx").write_bytes(b"\x08garbage")
    rebuilt = zoo.load("mlp", tmp_path)
    assert rebuilt.native is not None and rebuilt.fingerprint == good.fingerprint
    assert zoo.load("mlp", tmp_path).native is None  # the entry was replaced


def test_default_cache_dir_from_env(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("COMPSTACK_CACHE_DIR", str(tmp_path / "env-cache"))
    assert zoo.default_cache_dir() == tmp_path / "env-cache"
    zoo.load("mlp")
    assert any((tmp_path / "env-cache" / "zoo").glob("mlp-*/model.onnx"))


def test_bert_inputs_and_numerics(bert) -> None:
    assert bert.name == "zoo:bert"
    ids, mask, types = (bert.example_inputs[k] for k in
                        ("input_ids", "attention_mask", "token_type_ids"))
    assert ids.shape == mask.shape == types.shape == (2, 16) and ids.dtype == np.int64
    assert 0 <= ids.min() and ids.max() < 1000
    assert mask[0].all() and not mask[1].all()  # row 1 is padded
    assert set(np.unique(types)) == {0, 1}
    assert bert.val_ranges == {"input_ids": (0, 1000), "attention_mask": (0, 2),
                               "token_type_ids": (0, 2)}
    assert {"LayerNormalization", "Softmax", "MatMul", "Gelu"} <= set(_ops(bert))
    assert [v.name for v in bert.model.graph.outputs] == ["last_hidden_state"]
    np.testing.assert_allclose(_run_ort(bert), _run_native(bert), atol=1e-5, rtol=0)


def test_minilm_has_real_weights(minilm) -> None:
    from compstack.frontends.zoo._hf import minilm_inputs

    mask = minilm.example_inputs["attention_mask"]
    assert mask.shape == (2, 32) and not mask.all()  # padded
    assert minilm.example_inputs["input_ids"].max() < minilm.val_ranges["input_ids"][1]
    emb = _run_ort(minilm)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(emb, _run_native(minilm), atol=1e-5, rtol=0)

    def cosine(a: str, b: str) -> float:
        e = _run_ort(minilm, minilm_inputs([a, b]))
        return float(e[0] @ e[1])

    assert cosine("A man is eating food.", "A man is eating a piece of bread.") > 0.5
    assert cosine("A man is eating food.", "The stock market crashed today.") < 0.3


def test_minilm_cached_copy_identical(minilm, cache) -> None:
    again = zoo.load("minilm", cache)
    assert again.native is None and again.fingerprint == minilm.fingerprint


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama", "vit"])
def test_other_transformers_export(name, tmp_path) -> None:
    source = zoo.load(name, tmp_path)
    assert source.native is not None and "Constant" not in _ops(source)
    np.testing.assert_allclose(_run_ort(source), _run_native(source), atol=1e-5, rtol=0)
    assert zoo.load(name, tmp_path).fingerprint == source.fingerprint
    if name == "llama":  # grouped-query attention: K/V projections are half the width
        k_proj = [v for k, v in source.model.graph.initializers.items() if "k_proj.weight" in k]
        assert k_proj and sorted(k_proj[0].const_value.shape) == [32, 64]
