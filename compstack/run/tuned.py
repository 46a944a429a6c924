"""``--tuned``: every stack at its best, and what "tuned" meant for each row (issue #26).

Each target class says what its best is (:attr:`compstack.targets.base.Target.tuned_as`):
TVM searches with MetaSchedule for the budget, Inductor compiles with ``max-autotune``, IREE
searches its documented flag sets for the budget (:mod:`compstack.targets.iree.tuning`),
OpenVINO gets its ``LATENCY`` hint and ORT ``ORT_ENABLE_ALL``; XLA and TorchScript have no
tuning step and say so. The user's own ``--option`` values win over the tuned ones, as
trtexec's explicit tactic flags win over its builder optimisation level.

A performance engineer asks "how much did tuning buy?", so a ``--tuned`` compare also runs
each tunable stack as it comes (:func:`default_runs`: the user's own options, no tuning
budget, its own job and work folder) right after its tuned run, and the tuned row carries
that default run's status, compile time and latency (``flags["default"]``) and the speed-up
of tuned over default with its significance (``flags["tuned_speedup"]``); the console table
(:mod:`compstack.report.tuned`) and the report show the two side by side. A stack whose
tuned configuration is its default (ORT's ``ORT_ENABLE_ALL``, OpenVINO's ``LATENCY`` hint)
runs once, and its row says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["DEFAULT_BUDGET", "attach_default", "default_runs", "mark_tuned", "tuned_target_options"]

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


def default_runs(targets: Sequence[str], user: Mapping[str, Mapping[str, str]],
                 tuned: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """The targets of a ``--tuned`` run that also get a default run, with its options.

    Args:
        targets: resolved target names.
        user: the user's ``--option`` values (``{target: {option: value}}``).
        tuned: the options of the tuned run (:func:`tuned_target_options`).

    Returns:
        ``{target: options}`` for each target whose tuned options, parsed by its
        ``Options`` class, differ from its default ones: the user's options less the ones
        that ask for a search (``tune``, ``tune_trials``, an autotune ``mode``), so that
        ``--option tvm-llvm:tune=1m --tuned`` still gets an untuned default run, while any
        other value the user gave (``ort-cpu:opt_level=disable``) is in both runs. A stack
        whose tuned configuration is its default has no entry.

    Raises:
        UserError: an unknown target or a bad option (see ``Options.from_strings``).
    """
    from compstack import targets as registry

    out: dict[str, dict[str, str]] = {}
    for name in targets:
        cls = registry.get(name)
        mine = {k: v for k, v in user.get(name, {}).items()
                if k not in ("tune", "tune_trials") and not (k == "mode" and "autotune" in v)}
        theirs = dict(tuned.get(name, {}))
        if theirs and cls.Options.from_strings(theirs, owner=name) != cls.Options.from_strings(mine, owner=name):
            out[name] = mine
    return out


def default_row(run: Any, name: str, options: Any, ref: Any, expected: Any, oracle: Any) -> Any:
    """The default run of a ``--tuned`` target, as a row judged on numerics (None when the
    target has none: ``options.defaults``, :func:`default_runs`).

    Args:
        run: the comparison's job runner (``run(name, options, latency=..., tag=..., **job
            fields)``; ``tag`` names the job's own work folder, ``NAME.default``).
        name: the target.
        options: the :class:`~compstack.run.session.CompareOptions` of the tuned run.
        ref, expected, oracle: the reference outputs, the declared output dtypes and the checked
            oracle (see :func:`compstack.run.session.compare`).
    """
    if name not in options.defaults:
        return None
    from compstack.run import session

    plain = session.CompareOptions(**{**vars(options), "tuned": {}})
    outcome = run(name, options.defaults[name], latency=True, tag=".default", tuning_budget_s=0.0)
    return session._numerics_row(outcome, ref, expected, plain, "", oracle)


def attach_default(tuned: Any, default: Any, options: Any) -> Any:
    """Put the default run's row ``default`` (a :class:`~compstack.core.results.Result`, or
    None) into the tuned row ``tuned`` and return it: ``flags["default"]`` (status, stage,
    error, compile_s, cached, latency_ms), ``flags["tuned_speedup"]`` (``ratio``: default
    median over tuned median, > 1 when tuning paid; ``significant``: the medians' 95 %
    intervals do not overlap, :func:`compstack.core.latency.medians_differ`) and one note.
    A tuned target without a default run (not in ``options.defaults``) gets
    ``flags["no_default"]`` and a note: its tuned configuration is its default one, or
    (``sweep --tuned``, which runs no defaults) it has a default that was not run."""
    from compstack.analysis.verdict import AGREEING
    from compstack.core.latency import medians_differ

    if default is None:
        name = tuned.target
        if name in options.defaults or options.tuned.get(name, "nothing").startswith("nothing"):
            return tuned
        opts = {k: str(v) for k, v in options.target_options.get(name, {}).items()}
        why = ("no default run here (sweep --tuned runs the tuned configuration only)"
               if default_runs([name], {name: opts}, {name: opts}) else
               "this stack's tuned configuration is its default one; it ran once")
        tuned.flags = {**tuned.flags, "no_default": why}
        tuned.notes.append(f"--tuned: {why}")
        return tuned
    tuned.flags = {**tuned.flags, "default": {
        "status": default.status, "stage": default.stage, "error": default.error, "compile_s": default.compile_s,
        "cached": default.cached, "latency_ms": default.latency_ms}}
    a, b = default.latency_ms or {}, tuned.latency_ms or {}
    if a.get("median") and b.get("median") and default.status in AGREEING and tuned.status in AGREEING:
        ratio, sig = a["median"] / b["median"], medians_differ(a, b)
        tuned.flags["tuned_speedup"] = {"ratio": ratio, "significant": sig}
        word = {True: "significant", False: "within noise", None: "no interval"}[sig]
        tuned.notes.append(f"--tuned: default {a['median']:.4g} ms, tuned {b['median']:.4g} ms: "
                           f"x{ratio:.2f} ({word})")
    elif default.status not in AGREEING:
        tuned.notes.append(f"--tuned: the default run was {default.status}"
                           + (f" at {default.stage}: {default.error}" if default.stage else ""))
    return tuned
