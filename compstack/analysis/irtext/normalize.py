"""Normalise IR dumps so that two of them can be diffed (a read-only text analysis).

:func:`normalize` turns the text of one stage (``Lowered.as_text(stage)``, a file saved
under ``COMPSTACK_SAVE_TEMPS``, or a dump from the stack's own tools) into a canonical
form: the same input gives the same bytes in every run and process (no ``id()``, no
``hash()`` of strings, no set iteration order), and ``normalize(normalize(x)) ==
normalize(x)``. Nothing here imports a compiler stack.

Every dialect first gets the common clean-up: ``\\r\\n`` -> ``\\n``, trailing blanks
removed, runs of blank lines collapsed to one, leading/trailing blank lines dropped,
one final newline. The steps of :class:`NormalizeOptions` (strip_locations,
elide_constants, rename, sort_unordered) then apply per dialect; each private module
states its rules:

``mlir`` (IREE/MLIR: torch-onnx, input, flow, stream, hal, vm; StableHLO)
    :mod:`compstack.analysis.irtext._norm_mlir`: ``loc(...)`` removed, large ``dense``
    constants and resource blobs -> ``"0x...<B bytes #H>"``, SSA values, blocks and
    symbols renamed, attribute dicts and symbol-defining ops sorted.
``tvmscript`` (``mod.script()``)
    :mod:`compstack.analysis.irtext._norm_tvmscript`: metadata notes removed, local and
    global names renumbered per stem, metadata indices renumbered, functions and
    string-keyed dicts sorted.
``onnx-text`` (:func:`compstack.core.ir.to_text`)
    :mod:`compstack.analysis.irtext._norm_onnx`: node name/source suffixes removed, tensors
    renamed ``%v0, ...``, ``init`` lines sorted.
``hlo`` (XLA HLO text)
    :mod:`compstack.analysis.irtext._norm_hlo`: metadata and stack-frame tables removed,
    large ``constant({...})`` literals elided, instructions and computations
    renamed, computations sorted.
``llvm`` (LLVM IR) and ``asm``
    :mod:`compstack.analysis.irtext._norm_native`: debug info removed, locals and labels
    renamed, large global initializers elided (``llvm``).
``python`` and ``text``
    only the common clean-up.

Hashes in elided constants are :func:`content_hash`; renamed names keep their
:func:`name_stem` where the rules say so.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import PurePath

from compstack.analysis.irtext._norm_hlo import normalize_hlo
from compstack.analysis.irtext._norm_mlir import normalize_mlir
from compstack.analysis.irtext._norm_native import normalize_asm, normalize_llvm
from compstack.analysis.irtext._norm_onnx import (
    OnnxNodeLine,
    normalize_onnx_text,
    parse_onnx_node_line,
)
from compstack.analysis.irtext._norm_tvmscript import normalize_tvmscript
from compstack.analysis.irtext._text import NormalizeOptions, content_hash, name_stem, tidy

__all__ = [
    "DIALECTS",
    "NormalizeOptions",
    "OnnxNodeLine",
    "content_hash",
    "detect_dialect",
    "name_stem",
    "normalize",
    "parse_onnx_node_line",
]

#: The dialect names :func:`detect_dialect` returns and :func:`normalize` accepts.
DIALECTS = ("mlir", "tvmscript", "onnx-text", "hlo", "llvm", "asm", "python", "text")


# ---- dialect detection -----------------------------------------------------------------

_SUFFIX_DIALECT = {".mlir": "mlir", ".mlirbc": "mlir", ".ll": "llvm", ".s": "asm", ".asm": "asm",
                   ".hlo": "hlo", ".onnxtxt": "onnx-text"}

#: Content sniffers, tried in order; the first that matches names the dialect.
_SNIFFERS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # compstack.core.ir.to_text: first line `model NAME (opsets ...)`.
    ("onnx-text", re.compile(r"\A\s*model \S+ \(opsets [^)]*\)\s*$", re.M)),
    # XLA HLO: `HloModule name, ...` header or an `ENTRY` computation.
    ("hlo", re.compile(r"^(?:HloModule\s|ENTRY\s+%?[\w.\-]+\s*[({])", re.M)),
    # TVMScript: the printer's import comment or TVM decorators.
    ("tvmscript", re.compile(r"^\s*(?:# from tvm\.script import|@I\.ir_module|@R\.function|@T\.prim_func)", re.M)),
    # LLVM IR: ModuleID comment, target lines, or a define/declare.
    ("llvm", re.compile(r"^(?:; ModuleID = |target (?:datalayout|triple) = |define |declare )", re.M)),
    # MLIR: a (builtin.)module, a func-like op with a symbol, or `%x = dialect.op`.
    ("mlir", re.compile(r"^\s*(?:(?:builtin\.)?module\b.*\{|(?:[a-z_]+\.)+func\s.*@|%[\w$.\-:#]+ = [a-z_]+\.[\w.]+)",
                        re.M)),
    # Assembly: common section/symbol directives or an indented mnemonic with tab operands.
    ("asm", re.compile(r"^\s*\.(?:text|section|globl|p2align|type)\b|^\t[a-z][a-z0-9.]*\t", re.M)),
    # Python: import, def or class at the start of a line.
    ("python", re.compile(r"^(?:import \w|from [\w.]+ import |def \w|class \w)", re.M)),
)


def detect_dialect(text: str, filename: str | None = None) -> str:
    """Which kind of IR ``text`` is.

    Args:
        text: the dump.
        filename: its file name, if any. ``.mlir`` -> ``mlir``, ``.ll`` -> ``llvm``,
            ``.s``/``.asm`` -> ``asm``, ``.hlo`` -> ``hlo`` without looking at the
            content; other suffixes (``.py``: TVMScript or plain Python, ``.txt``) are
            decided by the content.

    Returns:
        One of :data:`DIALECTS`: ``mlir``, ``tvmscript``, ``onnx-text``, ``hlo``,
        ``llvm``, ``asm``, ``python`` or ``text`` (nothing recognised).
    """
    if filename:
        suffix = PurePath(filename).suffix.lower()
        if suffix in _SUFFIX_DIALECT:
            return _SUFFIX_DIALECT[suffix]
    head = text[:200_000]
    for dialect, rx in _SNIFFERS:
        if rx.search(head):
            return dialect
    return "text"



# ---- entry point -------------------------------------------------------------------------

_NORMALIZERS: dict[str, Callable[[str, NormalizeOptions], str]] = {
    "mlir": normalize_mlir,
    "tvmscript": normalize_tvmscript,
    "onnx-text": normalize_onnx_text,
    "hlo": normalize_hlo,
    "llvm": normalize_llvm,
    "asm": normalize_asm,
    "python": lambda text, opts: text,
    "text": lambda text, opts: text,
}


def normalize(text: str, dialect: str | None = None, options: NormalizeOptions = NormalizeOptions()) -> str:
    """The canonical form of an IR dump (rules per dialect: see the module docstring
    and the modules it names).

    Args:
        text: the dump.
        dialect: one of :data:`DIALECTS`; default: :func:`detect_dialect`.
        options: which steps run.

    Returns:
        The normalised text: byte-identical for the same input in any run or
        process, and a fixed point (``normalize(normalize(x)) == normalize(x)``).

    Raises:
        ValueError: unknown ``dialect``.
    """
    dialect = dialect or detect_dialect(text)
    if dialect not in _NORMALIZERS:
        raise ValueError(f"unknown dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    return tidy(_NORMALIZERS[dialect](tidy(text), options))
