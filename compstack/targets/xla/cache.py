"""XLA's compiled programs in compstack's store: JAX's persistent compilation cache.

JAX keys each entry itself (a hash of the StableHLO module, the compile options
including ``compiler_options`` and ``XLA_FLAGS``, the backend and jax/jaxlib versions;
JAX docs, "Persistent compilation cache") and stores XLA's serialized executable
(``backend.serialize_executable``; no pickle). compstack points it at
``<store root>/jax-cache/<key>/`` (:func:`compstack.targets.common.twopath.private_cache_dir`:
keyed by jax, jaxlib, compstack and the host CPU, private to the user), with both
thresholds at zero so every compile is written, whatever its time or size. Under
``--no-cache`` (no store root) the cache is switched off: neither read nor written.

What is verified: the folder is ours (owner, mode 0700). JAX's entries are not
hash-checked by compstack, and compstack never reads them: JAX does, and its docs say
the cache is trusted (whoever can write to it can run code in the process), which is
why the folder must be private.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

__all__ = ["cache_hits", "use_store"]

#: The folder this process's JAX cache was last pointed at by :func:`use_store` (None: off).
_current: list[Path | None] = []


def use_store(root: Path | None) -> Path | None:
    """Point JAX's persistent compilation cache at the store under ``root`` (before the
    first compile; again whenever ``root`` changes within one process, e.g. in tests).

    Args:
        root: compstack's store root (``Target.cache_root``), or None to switch the
            cache off (``--no-cache``).

    Returns:
        The cache folder in use, or None when the cache is off (no root, or the folder
        is not private to this user).
    """
    import jax
    from jax._src import compilation_cache

    from compstack.targets.common.twopath import private_cache_dir

    versions = {"jax": jax.__version__, "jaxlib": importlib.metadata.version("jaxlib")}
    folder = private_cache_dir(root, "jax-cache", versions)
    if _current and _current[0] == folder:
        return folder
    jax.config.update("jax_enable_compilation_cache", folder is not None)
    jax.config.update("jax_compilation_cache_dir", str(folder) if folder is not None else None)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)  # -1: no size floor
    compilation_cache.reset_cache()  # JAX opens its cache once per process; reopen at the new folder
    _current[:] = [folder]
    return folder


class cache_hits:  # noqa: N801 - used like a function: ``with cache_hits() as hits``
    """Count JAX's persistent-cache hits inside a ``with`` block (JAX's own monitoring
    event ``/jax/compilation_cache/cache_hits``); ``hits[0]`` after the block."""

    def __init__(self) -> None:
        self.hits = [0]

    def _listen(self, event: str, **_: Any) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.hits[0] += 1

    def __enter__(self) -> list[int]:
        from jax import monitoring

        monitoring.register_event_listener(self._listen)
        return self.hits

    def __exit__(self, *exc: Any) -> None:
        from jax._src import monitoring

        try:
            monitoring.unregister_event_listener(self._listen)
        except (AssertionError, ValueError):  # already gone
            pass
