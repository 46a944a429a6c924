"""Trust, second round (issue #27, class 2): a shared store loads no other user's code.

The store root, each kind's folder and each entry must belong to the user and not be
group- or world-writable; an entry that is not the user's is refused (not loaded, not
deleted) and the reason is reported once. ``--shared-store`` loads no native code.
Planting another user's entry needs ``os.chown``: these tests run as root only.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

import onnx
import pytest

from compstack.core import ownership
from compstack.core.integrity import write_manifest
from compstack.core.store import Store
from conftest import relu_proto, run_cli

ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="os.chown needs root")
OTHER = 4242  # a uid and gid nobody on the machine has


def _entry(store: Store, kind: str, k: str, name: str = "model.so", data: bytes = b"\x7fELF...") -> Path:
    staging = store.staging(kind)
    (staging / name).write_bytes(data)
    return store.publish(staging, kind, k, meta={"fingerprint": "f"})


@pytest.fixture(autouse=True)
def _fresh_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ownership, "_REPORTED", set())
    monkeypatch.delenv("COMPSTACK_SHARED_STORE", raising=False)


@ROOT
def test_issue_example_entry_of_another_uid_is_refused_and_reported_once(tmp_path: Path,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    store = Store(tmp_path / "store")
    folder = _entry(store, "artifacts", "tvm-llvm/k1")
    assert store.lookup("artifacts", "tvm-llvm/k1")[0] is not None  # the user's own entry is a hit
    for p in (folder, *folder.iterdir()):
        os.chown(p, OTHER, OTHER)
    with caplog.at_level(logging.WARNING, logger="compstack.store"):
        for _ in range(3):
            entry, why = store.lookup("artifacts", "tvm-llvm/k1")
            assert entry is None and f"belongs to uid {OTHER}" in why
    assert len([r for r in caplog.records if "refused" in r.getMessage()]) == 1
    store.evict("artifacts", "tvm-llvm/k1")  # another user's files are never deleted
    assert (folder / "model.so").is_file()


@ROOT
def test_group_writable_kind_folder_refuses_every_entry(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    _entry(store, "artifacts", "ort-cpu/k1", "model.onnx")
    kind = store.kind_dir("artifacts")
    os.chown(kind, 0, OTHER)  # a group that is not the user's private group
    kind.chmod(0o775)
    entry, why = store.lookup("artifacts", "ort-cpu/k1")
    assert entry is None and "group- or world-writable" in why and str(kind) in why
    kind.chmod(0o755)
    assert store.lookup("artifacts", "ort-cpu/k1")[0] is not None


@ROOT
def test_world_writable_sticky_root_and_foreign_record_are_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    store = Store(shared)
    path = store.write_record("failures", "tvm-llvm/k", {"error": "x"})
    data, why = store.read_record("failures", "tvm-llvm/k")
    assert data is None and "world-writable" in why and path.exists()
    shared.chmod(0o755)
    os.chown(path, OTHER, OTHER)
    assert store.read_record("failures", "tvm-llvm/k")[0] is None


@ROOT
def test_shared_store_recompiles_native_code_and_reads_data(tmp_path: Path) -> None:
    """``--shared-store``: another user's native entry is a plain miss, their data is read."""
    store = Store(tmp_path / "store", shared=True)
    native = _entry(store, "artifacts", "tvm-llvm/k1")
    data = _entry(store, "stages", "tvm-llvm/k1", "relax.txt", b"stage text")
    for p in (native, data, *native.iterdir(), *data.iterdir()):
        os.chown(p, OTHER, OTHER)
    assert store.lookup("artifacts", "tvm-llvm/k1") == (None, "")
    assert store.lookup("stages", "tvm-llvm/k1")[0] is not None
    assert Store(tmp_path / "store").lookup("stages", "tvm-llvm/k1")[0] is None  # not shared: refused


@ROOT
@pytest.mark.slow
def test_planted_consistent_tvm_library_is_never_loaded(tmp_path: Path, isolated_env: Path) -> None:
    """End to end: a compiled ``tvm-llvm`` entry replaced by a hostile library with a good
    manifest, owned by another uid; the next compare compiles again and never loads it."""
    onnx.save(relu_proto(), str(tmp_path / "m.onnx"))
    first = run_cli("compare", "m.onnx", "--targets", "tvm-llvm", "--json", cwd=tmp_path, timeout=600)
    assert first.returncode == 0, first.stderr
    (folder,) = [p.parent for p in (tmp_path / "cache" / "artifacts" / "tvm-llvm").glob("*/meta.json")]
    so = next(p for p in folder.iterdir() if p.suffix == ".so")
    marker = tmp_path / "LOADED"
    src = tmp_path / "evil.c"
    src.write_text(f'#include <stdio.h>\n__attribute__((constructor)) static void f(void) {{ '
                   f'FILE *o = fopen("{marker}", "w"); if (o) fclose(o); }}\n')
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    meta = json.loads((folder / "meta.json").read_text())
    write_manifest(folder, sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "meta.json"),
                   {k: v for k, v in meta.items() if k != "files"})
    for p in (folder, *folder.iterdir()):
        os.chown(p, OTHER, OTHER)
    again = run_cli("compare", "m.onnx", "--targets", "tvm-llvm", "--json", cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stderr
    assert not marker.exists()
    (row,) = json.loads(again.stdout)["results"]
    assert row["status"] == "ok" and not row["cached"] and f"belongs to uid {OTHER}" in " ".join(row["notes"])


def test_a_link_inside_the_entry_is_no_escape_one_outside_is_refused(tmp_path: Path) -> None:
    """A venv in the envs kind has ``lib64 -> lib``: a link to a folder of the entry itself,
    checked like the rest of the entry. A link to a folder outside the entry is refused."""
    from compstack.core.ownership import store_problem

    root = tmp_path / "store"
    entry = root / "envs" / "ort-cpu-1.17.0-py311"
    (entry / "lib").mkdir(parents=True)
    (entry / "lib" / "x.py").write_text("")
    (entry / "lib64").symlink_to("lib")
    for p in (root, root / "envs", entry, entry / "lib"):
        p.chmod(0o755)
    assert store_problem(root, entry) == ""
    (tmp_path / "elsewhere").mkdir()
    (entry / "out").symlink_to(tmp_path / "elsewhere")
    assert "is a symbolic link to a folder" in store_problem(root, entry)


def test_a_link_in_a_folder_entrys_place_is_unlinked_and_the_entry_rebuilt(tmp_path: Path) -> None:
    """A link where an entry's folder should be is refused, then unlinked (never followed): what it
    names is untouched and the next publish puts a real entry in its place. Before, it was refused
    on every run and never rebuilt."""
    store = Store(tmp_path / "store")
    folder = _entry(store, "oracle", "k1")
    copy = tmp_path / "copy"
    folder.rename(copy)
    folder.symlink_to(copy)
    entry, why = store.lookup("oracle", "k1")
    assert entry is None and "refused" in why
    assert not folder.is_symlink() and not folder.exists() and (copy / "model.so").read_bytes() == b"\x7fELF..."
    _entry(store, "oracle", "k1")
    assert store.lookup("oracle", "k1")[0] is not None
