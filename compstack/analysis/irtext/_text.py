"""Shared pieces of :mod:`compstack.analysis.irtext.normalize`: the options, the common clean-up,
content hashes and the text helpers the dialect normalisers use.

Common clean-up (:func:`tidy`, every dialect, before and after its own steps):
``\\r\\n`` -> ``\\n``, trailing blanks removed, runs of blank lines collapsed to one,
leading/trailing blank lines dropped, one final newline.

Everything here is deterministic: no ``id()``, no ``hash()`` of strings, no set
iteration order. Nothing here imports a compiler stack.
"""

from __future__ import annotations

import hashlib
import keyword
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "CLOSE",
    "DQ",
    "OPEN",
    "NormalizeOptions",
    "Numbering",
    "StemNumbering",
    "content_hash",
    "in_string",
    "match_close",
    "name_stem",
    "natural_key",
    "outside_strings",
    "sort_dicts",
    "split_top",
    "string_end",
    "tidy",
]


@dataclass(frozen=True)
class NormalizeOptions:
    """Which normalisation steps run (all by default); the rules per dialect are in
    :mod:`compstack.analysis.irtext.normalize` and the ``_norm_*`` modules it names.

    Attributes:
        strip_locations: drop source locations and debug info.
        rename: canonical names for values, labels, symbols and local variables.
        elide_constants: replace large constants by their size and a content hash.
        max_elements: constants with more elements than this are elided.
        sort_unordered: sort what has no semantic order (attribute dicts, functions).
    """

    strip_locations: bool = True
    rename: bool = True
    elide_constants: bool = True
    max_elements: int = 16
    sort_unordered: bool = True


# ---- small shared helpers ----------------------------------------------------------

#: A double-quoted string with backslash escapes, on one line.
DQ = r'"(?:[^"\\\n]|\\.)*"'
OPEN, CLOSE = "([{", ")]}"


def content_hash(data: str) -> str:
    """First 8 hex digits of SHA-256 of ``data`` (UTF-8): the hash in elided constants."""
    return hashlib.sha256(data.encode()).hexdigest()[:8]


def name_stem(name: str, sep: str = "_") -> str:
    """``name`` without its trailing uniqueness counters: ``lv3`` -> ``lv``,
    ``T_add_1`` -> ``T_add``, ``param_0_1`` -> ``param``, ``fused_conv2d_add1`` ->
    ``fused_conv2d_add`` (``sep="."``: ``add.3`` -> ``add``). A stem never ends in a
    digit, so ``stem``/``stem_k`` names made from different stems never collide.
    A name that is only digits is kept."""
    # Trailing groups of digits, each optionally preceded by the separator.
    stem = re.sub(rf"(?:{re.escape(sep)}?\d+)+$", "", name)
    return stem if stem and stem != sep else name


