"""The store: every cache compstack keeps, under one root, one key function, one publish.

Root: ``--cache-dir`` > ``$COMPSTACK_CACHE_DIR`` > ``$XDG_CACHE_HOME/compstack`` >
``~/.cache/compstack`` (:func:`compstack.core.config.settings`; :func:`root`).

Kinds (:data:`KINDS`), each a folder under the root (the folder names are those of the
caches this store replaced, so their entries stay valid):

==============  ================================  =======================================
kind            folder                            an entry
==============  ================================  =======================================
artifacts       ``artifacts/<target>/<key>/``     a compiled artifact (``Compiled.save``)
conformance     ``artifacts/conformance/<t>/<k>`` a conformance case's compiled artifact
failures        ``artifacts/conformance-failures/<t>/<k>.json``  a known lower/compile failure
stages          ``stages/<target>/<key>/``        stage texts of ``compstack dump``
models          ``models/<fingerprint>[.form]/``  a canonical model handed to workers
zoo             ``zoo/<name>-<key>/``             an exported zoo model and its inputs
cases           ``conformance/onnx-<v>/``         the ONNX node-test cases (``cases.bin``)
ops             ``ops/<key>/``                    the custom-op kernel library (CMake build)
roofline, rows  ``roofline/<h>.json``, ``rows/``  this host's measured peaks; a sweep's judged rows
tvm-tuning      ``tvm-tuning/<key>/``             MetaSchedule tuning records (in place)
xla, inductor   ``xla/<key>/``, ``inductor/<k>/`` compiled programs of those stacks
envs, oracle    ``envs/``, ``oracle/<key>/``      release venvs; a reference's outputs, floor, UB
==============  ================================  =======================================

A folder entry is published once: its files are written into a temporary folder beside
the final one (:meth:`Store.staging`), a manifest ``meta.json`` with each file's size and
SHA-256 is written last, and one ``rename`` moves the folder into place
(:meth:`Store.publish`), so a reader never sees half an entry. A file entry (a small
JSON record) carries the SHA-256 of its own canonical JSON and is written with one
``os.replace`` (:meth:`Store.write_record`). Every read re-checks sizes and hashes
(:meth:`Store.lookup`, :meth:`Store.read_record`); an entry that fails is deleted and
rebuilt by its caller, never loaded. Nothing read back is unpickled: manifests and
records are JSON. A hit refreshes the manifest's mtime, which :meth:`Store.prune` reads as "last used" (LRU).

Keys: :func:`key` hashes a canonical JSON (sorted keys, no spaces, UTF-8) of the key
parts together with compstack's version and the versions of the stack's packages, so an
upgrade of either starts new entries instead of reusing stale ones.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from compstack.core.integrity import MANIFEST, check_manifest, read_plain, write_manifest
from compstack.core.ownership import NATIVE_KINDS, report_once, store_problem
from compstack.core.sizes import parse_age, parse_size

__all__ = ["KINDS", "ArtifactCache", "CacheEntry", "Entry", "EntryInfo", "Kind", "Store", "cache_key",
           "canonical_json", "entry", "host_id", "key", "open_store", "parse_age", "parse_size", "root"]


@dataclass(frozen=True)
class Kind:
    """One kind of store entry.

    Attributes:
        name: the kind's name (``compstack cache clear --kind NAME``).
        folder: its folder, relative to the store root.
        depth: path components of a key (``<target>/<key>`` is 2).
        record: entries are single JSON records (``<key>.json``), not folders.
        about: one line for ``compstack cache info``.
    """

    name: str
    folder: str
    depth: int
    record: bool
    about: str


#: Every kind the store holds, by name (see the module docstring).
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("artifacts", "artifacts", 2, False, "compiled artifacts (<target>/<key>)"),
    Kind("conformance", "artifacts/conformance", 2, False, "compiled conformance cases (<target>/<key>)"),
    Kind("failures", "artifacts/conformance-failures", 2, True, "known conformance compile failures"),
    Kind("stages", "stages", 2, False, "stage texts of compstack dump (<target>/<key>)"),
    Kind("models", "models", 1, False, "canonical models handed to workers"),
    Kind("zoo", "zoo", 1, False, "exported zoo models"),
    Kind("cases", "conformance", 1, False, "ONNX node-test cases"),
    Kind("ops", "ops", 1, False, "custom-op kernel libraries"),
    Kind("roofline", "roofline", 1, True, "measured peaks of this host"),
    Kind("tvm-tuning", "tvm-tuning", 1, False, "MetaSchedule tuning records (tvm-llvm tune_trials)"),
    Kind("xla", "jax-cache", 1, False, "JAX's persistent compilation cache (sealed <key>/ folders)"),
    Kind("inductor", "inductor-cache", 1, False, "Inductor's FX graph / AOTAutograd caches (sealed <key>/ folders)"),
    Kind("envs", "envs", 1, False, "stack release venvs (<stack>-<version>-py<v>/, compstack.core.envs)"),
    Kind("oracle", "oracle", 1, False, "reference outputs, noise floors, UB findings (compstack.run.oracle_cache)"),
    Kind("rows", "rows", 1, True, "a sweep's judged rows (compstack.sweep._rowstore)"))}

_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


def root(cache_dir: str | Path | None = None) -> Path:
    """The store root: ``cache_dir`` when given, else ``$COMPSTACK_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/compstack``, else ``~/.cache/compstack``."""
    from compstack.core.config import settings

    return settings(cache_dir=cache_dir).cache_dir


def canonical_json(value: Any) -> bytes:
    """The canonical JSON of ``value``: sorted keys, no spaces, UTF-8; values JSON
    cannot hold are written with ``str`` (paths, enums)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode()


