"""``compstack sweep``: models x targets, local and on a local Ray cluster, resume, the matrix."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from compstack import targets as registry
from compstack.core.config import settings
from compstack.core.errors import UserError
from compstack.core.latency import LatencyConfig
from compstack.core.results import ResultsDB
from compstack.run.runner import Limits, default_memory_mb
from compstack.run.session import CompareOptions
from compstack.sweep import (
    LocalExecutor,
    SweepOptions,
    expand_models,
    run_sweep,
    summarize,
)
from conftest import TESTS, make_mlp, run_cli, said

for _name, _cls in [("crash-segfault", "SegfaultTarget"), ("crash-hang", "HangTarget"), ("crash-raise", "RaiseTarget")]:
    if _name not in registry.names():
        registry.register(_name, f"crashy:{_cls}")

TARGETS = ["ort-cpu", "iree-llvm-cpu", "openvino-cpu"]
FAST = LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    d = tmp_path_factory.mktemp("models")
    return [str(make_mlp(d / f"mlp{b}.onnx", batch=b)) for b in (2, 4, 8)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache and database for the module (the Ray run reuses the local run's artifacts)."""
    return tmp_path_factory.mktemp("store")


@pytest.fixture(scope="module")
def ray_executor(store: Path):
    """A local Ray cluster of 2 CPUs, started with tests/ on PYTHONPATH (crashy targets)."""
    pytest.importorskip("ray")
    from compstack.sweep import RayExecutor

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), old or ""])
    ex = RayExecutor(num_cpus=2)  # session folder under the system temp (AF_UNIX paths are short)
    yield ex
    ex.close()
    if old is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = old


def _sweep(models: list[str], targets: list[str], store: Path, executor, latency=None, timeout=60.0,
           resume=False, memory_mb=0, cache_results=True, db="results.sqlite", progress=None, **more):
    opts = CompareOptions(targets=targets, latency=latency, limits=Limits(timeout_s=timeout, memory_mb=memory_mb),
                          **more)
    cfg = settings(cache_dir=store / "cache", db=store / db)
    return run_sweep(SweepOptions(models, opts, "ort-cpu", resume, cache_results=cache_results), cfg, executor,
                     progress)