def natural_key(s: str) -> list[tuple[int, int | str]]:
    """Sort key that orders ``v2`` before ``v10``."""
    return [(0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", s)]


def string_end(s: str, i: int) -> int:
    """Index just past the string literal starting at ``s[i]`` (quote char at i)."""
    q, j = s[i], i + 1
    while j < len(s):
        if s[j] == "\\":
            j += 2
            continue
        if s[j] == q:
            return j + 1
        j += 1
    return len(s)


def match_close(s: str, i: int, quotes: str = '"') -> int:
    """Index of the bracket closing ``s[i]`` (one of ``([{``), strings skipped; -1 if none."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c in quotes:
            j = string_end(s, j)
            continue
        if c in OPEN:
            depth += 1
        elif c in CLOSE:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return -1


def split_top(s: str, quotes: str, angles: bool) -> list[str]:
    """Split ``s`` at commas outside brackets and strings (``<>`` too when ``angles``,
    where the ``>`` of ``->`` does not close)."""
    parts, depth, start, j = [], 0, 0, 0
    while j < len(s):
        c = s[j]
        if c in quotes:
            j = string_end(s, j)
            continue
        if c in OPEN or (angles and c == "<"):
            depth += 1
        elif c in CLOSE or (angles and c == ">" and (j == 0 or s[j - 1] != "-")):
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(s[start:j])
            start = j + 1
        j += 1
    parts.append(s[start:])
    return parts


def outside_strings(pattern: str, repl: Callable[[re.Match[str]], str], text: str) -> str:
    """Substitute ``pattern`` (with ``repl``) everywhere except inside ``"..."`` strings."""
    rx = _compiled(f"(?P<str>{DQ})|(?P<hit>{pattern})")

    def sub(m: re.Match[str]) -> str:
        return m.group(0) if m.group("str") is not None else repl(m)

    return rx.sub(sub, text)


_RX_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    rx = _RX_CACHE.get(pattern)
    if rx is None:
        rx = _RX_CACHE[pattern] = re.compile(pattern)
    return rx


class Numbering:
    """Gives each key a name by first appearance: ``prefix + counter`` per prefix."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def get(self, key: str, prefix: str) -> str:
        if key not in self.names:
            k = self.counts.get(prefix, 0)
            self.counts[prefix] = k + 1
            self.names[key] = f"{prefix}{k}"
        return self.names[key]


class StemNumbering:
    """Names by stem: the first of a stem is the stem, then ``stem{sep}1``, ``stem{sep}2``;
    a name in ``taken`` (or a Python keyword) is skipped."""

    def __init__(self, sep: str = "_", taken: Iterable[str] = ()) -> None:
        self.sep = sep
        self.taken = set(taken)
        self.names: dict[str, str] = {}
        self.counts: dict[str, int] = {}

    def get(self, name: str) -> str:
        if name not in self.names:
            stem = name_stem(name, self.sep)
            k = self.counts.get(stem, 0)
            new = stem if k == 0 else f"{stem}{self.sep}{k}"
            while new in self.taken or keyword.iskeyword(new):
                k += 1
                new = f"{stem}{self.sep}{k}"
            self.counts[stem] = k + 1
            self.names[name] = new
        return self.names[name]


def sort_dicts(s: str, python: bool) -> str:
    """Sort the entries of every one-line dict literal in ``s`` by key, recursively.

    MLIR dicts are ``{key = value, unit_key}`` (keys: bare identifiers or strings);
    Python dicts are ``{"key": value}``. Braces whose entries do not all look like that
    (regions, ``{%c256}`` dims, sets) are left alone, their contents still visited.
    """
    quotes = "\"'" if python else '"'
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c in quotes:
            j = string_end(s, i)
            out.append(s[i:j])
            i = j
            continue
        if c == "{":
            j = match_close(s, i, quotes)
            if j > 0:
                out.append("{" + _sort_dict_body(s[i + 1:j], python) + "}")
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


#: An MLIR dict entry: a bare or quoted key, optionally `= value`.
_MLIR_ENTRY = re.compile(rf"^\s*(?P<key>[A-Za-z_][\w.$\-]*|{DQ})(?:\s*=\s*(?P<value>.*?))?\s*$", re.S)
#: A Python dict entry with a string key: `"key": value`.
_PY_ENTRY = re.compile(r"""^\s*(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*:\s*(?P<value>.*?)\s*$""", re.S)


def _sort_dict_body(inner: str, python: bool) -> str:
    quotes = "\"'" if python else '"'
    rx = _PY_ENTRY if python else _MLIR_ENTRY
    matches = [rx.match(p) for p in split_top(inner, quotes, angles=not python)]
    if not inner.strip() or any(m is None for m in matches):
        return sort_dicts(inner, python)
    entries = []
    for m in matches:
        assert m is not None
        value = m.group("value")
        if value is None:
            entries.append((m.group("key"), m.group("key")))
            continue
        value = sort_dicts(value, python)
        entries.append((m.group("key"), f"{m.group('key')}: {value}" if python else f"{m.group('key')} = {value}"))
    return ", ".join(text for _, text in sorted(entries, key=lambda e: e[0]))


def in_string(line: str, pos: int) -> bool:
    """Whether ``line[pos]`` lies inside a ``"..."`` string."""
    i = 0
    while i < pos:
        if line[i] == '"':
            end = string_end(line, i)
            if end > pos:
                return True
            i = end
            continue
        i += 1
    return False


# ---- common clean-up ---------------------------------------------------------------------

def tidy(text: str) -> str:
    """Line endings, trailing blanks, blank-line runs, one final newline."""
    lines = [ln.rstrip() for ln in text.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
    out: list[str] = []
    for ln in lines:
        if ln or (out and out[-1]):
            out.append(ln)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n" if out else ""
