"""The ``llvm`` and ``asm`` dialects of :func:`compstack.analysis.irtext.normalize.normalize`.

``llvm`` (LLVM IR), rules (each one a step of :class:`NormalizeOptions`):

* strip_locations: ``!dbg !N`` attachments, ``#dbg_*`` records,
  ``llvm.dbg.*`` calls, ``!N = [distinct ]!DI...`` lines, ``; ModuleID`` and
  ``source_filename``.
* rename: local values and labels of each ``define`` -> ``%v0, ...``
  (``v0:`` for a label) by first appearance; global ``@names`` are kept.
* elide_constants: ``c"..."`` strings and ``[...]`` aggregates of global
  initializers with more than ``max_elements`` elements -> ``c"...<N bytes #H>"``
  / ``[...<N elements #H>]``.
* sort_unordered: nothing (the order of definitions is kept).

``asm``: strip_locations removes ``.file``, ``.loc``, ``.cfi_*`` lines and ``.Ltmp``
labels (debug-line anchors); rename renumbers local labels ``.L<stem><digits>`` per
stem by first appearance (``.LBB0_83`` -> ``.LBB0``).
"""

from __future__ import annotations

import re

from compstack.analysis.irtext._text import (
    NormalizeOptions,
    Numbering,
    content_hash,
    match_close,
    outside_strings,
    split_top,
)

__all__ = ["normalize_asm", "normalize_llvm"]

#: Debug-info-only lines: DI metadata nodes, dbg records/calls, module id, source file.
_LLVM_DEBUG_LINE = re.compile(r"^(?:!\d+ = (?:distinct )?!DI.*|!llvm\.dbg\.cu = .*|\s+#dbg_\w+\(.*|"
                              r"\s+(?:tail )?call void @llvm\.dbg\.\w+\(.*|; ModuleID = .*|source_filename = .*)$\n?",
                              re.M)
#: A `!dbg !N` attachment (with its comma).
_LLVM_DBG = re.compile(r",?\s*!dbg !\d+")
#: A string constant `c"..."` and an aggregate `[...]` in a global's initializer.
_LLVM_CSTR = re.compile(r'c"(?P<body>[^"]*)"')


def _elide_llvm_constants(text: str, limit: int) -> str:
    def cstr(m: re.Match[str]) -> str:
        size = len(re.sub(r"\\[0-9A-Fa-f]{2}", "x", m.group("body")))
        if size <= limit or m.group("body").startswith("...<"):
            return m.group(0)
        return f'c"...<{size} bytes #{content_hash(m.group("body"))}>"'

    out = []
    for line in text.split("\n"):
        if line.startswith("@") and " = " in line:
            line = _LLVM_CSTR.sub(cstr, line)
            line = _elide_llvm_aggregate(line, limit)
        out.append(line)
    return "\n".join(out)


def _elide_llvm_aggregate(line: str, limit: int) -> str:
    # The initializer aggregate: `] [` after an array type.
    i = line.find("] [")
    if i < 0 or line.startswith("[...", i + 2):
        return line
    end = match_close(line, i + 2)
    body = line[i + 2:end + 1] if end > 0 else ""
    count = len(split_top(body[1:-1], '"', angles=False)) if body else 0
    if count <= limit:
        return line
    digest = content_hash(re.sub(r"\s+", "", body))
    return f"{line[:i + 2]}[...<{count} elements #{digest}>]{line[end + 1:]}"


def _rename_llvm_locals(text: str) -> str:
    types = set(re.findall(r"^%([\w.\-$]+|\"[^\"]*\") = type\b", text, re.M))
    out: list[str] = []
    names: Numbering | None = None  # the current function's names; None outside one
    for line in text.split("\n"):
        if line.startswith("define "):
            names = Numbering()
        if names is not None:
            line = _rename_llvm_line(line, names, types)
        if line.startswith("}"):
            names = None
        out.append(line)
    return "\n".join(out)


def _rename_llvm_line(line: str, names: Numbering, types: set[str]) -> str:
    """Labels (``name:``) and locals (``%name``) of one line inside a function."""
    label = re.match(r"^([\w.\-$]+):", line)
    if label:
        line = names.get(label.group(1), "v") + line[label.end() - 1:]

    def sub(m: re.Match[str]) -> str:
        name = m.group("hit")[1:]
        return m.group("hit") if name in types else "%" + names.get(name, "v")

    # A local `%name`, `%7` or `%"quoted"` (string constants are skipped).
    return outside_strings(r'%(?:[\w.\-$]+|"[^"]*")', sub, line)


def normalize_llvm(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``llvm`` rules of the module docstring."""
    if opts.strip_locations:
        text = _LLVM_DBG.sub("", _LLVM_DEBUG_LINE.sub("", text))
    if opts.elide_constants:
        text = _elide_llvm_constants(text, opts.max_elements)
    if opts.rename:
        text = _rename_llvm_locals(text)
    return text


#: Debug-only assembly lines: `.file`, `.loc`, `.cfi_*` directives and `.Ltmp` labels.
_ASM_DEBUG_LINE = re.compile(r"^(?:\s*\.(?:file|loc|cfi_\w+)\b.*|\.Ltmp\d+:.*)$\n?", re.M)


def normalize_asm(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``asm`` rules of the module docstring."""
    if opts.strip_locations:
        text = _ASM_DEBUG_LINE.sub("", text)
    if opts.rename:
        names = Numbering()
        # Local labels `.L<stem><digits>[_<digits>]`.
        text = re.sub(r"\.L(?P<stem>[A-Za-z_]+?)(?P<num>\d+(?:_\d+)*)\b",
                      lambda m: ".L" + names.get(m.group(0), m.group("stem")), text)
    return text
