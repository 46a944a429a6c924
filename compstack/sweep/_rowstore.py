"""A sweep's judged rows in the store (kind ``rows``): a warm sweep does not run a job whose
row an earlier sweep already judged on the same inputs.

This is Bazel's test-result cache (``--cache_test_results``) for compstack's rows: a job
whose every input is unchanged ends the same way, so its row is read back and marked, not
run again. What keys an entry (:func:`compstack.core.store.key`):

* the fingerprint of the model the stacks got and a SHA-256 of the input set the row judges
  (set 0; the extra sets latency runs on are not part of the verdict);
* the target, its options, and the versions its worker reports (the probe of ``--resume``);
  a target whose versions cannot be read is never stored;
* the reference target and its options; the tolerances, threads, ``--tuned`` and the job
  limits; this host's CPU (:func:`compstack.core.store.host_id`);
* a hash of every source file of compstack (:func:`compstack.run.oracle_cache.code_digest`):
  a checkout edited without a new version starts new entries, since the judge, the
  translations or a target's glue may have changed; and the versions of :data:`_JUDGE`
  (onnx, onnx-ir, numpy, torch, onnxruntime), which the reference and the judge run on.

Only rows that end the same way when run again are stored (the statuses ``--resume``
keeps, :data:`DETERMINISTIC`), and only when the model's own reference
judged them (not a fallback after the reference failed). A row read back says so in a note
and in ``flags["stored_row"]`` (the sweep and time that judged it); its ``compile_s`` and
peak memory are the ones measured then. Latency is never stored: with latency on, a stored
``ok`` row is timed again. ``--no-cache``, ``--no-cache-results`` (run every job) and
``--shared-store`` (a verdict another user wrote is never taken) turn it off; models with
registered custom ops, whose Python references can change without a new fingerprint, are
never stored. Entries are JSON records verified by their hash (:meth:`Store.read_record`),
never pickles.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, Callable, Mapping

from compstack.core.results import Result

#: Statuses ``--resume`` keeps and a stored row may have: the same job would end the same
#: way. ``crashed``, ``timeout`` and ``oom`` are run again.
DETERMINISTIC = ("ok", "mismatch", "unsupported", "failed", "unavailable", "reference-suspect", "undefined")

__all__ = ["DETERMINISTIC", "Reuse", "RowStore", "row_to_result"]

#: The packages the reference and the judge run on (``onnx.reference``, the eager float64
#: reference in torch, ORT as the fallback reference): their versions are in every key.
_JUDGE = ("onnx", "onnx-ir", "numpy", "torch", "onnxruntime")

#: Result fields a stored row keeps (latency is measured again; the log is the job's own).
_KEPT = tuple(f.name for f in fields(Result) if f.name not in ("latency_ms", "latency_error", "log"))

_NUM = (int, float, type(None))
#: The JSON type of each kept field, checked on read (a record's hash only says it was not
#: changed by accident: anyone who can write the store can write a matching hash).
_TYPES: dict[str, tuple[type, ...]] = {
    "target": (str,), "status": (str,), "stage": (str,), "error": (str,), "compile_s": _NUM, "outputs": (list,),
    "versions": (dict,), "flags": (dict,), "cached": (bool,), "unsupported_ops": (list,), "notes": (list,),
    "fault": (str,), "fault_reason": (str,), "peak_rss_compile_mb": _NUM, "peak_rss_run_mb": _NUM}


def _bad_row(data: Mapping[str, Any], k: str, target: str) -> str:
    """Why the record ``data`` read under key ``k`` is not the stored row of ``target``, or ``""``."""
    row = data.get("row")
    if data.get("key") != k:
        return "it holds another key's row (copied or linked from another entry)"
    if not isinstance(row, dict) or set(row) != set(_KEPT):
        return "it does not hold a row"
    bad = [f for f, types in _TYPES.items()
           if not isinstance(row[f], types) or (types == _NUM and isinstance(row[f], bool))]
    if bad or not all(isinstance(o, dict) for o in row["outputs"]) or not all(isinstance(n, str) for n in row["notes"]):
        return f"its {', '.join(bad) or 'outputs or notes'} have the wrong type"
    if row["target"] != target or row["status"] not in DETERMINISTIC:
        return f"it holds a {row['status']!r} row of {row['target']!r}"
    at = data.get("at")
    if not isinstance(at, (int, float)) or isinstance(at, bool) or not 0 < at < 1e11 \
            or not isinstance(data.get("sweep"), str):
        return "its sweep or time is not readable"
    return ""


def row_to_result(d: Mapping[str, Any]) -> Result:
    """A results-database row (``results`` table, as a dict) as the :class:`Result` that
    ``--resume`` reuses, noted as not run again."""
    lat = json.loads(d.get("latency_json") or "{}")
    return Result(target=d["target"], status=d["status"], stage=d.get("stage") or "", error=d.get("error") or "",
                  compile_s=d.get("compile_s"), latency_ms=lat if lat and "error" not in lat else None,
                  outputs=json.loads(d.get("outputs_json") or "[]"),
                  versions=json.loads(d.get("versions_json") or "{}"),
                  flags={k: v for k, v in json.loads(d.get("flags_json") or "{}").items() if k != "stored_row"},
                  cached=bool(d.get("cached")),
                  notes=[f"resumed: row {d['id']} of run {d['run_id']} (not run again)"],
                  latency_error=(lat.get("error", "") if lat else ""), fault=d.get("fault") or "",
                  fault_reason=d.get("fault_reason") or "", peak_rss_compile_mb=d.get("peak_rss_compile_mb"),
                  peak_rss_run_mb=d.get("peak_rss_run_mb"))


class RowStore:
    """The stored rows of one sweep's models.

    Args:
        cache_dir: the store root; None turns it off (``--no-cache``, ``--no-cache-results``).
        common: the parts every key of this sweep shares (reference excluded): tolerances,
            threads, limits, ``--tuned`` (JSON-able).
    """

    def __init__(self, cache_dir: str | Path | None, common: Mapping[str, Any]) -> None:
        self.store = None
        if cache_dir is not None:
            from compstack.core.store import open_store

            store = open_store(cache_dir)
            self.store = None if store.shared else store  # never a verdict another user wrote
        self.common = dict(common)
        from compstack.core.version import installed_versions

        self.judge = installed_versions(_JUDGE) if self.store is not None else {}  # once: in every key

    def key(self, fingerprint: str, digest: str, target: str, options: Mapping[str, str], versions: str,
            reference: tuple[str, Mapping[str, str]], reference_versions: str = "") -> str | None:
        """The key of one row, or None when it may not be stored (no store, no
        fingerprint, or ``versions`` unknown: ``"?"``). ``reference_versions``: the versions
        of a stack that is the reference (``--reference tvm-llvm``; ``""`` for the float64
        references, whose packages are in every key)."""
        if self.store is None or not fingerprint or not digest or versions in ("", "?") or reference_versions == "?":
            return None
        from compstack.core.store import host_id, key
        from compstack.run.oracle_cache import code_digest

        ref = [reference[0], dict(reference[1]), *([reference_versions] if reference_versions else [])]
        parts = {"fp": fingerprint, "inputs": digest, "target": target, "options": dict(options),
                 "reference": ref, "host": host_id(), **self.common}
        return key("rows", parts, {"stack": versions, "compstack-code": code_digest(), **self.judge})

    def get(self, k: str | None, target: str) -> Result | None:
        """The row of ``target`` stored under ``k``, marked as read back, or None on a miss
        (an entry that is altered, holds another key's or target's row, or fields of the
        wrong type is deleted and reported once)."""
        if k is None:
            return None
        data = self.read(k, lambda d: _bad_row(d, k, target), "stored row", "the job runs again")
        if data is None:
            return None
        result = Result(**data["row"])
        sweep, at = data["sweep"], float(data["at"])
        when = time.strftime("%Y-%m-%d %H:%M", time.localtime(at))
        result.flags = {**result.flags, "stored_row": {"sweep": sweep, "at": at}}
        note = (f"stored: numerics judged by sweep {sweep} at {when}, not run again (--no-cache-results runs it); "
                "latency, when on, is measured again")
        result.notes = [*result.notes, note]
        return result

    def read(self, k: str, bad: Callable[[dict[str, Any]], str], what: str, then: str) -> dict[str, Any] | None:
        """The ``rows`` record under ``k``, or None: no store, a miss, or a record that is
        altered or that ``bad`` finds wrong (it returns why, ``""`` for none); such a record
        is deleted and reported once: ``"{what} {k} refused: {why}; {then}"``."""
        if self.store is None:
            return None
        from compstack.core.ownership import report_once

        try:
            data, why = self.store.read_record("rows", k)
        except OSError:
            return None
        if why:
            report_once(why)
        if data is None:
            return None
        why = bad(data)
        if why:
            report_once(f"{what} {k} refused: {why}; {then}")
            self.store.evict("rows", k)
            return None
        return data

    def put(self, k: str | None, result: Result, sweep_id: str) -> None:
        """Store ``result`` (its numerics row: no latency, no log) under ``k``; a full
        disk or a read-only store only skips it."""
        if k is None or self.store is None:
            return
        row = {name: getattr(result, name) for name in _KEPT}
        row["notes"] = [n for n in result.notes if not n.startswith(("stored: ", "resumed: "))]
        try:
            self.store.write_record("rows", k, {"row": json.loads(json.dumps(row, default=str)), "key": k,
                                                "sweep": sweep_id, "at": time.time()})
        except (OSError, ValueError):
            pass


def _same_tolerances(outputs: list[Any], rtol: float | None, atol: float | None) -> bool:
    """Whether every output of a stored row was judged with the tolerances asked for now:
    the per-dtype defaults when neither ``--rtol`` nor ``--atol`` is given, else the given
    ones (an output's ``tolerance`` is ``default`` or ``user``, its ``rtol``/``atol`` the
    values used)."""
    for o in outputs:
        if not isinstance(o, dict):
            return False
        if rtol is None and atol is None:
            if o.get("tolerance", "default") != "default":
                return False
        elif o.get("tolerance") != "user" or (rtol is not None and o.get("rtol") != rtol) or (
                atol is not None and o.get("atol") != atol):
            return False
    return True


class Reuse:
    """The rows a sweep does not run again: an earlier row of its database (``--resume``)
    or a row the store holds (:class:`RowStore`).

    Args:
        db: the sweep's :class:`~compstack.core.results.ResultsDB`.
        resume: ``--resume``.
        targets: the sweep's targets (their versions are probed together, once).
        rows: the stored rows (off: a :class:`RowStore` without a store).
    """

    def __init__(self, db: Any, resume: bool, targets: list[str], rows: RowStore) -> None:
        self.db, self.resume, self.targets, self.rows = db, resume, list(targets), rows
        self._versions: dict[str, str] = {}
        self._probe: threading.Thread | None = None
        if resume or rows.store is not None:  # the probe (seconds: it imports every stack) runs beside the first import
            self._probe = threading.Thread(target=self._probe_plain, name="compstack-versions-probe", daemon=True)
            self._probe.start()

    def _probe_plain(self) -> None:
        from compstack.run.session import _ref_of
        from compstack.sweep._probe import probe_versions

        try:
            found = probe_versions({t: _ref_of(t) for t in self.targets if "@" not in t})
            self._versions.update({t: json.dumps(v) if v is not None else "?" for t, v in found.items()})
        except Exception:  # noqa: BLE001 - a target that does not load here runs (and says why)
            pass

    def versions(self, name: str) -> str:
        """The versions ``name``'s worker would report (JSON), or ``"?"``: read in a probe
        process (:func:`compstack.sweep._probe.probe_versions`, started with the sweep), never
        by importing the stacks here."""
        if self._probe is not None:
            self._probe.join()
        if name not in self._versions and "@" in name:  # a release: the versions its env reported when built
            try:
                from compstack.run.releases import env_versions

                self._versions[name] = json.dumps(env_versions(name))
            except Exception:  # noqa: BLE001 - as above
                pass
        return self._versions.setdefault(name, "?")

    def earlier(self, fingerprint: str, name: str, opts: Mapping[str, str],
                reference: str) -> tuple[Result, int] | None:
        """With ``--resume``: the newest row of this (fingerprint, target, options,
        versions, reference target) in the database that ended deterministically and was
        judged with the same tolerances (:func:`_same_tolerances`), and its id; else None."""
        if not self.resume or self.db.conn is None or not fingerprint:
            return None
        cur = self.db.conn.execute(
            "SELECT * FROM results WHERE fingerprint = ? AND target = ? AND options_json = ? "
            "AND versions_json = ? AND reference = ? ORDER BY id DESC",
            (fingerprint, name, json.dumps(dict(opts)), self.versions(name), reference))
        names = [c[0] for c in cur.description]
        for row in cur:
            d = dict(zip(names, row))
            if _same_tolerances(json.loads(d.get("outputs_json") or "[]"), self.rows.common.get("rtol"),
                                self.rows.common.get("atol")):  # the newest row judged as this sweep judges
                return (row_to_result(d), int(d["id"])) if d["status"] in DETERMINISTIC else None
        return None

    def stored(self, stack: Any, digest: str, common: Mapping[str, Any], name: str, opts: Mapping[str, str],
               reference: tuple[str, Mapping[str, str]]) -> tuple[Result | None, str | None]:
        """``(the stored row, None)`` on a hit; ``(None, key)`` on a miss, ``key`` being
        where the job's row is to be stored (None: never). ``stack``: the model's
        :class:`~compstack.run.session.StackModel`; ``digest``: SHA-256 of the input set
        the row judges (:func:`compstack.run.oracle_cache.inputs_digest` of set 0); ``common``:
        the job fields (custom-op models are never stored)."""
        if self.rows.store is None or stack is None or common.get("op_origins"):
            return None, None
        k = self.row_key(stack.fingerprint, digest, name, opts, reference)
        hit = self.rows.get(k, name)
        return (hit, None) if hit is not None else (None, k)

    def row_key(self, fingerprint: str, digest: str, name: str, opts: Mapping[str, str],
                reference: tuple[str, Mapping[str, str]]) -> str | None:
        """:meth:`RowStore.key` of target ``name``'s row, with the versions this sweep's
        workers report for it and, when a stack is the reference, for that stack (unknown:
        None, never stored: a verdict against another release of the reference is another
        verdict; the float64 references' packages are in every key)."""
        from compstack.run.oracle_cache import cacheable

        ref_versions = "" if cacheable(*reference) else self.versions(reference[0])
        return self.rows.key(fingerprint, digest, name, opts, self.versions(name), reference, ref_versions)
