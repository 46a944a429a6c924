"""Durations written by users: ``90s``, ``10m``, ``1.5h`` or plain seconds (the forms of
``timeout(1)`` and of ``--time 4m`` in the fuzz and explain commands); and times shown to
them, with the unit that suits the value (:func:`format_ms`, every table's latency); and any
other figure shown, ``-`` where none was measured (:func:`figure`)."""

from __future__ import annotations

import math
import re

from compstack.core.errors import UserError

__all__ = ["figure", "format_ms", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*$")


def parse_duration(text: str | None, flag: str = "--time-budget") -> float:
    """``"10m"``, ``"90s"``, ``"1.5h"`` or plain seconds -> seconds (None: no limit, ``math.inf``).

    Raises:
        UserError: anything else, or a duration that is not positive, naming ``flag``.
    """
    if text is None:
        return math.inf
    m = _DURATION.match(text)
    if m is None or float(m.group(1)) <= 0:
        raise UserError(f"{flag} {text!r}: expected a positive duration like 90s, 10m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def format_ms(ms: float | None) -> str:
    """A time in milliseconds as text with the unit that suits the value: ``ns`` below
    1 µs, ``µs`` below 1 ms, ``ms`` below 1 s, else ``s``; three significant figures
    (four for 1000 and up in a unit); ``-`` for None.

    Examples: ``format_ms(0.005809) == "5.81 µs"``, ``format_ms(27.9) == "27.9 ms"``,
    ``format_ms(1280.0) == "1.28 s"``.
    """
    if ms is None:
        return "-"
    for scale, unit in ((1e-3, "ns"), (1.0, "µs"), (1e3, "ms")):
        if abs(ms) < scale:
            return f"{_sig3(ms * 1e3 / scale)} {unit}"
    return f"{_sig3(ms / 1e3)} s"


def _sig3(x: float) -> str:
    """Three significant figures without an exponent (``581``, ``58.1``, ``5.81``)."""
    ax = abs(x)
    return f"{x:.0f}" if ax >= 100 else f"{x:.1f}" if ax >= 10 else f"{x:.2f}"


def figure(x: float | None, spec: str = ".3g") -> str:
    """A figure in a table or report, formatted by ``spec``; ``-`` where none was measured
    (None: absent, or non-finite in the JSON it came from, such as a shape verdict's errors)."""
    return "-" if x is None else format(x, spec)
