"""Which reference a comparison uses, and running it (``--reference``).

``auto`` (the default): ``onnx.reference`` in float64 when the model is small enough (at
most :data:`FLOAT64_MAX_FLOPS` FLOPs and :data:`FLOAT64_MAX_PARAMS` parameters), else the
registry's ``large-reference`` (compstack's translated program run eagerly in float64,
:mod:`compstack.run.stackref`), or ``ort-cpu`` in float32 without torch. ``reference``,
``eager-float64`` or a target name choose one. A JAX source without a common IR has its
native program in float64. A reference that fails falls back to ``ort-cpu`` in float32,
and the report says so. Its outputs are read from and written to the store
(:mod:`compstack.run.oracle_cache`).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np

from compstack import targets as registry
from compstack.analysis.opstats import op_stats
from compstack.core import ir as cir
from compstack.core.errors import UserError
from compstack.core.results import Report
from compstack.run.jobs import JobOutcome
from compstack.run.oracle_cache import OracleCache
from compstack.run.stackref import LARGE_ROLE, is_large_reference

__all__ = ["EAGER_FLOAT64", "FLOAT64_MAX_FLOPS", "FLOAT64_MAX_PARAMS", "check_reference", "fall_back", "pick_reference",
           "reference_info", "run_reference"]

#: ``--reference`` for the registry's ``large-reference`` (:mod:`compstack.run.stackref`).
EAGER_FLOAT64 = "eager-float64"
#: Largest model (FLOPs of MatMul/Gemm/Conv) the float64 reference evaluator is used for.
FLOAT64_MAX_FLOPS = 20e9
#: Largest model (parameters) the float64 reference evaluator is used for.
FLOAT64_MAX_PARAMS = 200e6


#: The reference of a JAX source whose common IR could not be built: its native program
#: on XLA in float64 (``jax.enable_x64``, float inputs as float64): the registry's
#: ``native-jax-reference`` target and its options in that role.
_JAX_X64_REFERENCE = registry.role_target("native-jax-reference")


def check_reference(choice: str, cache_dir: Any = None) -> None:
    """Check ``--reference``: ``auto``, ``reference``, ``eager-float64`` or a registered target.
    A release (``TARGET@VERSION``) has its env built now in ``cache_dir`` (None: the
    configured store), as a lone versioned ``--targets`` has: one that cannot install is the
    command's error, not a reference that falls back to ``ort-cpu`` when the run starts.

    Raises:
        UserError: an unknown target, or a release that cannot be provisioned (one line naming it).
    """
    if choice not in ("auto", "reference", EAGER_FLOAT64):
        try:
            registry.get(choice)
        except UserError as exc:
            raise UserError(f"--reference {choice!r}: {exc} (or auto, reference, {EAGER_FLOAT64})") from None
        if "@" in choice:
            from compstack.run.releases import provision_single

            try:
                provision_single([choice], cache_dir)
            except UserError as exc:
                raise UserError(f"--reference {exc}") from None


def pick_reference(source: cir.SourceModel, choice: str) -> tuple[str, dict[str, str]]:
    """The reference target and its options (``--option`` strings) for ``--reference choice``
    (see the module docstring; ``auto`` reads the model's FLOPs and parameters, op_stats).

    Raises:
        UserError: a source without a common IR and a reference other than its native float64 run.
    """
    if source.import_error:
        if choice not in ("auto", "reference", _JAX_X64_REFERENCE[0]):
            raise UserError(f"--reference {choice}: {source.name} has no common IR ({source.import_error}); "
                            f"only the float64 native JAX run ({_JAX_X64_REFERENCE[0]}) can be the reference")
        return _JAX_X64_REFERENCE[0], dict(_JAX_X64_REFERENCE[1])
    if choice == "reference":
        return "reference", {"precision": "float64", "outputs": "float64"}
    if choice == EAGER_FLOAT64:
        return registry.role_target(LARGE_ROLE)
    if choice != "auto":
        return choice, {}
    stats = op_stats(source.model)
    if stats.flops <= FLOAT64_MAX_FLOPS and stats.params <= FLOAT64_MAX_PARAMS:
        return "reference", {"precision": "float64", "outputs": "float64"}
    import importlib.util

    if importlib.util.find_spec("torch") is not None:  # the float64 eager run (compstack.run.stackref)
        return registry.role_target(LARGE_ROLE)
    return registry.role_target("reference")


def reference_info(source: cir.SourceModel, name: str, opts: Mapping[str, str]) -> dict[str, Any]:
    """The report's ``reference``: the target, its precision, and for a source without a
    common IR what ran instead of the ONNX reference."""
    if source.import_error:
        return {"target": name, "precision": "float64", "program": "native JAX program, jax x64 (no ONNX reference: "
                                                                  "the common IR could not be built)"}
    if is_large_reference(name, opts):
        stats = op_stats(source.model)
        why = ("the model is too large for onnx.reference" if stats.flops > FLOAT64_MAX_FLOPS
               or stats.params > FLOAT64_MAX_PARAMS else f"--reference {EAGER_FLOAT64}")
        return {"target": name, "precision": "float64", "role": LARGE_ROLE,
                "program": f"compstack's translated program run eagerly in float64 (TorchDynamo aot_eager): {why}"}
    return {"target": name, **({"precision": opts["precision"]} if opts else {})}


def run_reference(run: Callable[..., JobOutcome], name: str, opts: Mapping[str, str], report: Report,
                   on_start: Callable[[str], None] | None,
                   cache: OracleCache | None = None) -> tuple[dict[str, np.ndarray] | None, str]:
    """The reference's outputs (from the store when ``cache`` holds them) and a note ("" or
    why the chosen reference failed); falls back to the registry's ``reference`` stand-in."""
    hit = cache.arrays("reference") if cache is not None else None
    if hit is not None:
        report.reference["cached"] = True
        return hit, ""
    if on_start:
        on_start(f"reference ({name})")
    outcome = run(name, opts, latency=False)
    if outcome.status == "ok":
        if cache is not None:
            cache.keep_reference(outcome)
        return outcome.extra["outputs"], ""
    outcome, note = fall_back(lambda n, o: run(n, o, latency=False), name, outcome, report)
    return (outcome.extra["outputs"] if outcome.status == "ok" else None), note


