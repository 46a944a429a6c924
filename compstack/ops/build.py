"""Build the custom-op kernel library with CMake, on demand, cached by source hash.

The same top-level ``CMakeLists.txt`` a user runs by hand
(``cmake -S . -B build && cmake --build build``) is configured into
``<cache>/ops/<key>/`` where ``key`` hashes ``CMakeLists.txt``, every file under
``csrc/``, the extra sources of registered user ops, the compiler, jaxlib's version
(its FFI headers) and whether CUDA is built. A second call with the same sources
builds nothing; concurrent worker processes wait on a file lock instead of building
twice. ``cmake`` comes from the ``cmake`` wheel when installed, else from PATH.

CUDA kernels are left out of these on-demand builds unless asked for
(``cuda=True``): nothing on a CPU machine calls them, and configuring CUDA costs
seconds. The top-level CMake build builds them whenever it finds ``nvcc``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from compstack.core.errors import CompstackError, UnavailableError

__all__ = ["KernelBuildError", "KernelLibrary", "build_key", "ensure_built", "find_cmake", "source_root"]

#: Bumped when the layout of a build folder changes.
_LAYOUT = 1


class KernelBuildError(CompstackError):
    """CMake failed to configure or build the kernels.

    Attributes:
        log: the build log file (configure and build output).
    """

    def __init__(self, message: str, log: Path | None = None) -> None:
        super().__init__(message)
        self.log = log


@dataclass(frozen=True)
class KernelLibrary:
    """One built kernel library.

    Attributes:
        folder: the CMake build folder.
        cpu: ``libcompstack_kernels.so`` (the CPU kernels' C entry points).
        iree_objects: the freestanding objects linked into IREE dispatches.
        xla: ``libcompstack_xla.so`` (XLA FFI handlers), or None without jaxlib headers.
        cuda: ``libcompstack_kernels_cuda.so``, or None when CUDA was not built.
        key: the source hash naming the folder.
    """

    folder: Path
    cpu: Path
    iree_objects: tuple[Path, ...]
    xla: Path | None
    cuda: Path | None
    key: str


def source_root() -> Path:
    """The folder holding ``CMakeLists.txt`` and ``csrc/`` (the repository root).

    Raises:
        UnavailableError: compstack is installed without its kernel sources.
    """
    root = Path(__file__).resolve().parents[2]
    if not (root / "CMakeLists.txt").is_file() or not (root / "csrc").is_dir():
        raise UnavailableError(f"compstack's kernel sources (CMakeLists.txt, csrc/) are not in {root}; install "
                               "compstack from a source checkout (pip install -e .) to build custom-op kernels")
    return root


def find_cmake() -> str:
    """The ``cmake`` executable: the ``cmake`` wheel's, else the one on PATH.

    Raises:
        UnavailableError: neither exists (``pip install cmake``).
    """
    try:
        import cmake  # the PyPI wheel: python -m pip install cmake

        exe = Path(cmake.CMAKE_BIN_DIR) / "cmake"
        if exe.is_file():
            return str(exe)
    except (ImportError, AttributeError):
        pass
    found = shutil.which("cmake")
    if found is None:
        raise UnavailableError("cmake not found: pip install cmake (custom-op kernels are built with CMake)")
    return found


def _find_ninja() -> str | None:
    """``ninja`` from the ``ninja`` wheel or PATH; None: CMake's default generator."""
    try:
        import ninja  # the PyPI wheel

        exe = Path(ninja.BIN_DIR) / "ninja"
        if exe.is_file():
            return str(exe)
    except (ImportError, AttributeError):
        pass
    return shutil.which("ninja")


def _find_cxx() -> str:
    for name in (os.environ.get("CXX", ""), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return str(shutil.which(name))
    raise UnavailableError("no C++ compiler (c++, g++ or clang++) on PATH: custom-op kernels need one "
                           "(apt-get install g++)")


def _jaxlib_include() -> tuple[str, str]:
    """(jaxlib's FFI include folder, jaxlib version), found without importing jax."""
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("jaxlib")
    if spec is None or spec.origin is None:
        return "", ""
    inc = Path(spec.origin).parent / "include"
    if not (inc / "xla" / "ffi" / "api" / "ffi.h").is_file():
        return "", ""
    try:
        version = importlib.metadata.version("jaxlib")
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    return str(inc), version


def build_key(extra: Sequence[str], extra_cuda: Sequence[str], cuda: bool, cxx: str, jaxlib: str) -> str:
    """The hash naming a build folder (see the module docstring)."""
    root = source_root()
    h = hashlib.sha256(f"layout={_LAYOUT};cuda={cuda};cxx={cxx};jaxlib={jaxlib};py={sys.version_info[:2]}".encode())
    files = [root / "CMakeLists.txt", *sorted(p for p in (root / "csrc").rglob("*") if p.is_file())]
    files += [Path(p) for p in (*extra, *extra_cuda)]
    for f in files:
        h.update(str(f.relative_to(root) if f.is_relative_to(root) else f).encode())
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:16]


def _ops_cache(cache_dir: Path | None) -> Path:
    """The folder of the store's ``ops`` kind (:class:`compstack.core.store.Store`).

    A kernel library is the one store entry built in place rather than staged and
    renamed: CMake writes absolute paths into its build folder (``CMakeCache.txt``,
    ``iree_objects.txt``), so the folder cannot move after the build. The build holds
    ``<key>.lock`` and its record ``compstack-build.json`` (each product's size and
    SHA-256, written atomically last) is what publishes it; :func:`_read` verifies it.
    """
    from compstack.core.store import open_store

    return open_store(cache_dir).kind_dir("ops")


def _refused(folder: Path, cache_dir: Path | None) -> bool:
    """The store's owner and mode rule for the library's folder (:mod:`compstack.core.ownership`)."""
    from compstack.core.store import open_store

    return open_store(cache_dir).refused("ops", folder)[0]


def _lock(path: Path) -> object:
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "w")  # noqa: SIM115 - held until the build ends
    fcntl.flock(f, fcntl.LOCK_EX)
    return f


