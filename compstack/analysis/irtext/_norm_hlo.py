"""The ``hlo`` dialect of :func:`compstack.analysis.irtext.normalize.normalize` (XLA HLO text).

Rules (each one a step of :class:`NormalizeOptions`):

* strip_locations: ``metadata={...}`` attributes and the ``FileNames``,
  ``FunctionNames``, ``FileLocations``, ``StackFrames`` tables.
* elide_constants: ``constant({...})`` literals with more than ``max_elements``
  numbers -> ``constant({...<N elements #H>})``.
* rename: instruction and parameter names -> ``v0, v1, ...`` per computation (the
  ``%`` sigil kept when the dump uses it); computation names keep their stem
  (without ``.N``) and are renumbered ``stem``, ``stem.1``, ... in order of
  definition.
* sort_unordered: the non-ENTRY computations are sorted by name stem then text
  (computation names reduced to stems); ENTRY comes last.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from compstack.analysis.irtext._text import (
    NormalizeOptions,
    Numbering,
    StemNumbering,
    content_hash,
    in_string,
    match_close,
    name_stem,
    outside_strings,
)

__all__ = ["normalize_hlo"]

#: The stack-frame tables of an optimized HLO dump, each up to a blank line.
_HLO_TABLES = re.compile(r"^(?:FileNames|FunctionNames|FileLocations|StackFrames)\n(?:.+\n?)*", re.M)
#: A computation header: `[ENTRY ]%?name [(params) -> type ]{`.
_HLO_COMP = re.compile(r"^(?P<entry>ENTRY\s+)?(?P<sigil>%?)(?P<name>[\w.\-]+)\s*(?P<sig>\(.*\)\s*->\s*.*?)?\s*\{\s*$")
#: An instruction definition: `[ROOT ]%?name = `.
_HLO_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?(?P<name>[\w.\-]+)\s+=\s")


def _strip_hlo_metadata(text: str) -> str:
    text = _HLO_TABLES.sub("", text)
    out = []
    for line in text.split("\n"):
        while True:
            m = re.search(r",\s*metadata=\{", line)
            if m is None or in_string(line, m.start()):
                break
            end = match_close(line, m.end() - 1)
            if end < 0:
                break
            line = line[:m.start()] + line[end + 1:]
        out.append(line)
    return "\n".join(out)


def _elide_hlo_constants(text: str, limit: int) -> str:
    out = []
    for line in text.split("\n"):
        i = line.find(" constant({")
        if i >= 0 and not line.startswith("{...", i + 11):
            start = i + len(" constant(")
            end = match_close(line, start)
            literal = line[start:end + 1] if end > 0 else ""
            count = len(re.findall(r"[-+\w.]+", literal))
            if end > 0 and count > limit:
                digest = content_hash(re.sub(r"\s+", "", literal))
                line = f"{line[:start]}{{...<{count} elements #{digest}>}}{line[end + 1:]}"
        out.append(line)
    return "\n".join(out)


@dataclass
class _Computation:
    name: str
    entry: bool
    lines: list[str]


def _split_hlo(text: str) -> tuple[list[str], list[_Computation]]:
    """(preamble lines, computations) of an HLO module dump."""
    pre: list[str] = []
    comps: list[_Computation] = []
    current: _Computation | None = None
    for line in text.split("\n"):
        m = _HLO_COMP.match(line) if current is None else None
        if m is not None:
            current = _Computation(m.group("name"), bool(m.group("entry")), [line])
        elif current is not None:
            current.lines.append(line)
            if line.strip() == "}":
                comps.append(current)
                current = None
        elif not comps:
            pre.append(line)
    if current is not None:
        comps.append(current)
    return pre, comps


def _hlo_name_pattern(sigil: bool) -> str:
    # With the sigil: `%name`; without: a bare name not followed by `(` or `=`.
    return r"%[\w.\-]+" if sigil else r"(?<![\w.\-%])[A-Za-z_][\w.\-]*(?![\w.\-(=])"


def _rename_hlo_instructions(comp: _Computation, sigil: bool) -> None:
    header = _HLO_COMP.match(comp.lines[0])
    bound = set(re.findall(r"(?:\(|,\s*)%?([\w.\-]+):", header.group("sig") or "")) if header else set()
    bound |= {m.group("name") for m in map(_HLO_INSTR.match, comp.lines[1:]) if m}
    names = Numbering()

    def sub(m: re.Match[str]) -> str:
        tok = m.group("hit")
        bare = tok.lstrip("%")
        return tok[: len(tok) - len(bare)] + names.get(bare, "v") if bare in bound else tok

    pattern = _hlo_name_pattern(sigil)
    sig_part = header.group("sig") if header and header.group("sig") else ""
    first = comp.lines[0]
    if sig_part:  # params in the signature are bare names even in `%` dumps
        idx = first.index(sig_part)
        first = first[:idx] + outside_strings(r"[\w.\-]+(?=:)", sub, sig_part) + first[idx + len(sig_part):]
    comp.lines = [first] + [outside_strings(pattern, sub, ln) for ln in comp.lines[1:]]


def _rename_hlo_computations(comps: list[_Computation], sigil: bool) -> None:
    numbering = StemNumbering(".")
    new = {c.name: numbering.get(c.name) for c in comps}

    def sub(m: re.Match[str]) -> str:
        tok = m.group("hit")
        bare = tok.lstrip("%")
        return tok[: len(tok) - len(bare)] + new[bare] if bare in new else tok

    pattern = _hlo_name_pattern(sigil)
    for comp in comps:
        head = _HLO_COMP.match(comp.lines[0])
        if head is not None:
            comp.lines[0] = comp.lines[0].replace(head.group("name"), new[comp.name], 1)
        comp.lines[1:] = [outside_strings(pattern, sub, ln) for ln in comp.lines[1:]]
        comp.name = new[comp.name]


def _sort_hlo(comps: list[_Computation]) -> list[_Computation]:
    stems = {c.name: name_stem(c.name, ".") for c in comps}
    rx = re.compile(r"(?<![\w.\-])%?(" + "|".join(re.escape(n) for n in sorted(stems, key=len, reverse=True))
                    + r")(?![\w.\-])") if stems else None

    def key(c: _Computation) -> tuple[str, str]:
        body = "\n".join(c.lines)
        return stems[c.name], rx.sub(lambda m: stems[m.group(1)], body) if rx else body

    return sorted((c for c in comps if not c.entry), key=key) + [c for c in comps if c.entry]


def normalize_hlo(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``hlo`` rules of the module docstring."""
    if opts.strip_locations:
        text = _strip_hlo_metadata(text)
    if opts.elide_constants:
        text = _elide_hlo_constants(text, opts.max_elements)
    pre, comps = _split_hlo(text)
    sigil = any(c.lines[0].lstrip().startswith(("%", "ENTRY %")) for c in comps)
    if opts.rename:
        for comp in comps:
            _rename_hlo_instructions(comp, sigil)
    if opts.sort_unordered:
        comps = _sort_hlo(comps)
    if opts.rename:
        _rename_hlo_computations(comps, sigil)
    parts = ["\n".join(pre).rstrip("\n")] + ["\n".join(c.lines) for c in comps]
    return "\n\n".join(p for p in parts if p)
