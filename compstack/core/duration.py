"""Durations written by users: ``90s``, ``10m``, ``1.5h`` or plain seconds (the forms of
``timeout(1)`` and of ``--time 4m`` in the fuzz and explain commands)."""

from __future__ import annotations

import math
import re

from compstack.core.errors import UserError

__all__ = ["parse_duration"]

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
