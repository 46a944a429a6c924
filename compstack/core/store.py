"""Artifact cache: compiled artifacts keyed by (model fingerprint, target, options,
stack versions, host CPU).

Layout: ``<cache_dir>/artifacts/<target>/<key>/`` holding the artifact files and a
``meta.json`` written last with each file's size and SHA-256. An entry is published
with an atomic ``rename`` of a finished temporary folder, so a reader never sees half
an entry. On lookup every file is re-hashed; a missing, truncated or altered file marks
the entry corrupt: it is deleted and rebuilt, never loaded.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from compstack.core.integrity import check_manifest, write_manifest

__all__ = ["ArtifactCache", "CacheEntry", "cache_key", "host_id"]

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
        pass
    return f"{platform.machine()}|{model}|{hashlib.sha256(flags.encode()).hexdigest()[:8]}"


def cache_key(fingerprint: str, target: str, options: Mapping[str, Any], versions: Mapping[str, str]) -> str:
    """Hex key of one artifact (24 hex digits of SHA-256 over the JSON of the parts)."""
    blob = json.dumps(
        {"fp": fingerprint, "target": target, "options": options, "versions": dict(versions), "host": host_id()},
        sort_keys=True, default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class CacheEntry:
    """A verified cache entry: its folder and its metadata (``compile_s``...)."""

    folder: Path
    meta: dict[str, Any]


class ArtifactCache:
    """The artifact cache under ``root`` (``<cache_dir>/artifacts``)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def folder(self, target: str, key: str) -> Path:
        return self.root / target / key

    def lookup(self, target: str, key: str) -> tuple[CacheEntry | None, str]:
        """Find a verified entry.

        Returns:
            ``(entry, "")`` on a hit; ``(None, "")`` on a miss; ``(None, why)`` when a
            corrupt entry was found and deleted (``why`` says what was wrong).
        """
        folder = self.folder(target, key)
        if not folder.exists():
            return None, ""
        meta, problem = check_manifest(folder)
        if meta is None:
            self.evict(target, key)
            return None, f"corrupt cache entry {folder} ({problem}); rebuilt"
        return CacheEntry(folder, meta), ""

    def evict(self, target: str, key: str) -> None:
        """Delete an entry (ignores a missing one)."""
        shutil.rmtree(self.folder(target, key), ignore_errors=True)

    def staging(self, target: str) -> Path:
        """A fresh temporary folder to write an entry into before :meth:`publish`."""
        base = self.root / target
        base.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=".tmp-", dir=base))

    def publish(self, staging: Path, target: str, key: str, files: list[Path], meta: Mapping[str, Any]) -> Path:
        """Hash ``files`` (inside ``staging``), write ``meta.json`` and move the folder
        to its final place atomically. If another process published first, keep theirs.

        Raises:
            OSError: the entry could not be written (disk full, read-only folder); the
                staging folder is removed first, so no ``.tmp-*`` folder stays behind.
        """
        try:
            write_manifest(staging, files, {**meta, "created": time.time()})
            final = self.folder(target, key)
            try:
                os.rename(staging, final)
            except OSError:
                if not final.is_dir():
                    raise
                # another process published first: keep theirs
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return final