def _products(lib: KernelLibrary) -> list[Path]:
    return [lib.cpu, *lib.iree_objects, *(p for p in (lib.xla, lib.cuda) if p is not None)]


def _read(folder: Path, key: str) -> KernelLibrary | None:
    """The built library in ``folder`` when its record (``compstack-build.json``) is
    readable and every product file has the size and SHA-256 recorded at build time
    (:func:`compstack.core.integrity.check_files`); else None (rebuilt)."""
    from compstack.core.integrity import check_files

    done = folder / "compstack-build.json"
    if not done.is_file():
        return None
    try:
        meta = json.loads(done.read_text())
        lib = KernelLibrary(folder=folder, cpu=Path(meta["cpu"]), iree_objects=tuple(Path(p) for p in meta["iree"]),
                            xla=Path(meta["xla"]) if meta["xla"] else None,
                            cuda=Path(meta["cuda"]) if meta["cuda"] else None, key=key)
        if any(p.parent != folder and folder not in p.parents for p in _products(lib)):
            return None  # a record pointing outside its own build folder is not ours
        if check_files(folder, meta["files"]):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return lib


def ensure_built(
    extra_sources: Sequence[str] = (),
    extra_cuda_sources: Sequence[str] = (),
    *,
    cuda: bool = False,
    cache_dir: Path | None = None,
    timeout: float = 900.0,
) -> KernelLibrary:
    """The kernel library for these sources, building it first when needed.

    Args:
        extra_sources: C++ kernel sources of user ops, compiled in beside ``csrc/cpu``.
        extra_cuda_sources: CUDA sources of user ops.
        cuda: also build the CUDA kernels (needs ``nvcc``).
        cache_dir: compstack's cache folder (default: :func:`compstack.core.config.settings`).
        timeout: limit for configure and for build, seconds.

    Returns:
        The :class:`KernelLibrary`.

    Raises:
        UnavailableError: no ``cmake`` or no C++ compiler (names what to install).
        KernelBuildError: CMake failed; the message has the tail of the log.
    """
    cxx = _find_cxx()
    inc, jaxlib = _jaxlib_include()
    key = build_key(extra_sources, extra_cuda_sources, cuda, cxx, jaxlib)
    folder = _ops_cache(cache_dir) / key
    if _refused(folder, cache_dir):  # another user's (or --shared-store): built in a private folder
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix=f"compstack-ops-{os.getpid()}-")) / key
    lib = _read(folder, key)
    if lib is not None:
        return lib
    lock = _lock(folder.with_suffix(".lock"))
    try:
        lib = _read(folder, key)
        if lib is None:
            lib = _build(folder, key, extra_sources, extra_cuda_sources, cuda, cxx, inc, timeout)
    finally:
        lock.close()  # type: ignore[attr-defined]
    return lib


