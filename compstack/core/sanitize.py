"""One function per output kind for strings that come from a model, a bundle or a stack.

A node name, an op type, an output name or a stack's error text is data someone else
wrote. Before it reaches an output it passes through the function for that output, so
that it is shown as the characters it is and never acts:

============  ===============================  ==============================================
function      output                           what it makes inert
============  ===============================  ==============================================
terminal      plain text on a terminal         C0/C1 controls (ANSI CSI/OSC escapes, BEL, NUL,
                                               CR, newline), Unicode bidi overrides and
                                               isolates (Trojan Source, CVE-2021-42574),
                                               other format characters; over-long text
terminal_     many lines on a terminal or in   as ``terminal`` line by line, keeping the
lines         Markdown (an IR dump, a diff)    newlines and tabs that lay the text out
rich_text     Rich markup (tables, console)    the above, then Rich markup (``[/x]``,
                                               ``[link=...]``) escaped
xml_text      XML 1.0 text and attributes      characters XML 1.0 cannot hold (``\\0``,
                                               U+FFFE, U+FFFF, lone surrogates); ``<&"`` are
                                               left to the XML writer (ElementTree)
html_text     HTML text and attribute values   the XML set, then ``<>&"'`` escaped
python_text   inside a Python string literal   backslashes, quotes, newlines, every
              or docstring (generated code)    non-ASCII character: written as escapes that
                                               evaluate back to the same string
sql_ident     an SQL identifier                quoted, ``"`` doubled, NUL refused (values go
                                               through ``?`` parameters, never this)
file_name     one path component               everything but ``[A-Za-z0-9._-]``; no leading
                                               dot, no empty name, at most ``limit`` bytes
============  ===============================  ==============================================

Invisible characters are written as their escape (``\\x1b``, ``\\u202e``), so what the
user reads is the string's real content. Rules: ECMA-48 (C0/C1 control functions),
XML 1.0 section 2.2 (``Char``), Unicode TR #9 (bidi controls), Python's ``unicode_escape``
codec, SQLite's identifier quoting.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

__all__ = ["MAX_SHOWN", "file_name", "html_text", "python_text", "rich_text", "sql_ident", "terminal", "terminal_lines",
           "xml_text"]

#: Longest name (characters) worth showing whole: the limit for a model's name in a table's title.
MAX_SHOWN = 200

#: Not an XML 1.0 ``Char`` (section 2.2): C0 controls but tab/LF/CR, surrogates, U+FFFE/U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _escape_char(c: str) -> str:
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}" if n < 0x10000 else f"\\U{n:08x}"


def _shown(c: str) -> bool:
    """Whether ``c`` is shown as itself on a terminal: not a control (Cc), format (Cf:
    bidi overrides, zero-width), surrogate (Cs), unassigned (Cn) or separator (Zl, Zp)."""
    return unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Cn", "Zl", "Zp")


def terminal(text: object, limit: int | None = None) -> str:
    """``text`` for a terminal: one line, every invisible or active character as its escape.

    Args:
        text: any value; ``str(text)`` is shown.
        limit: at most this many characters (the rest becomes ``…(N more)``); None: all
            (a name in a table: :data:`MAX_SHOWN`).

    Returns:
        A one-line string with no control, format or bidi character (a space stays a space).
    """
    s = str(text)
    more = 0
    if limit is not None and len(s) > limit:
        s, more = s[:limit], len(s) - limit
    out = "".join(c if c == " " or _shown(c) else _escape_char(c) for c in s)
    return out + (f"…({more} more)" if more else "")


def terminal_lines(text: object) -> str:
    """Multi-line ``text`` (an IR dump, a diff, a Markdown report) for a terminal or a text
    file: every character :func:`terminal` escapes is escaped, but for the newlines and tabs
    that lay the text out. A newline inside a name is not told apart from the layout's (a
    stack's printer wrote both): put a name through :func:`terminal` before joining it in.

    Args:
        text: any value; ``str(text)`` is shown.

    Returns:
        The same lines, with no escape sequence, control (but ``\\n``, ``\\t``), format or bidi
        character left.
    """
    return "\n".join("\t".join(terminal(part) for part in line.split("\t")) for line in str(text).split("\n"))


def rich_text(text: object, limit: int | None = None) -> str:
    """``text`` for a Rich table cell or ``console.print``: :func:`terminal`, then its
    markup escaped (``rich.markup.escape``), so ``[/x]`` or ``[link=...]`` shows as written.

    Args:
        text: any value.
        limit: as :func:`terminal`.
    """
    from rich.markup import escape

    s = terminal(text, limit)
    if s.endswith("\\"):  # a trailing backslash would escape the markup that follows it
        s += " "
    return escape(s)


def xml_text(text: object) -> str:
    """``text`` that XML 1.0 can hold: each forbidden character as its escape. ``<``, ``&``
    and quotes are left for the XML writer (ElementTree escapes them)."""
    return _NOT_XML.sub(lambda m: _escape_char(m.group()), str(text))


def html_text(text: object) -> str:
    """``text`` escaped for HTML text and quoted attribute values (``html.escape``), after
    :func:`xml_text`. Not for a template that already autoescapes (jinja2 ``autoescape``:
    give it :func:`xml_text`)."""
    import html

    return html.escape(xml_text(text), quote=True)


def python_text(text: object) -> str:
    """``text`` for the inside of a Python string literal or docstring in generated code.

    The result is ASCII, holds no newline, no unescaped quote and no lone backslash, so
    ``'...'``, ``"..."``, ``'''...'''`` and ``\"\"\"...\"\"\"`` around it all parse, and
    evaluating the literal gives back ``str(text)`` (for a value, prefer ``repr``).
    """
    s = str(text).encode("unicode_escape").decode("ascii")
    return s.replace('"', '\\"').replace("'", "\\'")


def sql_ident(name: str) -> str:
    """``name`` as a quoted SQLite identifier (``"a""b"``).

    Raises:
        ValueError: ``name`` holds a NUL byte (SQLite ends the identifier there).
    """
    if "\0" in name:
        raise ValueError(f"SQL identifier {ascii(name)} holds a NUL byte")
    return '"' + name.replace('"', '""') + '"'


def file_name(text: object, limit: int = 100) -> str:
    """``text`` as one safe path component: ``[A-Za-z0-9._-]`` only, no leading dot.

    A name that had to change gets 8 hex digits of its SHA-256, so two names that differ
    only in removed characters stay two files. Never empty, ``.`` or ``..``.

    Args:
        text: the name (a node, a model, an output).
        limit: the most characters of the result (at least 16).
    """
    s = str(text)
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", s).lstrip(".")
    limit = max(limit, 16)
    if safe != s or len(safe) > limit or not safe:
        digest = hashlib.sha256(s.encode("utf-8", "surrogatepass")).hexdigest()[:8]
        safe = f"{safe[: limit - 9]}_{digest}" if safe else digest
    return safe
