"""The oracle's results in the store (compstack.run.oracle_cache): a warm compare or sweep
reads the reference's outputs, the noise floor and the UB findings back, verified, instead of
evaluating the model again; a damaged entry is rebuilt, never read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

import compstack
from compstack.core.store import open_store
from compstack.run.oracle_cache import OracleCache, inputs_digest
from compstack.run.session import CompareOptions
from conftest import run_cli


def _compare(tmp: Path, cache: bool = True) -> compstack.Report:
    opts = CompareOptions(targets=["ort-cpu"], latency=None, cache=cache, executor="inline")
    return compstack.compare("zoo:cnn", ["ort-cpu"], options=opts, cache_dir=tmp / "cache", db=tmp / "db.sqlite")


def _entries(tmp: Path) -> list:
    return list(open_store(tmp / "cache").entries("oracle"))


def test_a_warm_compare_reads_the_reference_back_and_a_damaged_entry_is_rebuilt(tmp_path: Path) -> None:
    cold = _compare(tmp_path)
    assert "cached" not in cold.reference and len(_entries(tmp_path)) == 1
    warm = _compare(tmp_path)
    assert warm.reference.get("cached") is True
    for a, b in zip(cold.results, warm.results):
        assert a.status == b.status == "ok" and a.outputs[0]["max_abs_err"] == b.outputs[0]["max_abs_err"]
    arrays = _entries(tmp_path)[0].path / "arrays.npz"
    data = bytearray(arrays.read_bytes())
    data[-40] ^= 0xFF  # one flipped byte: the manifest's SHA-256 no longer matches
    arrays.write_bytes(bytes(data))
    again = _compare(tmp_path)
    assert "cached" not in again.reference and again.results[0].outputs[0]["max_abs_err"] == \
        cold.results[0].outputs[0]["max_abs_err"]
    assert len(_entries(tmp_path)) == 1  # deleted, then written anew


def test_latency_on_and_off_share_the_oracle_entry(tmp_path: Path) -> None:
    """Only input set 0 is judged, so the key digests set 0: a compare timed on three input
    sets reads back the reference a --no-latency compare stored."""
    cold = _compare(tmp_path)
    lat = compstack.LatencyConfig(warmup=0, min_runs=1, min_time_s=0.0, max_runs=2, input_sets=3)
    opts = CompareOptions(targets=["ort-cpu"], latency=lat, executor="inline")
    timed = compstack.compare("zoo:cnn", ["ort-cpu"], options=opts, cache_dir=tmp_path / "cache",
                              db=tmp_path / "db.sqlite")
    assert "cached" not in cold.reference and timed.reference.get("cached") is True
    assert timed.results[0].status == "ok" and timed.results[0].latency_ms is not None
    assert len(_entries(tmp_path)) == 1


def test_no_cache_writes_no_oracle_entry(tmp_path: Path) -> None:
    _compare(tmp_path, cache=False)
    assert _entries(tmp_path) == []


def test_the_key_covers_inputs_target_and_options(tmp_path: Path) -> None:
    a = {"x": np.arange(4, dtype=np.float32)}
    b = {"x": np.arange(4, dtype=np.float32) + 1}
    assert inputs_digest([a]) != inputs_digest([b]) and inputs_digest([a]) == inputs_digest([dict(a)])
    assert inputs_digest([a]) != inputs_digest([{"x": a["x"].astype(np.float64)}])
    one = OracleCache(tmp_path, "fp", inputs_digest([a]), "reference", {"precision": "float64"})
    one.put_arrays("reference", {"y": np.ones(3)})
    assert np.array_equal(one.arrays("reference")["y"], np.ones(3))
    for other in (OracleCache(tmp_path, "fp", inputs_digest([b]), "reference", {"precision": "float64"}),
                  OracleCache(tmp_path, "fp", inputs_digest([a]), "inductor-cpu", {"precision": "float64"}),
                  OracleCache(tmp_path, "fp2", inputs_digest([a]), "reference", {"precision": "float64"})):
        assert other.arrays("reference") is None
    one.put_record("ub", {"ub": ["Div by zero"], "masked": []})
    assert one.record("ub") == {"ub": ["Div by zero"], "masked": []}


def test_a_warm_sweep_runs_no_reference_job(tmp_path: Path) -> None:
    def sweep(db: str) -> dict:
        # --no-cache-results: the target's job runs every time (its judged row is stored too)
        res = run_cli("sweep", "zoo:cnn", "--targets", "ort-cpu", "--no-latency", "--cache-dir", str(tmp_path / "c"),
                      "--db", str(tmp_path / db), "--json", "--no-cache-results", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        return json.loads(res.stdout)

    cold, warm = sweep("cold.sqlite"), sweep("warm.sqlite")
    assert cold["reference_jobs"] == 1 and warm["reference_jobs"] == 0, (cold["reference_jobs"], warm["reference_jobs"])
    assert warm["matrix"]["zoo:cnn"]["ort-cpu"]["status"] == "ok"
    # the oracle's entries gone, the reference's compiled artifact still stored: its outputs are stored again
    assert run_cli("cache", "clear", "--kind", "oracle", "--cache-dir", str(tmp_path / "c")).returncode == 0
    third, fourth = sweep("third.sqlite"), sweep("fourth.sqlite")
    assert third["reference_jobs"] == 1 and fourth["reference_jobs"] == 0, (third["reference_jobs"], fourth["reference_jobs"])


def test_the_noise_floor_is_read_back(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    """An imprecise row (beyond the tolerance, within the float32 floor) warm: the same
    verdict from the stored floor, with no float32 evaluation."""
    from test_stackref import _cancel

    path, feeds = _cancel(tmp_path)

    def row() -> tuple[compstack.Report, dict]:
        opts = CompareOptions(targets=["ort-cpu"], inputs=feeds, latency=None, executor="inline")
        report = compstack.compare(str(path), ["ort-cpu"], options=opts, cache_dir=tmp_path / "cache",
                                   db=tmp_path / "db.sqlite")
        return report, report.results[0].outputs[0]

    cold, a = row()
    assert len(_entries(tmp_path)) == 2  # the reference's outputs, the floor

    def no(self):  # noqa: ANN001, ANN202
        raise AssertionError("the float32 evaluation ran again")

    from compstack.run.oracle import CheckedOracle

    monkeypatch.setattr(CheckedOracle, "_compute_floors", no)
    warm, b = row()
    assert warm.reference.get("cached") and a["kind"] == b["kind"] == "imprecise" and a["floor"] == b["floor"] > 0


def test_an_entry_that_does_not_fit_the_model_is_rebuilt_and_a_stack_reference_is_not_stored(tmp_path: Path) -> None:
    """An entry whose manifest matches but whose arrays are not the model's outputs (another
    output name) is dropped and recomputed, never judged against; ORT standing in as the
    float32 reference is not stored (its outputs depend on its release, threads and CPU)."""
    from compstack.core.inputs import save_npz
    from compstack.core.integrity import write_manifest

    cold = _compare(tmp_path)
    folder = _entries(tmp_path)[0].path
    save_npz(folder / "arrays.npz", {"bogus": np.zeros(3)})
    meta = json.loads((folder / "meta.json").read_text())
    write_manifest(folder, [folder / "arrays.npz"], {k: v for k, v in meta.items() if k != "files"})
    again = _compare(tmp_path)
    assert "cached" not in again.reference and again.results[0].status == "ok"
    assert again.results[0].outputs[0]["max_abs_err"] == cold.results[0].outputs[0]["max_abs_err"]
    assert len(_entries(tmp_path)) == 1

    opts = CompareOptions(targets=["openvino-cpu"], latency=None, executor="inline", reference="ort-cpu")
    other = tmp_path / "other"
    for _ in range(2):
        report = compstack.compare("zoo:cnn", ["openvino-cpu"], options=opts, cache_dir=other / "cache",
                                   db=other / "db.sqlite")
        assert report.reference["target"] == "ort-cpu" and "cached" not in report.reference
    assert list(open_store(other / "cache").entries("oracle")) == []
