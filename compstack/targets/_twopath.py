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

        return self.table().missing(cir.inline_functions(model))

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
        raise UnsupportedError(f"{self.name}: no eager run of the translated program")

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
