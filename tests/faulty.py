"""Targets that are wrong on purpose, for the explain and fuzz tests (imported by workers).

Each wraps ort-cpu and changes the model it is given before ORT sees it, the way a
miscompiling stack would:

* ``faulty-sin``: every ``Sin`` computes ``Cos`` (a wrong op: wrong alone too);
* ``faulty-fused``: a ``Relu`` whose input comes from an ``Add`` computes ``Abs`` (right
  alone, wrong in context: a bad fusion of Add+Relu);
* ``faulty-opt``: like ``faulty-sin``, but only with optimisations on (``opt_level`` not
  ``disable``): the fault is the optimiser's;
* ``faulty-xla-translation``: xla-cpu whose translated JAX program has ``Sin`` wrong:
  the fault is compstack's translation.
"""

from __future__ import annotations

import contextlib

import onnx_ir as ir

from compstack.targets.ort.target import OrtCpuTarget
from compstack.targets.xla.target import XlaCpuTarget


def _retype(model: ir.Model, rule) -> ir.Model:  # noqa: ANN001
    producers = {v.name: n for n in model.graph for v in n.outputs}
    for node in list(model.graph):
        new = rule(node, producers)
        if new:
            node.op_type = new
    return model


class WrongSinTarget(OrtCpuTarget):
    name = "faulty-sin"

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        copy = ir.from_proto(ir.to_proto(model))
        return super().lower_impl(_retype(copy, lambda n, p: "Cos" if n.op_type == "Sin" else ""))


class WrongFusionTarget(OrtCpuTarget):
    name = "faulty-fused"

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        def rule(n, producers):  # noqa: ANN001, ANN202
            src = producers.get(n.inputs[0].name) if n.inputs and n.inputs[0] is not None else None
            return "Abs" if n.op_type == "Relu" and src is not None and src.op_type == "Add" else ""

        copy = ir.from_proto(ir.to_proto(model))
        return super().lower_impl(_retype(copy, rule))


class WrongOptimizerTarget(OrtCpuTarget):
    name = "faulty-opt"

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        copy = ir.from_proto(ir.to_proto(model))
        if self.options.opt_level != "disable":
            copy = _retype(copy, lambda n, p: "Cos" if n.op_type == "Sin" else "")
        return super().lower_impl(copy)


class WrongTranslationTarget(XlaCpuTarget):
    """xla-cpu whose translated program computes ``Cos`` for ``Sin``: compstack's own
    translation is wrong (eager and compiled alike), the stack is not."""

    name = "faulty-xla-translation"

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        with _sin_is_cos():
            return super().lower_impl(model)

    def run_eager(self, model: ir.Model, feeds):  # noqa: ANN001, ANN201
        with _sin_is_cos():
            return super().run_eager(model, feeds)


@contextlib.contextmanager
def _sin_is_cos():  # noqa: ANN202
    from compstack.translate.jax import TABLE

    cos = TABLE.lookup("Cos", 22)
    entries = TABLE._ops["Sin"]
    saved = [e.fn for e in entries]
    for e in entries:
        e.fn = cos
    try:
        yield
    finally:
        for e, fn in zip(entries, saved):
            e.fn = fn


class WrongPassTarget(OrtCpuTarget):
    """ort-cpu with a made-up graph transformer ``SinFolding`` that turns Sin into Cos;
    it reports the pass among the applied ones and honours ``disabled_optimizers``."""

    name = "faulty-pass"

    def applied_passes(self, model: ir.Model) -> list[str]:
        real = super().applied_passes(model)
        return [*real, "SinFolding"] if any(n.op_type == "Sin" for n in model.graph) else real

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        copy = ir.from_proto(ir.to_proto(model))
        if self.options.opt_level != "disable" and "SinFolding" not in self.options.disabled_optimizers:
            copy = _retype(copy, lambda n, p: "Cos" if n.op_type == "Sin" else "")
        return super().lower_impl(copy)


class WrongPrecisionTarget(OrtCpuTarget):
    """ort-cpu whose Sin is wrong unless a (made-up) precision knob is set: the knob is
    ORT's ``opt_level=basic``, declared as this target's precision knob, so explain must
    say "differs because of strict-test-knob", not "bug"."""

    name = "faulty-precision"
    precision_knobs = {"strict-test-knob": {"options": {"opt_level": "basic"}}}

    def lower_impl(self, model: ir.Model):  # noqa: ANN201
        copy = ir.from_proto(ir.to_proto(model))
        if self.options.opt_level != "basic":
            copy = _retype(copy, lambda n, p: "Cos" if n.op_type == "Sin" else "")
        return super().lower_impl(copy)
