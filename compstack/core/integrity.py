"""Atomic writes and verified reads for everything compstack keeps on disk.

Every cache entry compstack writes (artifacts, stage texts, canonical models, zoo
exports, conformance cases, the custom-op kernel library) is published the same way:
the files are written into a temporary name beside their final place and moved there
with one ``rename``, so a reader never sees half an entry; and a manifest records each
file's size and SHA-256, so a reader can tell a truncated, altered or swapped file from
a good one before using it. Nothing read back is unpickled: manifests are JSON, models
are ONNX protobuf, arrays are ``.npy``/``.npz`` without pickle.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any, Iterable, Mapping

__all__ = ["MANIFEST", "RECORD_MAX_BYTES", "atomic_write", "check_files", "check_manifest", "file_record", "probe_dir",
           "read_plain", "sha256_file", "write_manifest"]

#: File name of a folder entry's manifest.
MANIFEST = "meta.json"

#: The largest JSON record or manifest :func:`read_plain` reads, bytes (a record is a few KiB).
RECORD_MAX_BYTES = 16 << 20


def read_plain(path: Path, max_bytes: int = RECORD_MAX_BYTES) -> bytes:
    """The bytes of ``path``: a regular file of at most ``max_bytes``, opened without
    following a symbolic link and without blocking, so that a link, a FIFO or a device put
    in a record's place is refused, not read (a link to ``/dev/zero`` filled the memory, a
    FIFO hung the command).

    Raises:
        FileNotFoundError, NotADirectoryError: no such file.
        OSError: a symbolic link (``ELOOP``), not a regular file (``EINVAL``), or larger
            than ``max_bytes`` (``EFBIG``).
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        if st.st_size > max_bytes:
            raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
        chunks, size = [], 0
        while size <= max_bytes:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > max_bytes:  # grew while read
        raise OSError(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
    return b"".join(chunks)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes, read in 1 MiB chunks.

    Raises:
        OSError: the file cannot be read.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_record(path: Path) -> dict[str, Any]:
    """``{"size": bytes, "sha256": hex}`` of one file."""
    return {"size": path.stat().st_size, "sha256": sha256_file(path)}


def atomic_write(path: Path, data: bytes | str) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the whole new one.

    The bytes go to a temporary file in the same folder, then ``os.replace`` moves it
    into place (POSIX ``rename(2)`` is atomic within a file system). The temporary
    file is removed when anything fails.

    Raises:
        OSError: the folder is not writable, the disk is full...
    """
    path = Path(path)
    raw = data.encode() if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def check_files(folder: Path, files: object) -> str:
    """Check ``files`` (``{relative name: {"size", "sha256"}}``) under ``folder``; ``files``
    is as read from a manifest, so any JSON value (anything else is a malformed record).

    Returns:
        ``""`` when every file exists with its recorded size and hash, else what is
        wrong with the first bad one (``"x missing"``, ``"x truncated (...)"``,
        ``"x altered (hash mismatch)"``, ``"malformed record"``).
    """
    if not isinstance(files, Mapping) or not files:
        return "no files recorded" if isinstance(files, Mapping) else "malformed record"
    for name, info in files.items():
        if not isinstance(name, str) or not isinstance(info, Mapping) or ".." in Path(name).parts \
                or Path(name).is_absolute():
            return "malformed record"
        p = Path(folder) / name
        if not p.is_file():
            return f"{name} missing"
        size = p.stat().st_size
        if size != info.get("size"):
            return f"{name} truncated or grown ({size} of {info.get('size')} bytes)"
        if sha256_file(p) != info.get("sha256"):
            return f"{name} altered (hash mismatch)"
    return ""


def write_manifest(folder: Path, files: Iterable[Path], meta: Mapping[str, Any]) -> dict[str, Any]:
    """Record ``files`` (inside ``folder``) with their sizes and hashes, plus ``meta``,
    in ``folder/meta.json`` (written atomically, last).

    Returns:
        The record written.
    """
    folder = Path(folder)
    record = dict(meta)
    record["files"] = {str(Path(p).relative_to(folder)): file_record(Path(p)) for p in files}
    atomic_write(folder / MANIFEST, json.dumps(record, indent=1, sort_keys=True, default=str))
    return record


def check_manifest(folder: Path) -> tuple[dict[str, Any] | None, str]:
    """Read and verify ``folder/meta.json`` and every file it lists.

    Returns:
        ``(meta, "")`` for a good entry; ``(None, why)`` otherwise (missing, unreadable
        or malformed manifest, or a bad file) — the caller evicts and rebuilds.
    """
    try:
        meta = json.loads(read_plain(Path(folder) / MANIFEST))
    except FileNotFoundError:
        return None, f"no {MANIFEST}"
    except (OSError, ValueError, RecursionError) as exc:
        return None, f"unreadable {MANIFEST} ({type(exc).__name__})"
    if not isinstance(meta, dict):
        return None, f"malformed {MANIFEST}"
    try:
        problem = check_files(folder, meta.get("files"))
    except OSError as exc:
        problem = f"unreadable file ({exc.strerror or exc})"
    return (None, problem) if problem else (meta, "")


def probe_dir(folder: Path, message: str) -> Path:
    """Create ``folder`` and write (then remove) a probe file in it.

    Raises:
        UserError: ``message (why)`` when that fails (read-only, full disk...).
    """
    from compstack.core.errors import UserError

    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / f".compstack-probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        file = next((f for f in (folder, *folder.parents) if f.exists() and not f.is_dir()), None)
        why = f"{file} is a file, not a folder" if file is not None else exc.strerror or exc  # not "File exists"
        raise UserError(f"{message} ({why})") from None
    return folder
