"""Helpers every command module shares: flag parsing into typed options, the model loader
with the process's own memory guard, writable-path checks, the exit rule of compare/run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compstack.core.errors import UserError

if TYPE_CHECKING:
    from compstack.cli.options import ModelFlags, RunFlags
    from compstack.core.ir import SourceModel
    from compstack.run.session import CompareOptions

__all__ = ["BAD", "check_writable_file", "compare_options", "exit_for", "load_source", "memory_limit",
           "parse_target_options", "probe_dir", "resolve_one", "target_options", "writable_dir"]

#: Statuses that make ``compare``/``run`` exit 1: the stack ran and was wrong, or broke.
BAD = ("mismatch", "failed", "crashed", "timeout", "oom")


def parse_target_options(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """``--option TARGET:KEY=VALUE`` items -> ``{target: {key: value}}`` (not validated).

    Raises:
        UserError: an item not of that form.
    """
    out: dict[str, dict[str, str]] = {}
    for item in items:
        target, sep, kv = item.partition(":")
        key, eq, value = kv.partition("=")
        if not sep or not eq or not key:
            raise UserError(f"--option {item}: expected TARGET:KEY=VALUE (e.g. ort-cpu:opt_level=basic)")
        out.setdefault(target, {})[key] = value
    return out


def target_options(items: Sequence[str]) -> dict[str, dict[str, str]]:
    """:func:`parse_target_options`, then validated against each target's ``Options``.

    Raises:
        UserError: bad form, unknown target, option or value.
    """
    from compstack.api import validate_target_options

    opts = parse_target_options(items)
    validate_target_options(opts)
    return opts


def memory_limit(value: int | None) -> int:
    """``--memory-limit`` in MiB; None -> 75 % of RAM."""
    from compstack.api import default_memory_mb

    return default_memory_mb() if value is None else value


def load_source(model: str, cache_dir: str | None, timeout: float = 900.0, memory_mb: int | None = None,
                partial: bool = False) -> SourceModel:
    """Import MODEL; a ``file.py:function`` runs in a worker under ``--timeout``/``--memory-limit``,
    and this process is held to ``--memory-limit`` from here on (:mod:`compstack.core.memlimit`).
    ``partial``: a JAX program without a common IR still imports (its native path runs).

    Raises:
        UserError: the cache folder cannot be written (one line; the import would have warned
            and the session refused it after); see :func:`compstack.api.load_model`.
    """
    from compstack.api import load_model
    from compstack.core.config import settings
    from compstack.core.memlimit import guard_own_memory

    cache = settings(cache_dir=cache_dir).cache_dir  # checked first: the import caches a zoo model there
    probe_dir(cache, f"cache folder {cache}: not writable; set --cache-dir or COMPSTACK_CACHE_DIR")
    guard_own_memory(memory_limit(memory_mb), f"working on {model}")
    return load_model(model, cache_dir=cache_dir, timeout_s=timeout, memory_mb=memory_limit(memory_mb),
                      partial=partial)


def probe_dir(folder: Path, message: str) -> Path:
    """Create ``folder`` and write a probe file in it; UserError ``message (why)`` if that fails."""
    from compstack.core.integrity import probe_dir as probe

    return probe(folder, message)


def check_writable_file(path: str | None, flag: str) -> None:
    """One-line UserError when the folder that will hold ``path`` cannot be written."""
    if path:
        probe_dir(Path(path).resolve().parent, f"{flag} {path}: folder not writable")


def writable_dir(path: str, command: str = "") -> Path:
    """``-o DIR`` created and probed; UserError naming ``-o`` when it cannot be written.
    With ``command``: claimed by :func:`compstack.core.outdir.claim_dir` first (an empty
    path, a file or a non-empty foreign folder is refused before any work starts)."""
    if command:
        from compstack.core.outdir import claim_dir

        claim_dir(path, command)
    return probe_dir(Path(path), f"-o {path}: output folder not writable")


def resolve_one(target: str) -> str:
    """``--target NAME``: exactly one target (UserError otherwise)."""
    from compstack.api import resolve_target

    if not target.strip(" ,"):  # the resolver's own message names --targets
        raise UserError("--target: no target given; run `compstack targets` to list them")
    return resolve_target(target)


def compare_options(targets: list[str], model: ModelFlags, run: RunFlags) -> CompareOptions:
    """The typed :class:`~compstack.run.session.CompareOptions` of compare/run/sweep flags.

    Raises:
        UserError: bad ``--option``, ``--inputs``, ``--val-range`` or ``--input-shape``.
    """
    from compstack.core.inputs import load_npz, parse_shapes, parse_val_ranges
    from compstack.core.latency import LatencyConfig
    from compstack.run.runner import Limits
    from compstack.run.session import CompareOptions

    topts = target_options(model.target_opts)
    tuned: dict[str, str] = {}
    defaults: dict[str, dict[str, str]] = {}
    budget_s = 0.0
    if run.budget is not None and not run.tuned:
        raise UserError(f"--budget {run.budget}: only with --tuned (a tuning budget)")
    if run.tuned:
        from compstack.core.duration import parse_duration
        from compstack.run.tuned import DEFAULT_BUDGET, tuned_target_options

        budget_s = parse_duration(DEFAULT_BUDGET if run.budget is None else run.budget, "--budget")
        if budget_s > 86400:
            raise UserError(f"--budget {run.budget}: at most 24h (the limit of --timeout)")
        from compstack.api import validate_target_options
        from compstack.run.tuned import default_runs

        validate_target_options(topts)  # the user's own first: their errors name their --option
        user, (topts, tuned) = topts, tuned_target_options(targets, topts, budget_s)
        validate_target_options(topts)  # the tuned options pass the checks --option values do
        defaults = default_runs(targets, user, topts)
    latency = None if run.no_latency else LatencyConfig(
        warmup=run.warmup, min_runs=run.min_runs, min_time_s=run.min_time, budget_s=run.latency_budget)
    return CompareOptions(
        targets=targets, seed=model.seed,
        inputs=load_npz(model.inputs_file) if model.inputs_file else None,
        val_ranges=parse_val_ranges(model.val_ranges), shapes=parse_shapes(model.input_shapes),
        rtol=run.rtol, atol=run.atol, latency=latency,
        limits=Limits(timeout_s=run.timeout, memory_mb=memory_limit(run.memory_limit)),
        cache=not run.no_cache, reference=run.reference, target_options=topts, opset=model.opset,
        threads=run.threads, tuned=tuned, tuned_budget_s=budget_s, defaults=defaults,
    )


def exit_for(report: Any) -> None:
    """Exit 1 when a row is mismatch/failed/crashed/timeout/oom, or its stack failed
    while timing (``latency_error``; unavailable and unsupported are facts about the
    machine or the stack, not failures)."""
    if any(r.status in BAD or r.latency_error for r in report.results):
        sys.exit(1)


def fault_explainer(model_flags: ModelFlags, run_flags: RunFlags) -> Any:
    """``explain(model, target, out_dir)`` for ``--bundle-faults`` (compare and sweep): an
    explain bundle of one stack fault within 120 s, with the run's ``--timeout`` and cache;
    each explain step is a line on stderr (an explain can take minutes)."""
    from compstack import api
    from compstack.core.sanitize import terminal

    def say(line: str) -> None:
        print(f"  explain: {terminal(line)}", file=sys.stderr, flush=True)  # a model's names: inert

    def explain(spec: str, target: str, out: Path) -> Any:
        return api.explain_model(spec, target, out_dir=out, time_budget_s=120.0, timeout_s=run_flags.timeout,
                                 cache_dir=model_flags.cache_dir, on_progress=say)

    return explain
