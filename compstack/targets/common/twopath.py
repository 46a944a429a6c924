"""What XLA and Inductor share: two paths to the stack (DESIGN.md, "The common IR").

* ``native``: the source was written in the stack's framework (JAX for XLA, PyTorch
  for Inductor); the original program is compiled.
* ``translated``: anything else; the common IR is translated op by op
  (:mod:`compstack.translate`) and that program is compiled.

The ``path`` option picks: ``auto`` (native when the source allows it), ``native``
(an ``unsupported`` row when it does not) or ``translated``. The chosen path is in the
target's ``flags`` (so every result row says which one ran).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Mapping

import numpy as np
import onnx_ir as ir

from compstack.core.errors import UnsupportedError, UserError
from compstack.targets.base import LowerRequest, Target, TargetOptions

__all__ = ["PATHS", "PathOptions", "TwoPathTarget", "canonical_for_translation", "private_cache_dir", "seal_cache_dir",
           "specialize_inputs"]

#: Values of the ``path`` option.
PATHS = ("auto", "native", "translated")


@dataclass(frozen=True)
class PathOptions(TargetOptions):
    """Options of a two-path target.

    Attributes:
        path: ``auto``, ``native`` or ``translated`` (see the module docstring).
    """

    path: str = "auto"

    def validate(self) -> str:
        if self.path not in PATHS:
            return f"path={self.path}: expected one of {', '.join(PATHS)}"
        return ""


class TwoPathTarget(Target):
    """A target with a native and a translated path.

    Subclasses set ``native_framework`` and ``table_module`` (the module holding the
    converters' ``TABLE``).
    """

    cacheable: ClassVar[bool] = False
    reads_canonical: ClassVar[bool] = True
    table_module: ClassVar[str] = ""

    def __init__(self, options: Any = None, request: LowerRequest | None = None) -> None:
        super().__init__(options, request)
        #: The canonical common IR, when the job's model is another form (as written,
        #: ``--opset N``) that the translated path's converters do not all cover.
        self.translation_model: ir.Model | None = None
        #: Row flags saying the translated path ran the canonical form, and why.
        self.form_flags: dict[str, Any] = {}
        if self.request.canonical_path and self.request.model is not None:
            self._use_canonical_if_needed(self.request.model, self.request.canonical_path)

    def _use_canonical_if_needed(self, model: ir.Model, canonical_path: str) -> None:
        """On the translated path, translate the canonical form (``canonical_path``)
        instead of ``model`` when compstack's converters miss ops of ``model`` at its
        opset that the canonical form's opset covers; the row's flags say so
        (``model_form``, ``model_opset``, ``model_form_reason``)."""
        try:
            if self.chosen_path() != "translated":
                return
        except UnsupportedError:
            return
        from compstack.core import ir as cir

        missing = self.table().missing(cir.inline_functions(model))
        if not missing:
            return
        canonical = ir.load(canonical_path)
        if self.table().missing(cir.inline_functions(canonical)):
            return  # neither form converts: the row lists the as-written model's missing ops
        opset = canonical.opset_imports.get("", canonical.opset_imports.get("ai.onnx", 0))
        self.translation_model = canonical
        self.form_flags = {"model_form": "canonical", "model_opset": opset,
                           "model_form_reason": f"compstack's converters need the canonical form (opset {opset}): "
                                                f"none for {', '.join(missing)} in the model as given"}

    def chosen_path(self) -> str:
        """``native`` or ``translated`` for this job.

        Raises:
            UnsupportedError: ``path=native`` without a source in ``native_framework``.
        """
        has_native = self.native is not None and self.native.framework == self.native_framework
        want = getattr(self.options, "path", "auto")
        if want == "native" and not has_native:
            raise UnsupportedError(
                f"{self.name}: path=native needs a {self.native_framework} source "
                f"(this model has none); use path=auto or path=translated")
        return "native" if has_native and want != "translated" else "translated"

    def flags(self) -> dict[str, Any]:
        flags = dict(self.options.to_dict())
        try:
            flags["path"] = self.chosen_path()
        except UnsupportedError:
            flags["path"] = "native (unavailable)"
        flags.update(self.form_flags)
        return flags

    def table(self) -> Any:
        """The converter table of the translated path."""
        import importlib

        return importlib.import_module(self.table_module).TABLE

    def unsupported_ops(self, model: ir.Model) -> list[str]:
        """On the translated path: every op without a converter (all at once)."""
        if self.chosen_path() == "native":
            return []
        from compstack.core import ir as cir

        return self.table().missing(cir.inline_functions(self.translation_model or model))

    def run_eager(self, model: ir.Model, feeds: dict[str, Any]) -> dict[str, Any]:
        """Run compstack's translated program of ``model`` without the compiler (JAX with
        ``jax.disable_jit()``, the FX ``GraphModule`` called directly): what the program
        means before the stack optimises it. ``compstack explain`` uses it to tell a
        translation bug (ours) from a compiler bug (the stack's).

        Args:
            model: the common IR.
            feeds: graph input name -> numpy array.

        Returns:
            Output name -> numpy array.

        Raises:
            UnsupportedError: the stack has no eager runner, or an op has no converter.
        """
        if self.table_module != "compstack.translate.fx":
            raise UnsupportedError(f"{self.name}: no eager run of the translated program")
        import numpy as np
        import torch

        from compstack.translate.fx import to_fx

        model = canonical_for_translation(model, feeds)
        names = [v.name or "" for v in model.graph.inputs if not v.is_initializer()]
        gm = to_fx(model)  # the FX GraphModule Inductor and TorchScript compile, called directly
        with torch.no_grad():
            got = gm(*[torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in names])
        return {v.name or "": t.numpy() if hasattr(t, "numpy") else np.asarray(t)
                for v, t in zip(model.graph.outputs, got)}

    ops_note: ClassVar[str] = "compstack's converters of the translated path (a native source needs none)"

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        """The ops the translated path converts (``Op`` / ``domain::Op``)."""
        import importlib

        return importlib.import_module(cls.table_module).TABLE.ops()


def specialize_inputs(model: ir.Model, given: Mapping[str, np.ndarray] | None) -> ir.Model:
    """``model`` with every symbolic or unknown dim of a graph input fixed to the shape of
    the job's array for it (``--inputs``, ``--input-shape``, a source's example inputs) and
    shapes re-inferred through the graph, at the model's own opset. The rule both
    translated paths follow: their converters, like the compile, see the shapes the job
    runs with. Returns ``model`` itself when nothing changes; never modifies it.

    Raises:
        UserError: an array whose rank or static dims contradict the model's input.
    """
    if not given:
        return model
    from compstack.core import ir as cir

    fixed: dict[str, tuple[int, ...]] = {}
    for v in model.graph.inputs:
        if v.is_initializer() or v.name is None or v.name not in given:
            continue
        shape = tuple(np.shape(given[v.name]))  # type: ignore[arg-type]  # numpy stubs: _SupportsShape[Never]
        if v.shape is not None:
            dims = list(v.shape)
            if len(dims) != len(shape) or any(isinstance(d, int) and d != s for d, s in zip(dims, shape)):
                raise UserError(f"input '{v.name}': array of shape {list(shape)} does not fit the model's "
                                f"{[d if isinstance(d, int) else str(d) for d in dims]}")
            if all(isinstance(d, int) for d in dims):
                continue
        fixed[v.name] = shape
    if not fixed:
        return model
    proto = cir.to_proto(model)
    for vi in proto.graph.input:
        if vi.name in fixed:
            tshape = vi.type.tensor_type.shape
            tshape.ClearField("dim")
            for d in fixed[vi.name]:
                tshape.dim.add().dim_value = d
    del proto.graph.value_info[:]  # inferred again from the fixed inputs
    for vo in proto.graph.output:
        for d in vo.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                d.Clear()
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    return cir.canonicalize(proto, source=model.graph.name or "<model>", opset=opset)


def canonical_for_translation(model: ir.Model, given: Mapping[str, np.ndarray] | None = None) -> ir.Model:
    """``model`` with its local functions inlined, its input dims fixed to the job's arrays
    (:func:`specialize_inputs`) and shapes inferred at its own opset (no upgrade), so
    converters see static shapes even for models that were not canonicalised
    (conformance cases) or that have symbolic dims."""
    from compstack.core import ir as cir

    model = cir.inline_functions(model)  # converters are per op: model-local functions are expanded first
    model = specialize_inputs(model, given)
    if all(v.shape is not None for node in model.graph for v in node.outputs if v is not None and v.name):
        return model
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    return cir.canonicalize(cir.to_proto(model), source=model.graph.name or "<model>", opset=opset)


def private_cache_dir(root: Path | None, name: str, versions: Mapping[str, str]) -> Path | None:
    """The folder a stack's own compilation cache lives in: ``<root>/<name>/<key>/``,
    ``key`` = 16 hex digits of SHA-256 over the stack's versions, compstack's version and
    the host CPU (:func:`compstack.core.store.host_id`), so a new JAX/torch, a new
    compstack or another kind of CPU starts an empty folder.

    What is verified: the folder is ours (created by this user with mode 0700, and
    ``<root>/<name>`` too; owned by this user, no symlink, no access for group or others;
    a folder that fails is not used: None, the stack compiles without a persistent cache),
    and its contents are what compstack's own workers left there: after each compile the
    worker seals the folder (:func:`seal_cache_dir`: size and SHA-256 of every file, in
    ``<key>.seal.json`` beside it), and here, before the stack may read an entry, every file
    is checked against the seal; a file that is new, changed or unsealed empties the
    folder (the stack then compiles anew). The entries' format is the stack's (JAX's docs
    call its cache "trusted"; Inductor's holds pickles, ``.py`` and ``.so`` it loads):
    compstack never reads them itself, it only makes sure nobody else wrote them.

    Args:
        root: compstack's store root (``Target.cache_root``), or None under ``--no-cache``.
        name: the subfolder, e.g. ``jax-cache`` or ``inductor-cache``.
        versions: the stack's package versions (``Availability.versions``).

    Returns:
        The folder, or None (no root, not creatable, or not private to this user).
    """
    if root is None:
        return None
    import hashlib
    import json

    from compstack.core.store import host_id
    from compstack.core.version import __version__

    blob = json.dumps({"versions": dict(versions), "compstack": __version__, "host": host_id()}, sort_keys=True)
    folder = Path(root) / name / hashlib.sha256(blob.encode()).hexdigest()[:16]
    try:
        for d in (folder.parent, folder):
            d.mkdir(mode=0o700, parents=True, exist_ok=True)
            st = d.stat()
            if (hasattr(os, "getuid") and st.st_uid != os.getuid()) or st.st_mode & 0o077 or d.is_symlink():
                return None
    except OSError:
        return None
    if not _matches_seal(folder):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
        _seal_path(folder).unlink(missing_ok=True)
        try:
            folder.mkdir(mode=0o700, exist_ok=True)
        except OSError:
            return None
    return folder


def _seal_path(folder: Path) -> Path:
    return folder.parent / f"{folder.name}.seal.json"


def _tree(folder: Path) -> dict[str, tuple[int, str]]:
    from compstack.core.integrity import sha256_file

    out = {}
    for f in sorted(folder.rglob("*")):
        if f.is_symlink():
            out[str(f.relative_to(folder))] = (-1, "symlink")
        elif f.is_file():
            out[str(f.relative_to(folder))] = (f.stat().st_size, sha256_file(f))
    return out


def _matches_seal(folder: Path) -> bool:
    """Whether every file under ``folder`` is in its seal with the same size and hash
    (an empty folder needs no seal; files the seal lists but the folder lacks are fine:
    the stack recompiles what is missing)."""
    import json

    try:
        files = _tree(folder)
        if not files:
            return True
        seal = json.loads(_seal_path(folder).read_text(encoding="utf-8"))["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return all(isinstance(seal.get(k), list) and tuple(seal[k]) == v for k, v in files.items())


def seal_cache_dir(folder: Path | None) -> None:
    """Record size and SHA-256 of every file under ``folder`` (a stack's cache folder from
    :func:`private_cache_dir`), atomically, after a compile has written its entries.
    A folder another process changes while it is hashed just fails the next check and is
    emptied: a lost cache, never an unverified read. Errors are ignored (the cache is an
    optimisation)."""
    if folder is None:
        return
    import json

    from compstack.core.integrity import atomic_write

    try:
        files = _tree(folder)
        atomic_write(_seal_path(folder), json.dumps({"files": {k: list(v) for k, v in files.items()}}))
    except OSError:
        pass
