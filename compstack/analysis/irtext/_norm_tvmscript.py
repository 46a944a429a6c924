"""The ``tvmscript`` dialect of :func:`compstack.analysis.irtext.normalize.normalize`
(``mod.script()``).

Rules (each one a step of :class:`NormalizeOptions`):

* strip_locations: the ``# Metadata omitted...`` line and a
  ``metadata = tvm.ir.load_json(...)`` block are removed (``script()`` prints no
  spans).
* rename: names bound in each function (parameters, assignment, ``for`` and
  ``with ... as`` targets: ``lv3``, ``gv``, ``alloc1``, ``T_add_1``, ``i0``) keep
  their stem (the name without its trailing ``_?digits``, the uniqueness counter)
  and are renumbered by first appearance within the function: the first name of a
  stem is the bare stem, the next ones ``stem_1``, ``stem_2`` (``lv, lv1, lv5`` ->
  ``lv, lv_1, lv_2``). Global functions get the same rule over the module, in
  order of definition: ``fused_conv2d_add``/``fused_conv2d_add1`` ->
  ``fused_conv2d_add``/``fused_conv2d_add_1``. The output stays valid Python.
* elide_constants: ``metadata["KIND"][i]`` indices (the printer's constant table;
  ``show_meta=False`` prints no values, so there is nothing to hash) are
  renumbered per KIND by first appearance.
* sort_unordered: the functions of an ``@I.ir_module`` class are sorted by name
  stem, then by text (with global names reduced to stems and metadata indices
  masked); Python dict literals whose keys are all strings
  (``R.func_attr({...})``) are sorted by key.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field

from compstack.analysis.irtext._text import (
    CLOSE,
    OPEN,
    NormalizeOptions,
    StemNumbering,
    name_stem,
    sort_dicts,
)

__all__ = ["normalize_tvmscript"]

#: The printer's note that constants were not printed.
_META_NOTE = re.compile(r"^# Metadata omitted\..*$", re.M)
#: A printed metadata table (show_meta=True).
_META_BLOCK = re.compile(r'^metadata = tvm\.ir\.load_json\(""".*?"""\)\s*$', re.M | re.S)
#: A constant-table reference `metadata["kind"][index]`.
_META_REF = re.compile(r'metadata\["(?P<kind>[^"]+)"\]\[(?P<index>\d+)\]')


def _tokens(text: str) -> list[tokenize.TokenInfo] | None:
    try:
        return list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None


def _apply_token_renames(text: str, renames: list[tuple[int, int, int, str]]) -> str:
    """Replace ``(row, col, end_col, new)`` token spans (1-based rows)."""
    lines = text.split("\n")
    for row, col, end, new in sorted(renames, reverse=True):
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end:]
    return "\n".join(lines)


@dataclass
class _Scope:
    first: int
    last: int
    bound: set[str] = field(default_factory=set)


def _function_scopes(tree: ast.AST) -> list[_Scope]:
    scopes = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        scope = _Scope(first, node.end_lineno or node.lineno)
        args = node.args
        for a in args.posonlyargs + args.args + args.kwonlyargs + [args.vararg, args.kwarg]:
            if a is not None:
                scope.bound.add(a.arg)
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                scope.bound.add(sub.id)
        scope.bound.discard("_")
        scopes.append(scope)
    # Innermost scope wins: assign larger spans first.
    return sorted(scopes, key=lambda s: s.first - s.last)


_LAYOUT_TOKENS = frozenset({tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT})


def _significant(toks: list[tokenize.TokenInfo]) -> list[tokenize.TokenInfo]:
    """Tokens without line breaks, comments and indentation."""
    return [t for t in toks if t.type not in _LAYOUT_TOKENS]


def _renameable_names(toks: list[tokenize.TokenInfo]) -> list[tokenize.TokenInfo]:
    """NAME tokens that are plain name uses: not attributes (after ``.``) and not
    keyword-argument names (``name=`` inside brackets)."""
    sig = _significant(toks)
    out, depth = [], 0
    for i, tok in enumerate(sig):
        if tok.type == tokenize.OP:
            depth += (tok.string in OPEN) - (tok.string in CLOSE)
        if tok.type != tokenize.NAME:
            continue
        is_attr = i > 0 and sig[i - 1].string == "."
        is_kwarg = depth > 0 and i + 1 < len(sig) and sig[i + 1].string == "="
        if not is_attr and not is_kwarg:
            out.append(tok)
    return out


def _rename_tvm_locals(text: str) -> str:
    toks = _tokens(text)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return text
    if toks is None:
        return text
    scopes = _function_scopes(tree)
    owner: dict[int, int] = {}  # line -> index of its innermost scope
    for k, scope in enumerate(scopes):
        for row in range(scope.first, scope.last + 1):
            owner[row] = k
    names = [tok for tok in _renameable_names(toks) if tok.start[0] in owner]
    taken: dict[int, set[str]] = {}
    for tok in names:
        k = owner[tok.start[0]]
        if tok.string not in scopes[k].bound:
            taken.setdefault(k, set()).add(tok.string)
    numbering: dict[int, StemNumbering] = {}
    renames = []
    for tok in names:
        k = owner[tok.start[0]]
        if tok.string not in scopes[k].bound:
            continue
        num = numbering.setdefault(k, StemNumbering("_", taken.get(k, set())))
        new = num.get(tok.string)
        if new != tok.string:
            renames.append((tok.start[0], tok.start[1], tok.end[1], new))
    return _apply_token_renames(text, renames)


@dataclass
class _Member:
    name: str
    lines: list[str]


def _class_members(lines: list[str]) -> tuple[int, int, list[_Member]] | None:
    """(first, end) line span and functions of the ``@I.ir_module`` class body."""
    start = next((i for i, ln in enumerate(lines) if re.match(r"^class \w+(?:\(.*\))?:\s*$", ln)
                  and i > 0 and lines[i - 1].strip().startswith("@I.ir_module")), None)
    if start is None:
        return None
    first = start + 1
    end = first
    while end < len(lines) and (not lines[end].strip() or lines[end].startswith((" ", "\t"))):
        end += 1
    body = lines[first:end]
    indent = min((len(ln) - len(ln.lstrip()) for ln in body if ln.strip()), default=4)
    members: list[_Member] = []
    for ln in body:
        is_start = len(ln) - len(ln.lstrip()) == indent and ln.lstrip().startswith(("@", "def "))
        starts_new = is_start and (not members or any(x.lstrip().startswith("def ") for x in members[-1].lines
                                                       if len(x) - len(x.lstrip()) == indent))
        if starts_new or not members:
            members.append(_Member("", []))
        members[-1].lines.append(ln)
    for m in members:
        while m.lines and not m.lines[-1].strip():
            m.lines.pop()
        found = next((re.match(r"^\s*def (\w+)", x) for x in m.lines if re.match(r"^\s*def \w+", x)), None)
        m.name = found.group(1) if found else ""
    return first, end, members


def _sort_tvm_functions(text: str) -> str:
    lines = text.split("\n")
    found = _class_members(lines)
    if found is None:
        return text
    first, end, members = found
    if any(not m.name for m in members):
        return text
    globals_rx = re.compile(r"\b(" + "|".join(sorted((re.escape(m.name) for m in members), key=len, reverse=True))
                            + r")\b")

    def key(m: _Member) -> tuple[str, str]:
        body = globals_rx.sub(lambda g: name_stem(g.group(1)), "\n".join(m.lines))
        return name_stem(m.name), _META_REF.sub(lambda r: f'metadata["{r.group("kind")}"][_]', body)

    ordered = sorted(members, key=key)
    body: list[str] = []
    for i, m in enumerate(ordered):
        body += ([""] if i else []) + m.lines
    tail = lines[end:]
    return "\n".join(lines[:first] + body + ([""] if tail and tail[0].strip() else []) + tail)


def _rename_tvm_globals(text: str) -> str:
    lines = text.split("\n")
    found = _class_members(lines)
    toks = _tokens(text)
    if found is None or toks is None:
        return text
    defs = [m.name for m in found[2] if m.name]
    class_names = set(re.findall(r"^class (\w+)", text, re.M)) | {"cls"}
    numbering = StemNumbering("_", {t.string for t in toks if t.type == tokenize.NAME} - set(defs))
    new_names = {name: numbering.get(name) for name in defs}
    renames = []
    sig = _significant(toks)
    for i, tok in enumerate(sig):
        if tok.type != tokenize.NAME or tok.string not in new_names or new_names[tok.string] == tok.string:
            continue
        after_def = i > 0 and sig[i - 1].string == "def"
        after_cls = i > 1 and sig[i - 1].string == "." and sig[i - 2].string in class_names
        if after_def or after_cls:
            renames.append((tok.start[0], tok.start[1], tok.end[1], new_names[tok.string]))
    return _apply_token_renames(text, renames)


def _renumber_tvm_metadata(text: str) -> str:
    per_kind: dict[str, dict[str, int]] = {}

    def sub(m: re.Match[str]) -> str:
        seen = per_kind.setdefault(m.group("kind"), {})
        index = seen.setdefault(m.group("index"), len(seen))
        return f'metadata["{m.group("kind")}"][{index}]'

    return _META_REF.sub(sub, text)


def normalize_tvmscript(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``tvmscript`` rules of the module docstring."""
    if opts.strip_locations:
        text = _META_BLOCK.sub("", _META_NOTE.sub("", text))
    if opts.rename:
        text = _rename_tvm_locals(text)
    if opts.sort_unordered:
        text = _sort_tvm_functions(text)
        text = "\n".join(sort_dicts(line, python=True) if "{" in line else line for line in text.split("\n"))
    if opts.rename:
        text = _rename_tvm_globals(text)
    if opts.elide_constants:
        text = _renumber_tvm_metadata(text)
    return text
