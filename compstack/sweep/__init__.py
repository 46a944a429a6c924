"""``compstack sweep``: models x targets through the same jobs, locally or on Ray.

* :func:`expand_models` turns the command line's model list into specs;
* :func:`run_sweep` runs them (two phases, see :mod:`compstack.sweep._core`) with an
  executor: :class:`LocalExecutor` (worker processes on this machine) or
  :class:`RayExecutor` (each job a Ray task that runs the same isolated worker;
  ``ray`` is imported only when one is made);
* :func:`summarize` / :func:`summary_of_db` give the matrix, geometric-mean speedups and
  counts; :func:`print_summary` prints them.
"""

from __future__ import annotations

from typing import Any

from compstack.sweep._cli import cli_sweep
from compstack.sweep._core import DETERMINISTIC, Sweep, SweepOptions, run_sweep
from compstack.sweep._local import LocalExecutor
from compstack.sweep._matrix import (
    print_summary,
    summarize,
    summary_from_rows,
    summary_of_db,
)
from compstack.sweep._models import expand_models

__all__ = [
    "DETERMINISTIC",
    "LocalExecutor",
    "RayExecutor",
    "Sweep",
    "SweepOptions",
    "cli_sweep",
    "expand_models",
    "print_summary",
    "run_sweep",
    "summarize",
    "summary_from_rows",
    "summary_of_db",
]


def __getattr__(name: str) -> Any:
    if name == "RayExecutor":  # lazy: compstack.sweep._ray imports ray only when one is made
        from compstack.sweep._ray import RayExecutor

        return RayExecutor
    raise AttributeError(name)
