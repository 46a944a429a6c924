"""One store (compstack.core.store) and one results schema (compstack.core.results).

Every kind's entry is verified on read (a flipped byte evicts it), the store root honours
``XDG_CACHE_HOME``, ``compstack cache info|prune|clear`` work on a real store, an old
results database is upgraded in place, and ``compstack fusion`` / ``profile`` leave their
rows in the database.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compstack.core import ir as cir
from compstack.core.ir import SourceModel
from compstack.core.store import KINDS, Store, key, parse_age, parse_size
from conftest import make_mlp, run_cli


def _flip(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def _key(kind: str, tag: str = "a") -> str:
    return "/".join([f"t-{tag}"] * (KINDS[kind].depth - 1) + [key(kind, {"tag": tag})])


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_is_verified_and_a_flipped_byte_evicts(tmp_path: Path, kind: str) -> None:
    store = Store(tmp_path)
    k = _key(kind)
    if KINDS[kind].record:
        path = store.write_record(kind, k, {"stage": "compile", "value": 12345.5})
        assert store.read_record(kind, k) == ({"stage": "compile", "value": 12345.5}, "")
        path.write_text(path.read_text().replace("12345.5", "12345.6"))  # valid JSON, other value
        data, why = store.read_record(kind, k)
    else:
        staging = store.staging(kind)
        (staging / "blob.bin").write_bytes(bytes(range(256)) * 8)
        folder = store.publish(staging, kind, k, None, {"note": kind})
        entry, why = store.lookup(kind, k)
        assert entry is not None and entry.meta["note"] == kind and why == ""
        assert not list(folder.parent.glob(".tmp-*"))
        _flip(folder / "blob.bin")
        data, why = store.lookup(kind, k)
        path = folder
    assert data is None and "corrupt" in why and str(path) in why
    assert not path.exists()  # evicted: the caller rebuilds it


def test_keys_are_checked_and_hash_the_versions(tmp_path: Path) -> None:
    store = Store(tmp_path)
    for bad in ("../x", "a/b", "/abs", ".hidden", ""):
        with pytest.raises(ValueError):
            store.entry("models", bad)
    with pytest.raises(ValueError, match="unknown store kind"):
        store.entry("nope", "x")
    a = key("artifacts", {"fp": "1"}, {"onnxruntime": "1.0"})
    assert a == key("artifacts", {"fp": "1"}, {"onnxruntime": "1.0"}) and len(a) == 24
    assert a != key("artifacts", {"fp": "1"}, {"onnxruntime": "1.1"}) != key("stages", {"fp": "1"},
                                                                             {"onnxruntime": "1.0"})


def test_callers_rebuild_their_corrupt_entries(tmp_path: Path) -> None:
    """Canonical models, stage texts, conformance failure records and peaks: a flipped
    byte is found by the caller's read and the entry rebuilt or dropped."""
    from compstack.analysis.fusion.roofline import Peak, machine_peak
    from compstack.core.errors import UnsupportedError
    from compstack.core.store import ArtifactCache, host_id
    from compstack.run.session import model_file
    from compstack.run.tasks.conformance import _known_failure, _record_failure

    cache = tmp_path / "cache"
    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    path = model_file(source, cache)
    good = path.read_bytes()
    _flip(path)
    assert model_file(source, cache) == path and path.read_bytes() == good

    class T:
        name = "ort-cpu"

    conf = ArtifactCache(cache / "artifacts" / "conformance", "conformance")
    _record_failure(conf, T(), "k" * 16, "compile", UnsupportedError("no kernel for Foo"))
    assert _known_failure(conf, T(), "k" * 16) == {"stage": "compile", "status": "unsupported",
                                                  "error": "no kernel for Foo", "log": ""}  # never raised: no frames
    record = cache / "artifacts" / "conformance-failures" / "ort-cpu" / f"{'k' * 16}.json"
    record.write_text(record.read_text().replace("unsupported", "failed"))
    assert _known_failure(conf, T(), "k" * 16) is None and not record.exists()

    peak = Peak(gflops=123.0, gbs=45.0, gemm_n=512, copy_mib=64, threads=2, measured_at=time.time(),
                method={"best": {"gemm": "numpy", "copy": "numpy"}})
    store = Store(cache)
    from compstack.analysis.fusion import roofline

    k = key("roofline", {"host": host_id(), "version": roofline._VERSION}, digits=16)
    from dataclasses import asdict

    store.write_record("roofline", k, {"version": roofline._VERSION, **asdict(peak)})
    assert machine_peak(cache).gflops == 123.0  # read back, not measured
    rec = store.entry("roofline", k)
    rec.write_text(rec.read_text().replace("123.0", "999.0"))
    assert store.read_record("roofline", k)[0] is None and not rec.exists()


