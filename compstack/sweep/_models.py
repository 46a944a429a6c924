"""The model list of a sweep: zoo names, ``.onnx`` files, folders, ``@file`` lists, ``zoo:*``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from compstack.core.errors import UserError

__all__ = ["expand_models"]


def expand_models(specs: Iterable[str], base: Path | None = None) -> list[str]:
    """Expand the sweep's model arguments into model specs, in order, without duplicates.

    * ``zoo:NAME`` (checked against the zoo table), ``zoo:*`` (every zoo model);
    * ``path/to/model.onnx``; a folder: every ``*.onnx`` under it, sorted;
    * ``file.py:function`` (passed through; imported in the driver only, as ``compare`` does);
    * ``@list.txt``: one entry a line (blank lines and ``#`` comments skipped; relative
      paths are relative to the list's folder); lists do not nest.

    Raises:
        UserError: an unknown zoo name, a missing file or folder, a folder without
            ``.onnx`` files, an unreadable list, or nothing at all.
    """
    out: list[str] = []
    for spec in specs:
        for item in _expand_one(spec.strip(), base, allow_list=True):
            if item not in out:
                out.append(item)
    if not out:
        raise UserError("sweep: no model given (zoo:NAME, zoo:*, file.onnx, a folder, @list.txt or --tier TIER)")
    return out


def _expand_one(spec: str, base: Path | None, allow_list: bool) -> list[str]:
    from compstack.frontends import zoo

    if not spec:
        return []
    if spec.startswith("@"):
        if not allow_list:
            raise UserError(f"{spec}: a model list cannot name another list")
        return _read_list(Path(spec[1:]) if base is None else base / spec[1:])
    if spec in ("zoo:*", "zoo:all"):
        return [f"zoo:{n}" for n in zoo.names()]
    if spec.startswith("zoo:"):
        zoo.describe(spec)  # UserError naming the known models
        return [spec]
    path_part, sep, _ = spec.rpartition(":")
    if sep and path_part.endswith(".py"):
        return [spec]
    path = Path(spec) if base is None or Path(spec).is_absolute() else base / spec
    if path.is_dir():
        found = sorted(str(p) for p in path.rglob("*.onnx") if p.is_file())
        if not found:
            raise UserError(f"{spec}: folder has no .onnx file")
        return found
    if not path.is_file():
        raise UserError(f"{spec}: no such model file or folder (or zoo:NAME, @list.txt)")
    return [str(path)]


def _read_list(path: Path) -> list[str]:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"@{path}: cannot read model list ({getattr(exc, 'strerror', None) or exc})") from None
    out: list[str] = []
    for line in lines:
        entry = line.split("#", 1)[0].strip()
        out.extend(_expand_one(entry, path.parent, allow_list=False))
    return out
