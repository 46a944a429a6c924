"""The ``onnx-text`` dialect of :func:`compstack.analysis.irtext.normalize.normalize`
(:func:`compstack.core.ir.to_text`), and the parser of its node lines.

Rules (each one a step of :class:`NormalizeOptions`):

* strip_locations: the ``  # node_name`` and ``  @ file:line`` node suffixes.
* rename: tensor names -> ``%v0, ...`` by first appearance over graph inputs, each
  node's inputs then outputs, and graph outputs (initializers used by no node
  come last).
* elide_constants: nothing to do (``to_text`` already prints hashes).
* sort_unordered: ``init`` lines sorted by (renamed) name, numbers in natural order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compstack.analysis.irtext._text import NormalizeOptions, natural_key, string_end

__all__ = ["OnnxNodeLine", "normalize_onnx_text", "parse_onnx_node_line"]

#: `  input  %name: TYPE`, `  init   %name: ...`, `  output %name: TYPE`.
_ONNX_VALUE = re.compile(r"^(?P<ind>\s+)(?P<kw>input|init|output)(?P<sp>\s+)%(?P<name>.+?): (?P<rest>.*)$")
#: Start of a node line: `  %a, %b = domain::Op`.
_ONNX_NODE = re.compile(r"^(?P<ind>\s+)(?P<outs>%.*?) = (?P<op>[\w.\-]+(?:::[\w.\-]+)?)(?P<rest>[<(].*)$")
#: What may follow a node's input list: `  # node_name` and/or `  @ file:line`.
_ONNX_TAIL = re.compile(r"^(?:\s+#\s?(?P<name>.*?))?(?:\s{2}@ (?P<src>.*))?$")


@dataclass
class OnnxNodeLine:
    """One node line of :func:`compstack.core.ir.to_text` output, parsed.

    Attributes:
        indent: leading blanks.
        outputs: output tensor names (without ``%``).
        op: ``domain::Op`` or ``Op``.
        attrs: the ``<...>`` attribute text, brackets included (``""`` when none).
        inputs: input tensor names; ``""`` for a missing optional input (``_``).
        name: the node name (``""`` when not printed).
        source: the provenance suffix after ``@`` (``""`` when none).
    """

    indent: str
    outputs: list[str]
    op: str
    attrs: str
    inputs: list[str]
    name: str = ""
    source: str = ""

    def format(self) -> str:
        """The line back in ``to_text`` form."""
        ins = ", ".join("%" + i if i else "_" for i in self.inputs)
        line = f"{self.indent}{', '.join('%' + o for o in self.outputs)} = {self.op}{self.attrs}({ins})"
        if self.name:
            line += f"  # {self.name}"
        if self.source:
            line += f"  @ {self.source}"
        return line


def _angle_end(s: str, i: int) -> int:
    """Index of the ``>`` closing the ``<`` at ``s[i]`` (quotes skipped), or -1."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c in "'\"":
            j = string_end(s, j)
            continue
        depth += (c == "<") - (c == ">")
        if depth == 0:
            return j
        j += 1
    return -1


def parse_onnx_node_line(line: str) -> OnnxNodeLine | None:
    """Parse a node line of ``to_text`` output; None for any other line."""
    m = _ONNX_NODE.match(line)
    if m is None:
        return None
    rest, attrs = m.group("rest"), ""
    if rest.startswith("<"):
        end = _angle_end(rest, 0)
        if end < 0:
            return None
        attrs, rest = rest[:end + 1], rest[end + 1:]
    if not rest.startswith("("):
        return None
    for close in (i for i, c in enumerate(rest) if c == ")"):
        tail = _ONNX_TAIL.match(rest[close + 1:])
        if tail is not None:
            break
    else:
        return None
    ins = rest[1:close]
    inputs = [] if not ins else ["" if x == "_" else x[1:] for x in ins.split(", ")]
    outs = [o[1:] for o in m.group("outs").split(", ")]
    return OnnxNodeLine(m.group("ind"), outs, m.group("op"), attrs, inputs,
                        tail.group("name") or "", tail.group("src") or "")


def _onnx_tensor_order(lines: list[str]) -> list[str]:
    """Tensor names by first appearance: graph inputs, then each node's inputs and
    outputs (data-flow order), graph outputs, then initializers used by no node."""
    order: dict[str, None] = {}
    inits = []
    for line in lines:
        v = _ONNX_VALUE.match(line)
        if v is not None:
            (inits.append(v.group("name")) if v.group("kw") == "init" else order.setdefault(v.group("name")))
            continue
        node = parse_onnx_node_line(line)
        if node is not None:
            for name in node.inputs + node.outputs:
                if name:
                    order.setdefault(name)
    for name in inits:
        order.setdefault(name)
    return list(order)


def normalize_onnx_text(text: str, opts: NormalizeOptions) -> str:
    """``text`` (already tidied) under the ``onnx-text`` rules of the module docstring."""
    lines = text.split("\n")
    names = {n: f"v{i}" for i, n in enumerate(_onnx_tensor_order(lines))} if opts.rename else {}
    out = []
    for line in lines:
        v = _ONNX_VALUE.match(line)
        node = parse_onnx_node_line(line) if v is None else None
        if v is not None:
            line = f"{v.group('ind')}{v.group('kw')}{v.group('sp')}%{names.get(v.group('name'), v.group('name'))}: " \
                   f"{v.group('rest')}"
        elif node is not None:
            node.outputs = [names.get(o, o) for o in node.outputs]
            node.inputs = [names.get(i, i) for i in node.inputs]
            if opts.strip_locations:
                node.name = node.source = ""
            line = node.format()
        out.append(line)
    if opts.sort_unordered:
        out = _sort_runs(out, lambda ln: bool(re.match(r"^\s+init\s", ln)),
                         lambda ln: natural_key(ln.split("%", 1)[1].split(":", 1)[0]))
    return "\n".join(out)


def _sort_runs(lines: list[str], member: Callable[[str], bool], key: Callable[[str], Any]) -> list[str]:
    """Sort each maximal run of consecutive lines for which ``member`` holds."""
    out: list[str] = []
    run: list[str] = []
    for line in lines:
        if member(line):
            run.append(line)
            continue
        out += sorted(run, key=key) + [line]
        run = []
    return out + sorted(run, key=key)
