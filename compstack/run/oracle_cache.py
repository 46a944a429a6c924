"""The oracle's results in the store: the reference's outputs, the float32 noise floor and
the undefined-behaviour findings of one model on one input set.

Each is a pure function of the model, its inputs and the reference's program, and each
costs a whole evaluation of the model (``onnx.reference`` in float64 or float32, or the
eager float64 run of a large model); a warm compare or sweep of the same model reads them
back instead (the ``oracle`` kind of :mod:`compstack.core.store`).

Key (:func:`compstack.core.store.key`): the fingerprint of the model the stacks got, a
SHA-256 of input set 0 (names, dtypes, shapes, bytes; the only set judged), the reference target and its
options, what the entry holds; with compstack's version and the versions of the packages
that compute it (onnx and numpy, torch for the eager reference). An entry is a folder
published once, its files checked against their manifest before every read
(:meth:`compstack.core.store.Store.lookup`); arrays are read without pickle
(:func:`compstack.core.npz.read_npz`), findings are JSON. A shared store
(``--shared-store``) is neither read nor written: a row is never judged against outputs
another user wrote.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["OracleCache", "cacheable", "code_digest", "inputs_digest"]

_ARRAYS = "arrays.npz"
_JSON = "record.json"


def inputs_digest(sets: Sequence[Mapping[str, np.ndarray]]) -> str:
    """SHA-256 (hex) over every input set's arrays: name, dtype, shape and bytes, in order.

    Args:
        sets: the input sets (set 0 first), ``{name: array}`` each.
    """
    h = hashlib.sha256()
    for i, s in enumerate(sets):
        for name in sorted(s):
            a = np.ascontiguousarray(np.asarray(s[name]))
            h.update(f"{i}|{name}|{a.dtype.str}|{a.shape}|".encode())
            h.update(a.tobytes() if a.dtype != object else json.dumps(a.tolist(), default=str).encode())
    return h.hexdigest()


#: compstack's code that computes the oracle's results: a checkout edited without a new
#: version still gets new entries (:func:`code_digest`).
_ORACLE_CODE = ("analysis/refdefects.py", "analysis/ub.py", "run/oracle.py", "run/stackref.py",
                "targets/reference", "targets/inductor", "targets/common/precision.py", "translate/fx", "ops")


@functools.lru_cache(maxsize=4)
def code_digest(parts: tuple[str, ...] = ("",)) -> str:
    """SHA-256 (16 hex digits) over the path and bytes of compstack's ``.py`` files under
    ``parts`` (files or folders relative to the package; the default ``""``: all of it), in
    order: a key that holds it changes when that code is edited, version or not."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for part in parts:
        p = root / part
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            if f.is_file():
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _versions(target: str) -> dict[str, str]:
    from compstack.core.version import installed_versions

    names = ["onnx", "numpy"] + (["torch"] if target != "reference" else [])
    return {"oracle-code": code_digest(_ORACLE_CODE), **installed_versions(names)}


def cacheable(target: str, options: Mapping[str, str]) -> bool:
    """Whether a reference's results may be stored: ``onnx.reference`` (``reference``) and
    the eager float64 program (the registry's ``large-reference``), whose code and package
    versions are in the key. A stack standing in as the float32 reference (``ort-cpu``, or
    any ``--reference TARGET``) is not: its outputs depend on its release, threads and CPU."""
    from compstack.run.stackref import is_large_reference

    return target == "reference" or is_large_reference(target, options)