class _Lines:
    """A progress display that keeps its status lines (the sweep's other events are dropped)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)

    def __getattr__(self, name: str):
        return lambda *a, **k: None


def test_expand_models(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    a = make_mlp(tmp_path / "sub" / "a.onnx")
    b = make_mlp(tmp_path / "b.onnx")
    (tmp_path / "list.txt").write_text(f"# models\nzoo:mlp\nsub/a.onnx\n\n{b}  # abs\n")
    assert expand_models([f"@{tmp_path / 'list.txt'}", str(tmp_path)]) == ["zoo:mlp", str(a), str(b)]
    assert len(expand_models(["zoo:*"])) >= 10
    with pytest.raises(UserError, match="unknown zoo model 'nope'"):
        expand_models(["zoo:nope"])
    with pytest.raises(UserError, match="no such model file"):
        expand_models([str(tmp_path / "missing.onnx")])


@pytest.fixture(scope="module")
def local_sweep(models: list[str], store: Path):
    """3 models x 3 targets on the local executor (latency off: phase 2 is checked by the CLI test and on Ray)."""
    return _sweep(models, TARGETS, store, LocalExecutor(2))


def test_local_sweep_then_resume(models: list[str], store: Path, local_sweep) -> None:
    sweep = local_sweep
    assert sweep.jobs_run == 3 + 9  # the references, then every (model, target)
    assert {r.status for r in sweep.rows.values()} == {"ok"}
    for r in sweep.rows.values():
        assert r.outputs[0]["max_abs_err"] < 1e-4 and r.latency_ms is None
    s = summarize(sweep)
    assert s["counts"]["iree-llvm-cpu"]["status"] == {"ok": 3}
    assert s["geomean_speedup"]["ort-cpu"] == {"geomean": None, "models": 0}  # no latency, no speedup
    assert s["reference_jobs"] == 3 and "latency_s" not in s["phases"] and s["scheduling"].startswith("one phase")
    assert set(s["job_s"]) == {*TARGETS, "reference"} and all(v > 0 for v in s["job_s"].values())
    db = sqlite3.connect(store / "results.sqlite")
    rows = db.execute("SELECT target, status FROM results WHERE sweep_id = ?", (sweep.sweep_id,)).fetchall()
    assert len(rows) == 9
    # --resume: every job is known (same fingerprint, target, options, versions): nothing runs
    t0 = time.monotonic()
    again = _sweep(models, TARGETS, store, LocalExecutor(2), resume=True)
    assert again.jobs_run == 0 and again.resumed == 9 and time.monotonic() - t0 < 20
    assert {k: r.status for k, r in again.rows.items()} == {k: r.status for k, r in sweep.rows.items()}
    reused = db.execute("SELECT COUNT(*) FROM results WHERE sweep_id = ? AND resumed_from IS NOT NULL",
                        (again.sweep_id,)).fetchone()[0]
    assert reused == 9
    marked = {m: {t: c["resumed"] for t, c in cells.items()} for m, cells in summarize(again)["matrix"].items()}
    assert marked == {m: dict.fromkeys(TARGETS, True) for m in models}
    assert not any(c["resumed"] for cells in summarize(sweep)["matrix"].values() for c in cells.values())
    from compstack.sweep import summary_of_db

    stored = summary_of_db(ResultsDB(store / "results.sqlite"), again.sweep_id)
    assert all(c["resumed"] for cells in stored["matrix"].values() for c in cells.values())
    from compstack.report.dashboard import load_dashboard, render_dashboard

    page = render_dashboard(load_dashboard(store / "results.sqlite", again.sweep_id))
    assert page.count('class="x resumed"') == 9
    assert summarize(again)["scheduling"].startswith("nothing run")


def test_a_warm_sweep_reads_judged_rows_from_the_store(models: list[str], store: Path, local_sweep) -> None:
    # a new database on the same store (the benchmark's warm run): every job was judged before, on
    # the same model, inputs, target, options, versions and reference: nothing runs
    warm = _sweep(models, TARGETS, store, LocalExecutor(2), db="warm.sqlite")
    assert warm.jobs_run == 0 and warm.stored == 9 and warm.resumed == 0
    for key, r in warm.rows.items():
        cold = local_sweep.rows[key]
        assert (r.status, r.compile_s, r.outputs) == (cold.status, cold.compile_s, cold.outputs)
        assert r.flags["stored_row"]["sweep"] == local_sweep.sweep_id
        assert any(n.startswith(f"stored: numerics judged by sweep {local_sweep.sweep_id}") for n in r.notes)
    s = summarize(warm)
    assert {r["target"] for r in s["references"].values()} == {"reference"} and set(s["references"]) == set(models)
    assert s["stored"] == 9 and all(c["stored"] for cells in s["matrix"].values() for c in cells.values())
    from compstack.report.dashboard import load_dashboard, render_dashboard

    assert render_dashboard(load_dashboard(store / "warm.sqlite", warm.sweep_id)).count(">stored</span>") == 9
    # what keys a row: another tolerance is another verdict; --no-cache-results runs every job
    other = _sweep(models[:1], ["ort-cpu"], store, LocalExecutor(1), db="warm.sqlite", rtol=0.5)
    assert other.stored == 0 and other.jobs_run == 1  # the target's job (the reference's outputs are stored)
    # --resume on that database: a row is resumed only if judged with the same tolerances, and a
    # resumed row is not also marked as read from the store
    resumed = _sweep(models[:1], ["ort-cpu"], store, LocalExecutor(1), db="warm.sqlite", resume=True)
    cell = summarize(resumed)["matrix"][models[0]]["ort-cpu"]
    assert resumed.resumed == 1 and cell["resumed"] and not cell["stored"]
    strict = _sweep(models[:1], ["ort-cpu"], store, LocalExecutor(1), db="warm.sqlite", resume=True, rtol=0.25)
    assert strict.resumed == 0 and strict.jobs_run == 1
    rerun = _sweep(models[:1], ["ort-cpu"], store, LocalExecutor(1), db="warm.sqlite", cache_results=False)
    assert rerun.stored == 0 and rerun.jobs_run == 1 and "stored_row" not in rerun.rows[(models[0], "ort-cpu")].flags
    # an altered entry is deleted and the job runs again (a JSON record with a hash: nothing is unpickled)
    rows = store / "cache" / "rows"
    for f in rows.glob("*.json"):
        doc = json.loads(f.read_text())
        if doc["row"]["target"] == "openvino-cpu":
            doc["row"]["status"] = "mismatch"
            f.write_text(json.dumps(doc))
    again = _sweep(models, ["openvino-cpu"], store, LocalExecutor(2), db="warm.sqlite")
    assert again.stored == 0 and again.jobs_run == 3
    assert {r.status for r in again.rows.values()} == {"ok"}
    assert _sweep(models, ["openvino-cpu"], store, LocalExecutor(2), db="warm.sqlite").stored == 3  # stored again
    # latency is never stored: a stored ok row is timed again
    timed = _sweep(models[:1], ["ort-cpu"], store, LocalExecutor(1), db="warm.sqlite", latency=FAST)
    row = timed.rows[(models[0], "ort-cpu")]
    assert timed.stored == 1 and timed.jobs_run == 1 and row.latency_ms is not None and row.latency_ms["runs"] >= 3


def test_a_row_judged_against_a_stack_is_stored_only_with_that_stacks_release(models: list[str], tmp_path: Path) -> None:
    """With a stack as the reference (``--reference openvino-cpu``), a stored row keyed
    without that stack's release would be reused after upgrading it (found by review): its
    versions are in the key, and a reference whose versions this sweep did not probe (not
    one of its targets) is never stored."""
    lone = [_sweep(models[:1], ["ort-cpu"], tmp_path, LocalExecutor(1), reference="openvino-cpu") for _ in range(2)]
    assert lone[1].stored == 0 and lone[1].jobs_run == 2  # openvino-cpu's release unknown here: not stored
    both = [_sweep(models[:1], ["ort-cpu", "openvino-cpu"], tmp_path, LocalExecutor(1), reference="openvino-cpu")
            for _ in range(2)]
    assert both[0].stored == 0 and both[1].stored == 2 and both[1].jobs_run == 0


def test_a_warm_sweep_does_not_import_a_zoo_model_whose_rows_are_stored(tmp_path: Path, caplog) -> None:
    """The warm real tier under --cache-max-size re-exported every pruned model only to find
    its stored rows by the export's fingerprint. A model record now finds them without the
    import: a warm sweep of a zoo model whose export is gone neither exports nor runs it."""
    import shutil

    cold = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1))
    assert cold.jobs_run == 2 and cold.rows[("zoo:mlp", "ort-cpu")].status == "ok"
    zoo_dir = tmp_path / "cache" / "zoo"
    assert [p.name for p in zoo_dir.iterdir() if p.name.startswith("mlp-")]
    shutil.rmtree(zoo_dir)  # pruned (--cache-max-size drops exports before rows)
    shown = _Lines()
    warm = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite", progress=shown)
    assert warm.jobs_run == 0 and warm.stored == 1 and not zoo_dir.exists()  # not imported: nothing exported
    assert shown.lines == ["zoo:mlp: every row resumed or stored; not imported"]  # no "importing zoo:mlp" first
    row, first = warm.rows[("zoo:mlp", "ort-cpu")], cold.rows[("zoo:mlp", "ort-cpu")]
    assert (row.status, row.compile_s, row.outputs) == (first.status, first.compile_s, first.outputs)
    assert warm.models[0]["fingerprint"] == cold.models[0]["fingerprint"] and warm.models[0]["params"] > 0
    s = summarize(warm)
    assert s["stored"] == 1 and s["references"]["zoo:mlp"]["target"] == "reference"
    # --resume on the cold database takes its row, also without the import
    again = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), resume=True)
    assert again.resumed == 1 and again.jobs_run == 0 and not zoo_dir.exists()
    # one row missing (another target) and the model is imported as before; the stored row is still read
    more = _sweep(["zoo:mlp"], ["ort-cpu", "openvino-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite")
    assert more.stored == 1 and more.jobs_run == 1 and zoo_dir.exists()
    # another seed is another model record, so the model is imported; its own example inputs are
    # judged whatever the seed, so the row found after the import is the stored one
    shutil.rmtree(zoo_dir)
    seeded = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite", seed=7)
    assert seeded.stored == 1 and seeded.jobs_run == 0 and zoo_dir.exists()
    # latency on: a stored ok row is timed again, so the model is imported
    shutil.rmtree(zoo_dir)
    timed = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite", latency=FAST)
    assert timed.stored == 1 and zoo_dir.exists()
    # a model record of the wrong form under a matching hash is deleted, and the model is imported
    from compstack.core.store import canonical_json

    records = [f for f in (tmp_path / "cache" / "rows").glob("*.json") if "stack_fp" in json.loads(f.read_text())]
    assert len(records) == 2  # seed 0 and seed 7
    for f in records:
        doc = json.loads(f.read_text())
        doc.pop("_store")
        doc["stack_fp"] = 5
        doc["_store"] = {"sha256": hashlib.sha256(canonical_json(doc)).hexdigest()}
        f.write_text(json.dumps(doc))
    shutil.rmtree(zoo_dir)
    forged = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite")
    assert forged.stored == 1 and zoo_dir.exists()
    assert sorted(isinstance(json.loads(f.read_text())["stack_fp"], str) for f in records) == [False, True]  # rewritten
    assert "refused: its stack_fp have the wrong type; zoo:mlp is imported" in caplog.text  # one warning line
    # another model's record under mlp's key (its hash recomputed): refused by name, not taken
    cnn = _sweep(["zoo:cnn"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite")
    assert cnn.jobs_run == 2
    docs = {f: json.loads(f.read_text()) for f in (tmp_path / "cache" / "rows").glob("*.json")}
    mlp_rec = next(f for f, d in docs.items() if d.get("model", {}).get("name") == "zoo:mlp"
                   and isinstance(d.get("stack_fp"), str))
    cnn_rec = next(d for d in docs.values() if d.get("model", {}).get("name") == "zoo:cnn")
    swapped = {**cnn_rec, "key": docs[mlp_rec]["key"]}
    swapped.pop("_store")
    swapped["_store"] = {"sha256": hashlib.sha256(canonical_json(swapped)).hexdigest()}
    mlp_rec.write_text(json.dumps(swapped))
    shutil.rmtree(zoo_dir)
    caplog.clear()
    taken = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite")
    assert taken.models[0]["fingerprint"] == cold.models[0]["fingerprint"] and zoo_dir.exists()
    assert "it is the record of 'zoo:cnn', not 'zoo:mlp'" in caplog.text
    # JSON nested past Python's recursion limit (10 KB) in a record's place: refused, not a traceback
    mlp_rec.write_text("[" * 5000 + "]" * 5000)
    shutil.rmtree(zoo_dir)
    deep = _sweep(["zoo:mlp"], ["ort-cpu"], tmp_path, LocalExecutor(1), db="warm.sqlite")
    assert deep.stored == 1 and zoo_dir.exists() and "(RecursionError); rebuilt" in caplog.text


class _Events:
    """A sweep progress display that keeps the order of what happened."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *a, **k: self.seen.append((name, a[0] if a else None))


