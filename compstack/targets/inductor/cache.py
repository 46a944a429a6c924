"""Inductor's compiled programs in compstack's store: its FX graph cache.

``torch.compile`` keeps two on-disk caches of its own, both on by default: AOTAutograd's
(``torch._functorch.config.enable_autograd_cache``) and Inductor's FX graph cache
(``torch._inductor.config.fx_graph_cache``), keyed by torch itself (the graph, the
example inputs' shapes/dtypes/strides, the Inductor config including ``cpp.threads``
and ``freezing``, the torch version and the C++ compiler; PyTorch tutorial "Compile
Time Caching in torch.compile"). compstack's split compile (capture in ``lower``,
``compile_fx`` in ``compile``) used to bypass it on every run ("No shape env": the
compile ran outside TorchDynamo's ``TracingContext``); the capture now keeps that
context and the compile runs inside it.

The cache root (``TORCHINDUCTOR_CACHE_DIR``; torch's default is ``/tmp/torchinductor_<user>``,
found with mode 0755 on this project's machine) is ``<store root>/inductor-cache/<key>/``
(:func:`compstack.targets.common.twopath.private_cache_dir`: keyed by torch, compstack
and the host CPU; mode 0700, owner checked on every use). Under ``--no-cache`` both
caches are switched off for the compile (``force_disable_caches``).

Pickle, decided: torch's cache entries are pickles (``CompiledFxGraph``, AOTAutograd's
entries) that torch unpickles, beside the generated Python modules and ``.so`` kernels
it imports from the same folder. compstack never unpickles anything itself. This is
accepted for this one folder because (1) what can write it can already run code
through the modules and shared objects Inductor imports from it by design (any cache
of compiled code runs what is in it), so pickle adds no power an attacker would not
have; (2) the folder is private: created by compstack with mode 0700, and refused
(no cache, compile anew) when it is owned by another user, a symlink, or open to group
or others, which is stricter than torch's default folder; (3) its contents are sealed:
after each compile the worker records size and SHA-256 of every file, and before the next
compile any file that is new or changed since (written by anything but a compstack worker)
empties the folder (:func:`compstack.targets.common.twopath.seal_cache_dir`). The alternative, AOTInductor
packages, was not taken: a package build links a full C++ wrapper (tens of seconds per
model) and is not the ``torch.compile`` path the row measures.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["use_store"]


def use_store(root: Path | None) -> Path | None:
    """Point Inductor's caches (``TORCHINDUCTOR_CACHE_DIR``) at the store under ``root``
    before the first compile (and again when ``root`` changes within one process:
    Inductor's in-memory caches of the old folder are cleared,
    ``torch._inductor.utils.clear_caches``).

    Args:
        root: compstack's store root (``Target.cache_root``), or None (``--no-cache``).

    Returns:
        The folder in use, or None: no root, or the folder is not private to this user;
        then the compile runs with Inductor's caches off.
    """
    import torch

    from compstack.targets.common.twopath import private_cache_dir

    folder = private_cache_dir(root, "inductor-cache", {"torch": torch.__version__})
    if folder is not None and os.environ.get("TORCHINDUCTOR_CACHE_DIR") != str(folder):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
        from torch._inductor.utils import clear_caches

        clear_caches()
    return folder