class OracleCache:
    """The oracle entries of one (model, inputs, reference).

    Args:
        cache_dir: the store root; None turns the cache off (``--no-cache``): every
            method then misses and writes nothing.
        fingerprint: the fingerprint of the model the stacks got.
        digest: :func:`inputs_digest` of its input set 0 (the set judged).
        target, options: the reference target and its options; off unless :func:`cacheable`.
        outputs: the model's output names: stored reference outputs must have exactly these.
        custom_ops: the model has registered custom ops, whose Python references can change
            without a new fingerprint: off.
    """

    def __init__(self, cache_dir: str | Path | None, fingerprint: str, digest: str, target: str,
                 options: Mapping[str, str], outputs: Sequence[str] = (), custom_ops: bool = False) -> None:
        self.store = None
        self.outputs = list(outputs)
        if cache_dir is not None and fingerprint and not custom_ops and cacheable(target, options):
            from compstack.core.store import open_store

            store = open_store(cache_dir)
            # Under --shared-store another user could have written the entries: a verdict
            # is never judged against outputs this user did not compute.
            self.store = None if store.shared else store
        self.parts = {"fp": fingerprint, "inputs": digest, "target": target, "options": dict(options)}
        self.versions = _versions(target) if self.store is not None else {}  # the key's: no store, no key

    @classmethod
    def for_model(cls, cache_dir: str | Path | None, fingerprint: str, sets: Sequence[Mapping[str, np.ndarray]],
                  target: str, options: Mapping[str, str], model: Any, op_origins: Sequence[str]) -> "OracleCache":
        """The entries of ``model`` (an ``onnx_ir.Model``: its output names) on input set 0
        of ``sets``, with ``fingerprint`` the stack model's; ``op_origins``: the job's
        custom-op origins (any: off).

        Only set 0 is judged (every job's outputs and the oracle's floor and findings come
        from it; latency's further sets are only timed), so the key digests set 0 alone: a
        compare with latency on (more sets) reads the entries one with ``--no-latency`` wrote.
        """
        return cls(cache_dir, fingerprint, inputs_digest(sets[:1]), target, options,
                   [v.name or "" for v in model.graph.outputs], custom_ops=bool(op_origins))

    def _key(self, what: str) -> str:
        from compstack.core.store import key

        return key("oracle", {**self.parts, "what": what}, self.versions)

    def _folder(self, what: str) -> Path | None:
        if self.store is None:
            return None
        try:
            entry, why = self.store.lookup("oracle", self._key(what))
        except OSError:
            return None
        if why:
            from compstack.core.ownership import report_once

            report_once(why)
        return entry.folder if entry is not None else None

    def arrays(self, what: str) -> dict[str, np.ndarray] | None:
        """The arrays stored as ``what`` (``reference``, ``floor``), or None on a miss."""
        from compstack.core.errors import UserError
        from compstack.core.inputs import decode_arrays
        from compstack.core.npz import read_npz

        folder = self._folder(what)
        if folder is None:
            return None
        try:
            got = decode_arrays(read_npz(folder / _ARRAYS))
        except UserError:
            return None
        if what == "reference" and self.outputs and sorted(got) != sorted(self.outputs):
            self.drop(what, f"holds {sorted(got)[:4]}, the model's outputs are {self.outputs[:4]}")
            return None
        return got

    def drop(self, what: str, why: str) -> None:
        """An entry that passed its manifest but does not fit the model: dropped, recomputed."""
        from compstack.core.ownership import report_once

        assert self.store is not None
        line = f"oracle entry {self._key(what)} ({what}) does not fit the model: {why}; rebuilt"
        report_once(line)
        self.store.evict("oracle", self._key(what))

    def record(self, what: str) -> dict[str, Any] | None:
        """The JSON record stored as ``what`` (``ub``), or None on a miss."""
        folder = self._folder(what)
        if folder is None:
            return None
        try:
            data = json.loads((folder / _JSON).read_text())
        except (OSError, ValueError, RecursionError):
            return None
        return data if isinstance(data, dict) else None

    def put_arrays(self, what: str, arrays: Mapping[str, np.ndarray]) -> None:
        """Store ``arrays`` as ``what`` (a full disk or read-only store only skips it)."""
        from compstack.core.inputs import save_npz

        self._put(what, lambda folder: save_npz(folder / _ARRAYS, arrays))

    def keep_reference(self, outcome: Any) -> None:
        """Store the outputs of a reference job's ``outcome`` (a
        :class:`~compstack.run.jobs.JobOutcome`) when it ran fine and was not read from here
        (``extra["stored"]``)."""
        if outcome.status == "ok" and outcome.extra.get("outputs") and not outcome.extra.get("stored"):
            self.put_arrays("reference", outcome.extra["outputs"])

    def put_record(self, what: str, data: Mapping[str, Any]) -> None:
        """Store the JSON ``data`` as ``what``."""
        self._put(what, lambda folder: (folder / _JSON).write_text(json.dumps(dict(data), sort_keys=True)))

    def _put(self, what: str, write: Any) -> None:
        if self.store is None:
            return
        from compstack.core.errors import UserError

        try:
            staging = self.store.staging("oracle")
        except OSError:
            return
        try:
            write(staging)
            self.store.publish(staging, "oracle", self._key(what), meta={"what": what, **self.parts})
        except (OSError, UserError):
            pass
