"""Bisect a finding across a stack's releases: since which release is it there (or gone)?

The property is explain's (:class:`compstack.explain.core.Explainer`, whose verdict is
:func:`compstack.analysis.verdict.judge`): ``TARGET@V != ref`` holds when release ``V``
fails on the model or gives an output the verdict calls ``wrong``, ``nan`` or ``shape``
against the float64 reference. It is evaluated on releases chosen by binary search over
the ordered release list (the registry's order, :func:`compstack.core.envs.registry_releases`):

1. the two ends of the range (moving inwards past releases that cannot install);
2. when they agree, the answer is "bad in every release tried" or "good in every release
   tried" (the ends are what was tried: a flip that flips back inside is not seen);
3. else binary search between the last release with the first end's answer and the
   first with the other's, skipping releases that cannot install.

At most ``ceil(log2 n) + 2`` evaluations for ``n`` releases in the range; a release that
cannot install costs an install attempt, not an evaluation, and is reported as skipped.
Each env is built once (the store) and reused.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx

__all__ = ["VersionBisect", "bisect_versions", "issue_section", "pick_range", "write_issue"]


@dataclass
class VersionBisect:
    """The answer of :func:`bisect_versions`.

    Attributes:
        target: the target (without version).
        releases: the releases in range, oldest first.
        answer: ``flip`` (the property changes between ``before`` and ``after``),
            ``bad-all``, ``good-all``, or ``none`` (no release in range could run).
        before, after: the adjacent evaluated releases where it flips (``flip`` only).
        direction: ``regression`` (good before, bad after) or ``fix`` (bad before, good
            after), ``flip`` only.
        tried: release -> ``bad``/``good``/``skipped: <why>`` in evaluation order.
        evaluations: releases evaluated (not counting skipped ones).
        envs_built: envs built during this bisect (the others came from the store).
        max_evaluations: ``ceil(log2 n) + 2``.
        summary: one line for the reader and ISSUE.md.
    """

    target: str
    releases: list[str]
    answer: str = "none"
    before: str = ""
    after: str = ""
    direction: str = ""
    tried: dict[str, str] = field(default_factory=dict)
    evaluations: int = 0
    envs_built: int = 0
    max_evaluations: int = 0
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pick_range(releases: list[str], spec: str) -> list[str]:
    """The releases of ``releases`` (oldest first) within ``spec`` = ``FIRST..LAST``
    (either end may be empty: ``3.0.0..``, ``..1.24.1``); ends must be listed releases.

    Raises:
        UserError: a malformed range or an end the registry does not list (names it).
    """
    from compstack.core.errors import UserError

    first, sep, last = spec.partition("..")
    if not sep:
        raise UserError(f"--range {spec}: expected FIRST..LAST (e.g. 1.20.0..1.32.0)")
    for end in (first, last):
        if end and end not in releases:
            raise UserError(f"--range {spec}: {end} is not a release the registry lists "
                            f"({releases[0]} .. {releases[-1]})" if releases else f"--range {spec}: no releases")
    lo = releases.index(first) if first else 0
    hi = releases.index(last) if last else len(releases) - 1
    if lo > hi:
        raise UserError(f"--range {spec}: {first} is newer than {last}")
    return releases[lo:hi + 1]


def bisect_versions(proto: onnx.ModelProto, feeds: dict[str, np.ndarray], target: str, releases: list[str], *,
                    options: dict[str, str] | None = None, timeout_s: float = 300.0, rtol: float = 1e-3,
                    atol: float = 1e-5, on_progress: Callable[[str], None] | None = None) -> VersionBisect:
    """Bisect ``TARGET@V != ref`` over ``releases`` (oldest first); see the module docstring.

    Args:
        proto: the model; ``feeds``: its inputs by name.
        target: a target with versioned form (``ort-cpu``), without ``@``.
        releases: the ordered releases to search.
        options: the target's ``--option`` values.
        timeout_s: limit per compile-and-run, seconds.
        rtol, atol: the verdict's tolerance.
        on_progress: called with one line per evaluation.

    Returns:
        The :class:`VersionBisect`.

    Raises:
        UserError: the reference evaluator cannot run the model.
    """
    from compstack.core.envs import find_env
    from compstack.core.errors import UserError
    from compstack.core.store import open_store
    from compstack.explain.core import Explainer
    from compstack.explain.evaluate import Evaluator
    from compstack.explain.graph import piece, reference_values
    from compstack.explain.keep import Clause
    from compstack.targets.releases import recipe

    say = on_progress or (lambda s: None)
    out = VersionBisect(target, list(releases), max_evaluations=math.ceil(math.log2(max(len(releases), 1))) + 2)
    try:
        ref = reference_values(proto, feeds)
    except Exception as exc:  # noqa: BLE001 - no oracle, nothing to judge against
        raise UserError(f"the ONNX reference evaluator cannot run this model ({type(exc).__name__})") from None
    store = open_store()
    seen: dict[int, bool | None] = {}

    with Evaluator(timeout_s) as ev:
        def evaluate(i: int) -> bool | None:
            if i in seen:
                return seen[i]
            v = releases[i]
            name = f"{target}@{v}"
            had = find_env(store, recipe(target, v), v) is not None
            ex = Explainer(proto, feeds, [Clause(name, "!=", "ref")], ev, {name: dict(options or {})}, rtol, atol,
                           ref=ref)
            chk = ex.check(piece(proto, range(len(proto.graph.node)), ref))
            res = chk.results[name]
            if not had and find_env(store, recipe(target, v), v) is not None:
                out.envs_built += 1
            if res.status == "unavailable":
                seen[i] = None
                out.tried[v] = f"skipped: {res.error[:200]}"
            else:
                seen[i] = chk.holds
                out.evaluations += 1
                out.tried[v] = "bad" if chk.holds else "good"
            say(f"{name}: {out.tried[v]} ({chk.why[:160]})")
            return seen[i]

        _search(evaluate, len(releases), out)
    out.summary = _summary(out)
    return out


def _search(evaluate: Callable[[int], bool | None], n: int, out: VersionBisect) -> None:
    """Fill ``out.answer``/``before``/``after`` by the search of the module docstring."""
    lo = next((i for i in range(n) if evaluate(i) is not None), None)
    if lo is None:
        return
    hi = next((i for i in range(n - 1, lo, -1) if evaluate(i) is not None), lo)
    first = evaluate(lo)
    if hi == lo or evaluate(hi) == first:
        out.answer = "bad-all" if first else "good-all"
        return
    while True:  # evaluate(lo) == first != evaluate(hi); find an installable release between
        inner = [i for i in range(lo + 1, hi)]
        if not inner:
            break
        mid = (lo + hi) // 2
        order = sorted(inner, key=lambda i: (abs(i - mid), i))
        got = None
        for i in order:
            got = evaluate(i)
            if got is not None:
                mid = i
                break
        if got is None:
            break  # nothing between can install: lo and hi are the closest evaluated pair
        if got == first:
            lo = mid
        else:
            hi = mid
    releases = out.releases
    out.answer, out.before, out.after = "flip", releases[lo], releases[hi]
    out.direction = "fix" if first else "regression"


def _summary(b: VersionBisect) -> str:
    rng = f"{b.releases[0]} .. {b.releases[-1]}" if b.releases else "-"
    skipped = sum(1 for s in b.tried.values() if s.startswith("skipped"))
    tail = (f" ({len(b.releases)} releases in {rng}; {b.evaluations} evaluations of at most {b.max_evaluations}, "
            f"{skipped} skipped, {b.envs_built} envs built)")
    if b.answer == "flip" and b.direction == "regression":
        return f"{b.target}: last good {b.before}, first bad {b.after}: regression since {b.after}" + tail
    if b.answer == "flip":
        return f"{b.target}: last bad {b.before}, first good {b.after}: fixed in {b.after}" + tail
    if b.answer == "bad-all":
        return f"{b.target}: bad in every release tried: present since at least {b.releases[0]}" + tail
    if b.answer == "good-all":
        return f"{b.target}: good in every release tried" + tail
    return f"{b.target}: no release in range could be provisioned here" + tail


def issue_section(b: VersionBisect) -> str:
    """The ``## Releases`` section of a bundle's ISSUE.md for ``b``."""
    lines = ["## Releases", "", b.summary, ""]
    lines += [f"- {b.target}@{v}: {s}" for v, s in b.tried.items()]
    lines += ["", f"Generated by `compstack bisect-versions . --target {b.target} --range "
              f"{b.releases[0]}..{b.releases[-1]}`, run in this folder." if b.releases else "", ""]
    return "\n".join(lines)


def write_issue(folder: Path, b: VersionBisect) -> Path:
    """Put :func:`issue_section` into ``folder/ISSUE.md`` (replacing an earlier one; the
    file is created when the bundle has none). Returns its path.

    Raises:
        OSError: the bundle folder is not writable.
    """
    from compstack.core.integrity import atomic_write

    path = folder / "ISSUE.md"
    text = path.read_text() if path.is_file() else ""
    head, sep, rest = text.partition("## Releases")
    if sep:  # drop the earlier section up to the next heading
        nxt = rest.find("\n## ")
        text = head + (rest[nxt + 1:] if nxt >= 0 else "")
    atomic_write(path, text.rstrip("\n") + ("\n\n" if text.strip() else "") + issue_section(b))
    return path