def key(kind: str, parts: Mapping[str, Any], versions: Mapping[str, str] | None = None, digits: int = 24) -> str:
    """The key of one store entry.

    Args:
        kind: the kind (:data:`KINDS`); hashed in, so two kinds never share a key.
        parts: what identifies the entry (fingerprint, target, options, host...).
        versions: the versions of the stack's packages that shape the entry.
        digits: hex digits kept (at most 64).

    Returns:
        ``digits`` hex digits of SHA-256 over :func:`canonical_json` of
        ``{"kind", "compstack": compstack's version, "parts", "versions"}``.
    """
    from compstack.core.version import __version__

    blob = {"kind": kind, "compstack": __version__, "parts": dict(parts), "versions": dict(versions or {})}
    return hashlib.sha256(canonical_json(blob)).hexdigest()[:digits]


def host_id() -> str:
    """The host CPU identity (machine + model name + flags hash): artifacts compiled
    for ``-mcpu=host`` are only valid on the same kind of CPU."""
    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = line.split(":", 1)[1].strip()
    except OSError:
        pass  # no /proc: the machine and no CPU model
    return f"{platform.machine()}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def cache_key(fingerprint: str, target: str, options: Mapping[str, Any], versions: Mapping[str, str]) -> str:
    """Key of one compiled artifact or stage-text entry: :func:`key` over the model's
    fingerprint, the target, its options and this host (:func:`host_id`), with the
    stack's ``versions`` (24 hex digits)."""
    return key("artifacts", {"fp": fingerprint, "target": target, "options": dict(options), "host": host_id()}, versions)


@dataclass(frozen=True)
class Entry:
    """A verified folder entry: its folder and its manifest (``meta.json``: the
    caller's metadata plus ``files`` and ``created``)."""

    folder: Path
    meta: dict[str, Any]


#: The name the artifact cache used for :class:`Entry`.
CacheEntry = Entry


