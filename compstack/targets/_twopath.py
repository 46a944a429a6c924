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

from dataclasses import dataclass
from typing import Any, ClassVar

import onnx_ir as ir

from compstack.errors import UnsupportedError
from compstack.target import Target, TargetOptions

__all__ = ["PATHS", "PathOptions", "TwoPathTarget"]

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
    table_module: ClassVar[str] = ""

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        #: The canonical common IR, when the job's model is another form (as written,
        #: ``--opset N``) that the translated path's converters do not all cover.
        self.translation_model: ir.Model | None = None
        #: Row flags saying the translated path ran the canonical form, and why.
        self.form_flags: dict[str, Any] = {}

    def use_canonical_if_needed(self, model: ir.Model, canonical_path: str) -> None:
        """On the translated path, translate the canonical form (``canonical_path``)
        instead of ``model`` when compstack's converters miss ops of ``model`` at its
        opset that the canonical form's opset covers; the row's flags say so
        (``model_form``, ``model_opset``, ``model_form_reason``)."""
        try:
            if self.chosen_path() != "translated":
                return
        except UnsupportedError:
            return
        from compstack import ir as cir

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
        from compstack import ir as cir

        return self.table().missing(cir.inline_functions(self.translation_model or model))

    ops_note: ClassVar[str] = "compstack's converters of the translated path (a native source needs none)"

    @classmethod
    def supported_ops(cls) -> list[str] | None:
        """The ops the translated path converts (``Op`` / ``domain::Op``)."""
        import importlib

        return importlib.import_module(cls.table_module).TABLE.ops()


def canonical_for_translation(model: ir.Model) -> ir.Model:
    """``model`` with its local functions inlined and shapes inferred at its own opset (no
    upgrade), so converters see static shapes even for models that were not
    canonicalised (conformance cases)."""
    from compstack import ir as cir

    model = cir.inline_functions(model)  # converters are per op: model-local functions are expanded first
    if all(v.shape is not None for node in model.graph for v in node.outputs if v is not None and v.name):
        return model
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
    return cir.canonicalize(cir.to_proto(model), source=model.graph.name or "<model>", opset=opset)
