"""The body of ``compstack sweep`` (the click command in :mod:`compstack.cli` stays thin)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compstack.core.errors import UserError

__all__ = ["cli_sweep"]


def cli_sweep(models: list[str], targets_spec: str, kw: dict[str, Any],
              compare_options: Callable[[list[str], dict[str, Any]], Any]) -> dict[str, Any]:
    """Run (or, with ``--last``, read back) a sweep; returns its summary.

    Raises:
        UserError: bad input (one line, exit 2): models, targets, flags, Ray missing or
            unreachable.
    """
    from compstack import targets as registry
    from compstack.core.config import settings
    from compstack.core.results import ResultsDB
    from compstack.sweep._matrix import summarize, summary_of_db

    cfg = settings(cache_dir=kw["cache_dir"], db=kw["db"])
    if kw["last"] or kw["matrix"]:
        if models:
            raise UserError("sweep --last: give no models (it shows the newest stored sweep)")
        db = ResultsDB(cfg.db, cfg.db_busy_timeout_s)
        try:
            return summary_of_db(db)
        finally:
            db.close()
    for flag in ("save_inputs", "save_outputs"):
        if kw.get(flag):
            raise UserError(f"--{flag.replace('_', '-')}: not available with sweep")
    if kw["ray_address"] and kw["executor"] != "ray":
        raise UserError("--ray-address needs --executor ray")
    from compstack.sweep._models import expand_models

    specs = expand_models(models)
    targets = registry.resolve(targets_spec)
    baseline = kw["baseline"] or next((t for t in registry.with_role("baseline") if t in targets), targets[0])
    if baseline not in targets:
        raise UserError(f"--baseline {baseline}: not one of the swept targets ({', '.join(targets)})")
    if kw["reference"] not in ("auto", "reference"):
        registry.get(kw["reference"])
    options = compare_options(targets, kw)
    executor = _executor(kw)
    from compstack.sweep._core import SweepOptions, run_sweep
    from compstack.sweep._display import SweepProgress

    try:
        with SweepProgress(enabled=not kw["as_json"]) as progress:
            result = run_sweep(SweepOptions(specs, options, baseline, kw["resume"]), cfg, executor, progress)
    finally:
        executor.close()
    return summarize(result)


def _executor(kw: dict[str, Any]) -> Any:
    if kw["executor"] == "ray":
        from compstack.sweep._ray import RayExecutor

        return RayExecutor(address=kw["ray_address"], num_cpus=kw["n_jobs"])
    from compstack.sweep._local import LocalExecutor

    return LocalExecutor(kw["n_jobs"])