@dataclass(frozen=True)
class EntryInfo:
    """One entry as :meth:`Store.entries` lists it.

    Attributes:
        kind: its kind.
        key: its key (``<target>/<hex>`` for two-part kinds).
        path: its folder (or record file).
        bytes: bytes on disk (all files under the folder).
        last_used: seconds since the epoch of the last hit or the publish (mtime of
            the manifest or record).
    """

    kind: str
    key: str
    path: Path
    bytes: int
    last_used: float


def _kind(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown store kind {kind!r} (kinds: {', '.join(KINDS)})") from None


def _check_key(kind: Kind, k: str) -> None:
    parts = k.split("/")
    if len(parts) != kind.depth or not all(_PART.fullmatch(p) for p in parts):
        raise ValueError(f"store key {k!r} of kind {kind.name}: {kind.depth} part(s) of [A-Za-z0-9._+-] expected")


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


class Store:
    """The store under ``root`` (see the module docstring).

    Args:
        root: the store root (:func:`root` gives the configured one).
        shared: ``--shared-store`` (default: :func:`compstack.core.config.shared_store`);
            see :mod:`compstack.core.ownership` for what each mode loads.
    """

    def __init__(self, root: str | Path, shared: bool | None = None) -> None:
        from compstack.core.config import shared_store

        self.root, self.shared = Path(root).expanduser(), shared_store() if shared is None else shared

    def refused(self, kind: str, path: Path) -> tuple[bool, str]:
        """Whether the entry at ``path`` must not be read (:mod:`compstack.core.ownership`),
        and why (``""`` for the plain miss of native code under ``--shared-store``)."""
        if self.shared:
            return kind in NATIVE_KINDS, ""
        why = store_problem(self.root, path)
        if why:
            report_once(f"store entry {path} refused (not loaded, rebuilt): {why}")
        return bool(why), why and f"store entry {path} refused: {why}; rebuilt"

    # ---- paths ----------------------------------------------------------------------

    def kind_dir(self, kind: str) -> Path:
        """The folder of ``kind``.

        Raises:
            ValueError: unknown kind.
        """
        return self.root / _kind(kind).folder

    def entry(self, kind: str, k: str) -> Path:
        """The path of entry ``k`` of ``kind``: a folder, or ``<key>.json`` for record
        kinds. The path may not exist; use :meth:`lookup` / :meth:`read_record` to read.

        Raises:
            ValueError: unknown kind, or a key with the wrong number of parts or with
                characters outside ``[A-Za-z0-9._+-]`` (no ``..``, no absolute path).
        """
        spec = _kind(kind)
        _check_key(spec, k)
        path = self.root / spec.folder / k
        return path.with_name(path.name + ".json") if spec.record else path

    # ---- folder entries ------------------------------------------------------------

    def lookup(self, kind: str, k: str) -> tuple[Entry | None, str]:
        """Find and verify a folder entry (every file's size and SHA-256 against its
        manifest, :func:`compstack.core.integrity.check_manifest`).

        Returns:
            ``(entry, "")`` on a hit (its manifest's mtime is refreshed: last used);
            ``(None, "")`` on a miss; ``(None, why)`` when a corrupt entry was found and
            deleted (``why`` names the folder and what was wrong).
        """
        folder = self.entry(kind, k)
        if not folder.exists():
            return None, ""
        refused, why = self.refused(kind, folder)
        if refused:
            if folder.is_symlink():  # a link in the entry's place: unlinked (never followed), so it is rebuilt
                self.evict(kind, k)
            return None, why
        meta, problem = check_manifest(folder)
        if meta is None:
            self.evict(kind, k)
            return None, f"corrupt cache entry {folder} ({problem}); rebuilt"
        with contextlib.suppress(OSError):  # a read-only store still serves hits
            os.utime(folder / MANIFEST)
        return Entry(folder, meta), ""

    def verify(self, kind: str, k: str) -> dict[str, Any] | None:
        """The manifest of a good entry, else None (nothing is deleted or touched)."""
        meta, _ = check_manifest(self.entry(kind, k))
        return meta

    def staging(self, kind: str) -> Path:
        """A fresh temporary folder (``.tmp-*`` in the kind's folder) to write an entry
        into before :meth:`publish`.

        Raises:
            OSError: the folder cannot be created.
        """
        base = self.kind_dir(kind)
        base.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))
        tmp.chmod(0o755)  # mkdtemp makes it 0700; a shared cache must stay readable
        return tmp

    def publish(self, staging: Path, kind: str, k: str, files: Sequence[Path] | None = None,
                meta: Mapping[str, Any] | None = None, replace: bool = False) -> Path:
        """Hash ``files`` (inside ``staging``; default: every file in it), write the
        manifest (``meta`` plus ``files`` and ``created``) and move the folder to its
        final place with one ``rename``.

        Args:
            replace: swap out an existing entry (also by rename); without it an entry
                that is already there (a concurrent writer's) is kept and ours dropped.

        Returns:
            The entry's folder.

        Raises:
            OSError: the entry could not be written (disk full, read-only folder); the
                staging folder is removed first, so no ``.tmp-*`` folder stays behind.
        """
        final = self.entry(kind, k)
        try:
            if files is None:
                files = sorted(p for p in Path(staging).rglob("*") if p.is_file())
            write_manifest(staging, files, {**dict(meta or {}), "created": time.time()})
            final.parent.mkdir(parents=True, exist_ok=True)
            old: Path | None = None
            if replace and final.exists():
                old = final.with_name(f".old-{final.name}-{os.getpid()}")
                os.rename(final, old)
            try:
                os.rename(staging, final)
            except OSError:
                if not final.is_dir():
                    if old is not None:
                        os.rename(old, final)  # put the previous entry back
                        old = None
                    raise
                # another process published first: keep theirs
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
        finally:
            if Path(staging).exists():
                shutil.rmtree(staging, ignore_errors=True)
        return final

    def evict(self, kind: str, k: str) -> None:
        """Delete an entry (folder or record; a missing one, or another user's, is left). A
        link or device in an entry's place is unlinked itself; what it names is never touched."""
        path = self.entry(kind, k)
        try:
            st = path.lstat()
            if st.st_uid != os.geteuid():
                return
            if stat.S_ISDIR(st.st_mode):  # a real folder (lstat: a link to one is not)
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink()
        except OSError:
            pass

    # ---- record entries ------------------------------------------------------------

    def write_record(self, kind: str, k: str, data: Mapping[str, Any]) -> Path:
        """Write a JSON record entry atomically: ``data`` plus ``_store: {"sha256"}``,
        the hash of :func:`canonical_json` of ``data`` (checked by :meth:`read_record`).

        Raises:
            OSError: the record could not be written.
            ValueError: ``data`` has a ``_store`` key.
        """
        from compstack.core.integrity import atomic_write

        if "_store" in data:
            raise ValueError("a store record may not have a '_store' key")
        path = self.entry(kind, k)
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {**dict(data), "_store": {"sha256": hashlib.sha256(canonical_json(dict(data))).hexdigest()}}
        atomic_write(path, json.dumps(doc, indent=1, sort_keys=True, default=str))
        return path

    def read_record(self, kind: str, k: str) -> tuple[dict[str, Any] | None, str]:
        """Read and verify a record entry.

        Returns:
            ``(data, "")`` on a hit (without ``_store``; its mtime is refreshed);
            ``(None, "")`` on a miss; ``(None, why)`` when the record was unreadable,
            malformed or altered and was deleted.
        """
        path = self.entry(kind, k)
        if path.exists() and self.refused(kind, path)[0]:
            return None, self.refused(kind, path)[1]
        try:
            doc = json.loads(read_plain(path))  # a link, FIFO or device in its place is refused, not read
            stamp = doc.pop("_store", None) if isinstance(doc, dict) else None
            digest = hashlib.sha256(canonical_json(doc)).hexdigest()
        except (FileNotFoundError, NotADirectoryError):
            return None, ""
        except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested ~1000 deep
            self.evict(kind, k)
            return None, f"corrupt cache record {path} ({type(exc).__name__}); rebuilt"
        if not isinstance(stamp, dict) or stamp.get("sha256") != digest:
            self.evict(kind, k)
            return None, f"corrupt cache record {path} (altered or not compstack's); rebuilt"
        with contextlib.suppress(OSError):
            os.utime(path)
        return doc, ""

    # ---- housekeeping --------------------------------------------------------------

    def entries(self, kind: str | None = None) -> Iterator[EntryInfo]:
        """Every published entry (of ``kind``, else of all kinds), in no set order.
        Temporary folders and another kind's folders nested inside a kind are skipped.
        """
        for spec in ([_kind(kind)] if kind else KINDS.values()):
            base = self.root / spec.folder
            nested = {self.root / o.folder for o in KINDS.values() if o is not spec}
            yield from self._walk(spec, base, base, spec.depth, nested)

    def _walk(self, spec: Kind, base: Path, folder: Path, depth: int, nested: set[Path]) -> Iterator[EntryInfo]:
        try:
            children = sorted(folder.iterdir())
        except OSError:
            return
        for child in children:
            if child.name.startswith(".") or child in nested:
                continue
            if depth > 1:
                if child.is_dir():
                    yield from self._walk(spec, base, child, depth - 1, nested)
                continue
            if spec.record:
                if child.suffix != ".json" or not child.is_file() or not _is_record(child):
                    continue
                stamp, k = child, str(child.relative_to(base))[:-5]
            else:
                seal = child.parent / f"{child.name}.seal.json"  # a stack's own cache folder, sealed by us
                if not child.is_dir() or not ((child / MANIFEST).is_file() or seal.is_file()):
                    continue  # not published by compstack (half-built, or not ours): never listed, never deleted
                stamp, k = (child / MANIFEST if (child / MANIFEST).is_file() else seal), str(child.relative_to(base))
            try:
                used = stamp.stat().st_mtime
            except OSError:
                used = child.stat().st_mtime if child.exists() else 0.0
            yield EntryInfo(spec.name, k, child, _size(child), used)

    def info(self) -> dict[str, dict[str, Any]]:
        """``{kind: {"folder", "entries", "bytes", "about"}}`` for every kind."""
        out: dict[str, dict[str, Any]] = {}
        for spec in KINDS.values():
            rows = list(self.entries(spec.name))
            out[spec.name] = {"folder": str(self.root / spec.folder), "entries": len(rows),
                              "bytes": sum(r.bytes for r in rows), "about": spec.about}
        return out

    def remove(self, info: EntryInfo) -> None:
        """Delete one listed entry (and the seal of a stack cache folder)."""
        if info.path.is_dir():
            shutil.rmtree(info.path, ignore_errors=True)
            (info.path.parent / f"{info.path.name}.seal.json").unlink(missing_ok=True)
        else:
            with contextlib.suppress(OSError):
                info.path.unlink()

    def prune(self, older_than_s: float | None = None, max_bytes: int | None = None, now: float | None = None,
              kinds: tuple[str, ...] | None = None, keep: Callable[[EntryInfo], bool] | None = None) -> list[EntryInfo]:
        """Delete entries unused for over ``older_than_s`` seconds, then the least
        recently used ones until the store holds at most ``max_bytes`` (of ``kinds``, default
        all; never one ``keep`` says is in use); also temporary folders left by killed writers (over a day old).

        Returns:
            The entries deleted (oldest first).
        """
        now = time.time() if now is None else now
        rows = sorted([r for k in kinds or [None] for r in self.entries(k)], key=lambda r: r.last_used)
        total, rows = sum(r.bytes for r in rows), [r for r in rows if not (keep and keep(r))]
        gone: list[EntryInfo] = []
        if older_than_s is not None:
            gone = [r for r in rows if now - r.last_used > older_than_s]
            rows = [r for r in rows if now - r.last_used <= older_than_s]
            total -= sum(r.bytes for r in gone)
        while max_bytes is not None and rows and total > max_bytes:
            r = rows.pop(0)
            total -= r.bytes
            gone.append(r)
        for r in gone:
            self.remove(r)
        self._drop_temps(now - 86400)
        return gone

    def clear(self, kind: str | None = None) -> list[EntryInfo]:
        """Delete every entry (of ``kind``, else of all kinds) and temporary folders.

        Returns:
            The entries deleted.

        Raises:
            ValueError: unknown kind.
        """
        gone = list(self.entries(kind))
        for r in gone:
            self.remove(r)
        self._drop_temps(None, kind)
        return gone

    def _drop_temps(self, before: float | None, kind: str | None = None) -> None:
        for spec in ([_kind(kind)] if kind else KINDS.values()):
            base = self.root / spec.folder
            for tmp in list(base.glob(".tmp-*")) + list(base.glob(".old-*")) if base.is_dir() else []:
                try:
                    if before is None or tmp.stat().st_mtime < before:
                        shutil.rmtree(tmp, ignore_errors=True) if tmp.is_dir() else tmp.unlink()
                except OSError:
                    pass


