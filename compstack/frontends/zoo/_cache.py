"""On-disk cache of exported zoo models.

One folder per model and toolchain: ``<root>/zoo/<name>-<key>/`` holding
``model.onnx`` (the canonical common IR), ``inputs.npz`` (example inputs by ONNX input
name) and ``meta.json`` (val ranges, fingerprint, versions). The key hashes
everything that shapes the exported graph: the versions of torch, transformers, onnx,
onnxscript and onnx-ir (plus per-model extras: jax and jaxlib for the JAX models),
``ZOO_VERSION``, and the source of the builder module, the frontend (from_torch or
from_jax) and :mod:`compstack.core.ir`; so an upgrade or an edit starts a new entry instead
of reusing a stale one. Entries are kind ``zoo`` of :class:`compstack.core.store.Store`: written to a
temporary folder and renamed into place, so a reader never sees half an entry;
``meta.json`` is the store's manifest whose sizes and hashes, and whose fingerprint of
the model, are checked on every read: a truncated, altered or malformed entry is rebuilt.
"""

from __future__ import annotations

import hashlib
import logging
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from compstack.core import ir as cir
from compstack.core.errors import UserError

__all__ = ["default_root", "entry_dir", "read", "versions", "write"]

_log = logging.getLogger(__name__)

#: Distributions whose versions change the exported graph of every zoo model.
BASE_DISTS = ("torch", "transformers", "onnx", "onnxscript", "onnx-ir")

_MODEL, _INPUTS, _META = "model.onnx", "inputs.npz", "meta.json"


def default_root() -> Path:
    """The cache root of :func:`compstack.core.config.settings`: ``$COMPSTACK_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/compstack``, else ``~/.cache/compstack``."""
    from compstack.core.config import settings

    return settings().cache_dir


def versions(extra: Sequence[str] = ()) -> dict[str, str]:
    """Installed versions of :data:`BASE_DISTS` plus ``extra`` (``"none"`` when absent)."""
    from compstack.core.version import installed_versions

    return installed_versions((*BASE_DISTS, *extra), missing="none")


def entry_dir(root: Path, name: str, zoo_version: int, extra: Sequence[str] = (),
              code: Sequence[Path] = (), pinned: Mapping[str, str] | None = None) -> Path:
    """``<root>/zoo/<name>-<key>``.

    Args:
        root: the cache root.
        name: the zoo name.
        zoo_version: :data:`compstack.frontends.zoo.ZOO_VERSION`.
        extra: distributions, besides :data:`BASE_DISTS`, whose versions matter.
        code: source files whose content shapes the export (the builder, the torch
            frontend); editing one starts a new entry.
        pinned: more versions that shape the export, found elsewhere (a framework in its
            own environment: Paddle, MindSpore).

    Returns:
        The entry folder; the key is :func:`compstack.core.store.key` (12 hex digits)
        over all of the above.
    """
    digests = {}
    for path in code:
        try:
            digests[path.name] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            digests[path.name] = "unreadable"
    from compstack.core.store import Store, key

    k = key("zoo", {"name": name, "zoo": zoo_version, "code": digests}, {**versions(extra), **(pinned or {})},
            digits=12)
    return Store(root).entry("zoo", f"{name}-{k}")


def read(entry: Path, display_name: str) -> cir.SourceModel | None:
    """Load a cache entry, or ``None`` when it is missing or unreadable.

    The returned model has ``origin="zoo"`` and ``native=None``.
    """
    from compstack.core.store import Store

    found, problem = Store(entry.parent.parent).lookup("zoo", entry.name)  # verified; a bad one is deleted
    if found is None:
        if problem:
            _log.warning("zoo: %s", problem)  # "corrupt cache entry <folder> (why); rebuilt"
        return None
    meta = found.meta
    try:
        model = cir.load(entry / _MODEL, opset=1)  # as exported: a zoo:resnet50-opset18 stays at opset 18
        with np.load(entry / _INPUTS, allow_pickle=False) as npz:
            arrays = {k: npz[f"arr_{i}"] for i, k in enumerate(meta["inputs"])}
        if cir.fingerprint(model) != meta["fingerprint"]:
            raise ValueError("the model's fingerprint is not the recorded one")
        ranges = {k: (float(v[0]), float(v[1])) for k, v in meta.get("val_ranges", {}).items()}
    except Exception as exc:  # noqa: BLE001 - a damaged entry is rebuilt, never fatal
        _log.warning("ignoring damaged zoo cache entry %s: %s", entry, exc)
        return None
    order = [i.name for i in cir.graph_inputs(model)]
    if sorted(order) != sorted(arrays):
        _log.warning("ignoring zoo cache entry %s: inputs do not match the model", entry)
        return None
    return cir.SourceModel(name=display_name, model=model,
                           example_inputs={k: arrays[k] for k in order},
                           val_ranges=ranges, origin="zoo", native=None)


def write(entry: Path, source: cir.SourceModel, extra: Sequence[str] = (),
          replace: bool = False) -> bool:
    """Write ``source`` to ``entry`` atomically (temp folder + rename).

    Args:
        entry: the folder from :func:`entry_dir`.
        source: the freshly exported model.
        extra: extra distributions recorded in ``meta.json``.
        replace: remove an existing (damaged) entry first. Without it, an entry that
            appeared meanwhile (a concurrent writer) is kept and ours is dropped.

    A cache that cannot be written is logged and skipped (the model is still usable).

    Returns:
        True when this call created the entry.
    """
    from compstack.core.store import Store

    store = Store(entry.parent.parent)
    try:
        tmp = store.staging("zoo")
    except OSError as exc:
        _log.warning("cannot write zoo cache under %s: %s", entry.parent, exc)
        return False
    try:
        cir.save(source.model, tmp / _MODEL)
        # positional arrays (arr_0, arr_1...): input names could clash with savez's own
        # keyword parameters; the names are kept, in order, in meta.json.
        np.savez(tmp / _INPUTS, *source.example_inputs.values())
        meta = {
            "name": source.name,
            "inputs": list(source.example_inputs),
            "fingerprint": source.fingerprint,
            "val_ranges": {k: list(v) for k, v in source.val_ranges.items()},
            "versions": versions(extra),
        }
        if entry.exists() and not replace:  # a concurrent writer got there first
            return False
        store.publish(tmp, "zoo", entry.name, [tmp / _MODEL, tmp / _INPUTS], meta, replace=replace)
        return True
    except (OSError, UserError) as exc:  # caching is best effort
        _log.warning("cannot write zoo cache entry %s: %s", entry, exc)
        return False
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
