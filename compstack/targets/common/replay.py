"""Which of a bundle's flags a replay may apply: the per-stack allowlist and its checks.

A bundle (``compstack explain -o DIR``, a fuzz finding) is meant to be sent to other
people, so replaying one (``explain --replay``, ``fuzz --replay``) treats its
``flags.json`` as untrusted data, like a model file. Each stack's folder holds a
``replay.py`` with ``ALLOWED``: option name -> :class:`Rule`. An option is applied on
replay only when its stack allows it and its value passes the rule; everything else,
and every environment variable a bundle names, is dropped and listed (:func:`screen`).

What no rule lets through (the rule of issue #27, class 1): a value that names a path
(``/``, ``\\``, ``~``, a leading ``.`` or ``@``), and a compiler flag whose name says it
names a tool, a plugin, a library, a pass plugin, a file or an output
(:data:`TOOL_WORDS`), such as IREE's ``--iree-llvmcpu-embedded-linker-path``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Rule", "TOOL_WORDS", "choice", "flags", "names", "number", "screen", "token"]

#: Words that, inside a compiler flag's name, mean the flag names a program, a library,
#: a plugin or a file to read or write: never applied from a bundle.
TOOL_WORDS = ("linker", "path", "plugin", "library", "libraries", "lib", "tool", "exe", "cc", "cxx", "compiler",
              "command", "program", "script", "file", "dir", "output", "dump", "reproducer", "load", "object",
              "extension", "config", "cache", "spec", "module", "so", "dll", "dylib", "shell", "run")
#: A plain value: letters, digits and ``_ . + : = -``; nothing that can name a path.
_PLAIN = re.compile(r"[A-Za-z0-9_+:=][A-Za-z0-9_.+:=-]*|")
_NUMBER = re.compile(r"[-+]?[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|true|false|yes|no|1|0", re.IGNORECASE)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]*")


@dataclass(frozen=True)
class Rule:
    """How one option's value is checked before a replay applies it.

    Attributes:
        kind: ``token`` (one plain value matching ``pattern``), ``choice`` (one of
            ``values``), ``number`` (an int, float or bool as text), ``names`` (a
            comma-separated list of identifiers) or ``flags`` (a comma-separated list
            of compiler flags, each starting with one of ``values``).
        values: the choices, or the allowed flag prefixes.
        pattern: the regular expression a ``token`` must match in full.
    """

    kind: str
    values: tuple[str, ...] = ()
    pattern: str = ""
    _re: Any = field(default=None, compare=False, repr=False)

    def problem(self, value: Any) -> str:
        """``""`` when ``value`` may be applied, else why not (a few words)."""
        if not isinstance(value, str):
            return f"a {type(value).__name__}, not text"
        if self.kind == "choice":
            return "" if value in self.values else f"not one of {', '.join(self.values)}"
        if self.kind == "number":
            return "" if _NUMBER.fullmatch(value) else "not a number"
        if self.kind == "names":
            bad = [n for n in value.split(",") if n and not _NAME.fullmatch(n)]
            return f"{bad[0]!r} is not a name" if bad else ""
        if self.kind == "flags":
            return next((p for p in (_flag_problem(f, self.values) for f in value.split(",") if f) if p), "")
        if not _PLAIN.fullmatch(value) or not re.fullmatch(self.pattern or ".*", value):
            return "not a plain value"
        return ""


def token(pattern: str = "") -> Rule:
    """A plain value (no path characters), matching ``pattern`` when given."""
    return Rule("token", pattern=pattern)


def choice(*values: str) -> Rule:
    """One of ``values``."""
    return Rule("choice", values)


def number() -> Rule:
    """An int, float or bool, as text."""
    return Rule("number")


def names() -> Rule:
    """A comma-separated list of identifiers (passes, optimizers, config switches)."""
    return Rule("names")


def flags(*prefixes: str) -> Rule:
    """A comma-separated list of compiler flags, each starting with one of ``prefixes``
    and none naming a tool, plugin, library or file (:data:`TOOL_WORDS`)."""
    return Rule("flags", prefixes)


def _flag_problem(flag: str, prefixes: tuple[str, ...]) -> str:
    name, eq, value = flag.partition("=")
    if not any(name.startswith(p) for p in prefixes):
        return f"{flag}: not a flag this stack replays (allowed: {', '.join(p + '*' for p in prefixes)})"
    words = set(re.split(r"[-_]+", name.lower()))
    named = sorted(words & set(TOOL_WORDS))
    if named:
        return f"{flag}: names a {named[0]} (a program, library, plugin or file)"
    if eq and not _PLAIN.fullmatch(value):
        return f"{flag}: the value is not a plain value"
    return ""


def _allowed(target: str) -> Mapping[str, Rule]:
    """The allowlist of ``target``'s stack: ``ALLOWED`` of ``replay.py`` in the folder of
    the registered target class (a module the registry names, never the bundle); empty
    for a stack without one."""
    from compstack import targets as registry

    module = registry.get(target).__module__.rpartition(".")[0] + ".replay"
    try:
        return dict(importlib.import_module(module).ALLOWED)
    except (ImportError, AttributeError):
        return {}


def screen(target: str, spec: Mapping[str, Any], trust: bool = False) -> tuple[dict[str, str], list[str]]:
    """Split one target's entry of a bundle's ``flags.json`` into what a replay applies
    and what it drops.

    Args:
        target: the registered target name the bundle names.
        spec: ``{"options": {name: value}, "flags": {...}, ...}``; ``flags`` is a record
            of how the stack was run and is never applied; ``env`` (or any other key) is
            dropped whatever ``trust`` says.
        trust: ``--trust-bundle-flags``: apply every text option, allowed or not
            (environment variables are still never applied).

    Returns:
        ``(options to apply, ["name=value (why)", ...] dropped or applied on trust)``.

    Raises:
        UserError: ``target`` is not a registered target.
    """
    allowed = _allowed(target)
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for key in sorted(set(spec) - {"options", "flags"}):
        dropped.append(f"{key} (a bundle never sets {'environment variables' if key == 'env' else key})")
    options = spec.get("options") or {}
    for name, value in sorted(options.items()):
        rule = allowed.get(name)
        why = f"{name} is not on {target}'s replay allowlist" if rule is None else rule.problem(value)
        if not why:
            kept[name] = value
            continue
        dropped.append(f"{name}={str(value)[:200]} ({why})")
        if trust and isinstance(value, str):
            kept[name] = value
    return kept, dropped