def test_the_next_model_is_prepared_while_jobs_run(models: list[str], tmp_path: Path) -> None:
    # the real tier spends 15-40 s exporting each model: the first jobs start before the
    # last model is imported, not after every model is (a 73-model tier waited ~30 min)
    events = _Events()
    opts = CompareOptions(targets=["ort-cpu"], latency=None, limits=Limits(timeout_s=60.0))
    cfg = settings(cache_dir=tmp_path / "cache", db=tmp_path / "results.sqlite")
    sweep = run_sweep(SweepOptions(models, opts, "ort-cpu"), cfg, LocalExecutor(1), progress=events)
    assert {r.status for r in sweep.rows.values()} == {"ok"} and sweep.jobs_run == 6
    order = [(k, v) for k, v in events.seen if k in ("status", "started")]
    first_job = next(i for i, (k, _) in enumerate(order) if k == "started")
    last_import = max(i for i, (k, v) in enumerate(order) if k == "status" and str(v).startswith("importing"))
    assert first_job < last_import, order


def test_ray_matches_local(models: list[str], store: Path, local_sweep, ray_executor) -> None:
    local = local_sweep
    # latency off: the statuses and numerics are compared; every job runs (the local sweep's rows are stored)
    ray = _sweep(models, TARGETS, store, ray_executor, cache_results=False)
    assert {k: r.status for k, r in ray.rows.items()} == {k: r.status for k, r in local.rows.items()}
    assert len(ray.rows) == 9 and {r.status for r in ray.rows.values()} == {"ok"}
    for key, r in ray.rows.items():
        want = local.rows[key].outputs[0]
        got = r.outputs[0]
        assert got["max_abs_err"] == pytest.approx(want["max_abs_err"], rel=1e-6, abs=1e-12), key
    assert ray_executor.describe()["task_overhead_ms_median"] is not None


