"""The ``mlir`` dialect of :func:`compstack.analysis.irtext.normalize.normalize` (IREE/MLIR:
torch-onnx, input, flow, stream, hal, vm; StableHLO).

Rules (each one a step of :class:`NormalizeOptions`):

* strip_locations: ``#loc... = loc(...)`` alias lines and every ``loc(...)``
  (nested ``fused[...]``/``callsite(...)`` included) are removed. The
  ``{-# ... #-}`` section is kept (it holds ``dialect_resources`` data, not debug
  info); its blobs are treated by elide_constants.
* elide_constants: ``dense<"0xHEX">`` with more than ``max_elements`` elements
  (element count from the ``: tensor<AxBxT>`` type that follows, else the byte
  count) becomes ``dense<"0x...<B bytes #H>">``, H = first 8 hex digits of SHA-256
  of the hex digits as printed -- the same form and hash as
  :mod:`compstack.targets.iree.target` stage texts (made by :func:`strip_locations` and
  :func:`elide_hex_constants` here), so a raw ``iree-compile`` dump and the stage
  text normalise alike. ``dense<[...]>`` lists with more than ``max_elements``
  scalars become ``dense<[...<N elements #H>]>`` (H over the list text without
  whitespace). Resource blobs (``key: "0xHEX"`` in ``dialect_resources``) longer
  than ``max_elements`` bytes become ``key: "0x...<B bytes #H>"``.
* rename: SSA values ``%x``/``%0``/``%arg0`` -> ``%v0, %v1, ...`` and block labels
  ``^bb3`` -> ``^b0, ...`` by first appearance; numbering restarts at each op that
  opens an isolated scope (an op whose last name part is ``func``, ``executable``,
  ``export``, ``variant``, ``module``, ``import`` or ``initializer`` with no
  results). Symbols defined in the text get their kind and a number per kind by
  first appearance: ``@global0``, ``@func0``, ``@executable0``, ``@export0``,
  ``@variant0``, ``@module0``, ``@rodata0``, ``@binary0`` (kind: the last part of the
  defining op; any ``*.global*`` op is ``global``). Symbols declared by ``*.import``
  (``@hal.buffer_view.create``) and symbols not defined in the text keep their
  names. ``dense_resource<KEY>`` keys -> ``res0, res1, ...`` by first appearance.
* sort_unordered: attribute dictionaries written on one line (``{a = 1, b}``,
  nested ones too) are sorted by key; the ops directly inside the top-level
  ``module`` that define a symbol are sorted -- globals (``*.global*``,
  ``*.rodata``) first, then by op name, then by their text with every ``@symbol``
  masked (so the order does not depend on the names); ops without a symbol
  (``util.initializer``) stay in place and no op moves across them (their order
  is semantic). Resource-section entries are sorted by key.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from compstack.analysis.irtext._text import (
    CLOSE,
    DQ,
    OPEN,
    NormalizeOptions,
    Numbering,
    content_hash,
    in_string,
    match_close,
    natural_key,
    outside_strings,
    sort_dicts,
    string_end,
)

__all__ = ["elide_hex_constants", "normalize_mlir", "split_resources", "strip_locations"]

#: `#loc`, `#loc12` alias definitions (a whole line).
_LOC_ALIAS = re.compile(r"^#loc[\w.$\-]*\s*=\s*loc\(.*$\n?", re.M)
#: The start of a location use, with the blanks before it (`alloc(` does not match).
_LOC_USE = re.compile(r"[ \t]*\bloc\(")
#: Where the resource section starts.
_RESOURCES = re.compile(r"^\{-#", re.M)
#: `dense<"0xHEX">` and the shaped type that may follow it.
_DENSE_HEX = re.compile(r'dense<"0x(?P<hex>[0-9A-Fa-f]+)">(?P<type>\s*:\s*(?:tensor|vector|memref)<(?P<dims>[^>]*)>)?')
#: `dense<[...]>`: a literal list (no strings or nested `<>`).
_DENSE_LIST = re.compile(r'dense<(?P<list>\[[^<>"]*\])>')
#: A resource blob entry `key: "0xHEX"`.
_RESOURCE_BLOB = re.compile(r'^(?P<head>\s*(?:[\w.$\-]+|' + DQ + r')\s*:\s*)"0x(?P<hex>[0-9A-Fa-f]+)"', re.M)
#: A line starting an op that defines a symbol: `op.name [words] @sym` (no results).
_SYMDEF = re.compile(r'^\s*(?P<op>[a-z_][\w]*(?:\.[\w]+)+)\s+(?:[a-z_]+\s+)*@(?P<sym>"(?:[^"\\]|\\.)*"|[\w$.\-]+)')
#: A line starting an isolated op: `op.name ...` whose last part is one of these, no results.
_SCOPE_OP = re.compile(r"^\s*(?:[a-z_]\w*\.)*(?:func|executable|export|variant|module|import|initializer)\b(?!\.)")
#: A `@symbol` reference (bare or quoted).
_SYMREF = r'@(?:"(?:[^"\\]|\\.)*"|[\w$.\-]+)'
#: Op kinds (last part of the defining op) whose symbols get `@<kind>N` names.
_SYM_KINDS = frozenset({"func", "executable", "export", "variant", "module", "rodata", "binary", "global"})


def split_resources(text: str) -> tuple[str, str]:
    """(module text, ``{-# ... #-}`` section or ``""``)."""
    m = _RESOURCES.search(text)
    return (text, "") if m is None else (text[:m.start()], text[m.start():])


def strip_locations(text: str) -> str:
    """``text`` without ``#loc`` alias lines and ``loc(...)`` uses (nested ones included)."""
    text = _LOC_ALIAS.sub("", text)
    return "\n".join(_strip_loc_uses(line) for line in text.split("\n"))


def _strip_loc_uses(line: str) -> str:
    if "loc(" not in line:
        return line
    out, i = [], 0
    while True:
        m = _LOC_USE.search(line, i)
        if m is None:
            break
        if in_string(line, m.end() - 1):
            out.append(line[i:m.end()])
            i = m.end()
            continue
        end = match_close(line, m.end() - 1)
        if end < 0:
            break
        out.append(line[i:m.start()])
        i = end + 1
    out.append(line[i:])
    return "".join(out)


def _elements(dims: str | None) -> int | None:
    """Element count of a shaped type body ``4x16xf32`` (None when dynamic/unknown)."""
    if not dims:
        return None
    parts = dims.split("x")[:-1]
    if not parts or not all(p.isdigit() for p in parts):
        return None if parts else 1
    n = 1
    for p in parts:
        n *= int(p)
    return n


def _hex_summary(blob: str) -> str:
    """``"0x...<B bytes #H>"``: the elided form of the hex digits ``blob``."""
    return f'"0x...<{len(blob) // 2} bytes #{content_hash(blob)}>"'


def _elide_hex(m: re.Match[str], limit: int, by_bytes: bool) -> str:
    blob = m.group("hex")
    count = None if by_bytes else _elements(m.group("dims"))
    if (count if count is not None else len(blob) // 2) <= limit:
        return m.group(0)
    return f'dense<{_hex_summary(blob)}>{m.group("type") or ""}'


def _elide_list(m: re.Match[str], limit: int) -> str:
    body = m.group("list")
    # Leaves: anything that is not a bracket, comma, paren or blank.
    count = len(re.findall(r"[^\s\[\](),]+", body))
    if count <= limit or body.startswith("[..."):
        return m.group(0)
    digest = content_hash(re.sub(r"\s+", "", body))
    return f"dense<[...<{count} elements #{digest}>]>"


def elide_hex_constants(main: str, resources: str, limit: int, *, by_bytes: bool = False) -> tuple[str, str]:
    """Elide the hex constants: ``dense<"0xHEX">`` in ``main`` and resource blobs
    (``key: "0xHEX"``) in ``resources`` larger than ``limit`` become
    ``"0x...<B bytes #H>"`` (see the module docstring).

    Args:
        main: the module text (before ``{-#``).
        resources: the ``{-# ... #-}`` section, or ``""``.
        limit: the largest size kept.
        by_bytes: measure ``dense`` constants in bytes, not in elements of their type.

    Returns:
        ``(main, resources)`` with the large constants elided.
    """
    main = _DENSE_HEX.sub(lambda m: _elide_hex(m, limit, by_bytes), main)

    def blob(m: re.Match[str]) -> str:
        hexd = m.group("hex")
        if len(hexd) // 2 <= limit:
            return m.group(0)
        return m.group("head") + _hex_summary(hexd)

    return main, _RESOURCE_BLOB.sub(blob, resources)


def _elide_mlir_constants(main: str, resources: str, limit: int) -> tuple[str, str]:
    main, resources = elide_hex_constants(main, resources, limit)
    return _DENSE_LIST.sub(lambda m: _elide_list(m, limit), main), resources


def _rename_mlir_values(main: str) -> str:
    """SSA values and block labels by first appearance, restarting at isolated ops."""
    values, blocks = Numbering(), Numbering()
    out = []
    for line in main.split("\n"):
        if _SCOPE_OP.match(line):
            values, blocks = Numbering(), Numbering()

        def sub(m: re.Match[str], values: Numbering = values, blocks: Numbering = blocks) -> str:
            tok = m.group("hit")
            if tok[0] == "%":
                return "%" + values.get(tok, "v")
            return "^" + blocks.get(tok, "b")

        # `%name` values and `^label` blocks.
        out.append(outside_strings(r"[%^][\w$.\-]+", sub, line))
    return "\n".join(out)


def _rename_resources(main: str, resources: str) -> tuple[str, str]:
    """``dense_resource<KEY>`` keys -> ``res0, ...`` by first appearance, in both parts."""
    names = Numbering()
    main = re.sub(r"dense_resource<([\w.$\-]+)>", lambda m: f"dense_resource<{names.get(m.group(1), 'res')}>", main)

    def key(m: re.Match[str]) -> str:
        return m.group(1) + names.get(m.group(2), "res") + m.group(3)

    # A resource entry line: indentation, key, `:`.
    resources = re.sub(r"^(\s+)([\w.$\-]+)(\s*:\s*\")", key, resources, flags=re.M)
    return main, resources


def _symbol_kind(op: str) -> str | None:
    """The kind used in a symbol's new name, or None when the name is kept."""
    last = op.rsplit(".", 1)[-1]
    if op == "vm.export" or last == "import":
        return None
    if ".global" in op:
        return "global"
    return last if last in _SYM_KINDS else None


def _rename_mlir_symbols(main: str) -> str:
    kinds: dict[str, str] = {}
    for line in main.split("\n"):
        m = _SYMDEF.match(line)
        if m and m.group("sym") not in kinds:
            kind = _symbol_kind(m.group("op"))
            kinds[m.group("sym")] = kind or ""
    names = Numbering()

    def sub(m: re.Match[str]) -> str:
        sym = m.group("hit")[1:]
        kind = kinds.get(sym)
        return "@" + names.get(sym, kind) if kind else m.group("hit")

    return outside_strings(_SYMREF, sub, main)


def _line_depth(line: str) -> int:
    """Net bracket depth change of one line (strings skipped)."""
    depth, i = 0, 0
    while i < len(line):
        c = line[i]
        if c == '"':
            i = string_end(line, i)
            continue
        depth += (c in OPEN) - (c in CLOSE)
        i += 1
    return depth


def _split_items(lines: Sequence[str]) -> list[list[str]]:
    """Top-level ops of a region body: each op with its nested lines; comments and
    blank lines go with the op that follows them."""
    items: list[list[str]] = []
    current: list[str] = []
    depth = 0
    for line in lines:
        current.append(line)
        depth += _line_depth(line)
        stripped = line.strip()
        if depth <= 0 and stripped and not stripped.startswith("//"):
            items.append(current)
            current, depth = [], 0
    if current:
        items.append(current)
    return items


def _module_body(lines: list[str]) -> tuple[int, int] | None:
    """(first, last) line index of the top-level ``module`` body, if the text has one."""
    depth = 0
    for i, line in enumerate(lines):
        if depth == 0 and re.match(r"^(?:builtin\.)?module\b.*\{\s*$", line):
            d = 0
            for j in range(i, len(lines)):
                d += _line_depth(lines[j])
                if d <= 0:
                    return i + 1, j
            return None
        depth += _line_depth(line)
    return None


def _item_sort_key(item: list[str]) -> tuple[int, str, str]:
    first = next((ln for ln in item if ln.strip() and not ln.strip().startswith("//")), "")
    op = first.split()[0] if first.split() else ""
    rank = 0 if ".global" in op or op.endswith(".rodata") else 1
    masked = outside_strings(_SYMREF, lambda m: "@_", "\n".join(item))
    return rank, op, masked


def _sort_module_items(main: str) -> str:
    lines = main.split("\n")
    span = _module_body(lines)
    if span is None:
        return main
    first, last = span
    items = _split_items(lines[first:last])
    body: list[str] = []
    run: list[list[str]] = []
    for item in items:
        head = next((ln for ln in item if ln.strip() and not ln.strip().startswith("//")), "")
        if _SYMDEF.match(head):
            run.append(item)
            continue
        body += [ln for it in sorted(run, key=_item_sort_key) for ln in it] + item
        run = []
    body += [ln for it in sorted(run, key=_item_sort_key) for ln in it]
    return "\n".join(lines[:first] + body + lines[last:])


def _sort_resources(resources: str) -> str:
    """Sort the entries of each innermost ``{ key: "blob", ... }`` block by key."""
    lines = resources.split("\n")
    out: list[str] = []
    block: list[str] = []
    for line in lines:
        if _RESOURCE_BLOB.match(line) or re.match(r'^\s+[\w.$\-]+\s*:\s*"0x\.\.\.', line):
            block.append(line.rstrip(","))
            continue
        if block:
            block.sort(key=lambda ln: natural_key(ln.strip().split(":", 1)[0]))
            out += [b + "," for b in block[:-1]] + [block[-1]]
            block = []
        out.append(line)
    return "\n".join(out)


def normalize_mlir(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``mlir`` rules of the module docstring."""
    main, resources = split_resources(text)
    if opts.strip_locations:
        main = strip_locations(main)
    if opts.elide_constants:
        main, resources = _elide_mlir_constants(main, resources, opts.max_elements)
    if opts.rename:
        main = _rename_mlir_values(main)
        main, resources = _rename_resources(main, resources)
    if opts.sort_unordered:
        main = "\n".join(sort_dicts(line, python=False) for line in main.split("\n"))
        main = _sort_module_items(main)
        resources = _sort_resources(resources)
    if opts.rename:
        main = _rename_mlir_symbols(main)
    return main.rstrip("\n") + ("\n\n" + resources if resources else "")
