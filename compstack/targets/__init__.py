"""The target registry: a lazy table of names, loaded on first use.

Each entry maps a target name to ``"module:Class"``; nothing is imported until a
target is used (pattern of ``torch/_dynamo/backends/registry.py``). A target whose
stack is missing still lists, with the reason from its ``availability()``.

Third-party targets register through the ``compstack.targets`` entry-point group.
Adding a stack is one folder here plus one line in ``_TABLE`` (docs/adding-a-stack.md).

This table is the one place target names live: other modules ask it for a target by
role (:func:`with_role`, :func:`role_target`) or ask a target's class for a capability
(:func:`capability`, :func:`custom_op_support`), never list names themselves.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any, Collection, Mapping

from compstack.core.errors import UserError
from compstack.targets.base import Target

__all__ = ["TargetEntry", "names", "entries", "get", "resolve", "register", "ALIASES", "ROLES", "with_role",
           "role_target", "capability", "custom_op_support", "unknown_target", "ref", "split"]

#: The roles a row can give its target for other commands (role -> what it means).
ROLES: dict[str, str] = {
    "reference": "the stack reference of a model with a common IR: `--reference auto` on a model too large "
                 "for the float64 NumPy reference, and the fallback when the chosen reference fails",
    "native-jax-reference": "the reference of a JAX source without a common IR (its native program in float64)",
    "baseline": "the target `compstack sweep` takes latency ratios against, when it is swept",
    "ops-test": "a default target of `compstack ops test`",
    "large-reference": "the float64 reference of a model too large for the NumPy reference: compstack's "
                       "translated program run eagerly in float64 (compstack.run.stackref)",
    "large-floor": "the float32 noise floor of a large-reference: the same program run eagerly in float32",
    "second-oracle": "an independent float64 evaluation that cross-checks the reference where a stack disagrees "
                     "(tried in table order; compstack.run.oracle)",
}


@dataclass(frozen=True)
class TargetEntry:
    """One row of the registry.

    Attributes:
        name: target name (``STACK-DEVICE``).
        ref: ``"module:Class"`` of its :class:`~compstack.targets.base.Target` subclass.
        device: device kind (``cpu``, ``cuda``, ``vulkan``).
        default: part of ``compare``'s default set when available.
        roles: role (a key of :data:`ROLES`) -> the target options (``--option`` strings)
            it takes in that role.
        caps: capabilities declared on the row instead of the class: class attribute name
            -> value, read by :func:`capability` before the class's own.
    """

    name: str
    ref: str
    device: str
    default: bool = True
    roles: Mapping[str, Mapping[str, str]] = field(default_factory=dict, compare=False)
    caps: Mapping[str, Any] = field(default_factory=dict, compare=False)


_NO_CPU = "no: the op declares no CPU kernel"

# xla-* and inductor-* declare their custom-op lines on the row (``caps``) until their
# classes carry the ClassVars the other stacks' classes carry.
_TABLE: tuple[TargetEntry, ...] = (
    TargetEntry("reference", "compstack.targets.reference.target:ReferenceTarget", "cpu", default=False),
    TargetEntry("ort-cpu", "compstack.targets.ort.target:OrtCpuTarget", "cpu",
                roles={"reference": {}, "baseline": {}, "ops-test": {}, "second-oracle": {"opt_level": "disable"}}),
    TargetEntry("ort-cuda", "compstack.targets.ort.target:OrtCudaTarget", "cuda"),
    TargetEntry("tvm-llvm", "compstack.targets.relax.target:TvmLlvmTarget", "cpu", roles={"ops-test": {}}),
    TargetEntry("iree-llvm-cpu", "compstack.targets.iree.target:IreeLlvmCpuTarget", "cpu", roles={"ops-test": {}}),
    TargetEntry("iree-vulkan", "compstack.targets.iree.gpu:IreeVulkanTarget", "vulkan"),
    TargetEntry("iree-cuda", "compstack.targets.iree.gpu:IreeCudaTarget", "cuda"),
    TargetEntry("iree-rocm", "compstack.targets.iree.gpu:IreeRocmTarget", "rocm"),
    TargetEntry("tvm-cuda", "compstack.targets.relax.gpu:TvmCudaTarget", "cuda"),
    TargetEntry("tvm-vulkan", "compstack.targets.relax.gpu:TvmVulkanTarget", "vulkan"),
    TargetEntry("tensorrt", "compstack.targets.trt.target:TensorRTTarget", "cuda"),
    TargetEntry("cann", "compstack.targets.cann.target:CannTarget", "ascend", default=False),
    TargetEntry("gcu", "compstack.targets.gcu.target:GcuTarget", "gcu", default=False),
    TargetEntry("xla-cpu", "compstack.targets.xla.target:XlaCpuTarget", "cpu",
                roles={"ops-test": {}, "native-jax-reference": {"x64": "true", "path": "native"}},
                caps={"custom_op_support": {"cpu": "yes: XLA FFI handler (jax.ffi custom call)", "": _NO_CPU},
                      "custom_op_needs": {"jaxlib": "no: jaxlib's FFI headers are needed (pip install jax)"}}),
    TargetEntry("xla-cuda", "compstack.targets.xla.target:XlaCudaTarget", "cuda",
                caps={"custom_op_support": {"": "no: the FFI handlers are registered for the CPU platform only"}}),
    TargetEntry("inductor-cpu", "compstack.targets.inductor.target:InductorCpuTarget", "cpu",
                roles={"ops-test": {}, "second-oracle": {"backend": "aot_eager", "path": "translated"},
                       "large-reference": {"backend": "aot_eager", "path": "translated", "precision": "float64"},
                       "large-floor": {"backend": "aot_eager", "path": "translated"}},
                caps={"custom_op_support": {"cpu": "yes: torch.library custom op, an extern kernel for Inductor",
                                            "": _NO_CPU}}),
    TargetEntry("openvino-cpu", "compstack.targets.openvino.target:OpenVinoCpuTarget", "cpu"),
    TargetEntry("inductor-cuda", "compstack.targets.inductor.target:InductorCudaTarget", "cuda",
                caps={"custom_op_support": {"cuda": "yes (needs an NVIDIA GPU): torch.library CUDA kernel",
                                            "": "no: the op declares no CUDA kernel"}}),
    TargetEntry("torchscript-cpu", "compstack.targets.torchscript.target:TorchScriptCpuTarget", "cpu"),
    TargetEntry("tf", "compstack.targets.framework.target:TfTarget", "cpu", default=False),
    TargetEntry("paddle", "compstack.targets.framework.target:PaddleTarget", "cpu", default=False),
    TargetEntry("mindspore", "compstack.targets.framework.target:MindSporeTarget", "cpu", default=False),
)

#: Short names for a device: an alias expands to every registered target of it.
ALIASES: dict[str, str] = {"cpu": "device:cpu", "cuda": "device:cuda", "vulkan": "iree-vulkan",
                           "rocm": "iree-rocm"}


_EXTRA: list[TargetEntry] = []


def register(name: str, ref: str, device: str = "cpu", default: bool = False) -> None:
    """Register a target at run time (``ref`` = ``"module:Class"``, importable by workers).

    Raises:
        UserError: the name is taken, or ``ref`` is not ``module:Class`` (dotted names).
    """
    if name in names():
        raise UserError(f"target '{name}' is already registered")
    module, sep, cls = ref.partition(":")
    if not (sep and all(p.isidentifier() for p in module.split(".")) and cls.isidentifier()):
        raise UserError(f"target '{name}': reference '{ref}' is not 'module:Class'")
    _EXTRA.append(TargetEntry(name, ref, device, default))


def entries() -> list[TargetEntry]:
    """Built-in entries, run-time registrations, and the ``compstack.targets`` entry-point group."""
    rows = list(_TABLE) + _EXTRA
    known = {e.name for e in rows}
    for ep in entry_points(group="compstack.targets"):
        if ep.name not in known:
            rows.append(TargetEntry(ep.name, ep.value, "cpu"))
    return rows


def names() -> list[str]:
    """All registered target names, in table order."""
    return [e.name for e in entries()]


def split(name: str) -> tuple[str, str]:
    """``"ort-cpu@1.24.1"`` -> ``("ort-cpu", "1.24.1")``; a plain name -> ``(name, "")``.

    A versioned target runs its worker in an env of that release
    (:mod:`compstack.targets.releases`, :mod:`compstack.core.envs`).

    Raises:
        UserError: a malformed ``@version``, or a stack without versioned form.
    """
    from compstack.core.envs import split_spec

    try:
        base, version = split_spec(name)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    if version:
        from compstack.targets.releases import RELEASES

        if base not in RELEASES:
            known = ", ".join(RELEASES)
            raise UserError(f"target '{name}': {base} has no versioned form (versioned targets: {known})")
    return base, version


def ref(name: str) -> str:
    """The ``module:Class`` of target ``name`` (versioned or not).

    Raises:
        UserError: unknown name.
    """
    return _entry(name).ref


def get(name: str) -> type[Target]:
    """The :class:`Target` class registered as ``name``, imported now (``NAME@VERSION``:
    the class of ``NAME``; its stack runs in the release's env, never in this process).

    Raises:
        UserError: unknown name (pointing to ``compstack targets``), or a registered
            reference whose module does not import or has no such class.
    """
    name = split(name)[0] if "@" in name else name
    for e in entries():
        if e.name == name:
            module, _, cls = e.ref.partition(":")
            try:
                return getattr(importlib.import_module(module), cls)
            except (ImportError, AttributeError) as exc:
                raise UserError(f"target '{name}': cannot load '{e.ref}' ({type(exc).__name__}: {exc})") from None
    raise UserError(unknown_target(name))


def unknown_target(name: str) -> str:
    """The one-line message for an unknown target ``name``: up to three suggestions (the
    targets of a stack named without its device, ``tvm`` -> ``tvm-llvm``, then
    :func:`difflib.get_close_matches` over the names and aliases, as git and click do)."""
    import difflib

    known = [*names(), *ALIASES, "all"]
    low = name.lower()  # names are lower case: ORT-CPU -> ort-cpu
    close = [n for n in known if n == low or n.startswith(f"{low}-")]
    close += [n for n in difflib.get_close_matches(low, known, n=3, cutoff=0.6) if n not in close]
    hint = f"; did you mean {', '.join(close[:3])}?" if close else ""
    return f"unknown target '{name}'{hint} (run `compstack targets` to list them)"


def resolve(spec: str) -> list[str]:
    """Expand a comma-separated target list with aliases (``cpu``, ``all``).

    ``all`` and ``cpu`` expand to every default target of that device (availability
    is checked later, so unavailable ones show as ``unavailable`` rows).

    Raises:
        UserError: an unknown name, naming it and pointing to ``compstack targets``.
    """
    out: list[str] = []
    known = {e.name: e for e in entries()}
    for raw in spec.split(","):
        name = raw.strip()
        if not name:
            continue
        if name == "all":
            expanded = [e.name for e in known.values() if e.default]
        elif name in ALIASES and ALIASES[name].startswith("device:"):
            dev = ALIASES[name].split(":", 1)[1]
            expanded = [e.name for e in known.values() if e.default and e.device == dev]
        elif name in ALIASES:
            expanded = [ALIASES[name]]
        elif name in known:
            expanded = [name]
        elif "@" in name and name.partition("@")[0] in known:
            expanded = [name]
            split(name)  # UserError: a malformed version, or a stack without releases
        elif "@" in name and name.partition("@")[0] in (*ALIASES, "all"):
            raise UserError(f"{name}: '{name.partition('@')[0]}' is an alias of several targets; a release names "
                            "one stack (TARGET@VERSION, e.g. ort-cpu@1.20.0; compstack versions TARGET lists them)")
        else:
            raise UserError(unknown_target(name))
        out.extend(n for n in expanded if n not in out)
    if not out:
        raise UserError("--targets: no target given; run `compstack targets` to list them")
    return out


def _entry(name: str) -> TargetEntry:
    name = split(name)[0] if "@" in name else name
    for e in entries():
        if e.name == name:
            return e
    raise UserError(unknown_target(name))


def with_role(role: str) -> list[str]:
    """The targets whose row gives them ``role`` (a key of :data:`ROLES`), in table order.

    Raises:
        KeyError: ``role`` is not in :data:`ROLES` (a programming error).
    """
    if role not in ROLES:
        raise KeyError(f"unknown target role {role!r} (known: {', '.join(ROLES)})")
    return [e.name for e in entries() if role in e.roles]


def role_target(role: str) -> tuple[str, dict[str, str]]:
    """The first target with ``role`` and the options (``--option`` strings) it takes in it.

    Raises:
        KeyError: unknown role, or no registered target has it.
    """
    for e in entries():
        if role in e.roles:
            return e.name, dict(e.roles[role])
    if role not in ROLES:
        raise KeyError(f"unknown target role {role!r} (known: {', '.join(ROLES)})")
    raise KeyError(f"no registered target has the role {role!r}")


def capability(name: str, attr: str) -> Any:
    """A capability of target ``name``: its row's ``caps[attr]`` when the row declares
    it, else the class attribute ``attr`` of its :class:`Target` class (with the base
    class's default; imports the target's module, never its stack).

    Raises:
        UserError: unknown target name.
        AttributeError: ``attr`` is no attribute of :class:`Target`.
    """
    e = _entry(name)
    if attr in e.caps:
        return e.caps[attr]
    if not hasattr(Target, attr):
        raise AttributeError(f"Target has no capability {attr!r}")
    return getattr(get(name), attr)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def custom_op_support(kernels: Collection[str]) -> dict[str, str]:
    """Target -> how it runs a custom op with these kernel kinds (``yes: ...``) or why
    not (``no: ...``), for ``compstack ops list``; from each target's
    :attr:`~compstack.targets.base.Target.custom_op_support` and
    :attr:`~compstack.targets.base.Target.custom_op_needs` (nothing is built, no stack is
    imported; a module is looked up with :func:`importlib.util.find_spec`).

    Args:
        kernels: the op's kernel kinds (``{"cpu", "cuda"}``).

    Returns:
        Only the targets that declare a line for such an op, in table order; a target
        whose module cannot be imported is left out.
    """
    out: dict[str, str] = {}
    for e in entries():
        try:
            support: Mapping[str, str] = capability(e.name, "custom_op_support")
            needs: Mapping[str, str] = capability(e.name, "custom_op_needs")
        except Exception:  # noqa: BLE001 - a broken third-party target must not break the listing
            continue
        kind = next((k for k in support if k and k in kernels), "")
        line = support.get(kind)
        if line is None:
            continue
        if kind:
            line = next((no for module, no in needs.items() if not _installed(module)), line)
        out[e.name] = line
    return out
