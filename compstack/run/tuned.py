"""``--tuned``: every stack at its best, and what "tuned" meant for each row (issue #26).

Each target class says what its best is (:attr:`compstack.targets.base.Target.tuned_as`):
TVM searches with MetaSchedule for the budget, Inductor compiles with ``max-autotune``, IREE
compiles at ``O3`` with data tiling and ukernels, OpenVINO gets its ``LATENCY`` hint and ORT
``ORT_ENABLE_ALL``; XLA and TorchScript have no tuning step and say so. The user's own
``--option`` values win over the tuned ones, as trtexec's explicit tactic flags win over its
builder optimisation level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_BUDGET", "mark_tuned", "tuned_target_options"]

#: ``--budget`` when ``--tuned`` is given alone: a tuning budget per model and stack.
DEFAULT_BUDGET = "5m"


def tuned_target_options(targets: Sequence[str], user: Mapping[str, Mapping[str, str]],
                         budget_s: float) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The target options of a ``--tuned`` run and what they mean per target.

    Args:
        targets: resolved target names (``NAME`` or ``NAME@VERSION``).
        user: the user's ``--option`` values, ``{target: {option: value}}``.
        budget_s: the tuning budget per model and target, seconds (> 0).

    Returns:
        ``(options, meaning)``: ``options`` is ``user`` with each target's tuned options
        under it (the user's values kept where both set a key); ``meaning`` is one line per
        target for its row (``flags.tuned_as``), ``"nothing to tune: WHY"`` for a stack
        without a tuning step or option.

    Raises:
        UserError: an unknown target (see :func:`compstack.targets.get`).
    """
    from compstack import targets as registry

    options = {k: dict(v) for k, v in user.items()}
    meaning: dict[str, str] = {}
    for name in targets:
        cls = registry.get(name)
        raw, text = cls.tuned_as
        tuned = {k: v.replace("{budget}", f"{budget_s:g}") for k, v in raw.items()}
        means = text.replace("{budget}", f"{budget_s:g}")
        if not tuned:
            meaning[name] = f"nothing to tune: {cls.untuned_reason}"
            continue
        mine = dict(user.get(name, {}))
        kept = sorted(k for k in tuned if k in mine and mine[k] != tuned[k])
        options[name] = {**tuned, **mine}
        meaning[name] = means if not kept else (  # say what ran, not what --tuned would have set
            f"{means}, except your --option " + ", ".join(f"{k}={mine[k]} (instead of {tuned[k]})" for k in kept))
    return options, meaning


def mark_tuned(result: Any, tuned: Mapping[str, str]) -> None:
    """Write what ``--tuned`` meant for ``result``'s target into the row: ``flags.tuned_as``
    and a note (nothing for an untuned run, ``tuned`` empty)."""
    if result.target in tuned:
        result.flags = {**result.flags, "tuned_as": tuned[result.target]}
        result.notes.append(f"--tuned: {tuned[result.target]}")
