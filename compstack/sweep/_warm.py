"""A warm sweep does not import a zoo model whose every row it would read back.

A sweep reads a judged row back from the store (:mod:`compstack.sweep._rowstore`) by the
fingerprint of the model the stacks got and the digest of its input set, so it had to
import the model first: load its export (hundreds of MB for a real-tier model, hashed on
every read) or, when ``--cache-max-size`` had pruned it, export it again. The import was
most of a warm sweep's time, and a capped store made a warm sweep of the real tier
nearly as slow as a cold one.

So a sweep that prepared a zoo model also stores a *model record* (kind ``rows``, a JSON
record verified by its hash, never a pickle): what preparing it found (the report's
``model``, ``reference`` and ``inputs``, the stack model's fingerprint, the input digest
and the reference chosen). Its key holds everything that shapes those: the zoo export's
own entry name (:func:`compstack.frontends.zoo.entry_name`: the model's name and the
versions and source files its export depends on), the seed, ``--opset``, ``--reference``,
``--val-range`` and ``--input-shape``, this host, the source of compstack and the judge's
versions. A later sweep reads the record first; when every target's row is resumed
(``--resume``) or stored under the keys it gives, the rows are written without the import.
One miss and the model is imported as before.

It applies only where nothing else needs the model's files: a zoo model of torch or JAX,
``--no-latency`` (a stored ``ok`` row is timed again otherwise), no ``--inputs``, the store on.
Records are kept by ``--cache-max-size`` as rows are (they are small).
"""

from __future__ import annotations

import json
import time
from typing import Any

from compstack.core.results import Report

__all__ = ["remember", "skip_import"]

_FIELDS = {"model": dict, "reference": dict, "inputs": dict, "stack_fp": str, "digest": str, "ref": list}


def _key(r: Any, spec: str) -> str | None:
    """The model record's key for ``spec`` in sweep ``r`` (a ``_Runner``), or None when a
    record does not apply (see the module docstring)."""
    c, rows = r.copts, r.reuse.rows
    if rows.store is None or c.latency is not None or c.inputs is not None or not spec.startswith("zoo:"):
        return None
    from compstack.core.errors import UserError
    from compstack.frontends import zoo

    try:
        entry = zoo.entry_name(spec, r.cfg.cache_dir)
    except UserError:
        return None
    if entry is None:
        return None
    from compstack.core.store import host_id, key
    from compstack.run.oracle_cache import code_digest

    parts = {"model-record": entry, "seed": c.seed, "opset": c.opset, "reference": c.reference,
             "val_ranges": {k: list(v) for k, v in sorted(c.val_ranges.items())},
             "shapes": {k: list(v) for k, v in sorted(c.shapes.items())}, "host": host_id()}
    return key("rows", parts, {"compstack-code": code_digest(), **rows.judge})


def _bad(data: dict[str, Any], k: str, spec: str) -> str:
    """Why ``data``, read under key ``k``, is not the model record of ``spec`` (``""``: it is)."""
    if data.get("key") != k:
        return "it holds another key's record (copied or linked from another entry)"
    bad = [f for f, t in _FIELDS.items() if not isinstance(data.get(f), t)]
    if bad:
        return f"its {', '.join(bad)} have the wrong type"
    ref, model = data["ref"], data["model"]
    if len(ref) != 2 or not isinstance(ref[0], str) or not ref[0] or not isinstance(ref[1], dict) \
            or not all(isinstance(v, str) for v in ref[1].values()):
        return "its reference is not a target and options"
    if model.get("name") != spec or model.get("spec") != spec:
        return f"it is the record of {model.get('name')!r}, not {spec!r}"
    if not all(isinstance(data[f], str) and data[f] for f in ("stack_fp", "digest")) \
            or not isinstance(model.get("fingerprint"), str) or not model["fingerprint"]:
        return "its fingerprints or input digest are empty"
    if not isinstance(data["reference"].get("target"), str):
        return "its reference has no target"
    return ""


def _read(r: Any, k: str, spec: str) -> dict[str, Any] | None:
    """The model record of ``spec`` under ``k``, or None: a miss, or a record that is not
    one (deleted, with one warning line, as a stored row is)."""
    return r.reuse.rows.read(k, lambda d: _bad(d, k, spec), "model record", f"{spec} is imported")


def skip_import(r: Any, spec: str, index: int) -> bool:
    """Write every row of model ``spec`` (the sweep's ``index``-th) without importing it,
    when its model record and every target's earlier or stored row are found.

    Returns:
        True when its rows are written (the model is done); False: import it as before.
    """
    k = _key(r, spec)
    data = _read(r, k, spec) if k is not None else None
    if data is None:
        return False
    ref = (data["ref"][0], dict(data["ref"][1]))
    found = []
    for name in r.copts.targets:
        opts = r.copts.target_options.get(name, {})
        earlier = r.reuse.earlier(data["model"]["fingerprint"], name, opts, ref[0])
        if earlier is not None:
            found.append((earlier[0], earlier[1]))
            continue
        row_key = r.reuse.row_key(data["stack_fp"], data["digest"], name, opts, ref)
        row = r.reuse.rows.get(row_key, name)
        if row is None:
            return False
        found.append((row, None))
    from compstack.sweep._core import _Model

    work = r.work / f"m{index}"
    work.mkdir()
    m = _Model(index, spec, Report(model=dict(data["model"]), reference={**data["reference"], "ran": False},
                                   inputs=dict(data["inputs"])), work, ref=ref)
    r.models.append(m)
    r.db.run_status(m.report, "running", command=f"sweep {r.sweep_id}")
    if r.progress is not None:
        r.progress.status(f"{spec}: every row resumed or stored; not imported")
    for row, resumed_from in found:
        if resumed_from is None:
            r.stored += 1
        else:
            r.resumed += 1
        r.record(m, row, resumed_from=resumed_from)
    return True


def remember(r: Any, m: Any) -> None:
    """Store model ``m``'s record once it is prepared (a model that did not import, has
    custom ops or no stack model gets none); a full or read-only store only skips it."""
    k = _key(r, m.spec)
    if k is None or m.stack is None or m.common.get("op_origins") or not m.digest \
            or not m.report.model.get("fingerprint"):
        return
    reference = {f: v for f, v in m.report.reference.items() if f not in ("ran", "cached")}
    try:
        doc = {"model": m.report.model, "reference": reference, "inputs": m.report.inputs,
               "stack_fp": m.stack.fingerprint, "digest": m.digest, "ref": [m.ref[0], dict(m.ref[1])]}
        r.reuse.rows.store.write_record("rows", k, {**json.loads(json.dumps(doc, default=str)), "key": k,
                                                    "at": time.time()})
    except (OSError, ValueError, TypeError):
        pass
