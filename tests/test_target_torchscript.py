"""torchscript-cpu: both paths against the float64 reference, stages before/after freezing,
the model.pt artifact through the artifact cache, kernels, profile, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from compstack.core import ir as cir
from compstack.core.errors import UnsupportedError
from compstack.frontends import zoo
from compstack.targets import get
from compstack.targets.base import LowerRequest
from conftest import run_cli

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def zoo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zoo")


@pytest.fixture(scope="module")
def cnn(zoo_root: Path) -> cir.SourceModel:
    return zoo.load("cnn", zoo_root)


@pytest.fixture(scope="module")
def reference(cnn: cir.SourceModel) -> np.ndarray:
    """The float64 oracle: compstack's reference target (onnx.reference on the IR in float64)."""
    cls = get("reference")
    oracle = cls(cls.Options.from_strings({"outputs": "float64"}, owner="reference"))
    out = oracle.lower(cnn.model).compile().run(cnn.example_inputs)["logits"]
    assert out.dtype == np.float64
    return out


def _target(cnn: cir.SourceModel, **options: str):
    cls = get("torchscript-cpu")
    request = LowerRequest(native=zoo.native("cnn"), example_inputs=cnn.example_inputs)
    return cls(cls.Options.from_strings(options, owner="torchscript-cpu"), request)


@pytest.fixture(scope="module")
def compiled(cnn: cir.SourceModel) -> dict:
    out = {}
    for path in ("native", "translated"):
        target = _target(cnn, path=path)
        lowered = target.lower(cnn.model)
        out[path] = (target, lowered, lowered.compile())
    return out


def test_both_paths_agree_with_the_float64_reference(cnn, reference, compiled) -> None:
    results = {}
    for path, (target, _, comp) in compiled.items():
        assert target.flags()["path"] == path
        assert target.flags()["capture"] == ("trace" if path == "native" else "script")
        got = comp.run(cnn.example_inputs)["logits"]
        assert got.shape == reference.shape and got.dtype == np.float32
        err = float(np.abs(got.astype(np.float64) - reference).max())
        # float32 arithmetic against a float64 oracle: small, and nonzero (a real computation)
        assert 0 < err < 1e-4, (path, err)
        np.testing.assert_allclose(got, reference, rtol=1e-3, atol=1e-5)
        results[path] = got
    np.testing.assert_allclose(results["native"], results["translated"], rtol=1e-4, atol=1e-5)


def test_stages_differ_before_and_after_freezing(compiled) -> None:
    _, lowered, comp = compiled["native"]
    before = lowered.as_text("torchscript")
    frozen = comp.as_text("torchscript-frozen")
    optimized = comp.as_text("torchscript-optimized")
    # the traced graph reads weights from the module and runs BatchNorm; freeze inlines
    # the weights as constants and folds each BatchNorm into its convolution
    assert before.count("aten::batch_norm") == 6 and "prim::GetAttr" in before
    assert "aten::batch_norm" not in frozen and "prim::GetAttr" not in frozen
    assert frozen.count("aten::_convolution") == 6 and "weight_fused_bn" in frozen
    if torch.backends.mkldnn.is_available():
        assert optimized.count("prim::mkldnn_convolution") == 6
        assert "aten::to_mkldnn" in optimized and "aten::to_dense" in optimized
    assert optimized != frozen
    # translated: the FX module's BatchNormalization is already decomposed; freeze still
    # turns every buffer into a constant
    _, lowered_t, comp_t = compiled["translated"]
    assert "prim::GetAttr" in lowered_t.as_text("torchscript")
    assert "prim::GetAttr" not in comp_t.as_text("torchscript-frozen")


