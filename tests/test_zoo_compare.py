"""Done-means of the spine: on zoo:mlp, cnn, bert and minilm, every CPU target is `ok`
against the float64 reference, through the real CLI path (worker processes, cache)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli

TARGETS = "ort-cpu,tvm-llvm,iree-llvm-cpu"


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("zoo-compare")
    return {"COMPSTACK_CACHE_DIR": str(root / "cache"), "COMPSTACK_DB": str(root / "db.sqlite")}


# minilm (22 M parameters) is slow: bert runs the same transformer path in CI
@pytest.mark.parametrize("model", ["mlp", "cnn", "bert", pytest.param("minilm", marks=pytest.mark.slow)])
def test_every_cpu_target_ok_against_float64(model: str, shared_cache: dict[str, str]) -> None:
    proc = run_cli("compare", f"zoo:{model}", "--targets", TARGETS, "--json",
                   "--min-runs", "3", "--min-time", "0", "--warmup", "1", env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["reference"] == {"target": "reference", "precision": "float64"}
    assert data["model"]["name"] == f"zoo:{model}"
    assert data["inputs"]["source"] == "model"  # the zoo's realistic inputs
    rows = {r["target"]: r for r in data["results"]}
    assert set(rows) == set(TARGETS.split(","))
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["stage"], row["error"])
        for out in row["outputs"]:
            # float32 stacks against the float64 oracle: well inside rtol=1e-3/atol=1e-5
            assert out["ok"] and out["max_abs_err"] < 1e-5 and out["rel_l2"] < 1e-5, (name, out)
        assert row["latency_ms"]["median"] > 0 and row["compile_s"] > 0
    assert rows["tvm-llvm"]["flags"]["tuned"] is False
    assert "--iree-llvmcpu-target-cpu=host" in rows["iree-llvm-cpu"]["flags"]["iree-compile"]


def test_bert_inputs_are_realistic(shared_cache: dict[str, str], tmp_path: Path) -> None:
    import numpy as np

    ins = tmp_path / "in.npz"
    proc = run_cli("compare", "zoo:bert", "--targets", "ort-cpu", "--no-latency", "--save-inputs", str(ins),
                   "--json", env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    arrays = dict(np.load(ins))
    ids = next(v for k, v in arrays.items() if "ids" in k)
    mask = next(v for k, v in arrays.items() if "mask" in k)
    assert ids.dtype == np.int64 and 0 <= ids.min() and ids.max() < 1000
    assert set(np.unique(mask)) <= {0, 1} and mask.sum() < mask.size  # some padding


def test_lower_iree_writes_vmfb_stages_and_run_command(shared_cache: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli("lower", "zoo:mlp", "--target", "iree-llvm-cpu", "-o", str(out), env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "ok" and manifest["device"] == "cpu"
    assert manifest["artifacts"] == ["model.vmfb"] and b"IREE" in (out / "model.vmfb").read_bytes()[:4096]
    assert manifest["stages"][:2] == ["torch-onnx", "input"] and "flow" in manifest["stages"]
    assert "flow.executable" in next((out / "stages").glob("*-flow.mlir")).read_text()
    assert manifest["run_command"].startswith("iree-run-module --device=local-task --module=")
    assert "--input=8x64xf32" in manifest["run_command"]
    assert len(manifest["model"]["fingerprint"]) == 16 and manifest["versions"]


def test_run_cnn_on_tvm(shared_cache: dict[str, str]) -> None:
    proc = run_cli("run", "zoo:cnn", "--target", "tvm-llvm", "--min-runs", "3", "--min-time", "0", env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    assert "tvm-llvm::" in proc.stdout and "untuned" in proc.stdout
    assert " ok " in proc.stdout


def test_zoo_command_lists_models_with_counts(shared_cache: dict[str, str]) -> None:
    proc = run_cli("zoo", "--json", env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) >= {"zoo:mlp", "zoo:cnn", "zoo:bert", "zoo:gpt2", "zoo:llama", "zoo:vit", "zoo:minilm"}
    assert rows["zoo:cnn"]["ops"]["BatchNormalization"] >= 2  # the exporter kept BN
    assert 22_000_000 < rows["zoo:minilm"]["params"] < 23_000_000  # the real all-MiniLM-L6-v2
    assert all(r["nodes"] > 0 for r in rows.values())


def test_zoo_inputs_flags_ask_for_generated_inputs(shared_cache: dict[str, str], tmp_path: Path) -> None:
    import numpy as np

    ins = tmp_path / "in.npz"
    proc = run_cli("compare", "zoo:bert", "--targets", "ort-cpu", "--no-latency", "--val-range", "input_ids:0,5",
                   "--seed", "7", "--save-inputs", str(ins), "--json", env=shared_cache)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["inputs"]["source"] == "generated"
    arrays = dict(np.load(ins))
    assert arrays["input_ids"].max() < 5
    assert set(np.unique(arrays["attention_mask"])) <= {0, 1}  # the zoo's own range still applies
    bad = run_cli("compare", "zoo:bert", "--val-range", "nope:0,1", env=shared_cache)
    assert bad.returncode == 2 and "match no input" in bad.stderr
