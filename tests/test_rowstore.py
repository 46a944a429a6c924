"""The store's judged rows (compstack.sweep._rowstore): what a record must be to be taken.

A new user's review found a record could be a link to /dev/zero (the command filled the
memory), a FIFO (it hung), another key's record copied in (another job's verdict, silently),
or hold fields of the wrong type under a matching hash (tracebacks). Each is refused now,
with one warning, and the job runs again."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

import pytest

from compstack.core.results import Result
from compstack.core.store import canonical_json, open_store
from compstack.sweep._rowstore import RowStore, _same_tolerances

REF = ("reference", {"precision": "float64"})


def _row(target: str = "ort-cpu") -> Result:
    out = {"name": "y", "kind": "ok", "max_abs_err": 1e-7, "rtol": 1e-3, "atol": 1e-5, "tolerance": "default"}
    return Result(target=target, status="ok", compile_s=0.25, outputs=[out], versions={"onnxruntime": "1"},
                  flags={"threads": {"requested": 2}}, peak_rss_compile_mb=80.0, peak_rss_run_mb=81.0)


def _rows(tmp_path: Path) -> tuple[RowStore, str, str]:
    rows = RowStore(tmp_path / "cache", {"rtol": None, "atol": None, "threads": 2})
    a = rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', REF)
    b = rows.key("fp-b", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', REF)
    assert a and b and a != b
    rows.put(a, _row(), "sw-a")
    rows.put(b, _row(), "sw-b")
    return rows, a, b


def _path(rows: RowStore, k: str) -> Path:
    assert rows.store is not None
    return rows.store.entry("rows", k)


def _rehash(path: Path, doc: dict) -> None:
    """Write ``doc`` with a matching ``_store`` hash, as anyone who can write the store can."""
    doc.pop("_store", None)
    doc["_store"] = {"sha256": hashlib.sha256(canonical_json(doc)).hexdigest()}
    path.write_text(json.dumps(doc))


def test_a_stored_row_reads_back_marked_and_keyed_by_what_judged_it(tmp_path: Path) -> None:
    rows, a, _ = _rows(tmp_path)
    got = rows.get(a, "ort-cpu")
    assert got is not None and got.outputs == _row().outputs and got.compile_s == 0.25
    assert got.flags["stored_row"]["sweep"] == "sw-a" and got.notes[-1].startswith("stored: numerics judged by sweep sw-a")
    assert rows.get(a, "openvino-cpu") is None  # another target under this key: refused (and deleted)
    assert rows.get(a, "ort-cpu") is None
    # what goes into the key: the reference, the stack's versions, the judge's settings
    other = RowStore(tmp_path / "cache", {"rtol": 0.5, "atol": None, "threads": 2})
    assert other.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', REF) != a
    assert rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "2"}', REF) != a
    assert rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', ("ort-cpu", {})) != a
    assert rows.key("fp-a", "in", "ort-cpu", {}, "?", REF) is None  # unknown versions: never stored
    # a stack as the reference (--reference tvm-llvm): its release is part of the verdict (found by review)
    tvm = ("tvm-llvm", {})
    k1 = rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', tvm, '{"tvm": "0.26"}')
    k2 = rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', tvm, '{"tvm": "0.27"}')
    assert k1 and k2 and k1 != k2
    assert rows.key("fp-a", "in", "ort-cpu", {}, '{"onnxruntime": "1"}', tvm, "?") is None


def test_a_record_copied_from_another_key_is_refused(tmp_path: Path) -> None:
    rows, a, b = _rows(tmp_path)
    _path(rows, a).write_bytes(_path(rows, b).read_bytes())  # a valid record, of another job
    assert rows.get(a, "ort-cpu") is None and not _path(rows, a).exists()
    assert rows.get(b, "ort-cpu") is not None


@pytest.mark.parametrize("change", ["flags-list", "at-text", "at-huge", "compile-text", "outputs-text", "extra-field",
                                    "status-crashed"])
def test_fields_of_the_wrong_type_under_a_matching_hash_are_refused(tmp_path: Path, change: str) -> None:
    rows, a, _ = _rows(tmp_path)
    path = _path(rows, a)
    doc = json.loads(path.read_text())
    row = doc["row"]
    {"flags-list": lambda: row.update(flags=[]), "at-text": lambda: doc.update(at="yesterday"),
     "at-huge": lambda: doc.update(at=1e300), "compile-text": lambda: row.update(compile_s="abc"),
     "outputs-text": lambda: row.update(outputs="zzz"), "extra-field": lambda: row.update(latency_ms={"median": 1}),
     "status-crashed": lambda: row.update(status="crashed")}[change]()
    _rehash(path, doc)
    assert rows.get(a, "ort-cpu") is None and not path.exists()


def test_a_link_a_fifo_or_a_huge_file_in_a_records_place_is_not_read(tmp_path: Path) -> None:
    rows, a, b = _rows(tmp_path)
    path = _path(rows, a)
    path.unlink()
    path.symlink_to("/dev/zero")  # read, it never ends: the command filled the memory
    t0 = time.monotonic()
    assert rows.get(a, "ort-cpu") is None
    assert not path.is_symlink() and Path("/dev/zero").exists()  # the link itself is deleted, not what it names
    os.mkfifo(path)  # read, it blocks forever
    assert rows.get(a, "ort-cpu") is None
    assert not path.exists()  # a FIFO is deleted
    path.write_bytes(b" " * (17 << 20))  # larger than any record
    assert rows.get(a, "ort-cpu") is None
    for depth in (995, 5000):  # JSON nested past the recursion limit, parsing or hashing: RecursionError crashed every sweep
        path.write_text('{"a": ' + "[" * depth + "]" * depth + "}")
        assert rows.get(a, "ort-cpu") is None and not path.exists()
    assert time.monotonic() - t0 < 10
    rows.put(a, _row(), "sw-again")  # a job that ran again stores its row in the place
    assert rows.get(a, "ort-cpu") is not None
    (tmp_path / "cache" / "rows").rename(tmp_path / "moved")
    (tmp_path / "cache" / "rows").write_text("")  # the kind's folder is a file: a miss, quietly
    assert rows.get(b, "ort-cpu") is None
    assert open_store(tmp_path / "cache").read_record("rows", b) == (None, "")


def test_resume_takes_a_row_only_if_judged_with_the_same_tolerances() -> None:
    default = [{"tolerance": "default", "rtol": 1e-3, "atol": 1e-5}]
    user = [{"tolerance": "user", "rtol": 0.0, "atol": 0.0}]
    assert _same_tolerances(default, None, None) and not _same_tolerances(default, 0.0, 0.0)
    assert _same_tolerances(user, 0.0, 0.0) and not _same_tolerances(user, None, None)
    assert not _same_tolerances(user, 0.5, None) and _same_tolerances([], 0.5, None)  # a failed row has no outputs