def reference_note(name: str, outcome: JobOutcome) -> str:
    """Why the reference ``name`` gave no outputs, as the report's ``reference.error`` and the
    rows' notes say it: ``reference NAME STATUS in STAGE: ERROR``."""
    return f"reference {name} {outcome.status} in {outcome.stage}: {outcome.error}"


def refused(note: str) -> bool:
    """Whether :func:`reference_note`'s ``note`` says the reference *failed* (raised on the
    model: it may be invalid), not that it was lost (crashed, timed out, out of memory: a large
    model says nothing then about the model's validity)."""
    return note.split(" ", 3)[2:3] == ["failed"]


def fall_back(run: Callable[[str, Mapping[str, str]], JobOutcome], name: str, outcome: JobOutcome,
              report: Report) -> tuple[JobOutcome, str]:
    """After the reference ``name`` failed with ``outcome``: the registry's ``reference``
    stand-in (ORT in float32) run by ``run(target, options)``, and the note saying why.

    Returns:
        The stand-in's outcome when it ran (``report.reference`` then names it, with
        ``fallback_from``), else ``outcome``; and the note (``reference.error``).
    """
    note = reference_note(name, outcome)
    report.reference["error"] = note
    stand_in, stand_in_opts = registry.role_target("reference")
    if name != stand_in and not report.model.get("import_error"):  # the stand-in needs the common IR
        fallback = run(stand_in, stand_in_opts)
        if fallback.status == "ok":
            report.reference.update({"target": stand_in, "fallback_from": name})
            for key in ("precision", "role", "program"):
                report.reference.pop(key, None)
            return fallback, note
    return outcome, note
