"""Sizes and ages as users write them (``5G``, ``2GiB``, ``30d``): ``compstack cache prune``'s units."""

from __future__ import annotations

import re

__all__ = ["parse_age", "parse_size"]

_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3,
          "t": 1000**4, "tb": 1000**4, "ki": 1024, "kib": 1024, "mi": 1024**2, "mib": 1024**2, "gi": 1024**3,
          "gib": 1024**3, "ti": 1024**4, "tib": 1024**4}
_AGES = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_size(text: str) -> int:
    """Bytes of a size like ``5G``, ``500MB``, ``2GiB``, ``1024`` (decimal units, binary
    with ``i``).

    Raises:
        ValueError: not a size (the message names the text).
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size (examples: 5G, 500MB, 2GiB)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def parse_age(text: str) -> float:
    """Seconds of an age like ``30d``, ``12h``, ``2w``, ``90m``, ``45s``.

    Raises:
        ValueError: not an age (the message names the text).
    """
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]+)\s*", text)
    if not m or m.group(2).lower() not in _AGES:
        raise ValueError(f"{text!r} is not an age (examples: 30d, 12h, 2w)")
    return float(m.group(1)) * _AGES[m.group(2).lower()]
