"""Which package makes a stack release, and what an env of that release holds.

``<target>@<version>`` (``ort-cpu@1.24.1``) names a target at one release of its stack;
:func:`recipe` says what to install for it (:class:`compstack.core.envs.Recipe`) and
:data:`SUPPORTED` how far back compstack's adapter of each stack was checked to work.
A target without a line here has no versioned form.

Common to every env: ``onnx==1.23.2`` (the version the parent's onnx.reference and the
canonical models are made with, checked to install beside every listed ORT release,
``/work/shared/notes/STACKS.md`` section 11), ``onnx_ir``, ``ml_dtypes`` and numpy; numpy
stays below 2 for releases built against the numpy 1 ABI (onnxruntime <= 1.18).
"""

from __future__ import annotations

from dataclasses import dataclass

from compstack.core.envs import Recipe

__all__ = ["Release", "RELEASES", "SUPPORTED", "recipe", "release_of", "version_tuple"]

_COMMON = ("onnx==1.23.2", "onnx_ir", "ml_dtypes")


@dataclass(frozen=True)
class Release:
    """How to install a release of one stack.

    Attributes:
        package: the distribution whose releases the registry lists.
        module: its import name (the version is read from ``module.__version__``).
        also: further distributions of the same release (IREE's runtime): the newest of
            the same ``MAJOR.MINOR`` not newer than the stack's release (the registry has
            ``iree-base-compiler`` 3.7.1 but no runtime 3.7.1: it gets runtime 3.7.0); a
            pre-release is pinned exactly.
        numpy1_upto: the newest release that needs ``numpy<2`` ("" when none does).
    """

    package: str
    module: str
    also: tuple[tuple[str, str], ...] = ()
    numpy1_upto: str = ""
    pins: tuple[tuple[str, str], ...] = ()

    def pin(self, version: str) -> tuple[str, ...]:
        """The extra requirement of :attr:`pins` for ``version``: the first
        ``(bound, requirement)`` whose bound ``version`` does not pass, compared on the
        bound's own parts (``0.25``: every 0.25.x; "": any release); empty when none applies."""
        for upto, req in self.pins:
            if not upto or version_tuple(version)[:len(version_tuple(upto))] <= version_tuple(upto):
                return (req,)
        return ()


#: Target name -> its release recipe.
RELEASES: dict[str, Release] = {
    "ort-cpu": Release("onnxruntime", "onnxruntime", numpy1_upto="1.18.1"),
    "iree-llvm-cpu": Release("iree-base-compiler", "iree.compiler.version",
                             also=(("iree-base-runtime", "iree.runtime.version"),)),
    # apache-tvm declares no apache-tvm-ffi pin, and the newest ffi breaks older releases:
    # 0.25.x loads only with ffi 0.1.12 (it requires >=0.1.12; 0.1.13+: undefined symbol
    # tvm::ffi::json::Stringify); 0.26+ get the parent's pin, 0.1.14.post0, under which
    # MetaSchedule's save_json works (0.1.15.post2 segfaults there). Checked here by importing each.
    "tvm-llvm": Release("apache-tvm", "tvm", pins=(("0.25", "apache-tvm-ffi==0.1.12"),
                                                   ("", "apache-tvm-ffi==0.1.14.post0"))),
    "openvino-cpu": Release("openvino", "openvino"),
}

#: Target name -> the releases compstack's adapter was checked to work with here (the
#: oldest first) and what breaks before it; shown by ``compstack versions``.
SUPPORTED: dict[str, str] = {
    "ort-cpu": "checked 1.15.0 .. 1.32.0 (every release the registry serves for Python 3.11)",
    "iree-llvm-cpu": "checked 2.9.0 .. 3.13.0 (every release the registry serves; 3.7.1 runs with runtime 3.7.0, "
                     "the registry has no runtime 3.7.1)",
    "tvm-llvm": "checked 0.25.0 .. 0.27.0.post1 (every release the registry serves; 0.25.x with apache-tvm-ffi "
                "0.1.12, the only ffi it loads with)",
    "openvino-cpu": "checked 2025.4.0 .. 2026.4.1 (the last 10 releases)",
}


def version_tuple(v: str) -> tuple[int, ...]:
    """The leading numeric parts of a version (``"1.24.1"`` -> ``(1, 24, 1)``), for pins
    like :attr:`Release.numpy1_upto`; never used to order a registry's releases."""
    out: list[int] = []
    for part in v.split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        out.append(int(digits))
        if not part.isdigit():
            break
    return tuple(out)


def release_of(target: str) -> Release | None:
    """The :class:`Release` of ``target`` (a name without a version), or None."""
    return RELEASES.get(target)


def recipe(target: str, version: str) -> Recipe:
    """The env recipe of ``target`` at ``version``.

    Raises:
        KeyError: ``target`` has no versioned form (not in :data:`RELEASES`).
    """
    rel = RELEASES[target]
    numpy = "numpy<2" if rel.numpy1_upto and version_tuple(version) <= version_tuple(rel.numpy1_upto) else "numpy"
    reqs = (f"{rel.package}=={version}", *(_companion(p, version) for p, _ in rel.also), numpy, *rel.pin(version),
            *_COMMON)
    return Recipe(stack=target, package=rel.package, module=rel.module, requirements=reqs,
                  extra_modules={p: m for p, m in rel.also})


def _companion(package: str, version: str) -> str:
    """The requirement of a companion distribution of release ``version`` (see :attr:`Release.also`)."""
    parts = version.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts):
        return f"{package}=={version}"
    return f"{package}>={parts[0]}.{parts[1]}.0,<={version}"