def test_model_pt_round_trips_through_the_artifact_cache(tmp_path: Path, cnn, compiled) -> None:
    from compstack.core.store import ArtifactCache
    from compstack.targets.torchscript.kernels import kernel_nodes

    target, _, comp = compiled["translated"]
    cache = ArtifactCache(tmp_path / "artifacts")
    staging = cache.staging(target.name)
    files = comp.save(staging)
    assert [p.name for p in files] == ["model.pt", "call.json"]
    cache.publish(staging, target.name, "k1", files, {"compile_s": comp.compile_s})
    entry, note = cache.lookup(target.name, "k1")
    assert entry is not None and note == ""
    loaded = target.load_compiled(entry.folder, cnn.model)
    assert [n.kind() for n in kernel_nodes(loaded.module.graph)] == [n.kind() for n in kernel_nodes(comp.module.graph)]
    x = cnn.example_inputs
    np.testing.assert_array_equal(loaded.run(x)["logits"], comp.run(x)["logits"])
    # the native path's model.pt: the frozen trace, BatchNorm folded into the convolutions
    _, _, native = compiled["native"]
    native.save(tmp_path / "native")
    frozen = torch.jit.load(str(tmp_path / "native" / "model.pt"))
    assert str(frozen.graph).count("aten::_convolution") == 6 and "batch_norm" not in str(frozen.graph)
    assert json.loads((tmp_path / "native" / "call.json").read_text())["keywords"] == ["image"]  # zoo: by keyword
    # an altered model.pt is never loaded: the cache drops the entry
    pt = entry.folder / "model.pt"
    data = bytearray(pt.read_bytes())
    data[len(data) // 2] ^= 0xFF
    pt.write_bytes(bytes(data))
    entry, note = cache.lookup(target.name, "k1")
    assert entry is None and "altered" in note


def test_kernels_map_to_the_source_nodes(cnn, compiled) -> None:
    convs = {n.name for n in cnn.model.graph if n.op_type == "Conv"}
    bns = {n.name for n in cnn.model.graph if n.op_type == "BatchNormalization"}
    for path, (_, _, comp) in compiled.items():
        kmap = comp.kernels()
        assert kmap is not None and kmap.coverage == 1.0, (path, kmap.unmapped)
        conv_kernels = [k for k in kmap.kernels if "convolution" in k.detail["op"]]
        assert len(conv_kernels) == 6
        # each convolution kernel computes exactly one Conv node, each Conv has one kernel
        assert sorted(n for k in conv_kernels for n in k.nodes if n in convs) == sorted(convs)
        assert all(k.kind == "library" for k in conv_kernels)
        if path == "native":  # BatchNorm folded by freeze: given to the convolution, marked inferred
            assert {n for k in conv_kernels for n in k.inferred} == bns
        else:  # BatchNorm decomposed into elementwise ATen ops, each recorded by name
            assert {n for k in kmap.kernels if k.detail["op"] in ("aten::sub", "aten::mul") for n in k.nodes} == bns


def test_profile_times_the_aten_kernels(cnn, compiled) -> None:
    from compstack.core.latency import LatencyConfig

    _, _, comp = compiled["native"]
    kmap = comp.kernels()
    prof = comp.profile([cnn.example_inputs], LatencyConfig(warmup=2, min_runs=5, min_time_s=0.05), kmap)
    assert prof is not None and prof.runs >= 5
    timed = {k.id for k in prof.kernels}
    assert "aten::mean" in timed and all(k.median >= 0 for k in prof.kernels)
    if torch.backends.mkldnn.is_available():
        # oneDNN convolutions are prim ops outside the dispatcher: no event; the time
        # ``forward`` spends outside its child events is reported instead, and is real
        assert "prim::mkldnn_convolution" in " ".join(prof.notes)
        unrecorded = [v for k, v in prof.other.items() if k.startswith("(inside forward")]
        assert unrecorded and unrecorded[0] > 0
    assert prof.end_to_end["median"] > 0


def test_path_native_needs_a_torch_source(cnn) -> None:
    cls = get("torchscript-cpu")
    target = cls(cls.Options.from_strings({"path": "native"}, owner="torchscript-cpu"))
    with pytest.raises(UnsupportedError, match="path=native needs a torch source"):
        target.lower(cnn.model)
    from compstack.core.errors import UserError

    with pytest.raises(UserError, match="capture=jit"):
        cls.Options.from_strings({"capture": "jit"}, owner="torchscript-cpu")


def test_cli_lower_writes_model_pt_and_compare_reuses_the_cache(isolated_env: Path, mlp_onnx: Path) -> None:
    """An ONNX file takes the translated path: ``lower -o`` writes model.pt and the stages
    (lower never uses the artifact cache); a second ``compare`` loads the first one's artifact."""
    out = isolated_env / "out"
    proc = run_cli("lower", str(mlp_onnx), "--target", "torchscript-cpu", "-o", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in (out / "stages").iterdir()) == \
        ["00-torchscript.txt", "01-torchscript-frozen.txt", "02-torchscript-optimized.txt"]
    loaded = torch.jit.load(str(out / "model.pt"))  # our own artifact, just written
    assert "aten::matmul" in str(loaded.graph) and "prim::GetAttr" not in str(loaded.graph)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["flags"]["path"] == "translated" and manifest["flags"]["capture"] == "script"
    rows = []
    for _ in range(2):
        proc = run_cli("compare", str(mlp_onnx), "--targets", "torchscript-cpu", "--json", "--no-latency")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        rows.append(json.loads(proc.stdout)["results"][0])
    assert [r["cached"] for r in rows] == [False, True]
    for row in rows:
        assert row["status"] == "ok" and row["flags"]["path"] == "translated"
        assert row["outputs"][0]["max_abs_err"] < 1e-5