def test_cached_stage_texts_are_rebuilt_when_altered(tmp_path: Path) -> None:
    from compstack.run.dump import dump

    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    cache = tmp_path / "cache"
    first = dump(source, "ort-cpu", tmp_path / "d1", stages=["optimized"], cache_dir=cache)
    assert first.outcome.status == "ok", first.outcome.error
    (entry,) = [e for e in Store(cache).entries("stages")]
    assert entry.key.startswith("ort-cpu/")
    _flip(next(entry.path.glob("*-optimized*")))
    again = dump(source, "ort-cpu", tmp_path / "d2", stages=["optimized"], cache_dir=cache)
    assert not again.outcome.cached
    assert again.stages["optimized"].read_text() == first.stages["optimized"].read_text()
    third = dump(source, "ort-cpu", tmp_path / "d3", stages=["optimized"], cache_dir=cache)
    assert third.outcome.cached  # the rebuilt entry is good


def test_xdg_cache_home_is_the_store_root_everywhere(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COMPSTACK_CACHE_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    code = ("import json; from compstack.core.store import root; from compstack.frontends import zoo; "
            "from compstack.ops.build import _ops_cache; from compstack.core.config import settings; "
            "print(json.dumps([str(root()), str(zoo.default_cache_dir()), str(_ops_cache(None)), "
            "str(settings().cache_dir)]))")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    want = str(tmp_path / "xdg" / "compstack")
    assert json.loads(out.stdout) == [want, want, want + "/ops", want]
    info = run_cli("cache", "info", "--json", env=env)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["root"] == want
    env["COMPSTACK_CACHE_DIR"] = str(tmp_path / "explicit")  # the documented variable wins
    info = run_cli("cache", "info", "--json", env=env)
    assert json.loads(info.stdout)["root"] == str(tmp_path / "explicit")


def _fill(store: Store, kind: str, tag: str, size: int, used: float) -> Path:
    staging = store.staging(kind)
    (staging / "x.bin").write_bytes(b"\0" * size)
    folder = store.publish(staging, kind, _key(kind, tag), None, {})
    os.utime(folder / "meta.json", (used, used))
    return folder


def test_cache_info_prune_clear(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = Store(root)
    now = time.time()
    old = _fill(store, "artifacts", "old", 1000, now - 40 * 86400)
    mid = _fill(store, "models", "mid", 3000, now - 2 * 86400)
    new = _fill(store, "zoo", "new", 2000, now - 60)
    store.write_record("failures", _key("failures"), {"stage": "compile"})
    (store.kind_dir("artifacts") / ".tmp-stale").mkdir()
    os.utime(store.kind_dir("artifacts") / ".tmp-stale", (now - 3 * 86400,) * 2)

    info = run_cli("cache", "info", "--json", "--cache-dir", str(root))
    assert info.returncode == 0, info.stderr
    doc = json.loads(info.stdout)
    assert doc["kinds"]["artifacts"]["entries"] == 1 and doc["kinds"]["models"]["entries"] == 1
    assert doc["kinds"]["failures"]["entries"] == 1 and doc["entries"] == 4
    assert doc["kinds"]["models"]["bytes"] >= 3000 and doc["bytes"] == sum(k["bytes"] for k in doc["kinds"].values())

    pruned = run_cli("cache", "prune", "--older-than", "30d", "--json", "--cache-dir", str(root))
    assert pruned.returncode == 0, pruned.stderr
    assert json.loads(pruned.stdout)["kinds"] == {"artifacts": 1}
    assert not old.exists() and mid.exists() and new.exists()
    assert not (store.kind_dir("artifacts") / ".tmp-stale").exists()  # a killed writer's leftovers

    store.lookup("models", _key("models", "mid"))  # a hit: now the most recently used
    budget = sum(e.bytes for e in store.entries()) - 1  # one entry too many: the LRU one goes
    pruned = run_cli("cache", "prune", "--max-size", str(budget), "--json", "--cache-dir", str(root))
    assert json.loads(pruned.stdout)["removed"] == 1 and not new.exists() and mid.exists()

    bad = run_cli("cache", "clear", "--kind", "failures", "--kind", "nope", "--cache-dir", str(root))
    assert bad.returncode == 2 and "--kind nope" in bad.stderr  # refused before anything is deleted
    cleared = run_cli("cache", "clear", "--kind", "failures", "--kind", "rows", "--json", "--cache-dir", str(root))
    assert json.loads(cleared.stdout) == {"removed": 1, "bytes": json.loads(cleared.stdout)["bytes"],
                                          "kinds": {"failures": 1}}
    assert mid.exists()
    cleared = run_cli("cache", "clear", "--cache-dir", str(root))
    assert cleared.returncode == 0 and "cleared 1 entries" in cleared.stdout and not mid.exists()
    assert list(store.entries()) == []

    for args, flag in ((("prune",), "--older-than"), (("prune", "--max-size", "lots"), "--max-size"),
                       (("prune", "--older-than", "3 fortnights"), "--older-than"),
                       (("clear", "--kind", "nope"), "--kind nope")):
        bad = run_cli("cache", *args, "--cache-dir", str(root))
        assert bad.returncode == 2 and flag in bad.stderr and "Traceback" not in bad.stderr, bad.stderr


def test_size_and_age_parsing() -> None:
    assert parse_size("5G") == 5 * 10**9 and parse_size("2GiB") == 2 * 2**30 and parse_size("1024") == 1024
    assert parse_age("30d") == 30 * 86400 and parse_age("12h") == 43200
    with pytest.raises(ValueError, match="'5Q'"):
        parse_size("5Q")


#: The schema compstack wrote before schema versions (main at 634f726), verbatim:
#: results without sweep_id/options_json/resumed_from, no user_version, conformance's
#: own tables made by its own code.
_OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
    id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, created REAL NOT NULL, model_name TEXT NOT NULL,
    fingerprint TEXT NOT NULL, target TEXT NOT NULL, status TEXT NOT NULL, stage TEXT, error TEXT, compile_s REAL,
    latency_median_ms REAL, latency_json TEXT, outputs_json TEXT, versions_json TEXT, flags_json TEXT,
    reference TEXT, cached INTEGER, log TEXT);
CREATE INDEX IF NOT EXISTS results_model ON results (fingerprint, target);
CREATE TABLE IF NOT EXISTS runs (run_id TEXT PRIMARY KEY, command TEXT, model_name TEXT, started REAL, ended REAL,
    status TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS conformance_runs (
    run_id TEXT, created REAL, target TEXT, version TEXT, onnx_version TEXT, total INTEGER,
    passed INTEGER, unsupported INTEGER, timeout INTEGER, crashed INTEGER, failed_at_json TEXT,
    seconds REAL, selection_json TEXT);
CREATE TABLE IF NOT EXISTS conformance_cases (
    run_id TEXT, target TEXT, name TEXT, status TEXT, stage TEXT, error TEXT, seconds REAL);
"""


def _schema(conn: sqlite3.Connection) -> dict[str, list[str]]:
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE "
                                         "'sqlite_%' ORDER BY name")]
    return {t: sorted(r[1] for r in conn.execute(f"PRAGMA table_info({t})")) for t in tables}


def test_old_results_database_is_migrated_in_place(tmp_path: Path) -> None:
    from compstack.conformance.suite import trend
    from compstack.core.results import DB_SCHEMA_VERSION, Report, Result, ResultsDB, connect

    db = tmp_path / "old.sqlite"
    conn = sqlite3.connect(db)
    conn.executescript(_OLD_SCHEMA)
    conn.execute("INSERT INTO results (run_id, created, model_name, fingerprint, target, status, compile_s) "
                 "VALUES ('r0', 1.0, 'mlp', 'fp0', 'ort-cpu', 'ok', 0.25)")
    conn.execute("INSERT INTO conformance_runs VALUES ('c0', 2.0, 'ort-cpu', '1.0', '1.17', 10, 7, 1, 0, 0, "
                 "'{}', 3.0, '{}')")
    conn.commit()
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
    conn.close()

    store = ResultsDB(db)
    assert store.conn is not None and store.warning == ""
    assert store.conn.execute("PRAGMA user_version").fetchone()[0] == DB_SCHEMA_VERSION
    (old,) = store.rows()
    assert (old["run_id"], old["target"], old["compile_s"], old["sweep_id"], old["options_json"]) == \
        ("r0", "ort-cpu", 0.25, "", "{}")
    report = Report(model={"name": "mlp", "fingerprint": "fp1"}, reference={"target": "reference"})
    store.add(report, Result(target="tvm-llvm", status="ok", compile_s=1.5), sweep_id="s1")
    assert [r["target"] for r in store.rows()] == ["ort-cpu", "tvm-llvm"]
    migrated = _schema(store.conn)
    store.close()
    assert trend(db)[0]["pass_rate"] == 0.7  # conformance's old rows read through the one schema

    fresh = connect(tmp_path / "new.sqlite")
    assert _schema(fresh) == migrated  # an upgraded database has the schema of a new one
    assert {"kernel_rows", "fuzz_campaigns", "fuzz_findings", "sweeps"} <= set(migrated)
    fresh.close()
    again = connect(db)  # opening a current database changes nothing
    assert again.execute("PRAGMA user_version").fetchone()[0] == DB_SCHEMA_VERSION
    assert again.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2
    again.close()


def test_fusion_and_profile_rows_are_in_the_database(tmp_path: Path, isolated_env: Path) -> None:
    model = make_mlp(tmp_path / "mlp.onnx")
    fusion = run_cli("fusion", str(model), "--targets", "ort-cpu", "--json")
    assert fusion.returncode == 0, fusion.stderr
    profile = run_cli("profile", str(model), "--target", "ort-cpu", "--warmup", "0", "--min-runs", "2",
                      "--min-time", "0", "--json")
    assert profile.returncode == 0, profile.stderr
    conn = sqlite3.connect(isolated_env / "results.sqlite")
    conn.row_factory = sqlite3.Row
    rows = [dict(r) for r in conn.execute("SELECT * FROM kernel_rows ORDER BY id")]
    runs = {r["run_id"]: dict(r) for r in conn.execute("SELECT * FROM runs")}
    assert [(r["command"], r["target"], r["status"]) for r in rows] == [("fusion", "ort-cpu", "ok"),
                                                                        ("profile", "ort-cpu", "ok")]
    (f_row,) = json.loads(fusion.stdout)["targets"]
    (p_row,) = json.loads(profile.stdout)["targets"]
    stored = json.loads(rows[0]["kernels_json"])
    assert stored == f_row["kernels"] and rows[0]["kernels"] == stored["kernel_count"] == len(stored["kernels"]) > 0
    assert json.loads(rows[1]["profile_json"]) == json.loads(json.dumps(p_row["profile"], default=str))
    assert json.loads(rows[1]["profile_json"])["kernels"]
    assert rows[0]["fingerprint"] == rows[1]["fingerprint"] != ""
    for r in rows:
        run = runs[r["run_id"]]
        assert run["command"] == r["command"] and run["status"] == "done" and run["ended"] >= run["started"]


def test_prune_and_clear_never_touch_what_the_store_did_not_write(tmp_path: Path) -> None:
    from compstack.core.store import Store

    store = Store(tmp_path)
    (tmp_path / "artifacts" / "ort-cpu" / "mine").mkdir(parents=True)
    (tmp_path / "artifacts" / "ort-cpu" / "mine" / "notes.txt").write_text("mine")
    (tmp_path / "models" / "x").mkdir(parents=True)
    (tmp_path / "models" / "x" / "data.txt").write_text("mine")
    (tmp_path / "roofline").mkdir()
    (tmp_path / "roofline" / "notes.json").write_text('{"mine": 1}')
    store.write_record("roofline", "peak", {"gflops": 1.0})
    assert [e.key for e in store.entries()] == ["peak"]  # only what the store published
    store.prune(max_bytes=0)
    store.clear()
    for f in ("artifacts/ort-cpu/mine/notes.txt", "models/x/data.txt", "roofline/notes.json"):
        assert (tmp_path / f).read_text().startswith(("mine", '{"mine"')), f
    assert not list(store.entries())


def test_a_bounded_sweep_prunes_artifacts_before_model_exports(tmp_path: Path) -> None:
    """--cache-max-size: a compiled artifact goes before a zoo export even when the export is the
    least recently used (a sweep reading stored rows needs the export, not the artifact)."""
    from compstack.core.integrity import MANIFEST
    from compstack.sweep._core import bound

    store = Store(tmp_path)

    def publish(kind: str, tag: str) -> Path:
        staging = store.staging(kind)
        (staging / "blob.bin").write_bytes(tag.encode() * 4000)
        return store.publish(staging, kind, _key(kind, tag), None, {})

    zoo, art = publish("zoo", "z"), publish("artifacts", "a")
    old = time.time() - 3600
    os.utime(zoo / MANIFEST, (old, old))  # the export is the older: plain LRU would delete it first
    gone = bound(store, 6000, lambda e: False)
    assert [g.kind for g in gone] == ["artifacts"] and not art.exists() and zoo.exists()
    assert [g.kind for g in bound(store, 100, lambda e: False)] == ["zoo"]  # still over: the exports go too
