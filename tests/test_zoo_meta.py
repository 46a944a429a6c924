"""``compstack zoo`` lists from shipped metadata and builds nothing (issue #28 part 7); the
metadata is what a fresh export of each toy model counts, so the listing cannot drift."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compstack.frontends import zoo
from compstack.frontends.zoo._toy_meta import TOY
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def test_every_toy_model_this_project_can_build_everywhere_has_metadata() -> None:
    # Paddle and MindSpore models run in their own environments and may lack an entry
    # (listing then exports them); every torch, JAX and TensorFlow toy has one.
    need = {n for n in zoo.names(tier="toy") if zoo.framework(n) in ("torch", "jax", "tf")}
    assert need <= set(TOY), sorted(need - set(TOY))


def test_listing_builds_nothing_and_imports_no_framework(tmp_path: Path) -> None:
    code = ("import json, sys; from compstack.frontends import zoo; "
            f"rows = [zoo.listing(n, {str(tmp_path / 'cache')!r}) for n in zoo.names(tier='toy') if n in "
            "__import__('compstack.frontends.zoo._toy_meta', fromlist=['TOY']).TOY]; "
            "print(json.dumps({'rows': rows, 'mods': sorted(m for m in ('torch', 'jax', 'tensorflow', 'transformers') "
            "if m in sys.modules)}))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["mods"] == []
    assert not (tmp_path / "cache").exists()
    rows = {r["name"]: r for r in out["rows"]}
    assert rows["zoo:minilm"]["counts"] == "metadata" and 22_000_000 < rows["zoo:minilm"]["params"] < 23_000_000
    assert all(r["nodes"] > 0 and r["fingerprint"] is None for r in rows.values())


def test_cli_zoo_on_an_empty_cache_writes_nothing(tmp_path: Path) -> None:
    env = {"COMPSTACK_CACHE_DIR": str(tmp_path / "cache")}
    proc = run_cli("zoo", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    names = [r["name"] for r in json.loads(proc.stdout)]
    assert names[:3] == ["zoo:mlp", "zoo:cnn", "zoo:bert"]
    assert not (tmp_path / "cache" / "zoo").exists()


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo-meta")


@pytest.mark.parametrize("name", list(TOY))
def test_metadata_is_what_a_fresh_export_counts(name: str, cache: Path) -> None:
    if name not in zoo.names(available_only=True, tier="toy"):
        pytest.skip(f"zoo:{name}: its framework is not available here (compstack frontends)")
    built = zoo.info(name, cache)
    assert built["fingerprint"]
    listed = zoo.listing(name, cache)
    for key, value in TOY[name].items():
        assert built[key] == value, (f"zoo:{name} {key}: the export counts {built[key]!r}, the metadata says "
                                     f"{value!r}; run python3 scripts/toy_zoo_meta.py")
        assert listed[key] == value


def test_a_cached_export_below_the_default_opset_reads_back_as_written(tmp_path: Path) -> None:
    """zoo:resnet50-opset18's entry: read back, the model was upgraded to opset 20, its
    fingerprint no longer matched the recorded one, and the sweep failed all 7 rows at build."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    from compstack.core import ir as cir
    from compstack.frontends.zoo import _cache

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = cir.canonicalize(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), "relu18", opset=18)
    source = cir.SourceModel(name="zoo:relu18", model=model, example_inputs={"x": np.ones(2, np.float32)},
                             val_ranges={}, origin="zoo", native=None)
    entry = _cache.entry_dir(tmp_path, "relu18", 1)
    assert _cache.write(entry, source)
    back = _cache.read(entry, "zoo:relu18")
    assert back is not None and back.fingerprint == source.fingerprint
    assert back.model.opset_imports[""] == 18 and onnx.load(str(entry / "model.onnx")).opset_import[0].version == 18
