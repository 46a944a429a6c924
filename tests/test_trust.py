"""Trust (issue #13, items 1-9): a model file, a cache entry or the current folder never
runs code; every store entry is verified on read; no measured row is ever lost.

Each test fails on the code before its fix: the model's metadata imported files, workers
had the current folder on sys.path, the cases cache was a pickle, entries were trusted
on existence, a locked database was a traceback, a torn result.json aborted the run,
SIGTERM left workers and exited 143 silently, a conformance worker that did not start
aborted every target, and a full disk turned a good compile into ``failed``.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import pytest

from compstack import targets as registry
from compstack.core import ir as cir
from compstack.core.config import settings
from compstack.core.ir import SourceModel
from compstack.core.latency import LatencyConfig
from compstack.core.results import ResultsDB
from compstack.run.runner import Limits
from compstack.run.session import CompareOptions, compare
from conftest import TESTS, gone, make_mlp, said

_CRASHY = [("crash-segfault", "SegfaultTarget"), ("crash-hang", "HangTarget"), ("crash-torn", "TornTarget"),
           ("crash-start", "StartCrashTarget"), ("crash-start-hang", "StartHangTarget")]
for _name, _cls in _CRASHY:
    if _name not in registry.names():
        registry.register(_name, f"crashy:{_cls}")

#: The CLI as the console script runs it (no current folder on sys.path), with the
#: test-only targets of tests/crashy.py registered.
_CLI = ("import sys\nfrom compstack import targets as r\n"
        f"for n, c in {_CRASHY!r}:\n    r.register(n, 'crashy:' + c)\n"
        "from compstack.cli import main\nmain(sys.argv[1:])\n")


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    """The environment of a CLI run: its own cache and db, tests/ importable, and no
    empty PYTHONPATH entry (an empty entry means the current folder)."""
    path = [str(TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), "COMPSTACK_CACHE_DIR": str(tmp / "cache"),
            "COMPSTACK_DB": str(tmp / "results.sqlite"), **extra}


def _cli(tmp: Path, *args: str, cwd: Path | None = None, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-P", "-c", _CLI, *args], capture_output=True, text=True,
                          env=_env(tmp, **env), cwd=cwd or tmp, timeout=timeout)


def _quick(*targets: str, **kw) -> CompareOptions:  # noqa: ANN003
    return CompareOptions(targets=list(targets), latency=LatencyConfig(warmup=1, min_runs=3, min_time_s=0.0), **kw)


# ---- 1, 2: nothing from the model or the current folder is imported -------------------------


def test_model_metadata_cannot_make_workers_import_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    (tmp_path / "evilmod.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    model = onnx.load(make_mlp(tmp_path / "mlp.onnx"))
    onnx.helper.set_model_props(model, {"compstack.op_origins": f"file:{evil}\nfile:evil.py\nmodule:evilmod"})
    onnx.save(model, tmp_path / "evil.onnx")
    done = _cli(tmp_path, "compare", str(tmp_path / "evil.onnx"), "--targets", "ort-cpu", "--no-latency",
                PYTHONPATH=os.pathsep.join([str(TESTS), str(tmp_path)]))
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), "a model's metadata made a worker import code"
    assert "ok" in done.stdout


def test_workers_never_import_from_the_current_folder(tmp_path: Path) -> None:
    marker = tmp_path / "planted"
    for name in ("onnxruntime", "numpy", "onnx_ir"):
        (tmp_path / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r})\nraise SystemExit(9)\n")
    make_mlp(tmp_path / "mlp.onnx")
    done = _cli(tmp_path, "compare", "mlp.onnx", "--targets", "ort-cpu", "--no-latency", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not marker.exists(), f"a planted module ran: {marker.read_text()}"
    assert "ort-cpu" in done.stdout and "ok" in done.stdout


# ---- 3, 4: nothing unpickled; every store entry verified ------------------------------------


def test_conformance_cases_are_not_a_pickle_and_are_verified(tmp_path: Path) -> None:
    from compstack.conformance.cases import cases_path, load_cases, read_cases

    cases = load_cases(tmp_path)
    path = cases_path(tmp_path)
    raw = path.read_bytes()
    assert raw[:8] == b"CSCASES2" and path.suffix == ".bin"
    assert len(read_cases(path)) == len(cases) > 1000
    # a pickle that would run code, planted with a manifest that matches it
    marker = tmp_path / "unpickled"
    import pickle

    class Boom:
        def __reduce__(self):  # noqa: ANN204
            return (open, (str(marker), "w"))

    path.write_bytes(pickle.dumps(Boom()))
    from compstack.core.integrity import write_manifest

    write_manifest(path.parent, [path], {"onnx": path.parent.name})
    with pytest.raises(ValueError, match="not a compstack cases file"):
        read_cases(path)
    again = load_cases(tmp_path)  # refused, regenerated
    assert not marker.exists() and len(again) == len(cases)
    # one flipped byte is caught by the manifest
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="altered"):
        read_cases(path)


def test_altered_canonical_model_is_replaced_not_run(tmp_path: Path) -> None:
    from compstack.run.session import model_file

    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    path = model_file(source, tmp_path / "cache")
    good = path.read_bytes()
    # same size, other weights: only the hash can tell
    raw = bytearray(good)
    raw[-100] ^= 0x01
    path.write_bytes(bytes(raw))
    assert model_file(source, tmp_path / "cache") == path
    assert path.read_bytes() == good
    (path.parent / "meta.json").write_text(json.dumps({"fingerprint": source.fingerprint, "files": ["x"]}))
    model_file(source, tmp_path / "cache")  # a malformed manifest is rebuilt, not fatal
    assert path.read_bytes() == good
    report = compare(source, _quick("ort-cpu"), settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite"))
    assert report.results[0].status == "ok"
    assert report.results[0].outputs[0]["max_abs_err"] < 1e-5


def test_zoo_entry_with_zeroed_weights_or_bad_meta_is_rebuilt(tmp_path: Path) -> None:
    from compstack.frontends import zoo

    first = zoo.load("zoo:mlp", tmp_path)
    entry = next((tmp_path / "zoo").glob("mlp-*"))
    proto = onnx.load(entry / "model.onnx")
    for init in proto.graph.initializer:  # a valid model with zeroed weights
        arr = onnx.numpy_helper.to_array(init)
        init.CopyFrom(onnx.numpy_helper.from_array(np.zeros_like(arr), init.name))
    onnx.save(proto, entry / "model.onnx")
    again = zoo.load("zoo:mlp", tmp_path)
    assert again.fingerprint == first.fingerprint
    meta = json.loads((entry / "meta.json").read_text())
    meta["files"] = list(meta["files"])  # "files" as a list
    (entry / "meta.json").write_text(json.dumps(meta))
    third = zoo.load("zoo:mlp", tmp_path)
    assert third.fingerprint == first.fingerprint
    assert isinstance(json.loads((entry / "meta.json").read_text())["files"], dict)


def test_cached_stage_text_is_verified(tmp_path: Path) -> None:
    from compstack.run.dump import dump

    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    cache = tmp_path / "cache"
    res = dump(source, "ort-cpu", tmp_path / "d1", stages=["optimized"], cache_dir=cache)
    assert res.outcome.status == "ok", res.outcome.error
    text = res.stages["optimized"].read_text()
    cached = next((cache / "stages" / "ort-cpu").glob("*/*-optimized*"))
    cached.write_text(text.replace("MatMul", "Tampered"))
    again = dump(source, "ort-cpu", tmp_path / "d2", stages=["optimized"], cache_dir=cache)
    assert again.stages["optimized"].read_text() == text


def test_kernel_library_record_is_verified(tmp_path: Path) -> None:
    from compstack.core.integrity import file_record
    from compstack.ops.build import _read

    folder = tmp_path / "key"
    folder.mkdir()
    lib = folder / "libcompstack_kernels.so"
    lib.write_bytes(b"\x7fELF" + bytes(64))
    record = {"cpu": str(lib), "iree": [], "xla": "", "cuda": "", "files": {lib.name: file_record(lib)}}
    (folder / "compstack-build.json").write_text(json.dumps(record))
    assert _read(folder, "key") is not None
    lib.write_bytes(b"\x7fELF" + bytes(63) + b"\x01")  # same size, other bytes
    assert _read(folder, "key") is None
    (folder / "compstack-build.json").write_text(json.dumps({**record, "files": [lib.name]}))
    assert _read(folder, "key") is None  # malformed: rebuilt, not a crash
    outside = {**record, "cpu": "/usr/lib/x.so"}
    (folder / "compstack-build.json").write_text(json.dumps(outside))
    assert _read(folder, "key") is None


# ---- 5, 6, 9: no measured row is lost -------------------------------------------------------


def test_locked_database_keeps_rows_in_a_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "db.sqlite"
    ResultsDB(db).close()
    holder = sqlite3.connect(db)
    holder.execute("BEGIN EXCLUSIVE")
    monkeypatch.setenv("COMPSTACK_DB_BUSY_TIMEOUT", "0.5")
    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    report = compare(source, _quick("ort-cpu", "tvm-llvm"), settings(cache_dir=tmp_path / "cache", db=db))
    assert [r.status for r in report.results] == ["ok", "ok"]  # the second target still ran
    assert any("journal" in w for w in report.warnings)
    journal = [json.loads(ln) for ln in (tmp_path / "db.sqlite.journal.jsonl").read_text().splitlines()]
    assert [r["row"]["target"] for r in journal if r["table"] == "results"] == ["ort-cpu", "tvm-llvm"]
    holder.rollback()
    holder.close()
    again = ResultsDB(db)  # the next open moves the journal into the database
    assert [r["target"] for r in again.rows()] == ["ort-cpu", "tvm-llvm"]
    assert [r["status"] for r in again.runs()] == ["done"]
    assert not (tmp_path / "db.sqlite.journal.jsonl").exists()
    again.close()


def test_corrupt_database_is_one_warning_and_rows_are_kept(tmp_path: Path) -> None:
    """An SQLite file whose pages are garbage: the run goes on, its rows in the journal."""
    db = tmp_path / "db.sqlite"
    db.write_bytes(b"SQLite format 3\x00" + b"this is not sqlite" * 300)
    make_mlp(tmp_path / "mlp.onnx")
    done = _cli(tmp_path, "compare", "mlp.onnx", "--targets", "ort-cpu", "--no-latency", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert "journal" in done.stdout
    rows = (tmp_path / "db.sqlite.journal.jsonl").read_text().splitlines()
    assert any(json.loads(r)["row"].get("target") == "ort-cpu" for r in rows)


def test_a_db_that_is_not_a_database_is_bad_input(tmp_path: Path) -> None:
    """Found by a new-user trial: ``--db`` naming a text file gave exit 0 and rows in a journal
    beside it (``sweep`` without a word); a folder under ``COMPSTACK_DB`` the same. Now: one
    line, exit 2, and the file unchanged."""
    make_mlp(tmp_path / "mlp.onnx")
    text = tmp_path / "notes.txt"
    text.write_text("my notes\n")
    (tmp_path / "adir").mkdir()
    for cmd, db in (("compare", "notes.txt"), ("sweep", "notes.txt"), ("compare", "notes.txt/x.sqlite"),
                    ("sweep", "adir")):
        flags = ("--db", db) if db != "adir" else ()
        done = _cli(tmp_path, cmd, "mlp.onnx", "--targets", "ort-cpu", "--no-latency", *flags,
                    **({"COMPSTACK_DB": db} if db == "adir" else {}))
        assert done.returncode == 2, (cmd, db, done.stderr)
        assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1 and db in done.stderr
    assert text.read_text() == "my notes\n" and not list(tmp_path.glob("*.journal.jsonl"))


@pytest.mark.parametrize("executor", [
    "process", "pool", "daemon",
    pytest.param("inline", marks=pytest.mark.skip(reason="the torn target ends its worker with os._exit: "
                                                         "inline that is the test process"))])
def test_torn_result_file_is_that_rows_crash(tmp_path: Path, executor: str) -> None:
    source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx")))
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS), *(p for p in os.environ.get("PYTHONPATH", "").split(":") if p)])}
    old = dict(os.environ)
    os.environ.update(env)
    try:
        report = compare(source, _quick("crash-torn", "ort-cpu", cache=False, limits=Limits(timeout_s=120),
                                        executor=executor),
                         settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite"))
    finally:
        os.environ.clear()
        os.environ.update(old)
    by = {r.target: r for r in report.results}
    assert by["crash-torn"].status == "crashed" and "unreadable result" in by["crash-torn"].error
    assert by["ort-cpu"].status == "ok"


def _mount_tmpfs(where: Path, size: str) -> bool:
    where.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                          capture_output=True).returncode == 0


def test_full_disk_on_cache_write_is_a_note_not_a_failure(tmp_path: Path) -> None:
    arts = tmp_path / "cache" / "artifacts"
    if not _mount_tmpfs(arts, "8k"):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        source = SourceModel(name="mlp", model=cir.load(make_mlp(tmp_path / "mlp.onnx", batch=64)))
        report = compare(source, _quick("ort-cpu"), settings(cache_dir=tmp_path / "cache", db=tmp_path / "db.sqlite"))
        row = report.results[0]
        assert row.status == "ok", row.error
        assert any("not cached" in n for n in row.notes), row.notes
        assert not list(arts.rglob(".tmp-*")), "temporary folders left behind"
    finally:
        subprocess.run(["umount", str(arts)], check=False)


# ---- 7: signals ------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        out += [int(c) for c in (task / "children").read_text().split()]
    return out


def _wait_for_worker(proc: subprocess.Popen, tmp: Path, seconds: float = 120) -> int:
    """The pid of the worker once it runs the hanging target (it reports stage ``run``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for prog in Path(tempfile.gettempdir()).glob(f"compstack-run-{proc.pid}-*/crash-hang/progress"):
            if " run" in prog.read_text():
                kids = _children(proc.pid)
                if kids:
                    return kids[0]
        time.sleep(0.2)
    raise AssertionError("the worker never reached its run stage")



#: The CLI's jobs on each isolating executor (inline has no worker to kill: it is the CLI).
_EXECUTORS = ["process", "pool"]


@pytest.mark.parametrize("executor", _EXECUTORS)
@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_kills_workers_marks_run_and_exits_128_plus_n(tmp_path: Path, sig: int, code: int,
                                                              executor: str) -> None:
    make_mlp(tmp_path / "mlp.onnx")
    proc = subprocess.Popen([sys.executable, "-P", "-c", _CLI, "compare", "mlp.onnx", "--targets", "crash-hang",
                             "--no-cache", "--timeout", "300"], cwd=tmp_path,
                            env=_env(tmp_path, COMPSTACK_EXECUTOR=executor),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    worker = _wait_for_worker(proc, tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and len(said(err)) == 1
    assert ("terminated" if sig == signal.SIGTERM else "interrupted") in err
    assert gone(worker), "the worker outlived its parent"
    assert not list(Path(tempfile.gettempdir()).glob(f"compstack-run-{proc.pid}-*"))
    runs = sqlite3.connect(tmp_path / "results.sqlite").execute("SELECT status FROM runs").fetchall()
    assert runs == [("interrupted",)]


@pytest.mark.parametrize("executor", _EXECUTORS)
def test_sigkill_of_compstack_takes_its_worker_with_it(tmp_path: Path, executor: str) -> None:
    make_mlp(tmp_path / "mlp.onnx")
    proc = subprocess.Popen([sys.executable, "-P", "-c", _CLI, "compare", "mlp.onnx", "--targets", "crash-hang",
                             "--no-cache", "--timeout", "300"], cwd=tmp_path,
                            env=_env(tmp_path, COMPSTACK_EXECUTOR=executor),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    worker = _wait_for_worker(proc, tmp_path)
    proc.kill()
    proc.wait()
    assert gone(worker), "the worker outlived a SIGKILLed parent"
    left = list(Path(tempfile.gettempdir()).glob(f"compstack-run-{proc.pid}-*"))
    assert left, "expected the killed run's folder (nothing could clean it)"
    from compstack.core.procs import run_tempdir

    fresh = run_tempdir("compstack-run-")  # the next run sweeps folders of dead runs
    try:
        assert not any(p.exists() for p in left)
    finally:
        fresh.rmdir()


# ---- 8: a conformance worker that cannot start -----------------------------------------------


def test_conformance_worker_crash_at_start_costs_its_target_only(tmp_path: Path) -> None:
    from compstack.conformance.cases import cases_path, load_cases, select
    from compstack.conformance.suite import run_suite

    cases = select(load_cases(tmp_path), pattern=r"^test_(abs|relu)$")
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), *(p for p in (old or "").split(":") if p)])
    try:
        report = run_suite(cases, cases_path(tmp_path), ["crash-start", "ort-cpu"], workers=1, timeout=60,
                           cache_dir=None, xfail_dir=tmp_path / "xfail")
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    by = {(r["target"], r["case"]): r for r in report.rows}
    assert {by[("crash-start", c.name)]["status"] for c in cases} == {"crashed"}
    assert {by[("ort-cpu", c.name)]["status"] for c in cases} == {"passed"}
    crash = next(s for s in report.summaries if s.target == "crash-start")
    assert "did not start" in crash.reason


def test_conformance_worker_hang_at_start_is_bounded(tmp_path: Path) -> None:
    from compstack.conformance.cases import cases_path, load_cases
    from compstack.run.pool import run_pool

    load_cases(tmp_path)
    rows: list[dict] = []
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), *(p for p in (old or "").split(":") if p)])
    t0 = time.monotonic()
    try:
        info = run_pool({"target_ref": "crashy:StartHangTarget", "options": {}, "cases": str(cases_path(tmp_path)),
                         "cache_dir": None}, ["test_abs", "test_relu"], 1, 30, rows.append, start_timeout=3)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH")
        else:
            os.environ["PYTHONPATH"] = old
    assert time.monotonic() - t0 < 30
    assert info["start_error"] and [r["status"] for r in rows] == ["crashed", "crashed"]


def test_string_inputs_cross_to_workers_without_pickle(tmp_path) -> None:  # noqa: ANN001
    from compstack.core.inputs import decode_arrays, save_npz

    strings = np.array([["ab", "c"], ["", "déf"]], dtype=object)
    path = save_npz(tmp_path / "inputs.npz", {"s": strings, "x": np.ones(3, np.float32)})
    with np.load(path, allow_pickle=False) as data:  # what workers do: a pickle would raise here
        back = decode_arrays({k: data[k] for k in data.files})
    assert back["s"].dtype == object and back["s"].tolist() == strings.tolist()
    assert back["x"].dtype == np.float32
