"""``sweep --bundle-faults DIR``: an explain bundle for every row of a sweep whose fault is the
stack's (issue #23, part 2: "for each stack fault, write an explain bundle, as fuzz does").

The rows are already in the results database when the sweep ends; each bundle is written
after it (:func:`compstack.run.faults.write_fault_bundle`, the one ``compare
--bundle-faults`` uses) and its folder goes into that row's ``flags["bundle"]``, which the
dashboard links (:mod:`compstack.report.dashboard`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compstack.core.results import Result, ResultsDB

__all__ = ["bundle_sweep_faults"]


def _slug(model: str) -> str:
    """A folder name for a model spec (``zoo:bert-base`` -> ``zoo_bert-base``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", Path(model).name if "/" in model else model).strip("_") or "model"


def bundle_sweep_faults(db_path: Path, sweep_id: str, folder: Path, explain: Callable[..., Any],
                        on_bundle: Callable[[str, str, str], None] | None = None) -> dict[str, dict[str, str]]:
    """Write an explain bundle for each ``stack`` fault of sweep ``sweep_id``.

    Args:
        db_path: the results database the sweep wrote.
        sweep_id: the sweep.
        folder: the ``--bundle-faults`` folder; a model's bundles go to
            ``folder/<model>/<target>``.
        explain: ``explain(model, target, out_dir)``, as for :func:`write_fault_bundle`.
        on_bundle: called as ``(model, target, "start")`` before each bundle and
            ``(model, target, where)`` after it (progress).

    Returns:
        ``{model: {target: bundle folder, or the one-line reason there is none}}``.

    Raises:
        UserError: the database cannot be read or written.
    """
    from compstack.run.faults import write_fault_bundle

    db = ResultsDB(db_path)
    done: dict[str, dict[str, str]] = {}
    try:
        for row in db.sweep_rows(sweep_id):
            if row.get("fault") != "stack":
                continue
            model, target = row["model_name"], row["target"]
            if on_bundle is not None:
                on_bundle(model, target, "start")
            where = write_fault_bundle(model, target, Result(target=target, status=row["status"], fault="stack"),
                                       folder / _slug(model), explain)
            done.setdefault(model, {})[target] = where
            if not where.startswith("no bundle"):
                db.set_row_flag(int(row["id"]), "bundle", where)
            if on_bundle is not None:
                on_bundle(model, target, where)
    finally:
        db.close()
    return done