def _build(folder: Path, key: str, extra: Sequence[str], extra_cuda: Sequence[str], cuda: bool, cxx: str,
           inc: str, timeout: float) -> KernelLibrary:
    from compstack.core import tools

    cmake = find_cmake()
    root = source_root()
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "build.log"
    argv = [cmake, "-S", str(root), "-B", str(folder), "-DCMAKE_BUILD_TYPE=Release", f"-DCMAKE_CXX_COMPILER={cxx}",
            f"-DCOMPSTACK_WITH_CUDA={'ON' if cuda else 'OFF'}", f"-DCOMPSTACK_WITH_XLA={'ON' if inc else 'OFF'}",
            f"-DXLA_FFI_INCLUDE_DIR={inc}", f"-DCOMPSTACK_EXTRA_SOURCES={';'.join(extra)}",
            f"-DCOMPSTACK_EXTRA_CUDA_SOURCES={';'.join(extra_cuda)}"]
    ninja = _find_ninja()
    if ninja and not (folder / "CMakeCache.txt").exists():
        argv += ["-G", "Ninja", f"-DCMAKE_MAKE_PROGRAM={ninja}"]
    steps = [argv, [cmake, "--build", str(folder), "--parallel", str(os.cpu_count() or 1)]]
    with open(log, "wb") as out:
        for step in steps:
            out.write(("$ " + tools.format_command(step) + "\n").encode())
            out.flush()
            try:
                done = subprocess.run(step, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout,
                                      check=False)
            except subprocess.TimeoutExpired:
                raise KernelBuildError(f"building custom-op kernels took over {timeout:g} s (see {log})", log) from None
            out.write(done.stdout)
            if done.returncode != 0:
                lines = done.stdout.decode(errors="replace").strip().splitlines()
                errors = [ln for ln in lines if "error" in ln.lower() and "warning" not in ln.lower()]
                tail = "\n".join((errors or lines)[-15:])
                raise KernelBuildError(f"building custom-op kernels failed (exit {done.returncode}; log {log}):\n"
                                       f"{tail}", log)
    lib = _collect(folder, key, inc, cuda)
    from compstack.core.integrity import atomic_write, file_record

    meta = {"cpu": str(lib.cpu), "iree": [str(p) for p in lib.iree_objects], "xla": str(lib.xla or ""),
            "cuda": str(lib.cuda or ""), "cmake": cmake, "cxx": cxx,
            "files": {str(p.relative_to(folder)): file_record(p) for p in _products(lib)}}
    atomic_write(folder / "compstack-build.json", json.dumps(meta, indent=1))
    return lib


def _collect(folder: Path, key: str, inc: str, cuda: bool) -> KernelLibrary:
    def lib(name: str) -> Path:
        return folder / f"lib{name}.so"

    listing = folder / "iree_objects.txt"
    objects = tuple(Path(p) for p in listing.read_text().split() if p) if listing.is_file() else ()
    return KernelLibrary(folder=folder, cpu=lib("compstack_kernels"), iree_objects=objects,
                         xla=lib("compstack_xla") if inc and lib("compstack_xla").is_file() else None,
                         cuda=lib("compstack_kernels_cuda") if cuda else None, key=key)
