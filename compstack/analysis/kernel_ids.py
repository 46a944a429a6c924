"""Kernel ids: one name per kernel of a kernel map, unique in execution order."""

from __future__ import annotations

__all__ = ["unique_ids"]


def unique_ids(names: list[str]) -> list[str]:
    """``names`` made unique in order: a name that occurs more than once gets ``#0``,
    ``#1``... (the kernel ids of a kernel map, e.g. two calls of one IREE dispatch or TVM
    PrimFunc, two Inductor kernels of one name)."""
    total: dict[str, int] = {}
    for n in names:
        total[n] = total.get(n, 0) + 1
    seen: dict[str, int] = {}
    out = []
    for n in names:
        i = seen.get(n, 0)
        seen[n] = i + 1
        out.append(n if total[n] == 1 else f"{n}#{i}")
    return out