def test_ray_crash_and_hang_cost_their_rows(models: list[str], store: Path, ray_executor) -> None:
    sweep = _sweep(models[:1], ["ort-cpu", "crash-segfault", "crash-hang"], store, ray_executor, latency=FAST,
                   timeout=3.0, memory_mb=default_memory_mb(), cache_results=False)  # the CLI's default limit schedules on Ray
    by = {t: r for (_, t), r in sweep.rows.items()}
    assert by["crash-segfault"].status == "crashed" and "SIGSEGV" in by["crash-segfault"].error
    assert by["crash-segfault"].stage == "run"
    assert by["crash-hang"].status == "timeout" and "3 s wall-clock" in by["crash-hang"].error
    assert by["ort-cpu"].status == "ok" and by["ort-cpu"].latency_ms["runs"] >= 3  # phase 2 ran on Ray too
    rows = sqlite3.connect(store / "results.sqlite").execute(
        "SELECT target, status FROM results WHERE sweep_id = ? ORDER BY target", (sweep.sweep_id,)).fetchall()
    assert rows == [("crash-hang", "timeout"), ("crash-segfault", "crashed"), ("ort-cpu", "ok")]


def test_cli_sweep_json_and_last_matrix(models: list[str], tmp_path: Path, isolated_env: Path) -> None:
    listing = tmp_path / "models.txt"
    listing.write_text("\n".join(models[:2]) + "\n")
    p = run_cli("sweep", f"@{listing}", "--targets", "reference,ort-cpu", "--baseline", "reference", "--warmup", "1",
                "--min-runs", "3", "--min-time", "0", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["models"] == models[:2] and out["counts"]["ort-cpu"]["status"] == {"ok": 2}
    # phase 2 timed every ok row; each speed-up is the baseline's median over the target's (on a
    # 4-node MLP the two medians are tens of microseconds apart, so which is faster depends on
    # the machine's load: that is not asserted), and the geomean is theirs
    cells = [out["matrix"][m]["ort-cpu"] for m in models[:2]]
    refs = [out["matrix"][m]["reference"] for m in models[:2]]
    assert all(c["latency_ms"] > 0 and r["latency_ms"] > 0 for c, r in zip(cells, refs))
    for c, r in zip(cells, refs):
        assert c["speedup"] == pytest.approx(r["latency_ms"] / c["latency_ms"], rel=1e-3), (c, r)
    geo = out["geomean_speedup"]["ort-cpu"]
    assert geo["models"] == 2 and geo["geomean"] == pytest.approx((cells[0]["speedup"] * cells[1]["speedup"]) ** 0.5,
                                                                   rel=1e-3)
    assert out["executor"]["name"] == "local"
    p = run_cli("sweep", "--last", "--matrix", "--json")
    assert p.returncode == 0, p.stderr
    last = json.loads(p.stdout)
    assert last["sweep_id"] == out["sweep_id"] and last["matrix"][models[0]]["reference"]["status"] == "ok"
    page = tmp_path / "sweep.html"
    p = run_cli("report", "--sweep", "-o", str(page))
    assert p.returncode == 0 and out["sweep_id"] in p.stdout, p.stderr
    html = page.read_text()
    assert f"sweep {out['sweep_id']}" in html and "<script" not in html and "http" not in html.split("</head>")[0]
    p = run_cli("report", "--last", "-o", str(tmp_path / "last.html"))  # the newest run is the sweep's: its matrix
    assert p.returncode == 0 and f"sweep {out['sweep_id']}" in p.stdout, p.stdout + p.stderr
    speed = out["matrix"][models[0]]["ort-cpu"]["speedup"]
    assert f"{speed:.3g}×" in html and html.count('class="status s-ok"') == 4  # 2 models x 2 targets


def test_cli_sweep_tier_and_dashboard_file(tmp_path: Path, isolated_env: Path) -> None:
    """``--tier TIER`` sweeps that zoo tier; ``-o`` writes the sweep's dashboard, and a bad ``-o``
    or ``--tier`` with ``--last`` is one line before any work."""
    from compstack.frontends import zoo

    page = tmp_path / "dash.html"
    p = run_cli("sweep", "--tier", "toy", "--targets", "reference", "--no-latency", "--json", "-o", str(page))
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["models"] == [f"zoo:{n}" for n in zoo.names(available_only=True, tier="toy")]
    assert out["dashboard"]["path"] == str(page) and out["dashboard"]["bytes"] == page.stat().st_size
    html = page.read_text()
    assert f"sweep {out['sweep_id']}" in html and "zoo:cnn" in html
    assert "importing zoo:mlp (1 of " in p.stderr  # each model's import is a progress line off a terminal
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    t0 = time.monotonic()
    p = run_cli("sweep", "--tier", "real", "--targets", "ort-cpu", "-o", str(blocker / "dash.html"))
    assert p.returncode == 2 and p.stderr.startswith("compstack: error: -o ") and "Traceback" not in p.stderr
    assert time.monotonic() - t0 < 60  # refused before the first real model is exported
    p = run_cli("sweep", "zoo:mlp", "--targets", "ort-cpu", "-o", str(tmp_path))  # a folder: refused before the sweep
    assert p.returncode == 2 and "a folder; give the FILE.html" in p.stderr and "zoo:mlp" not in p.stderr
    p = run_cli("sweep", "--last", "--tier", "real")
    assert p.returncode == 2 and "give no models or --tier" in p.stderr
    p = run_cli("sweep", "--last", "--no-cache-results")
    assert p.returncode == 2 and "--no-cache-results applies to running a sweep" in p.stderr
    for flag in (["--targets", "ort-cpu"], ["--no-latency"], ["--rtol", "0"], ["--reference", "ort-cpu"]):
        p = run_cli("sweep", "--last", *flag)  # a run's flag beside --last was silently ignored
        assert p.returncode == 2 and f"sweep --last: {flag[0]} applies to running a sweep" in p.stderr, flag
    assert "--save-inputs" not in run_cli("sweep", "--help").stdout  # sweep refuses it, so --help hides it
    p = run_cli("sweep", "--last", "--baseline", "openvino-cpu")  # it set only the dashboard's: ignored without -o
    assert p.returncode == 2 and "--baseline sets the dashboard's baseline; give -o" in p.stderr
    missing = tmp_path / "none" / "results.sqlite"
    p = run_cli("sweep", "--last", "--db", str(missing))  # reading made an empty database (and its folder)
    assert p.returncode == 2 and "no results database at" in p.stderr and not missing.parent.exists()
    for content in (b"", b"not a database"):  # an empty file became a 60 KB database
        (tmp_path / "other.sqlite").write_bytes(content)
        p = run_cli("sweep", "--last", "--db", str(tmp_path / "other.sqlite"))
        assert p.returncode == 2 and "is not a results database" in p.stderr, p.stderr
        assert (tmp_path / "other.sqlite").read_bytes() == content
    foreign = tmp_path / "foreign.sqlite"  # another program's database got compstack's tables added
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    before = foreign.read_bytes()
    p = run_cli("sweep", "--last", "--db", str(foreign))
    assert p.returncode == 2 and "not compstack's results database (no sweeps table)" in p.stderr, p.stderr
    assert foreign.read_bytes() == before
    (tmp_path / "cut.sqlite").write_bytes(before[:16] + b"\0" * 100)  # the header, then garbage
    p = run_cli("sweep", "--last", "--db", str(tmp_path / "cut.sqlite"))
    assert p.returncode == 2 and "cut.sqlite is not a readable results database" in p.stderr, p.stderr


def test_sweep_rows_are_judged_as_compare_judges_them(tmp_path: Path, isolated_env: Path) -> None:
    """One judge (issue #24) in the sweep too: a float32 cancellation beyond the tolerance but
    within the float32 noise floor is ``imprecise`` (agrees), as in compare. The sweep used
    the tolerance alone and called it a mismatch (ResNet-50: 4 stacks at rel L2 2e-5)."""
    import numpy as np

    from test_verdict import _cancellation

    path, feeds = _cancellation(tmp_path)
    np.savez(tmp_path / "in.npz", **feeds)
    p = run_cli("sweep", str(path), "--targets", "ort-cpu", "--inputs", str(tmp_path / "in.npz"), "--no-latency",
                "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    assert json.loads(p.stdout)["matrix"][str(path)]["ort-cpu"]["status"] in ("ok", "imprecise")
    with sqlite3.connect(isolated_env / "results.sqlite") as conn:
        outputs = json.loads(conn.execute("SELECT outputs_json FROM results WHERE target = 'ort-cpu'").fetchone()[0])
    assert outputs[0]["kind"] == "imprecise" and outputs[0]["floor"] > 0, outputs


def test_bundle_faults_writes_a_bundle_per_stack_fault_and_the_dashboard_links_it(tmp_path: Path,
                                                                                    isolated_env: Path) -> None:
    """``sweep --bundle-faults``: the stack's failure (crash-raise) gets an explain bundle, the
    row's flags name it and the dashboard links it; an ok row gets none."""
    from compstack import api
    from compstack.report.dashboard import load_dashboard
    from compstack.sweep import LocalExecutor
    from compstack.sweep._bundles import bundle_sweep_faults

    model = str(make_mlp(tmp_path / "m.onnx"))
    sweep = _sweep([model], ["ort-cpu", "crash-raise"], tmp_path, LocalExecutor(1))
    db = tmp_path / "results.sqlite"
    seen: list[str] = []
    done = bundle_sweep_faults(db, sweep.sweep_id, tmp_path / "bundles",
                               lambda m, t, out: api.explain_model(m, t, out_dir=out, time_budget_s=30),
                               lambda m, t, where: seen.append(f"{t}:{where}"))
    assert list(done) == [model] and list(done[model]) == ["crash-raise"], done
    where = Path(done[model]["crash-raise"])
    assert where == tmp_path / "bundles" / "m.onnx" / "crash-raise" and (where / "ISSUE.md").is_file()
    assert seen == ["crash-raise:start", f"crash-raise:{where}"]
    cell = load_dashboard(db)["grid"][model]["crash-raise"]
    assert cell["status"] == "failed" and str(where) in cell["bundle"]
    assert not load_dashboard(db)["grid"][model]["ort-cpu"]["bundle"]


def test_cli_ray_errors_are_one_line(models: list[str], isolated_env: Path) -> None:
    t0 = time.monotonic()
    p = run_cli("sweep", models[0], "--targets", "ort-cpu", "--executor", "ray", "--ray-address", "127.0.0.1:9")
    assert p.returncode == 2 and time.monotonic() - t0 < 15
    assert said(p.stderr) == [("compstack: error: --ray-address 127.0.0.1:9: unreachable "
                                              "(Connection refused)")]
    code = ("import sys; sys.modules['ray'] = None; from compstack.cli import main; "
            f"main(['sweep', {models[0]!r}, '--targets', 'ort-cpu', '--executor', 'ray'])")
    import subprocess

    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert said(p.stderr) == ['compstack: error: the ray executor needs Ray: pip install -e ".[ray]"']
    probe = ("import compstack, compstack.sweep, compstack.cli, sys; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray'))")
    p = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "[]"  # import compstack (and the sweep package) never imports ray


def test_old_database_gets_the_sweep_columns(tmp_path: Path) -> None:
    from compstack.core.results import Report, Result, ResultsDB

    db_path = tmp_path / "old.sqlite"
    old = sqlite3.connect(db_path)
    old.executescript("CREATE TABLE results (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, "
                      "created REAL NOT NULL, model_name TEXT NOT NULL, fingerprint TEXT NOT NULL, target TEXT NOT NULL, "
                      "status TEXT NOT NULL, stage TEXT, error TEXT, compile_s REAL, latency_median_ms REAL, "
                      "latency_json TEXT, outputs_json TEXT, versions_json TEXT, flags_json TEXT, reference TEXT, "
                      "cached INTEGER, log TEXT);"
                      "INSERT INTO results (run_id, created, model_name, fingerprint, target, status) "
                      "VALUES ('r0', 0, 'm', 'f', 'ort-cpu', 'ok');")
    old.commit()
    old.close()
    db = ResultsDB(db_path)
    db.add(Report(model={"name": "m2", "fingerprint": "g"}, reference={}), Result("tvm-llvm", "failed"), "sw-1",
           {"opt": "x"})
    rows = db.conn.execute("SELECT target, sweep_id, options_json FROM results ORDER BY id").fetchall()
    db.close()
    assert rows == [("ort-cpu", "", "{}"), ("tvm-llvm", "sw-1", '{"opt": "x"}')]


def test_resume_reads_the_stacks_versions_without_importing_them(models: list[str], tmp_path: Path) -> None:
    # --resume compares each row's stack versions with the installed ones; reading them by
    # importing every stack put JAX's threads in the driver, which forks a worker per job
    code = ("import json, sys\n"
            "from compstack.core.config import settings\nfrom compstack.run.runner import Limits\n"
            "from compstack.run.session import CompareOptions\n"
            "from compstack.sweep import LocalExecutor, SweepOptions, run_sweep\n"
            "opts = CompareOptions(targets=['ort-cpu', 'xla-cpu'], latency=None, limits=Limits(timeout_s=120.0))\n"
            "cfg = settings(cache_dir=sys.argv[2] + '/cache', db=sys.argv[2] + '/r.sqlite')\n"
            "s = run_sweep(SweepOptions([sys.argv[1]], opts, 'ort-cpu', True), cfg, LocalExecutor(2))\n"
            "print(json.dumps({'resumed': s.resumed, 'status': sorted(r.status for r in s.rows.values()),\n"
            "                  'stacks': sorted(m for m in ('jax', 'torch', 'onnxruntime') if m in sys.modules)}))\n")
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", code, models[0], str(tmp_path)], capture_output=True, text=True,
                              timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert runs[0]["status"] == ["ok", "ok"] and runs[0]["resumed"] == 0
    assert runs[1]["resumed"] == 2 and runs[1]["status"] == ["ok", "ok"]
    assert "jax" not in runs[1]["stacks"], runs


def test_cache_max_size_keeps_the_store_bounded(models: list[str], tmp_path: Path, isolated_env: Path) -> None:
    from compstack.core.store import open_store

    cache = tmp_path / "bounded"
    p = run_cli("sweep", *models[:2], "--targets", "ort-cpu,iree-llvm-cpu", "--no-latency", "--cache-dir", str(cache),
                "--cache-max-size", "20K", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout)
    assert out["counts"]["iree-llvm-cpu"]["status"] == {"ok": 2}
    assert "--cache-max-size: pruned" in p.stderr
    store = open_store(cache)
    kept = sum(e.bytes for k in ("artifacts", "models", "zoo") for e in store.entries(k))
    assert kept <= 20_000, kept
    for bad, why in ((["--cache-max-size", "12Q"], "--cache-max-size"), (["--cache-max-size", "1G", "--warmup", "1"],
                                                                          "needs --no-latency")):
        args = ["sweep", models[0], "--targets", "ort-cpu", *bad] + ([] if "--warmup" in bad else ["--no-latency"])
        p = run_cli(*args)
        assert p.returncode == 2 and why in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_job_is_timed_from_its_start_not_from_when_the_driver_hears_of_it() -> None:
    """The driver's thread prepares the next model (a real model's export: minutes) while
    jobs run; a job's time must still be its own (``sweep --json`` ``job_s``): not ~0, and
    not the job plus the import the driver was busy with when it ended (each event carries
    the time it happened)."""
    import time as _time

    from compstack.run.jobs import Job, JobOutcome
    from compstack.run.runner import Limits

    class Sleeper:  # stands in for the worker processes: this test is about the driver's clock
        def run(self, job: Job, limits: Limits) -> JobOutcome:
            _time.sleep(0.6)
            return JobOutcome(job.target)

    ex = LocalExecutor(1)
    ex.executor = Sleeper()  # type: ignore[assignment]
    started: dict = {}
    ended: dict = {}
    calls = iter([[], None])

    def more():  # noqa: ANN202
        _time.sleep(1.5)  # the driver busy preparing the next model while the job runs
        return next(calls)

    job = Job(target="t", target_ref="x:Y", workdir="/tmp", model_path="", fingerprint="", inputs_path="")
    heard: dict = {}
    ex.run([("k", job)], Limits(), False, lambda k, at=None: started.setdefault(k, at),
           lambda k, o, at=None: (ended.setdefault(k, at), heard.setdefault(k, _time.monotonic())), more)
    assert started["k"] is not None and 0.6 <= ended["k"] - started["k"] < 1.4
    assert heard["k"] - started["k"] >= 1.5  # heard after the driver's 1.5 s "import"


def test_a_start_line_heard_late_says_when_the_job_started(capsys) -> None:
    from compstack.sweep._display import SweepProgress

    shown = SweepProgress()
    shown.t0 -= 60.0  # the sweep began a minute ago
    shown.started((0, "ort-cpu"), "zoo:mlp", time.monotonic() - 30.0)  # heard 30 s late
    shown.started((0, "xla-cpu"), "zoo:mlp", time.monotonic())
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("[   60.0 s]") and lines[0].endswith("start ort-cpu on zoo:mlp (started at 30.0 s)")
    assert lines[1].endswith("start xla-cpu on zoo:mlp")


def test_a_job_killed_beside_others_runs_again_alone() -> None:
    """The tier run lost qwen2.5-0.5b's IREE compile (11.7 GB) to the kernel's OOM killer
    while another compile ran beside it. Such a job runs once more, alone: the other job
    ends first and no new one starts until it has; a job killed alone is not run again."""
    from compstack.run.jobs import Job, JobOutcome

    calls: list[tuple[str, float, float]] = []

    class Machine:  # the first run of "big" is killed from outside; "side" runs long
        def run(self, job: Job, limits: Limits) -> JobOutcome:
            t = time.monotonic()
            time.sleep(1.0 if job.target == "side" else 0.1)
            calls.append((job.target, t, time.monotonic()))
            if job.target.startswith("big") and sum(c[0] == job.target for c in calls) == 1:
                return JobOutcome(job.target, status="crashed", stage="lower",
                                  error="worker died by SIGKILL (possibly the kernel's OOM killer) in stage lower")
            return JobOutcome(job.target)

    def job(name: str) -> Job:
        return Job(target=name, target_ref="", workdir="", model_path="", fingerprint="", inputs_path="")

    ex = LocalExecutor(2)
    ex.executor = Machine()  # type: ignore[assignment]
    got: dict = {}
    ex.run([("big", job("big")), ("side", job("side")), ("late", job("late"))], Limits(), False,
           lambda k, at=None: None, lambda k, o, at=None: got.setdefault(k, o))
    assert got["big"].status == "ok" and "run again alone" in got["big"].extra["notes"][0]
    runs = {name: [(a, b) for n, a, b in calls if n == name] for name in ("big", "side", "late")}
    retry_start, retry_end = runs["big"][1]
    assert retry_start >= runs["side"][0][1]  # the job beside it ended first
    assert runs["late"][0][0] >= retry_end  # and nothing started while it ran again
    calls.clear()
    ex.run([("big-alone", job("big-alone"))], Limits(), False, lambda k, at=None: None,
           lambda k, o, at=None: got.setdefault(k, o))
    assert got["big-alone"].status == "crashed" and len(calls) == 1  # killed alone: that is its row
