"""``compstack sweep``: models x targets through the same jobs, locally or on Ray.

* :func:`expand_models` turns the command line's model list into specs;
* :func:`run_sweep` runs them (two phases, see :mod:`compstack.sweep._core`) with an
  executor: :class:`LocalExecutor` (worker processes on this machine) or
  :class:`RayExecutor` (each job a Ray task that runs the same isolated worker;
  ``ray`` is imported only when one is made);
* :func:`summarize` / :func:`summary_of_db` give the matrix, geometric-mean speedups and
  counts; :func:`print_summary` prints them.

Every name loads on first use: a Ray worker that unpickles the task
(:func:`compstack.sweep._ray.ray_job_task`) imports only the runner, not the sweep's
driver side (the session, ONNX, the IR).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "DETERMINISTIC",
    "LocalExecutor",
    "RayExecutor",
    "Sweep",
    "SweepOptions",
    "expand_models",
    "print_summary",
    "run_sweep",
    "summarize",
    "summary_from_rows",
    "summary_of_db",
]

_WHERE = {"DETERMINISTIC": "_core", "Sweep": "_core", "SweepOptions": "_core", "run_sweep": "_core",
          "LocalExecutor": "_local", "RayExecutor": "_ray", "expand_models": "_models",
          "print_summary": "_matrix", "summarize": "_matrix", "summary_from_rows": "_matrix",
          "summary_of_db": "_matrix"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"compstack.sweep.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'compstack.sweep' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