def open_store(cache_dir: str | Path | None = None) -> Store:
    """The :class:`Store` at :func:`root` (``cache_dir`` when given)."""
    return Store(root(cache_dir))


def entry(kind: str, k: str, cache_dir: str | Path | None = None) -> Path:
    """Shortcut: ``open_store(cache_dir).entry(kind, k)`` (see :meth:`Store.entry`)."""
    return open_store(cache_dir).entry(kind, k)


class ArtifactCache:
    """Artifacts of one kind, addressed by ``(target, key)``: a view of :class:`Store`.

    Args:
        root: ``<store root>/artifacts`` (kind ``artifacts``) or
            ``<store root>/artifacts/conformance`` (kind ``conformance``).
        kind: the kind; default: the one whose folder ``root`` is.
    """

    def __init__(self, root: Path, kind: str | None = None) -> None:
        root = Path(root)
        if kind is None:
            kind = "conformance" if root.name == "conformance" and root.parent.name == "artifacts" else "artifacts"
        base = root
        for _ in Path(KINDS[kind].folder).parts:
            base = base.parent
        self.store, self.kind, self.root = Store(base), kind, root

    def folder(self, target: str, k: str) -> Path:
        """The entry folder of ``(target, k)``."""
        return self.store.entry(self.kind, f"{target}/{k}")

    def lookup(self, target: str, k: str) -> tuple[Entry | None, str]:
        """:meth:`Store.lookup` of ``(target, k)``."""
        return self.store.lookup(self.kind, f"{target}/{k}")

    def evict(self, target: str, k: str) -> None:
        """Delete an entry (ignores a missing one)."""
        self.store.evict(self.kind, f"{target}/{k}")

    def staging(self, target: str) -> Path:
        """A fresh temporary folder to write an entry into before :meth:`publish`."""
        return self.store.staging(self.kind)

    def publish(self, staging: Path, target: str, k: str, files: list[Path], meta: Mapping[str, Any]) -> Path:
        """:meth:`Store.publish` of ``(target, k)``.

        Raises:
            OSError: the entry could not be written.
        """
        return self.store.publish(staging, self.kind, f"{target}/{k}", files, meta)


def _is_record(path: Path) -> bool:
    """Whether ``path`` is a JSON record this store wrote (it carries ``_store``), so a
    foreign ``.json`` in a record kind's folder is neither listed nor deleted."""
    try:
        doc = json.loads(read_plain(path))
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(doc, dict) and isinstance(doc.get("_store"), dict)
