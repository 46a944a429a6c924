"""The tasks a job can be: one module per kind, each with ``run(job, target, outcome,
stage, avail)`` (and, where the task has a typed result, a ``Result``/``CaseResult``
dataclass whose JSON goes into ``JobOutcome.result``).

=============  ==========================================  =====================================
kind           module                                      result
=============  ==========================================  =====================================
compare        :mod:`compstack.run.tasks.compare`          ``JobOutcome`` fields + outputs .npz
dump           :mod:`compstack.run.tasks.dump`             ``JobOutcome.stages`` + files
kernels        :mod:`compstack.run.tasks.kernels`          :class:`~compstack.run.tasks.kernels.Result`
profile        :mod:`compstack.run.tasks.kernels`          :class:`~compstack.run.tasks.kernels.Result`
conformance    :mod:`compstack.run.tasks.conformance`      :class:`~compstack.run.tasks.conformance.CaseResult`
optest         :mod:`compstack.run.tasks.optest`           ``{"cells": [CaseResult...]}``
evaluate       :mod:`compstack.run.tasks.evaluate`         :class:`~compstack.run.tasks.evaluate.Result`
=============  ==========================================  =====================================

A task on the job's model sets ``MODEL_TASK = True``: the worker then loads the model and
the source first (:func:`compstack.run.jobs.load_job_model`), builds the target once with
them in its :class:`~compstack.targets.base.LowerRequest`, and calls ``run(...,
model=model)``. A task may define ``records_stages(job) -> bool`` (the request's
``record_stages``; default False).

The executors (:mod:`compstack.run.executors`) never look at the kind: a task runs the
same in-process, in a fresh process, in a pool worker or on a cluster node.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["KINDS", "task"]

#: Job kind -> task module.
KINDS: dict[str, str] = {
    "compare": "compstack.run.tasks.compare",
    "dump": "compstack.run.tasks.dump",
    "kernels": "compstack.run.tasks.kernels",
    "profile": "compstack.run.tasks.kernels",
    "conformance": "compstack.run.tasks.conformance",
    "optest": "compstack.run.tasks.optest",
    "evaluate": "compstack.run.tasks.evaluate",
}


def task(kind: str) -> ModuleType:
    """The task module of job kind ``kind``.

    Raises:
        ValueError: not a known kind (see :data:`KINDS`).
    """
    if kind not in KINDS:
        raise ValueError(f"unknown job kind '{kind}' (known: {', '.join(KINDS)})")
    return importlib.import_module(KINDS[kind])
