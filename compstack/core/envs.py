"""Stack-release environments: one isolated virtual environment per (stack, version).

A versioned target (``ort-cpu@1.24.1``) runs its worker in ``<env>/bin/python -P -m
compstack.run.worker``: the env holds the stack at that release with a compatible numpy,
onnx, onnx_ir and ml_dtypes, and nothing of the parent's site-packages.

* Built with ``uv`` (``uv venv`` + ``uv pip install``, pointed at the same indexes and
  find-links as pip's own configuration, read from ``pip config list``), else with
  ``python -m venv`` and the env's own pip.
* Store kind ``envs`` (:mod:`compstack.core.store`): built in a ``.tmp-*`` folder beside
  the final one under an exclusive lock (``fcntl.flock`` on ``envs/.lock-<key>``), the
  installed version checked from inside the env, then the manifest written and one
  ``rename`` moves it into place: a half-built env is never used. ``compstack cache info``
  lists envs and ``cache prune``/``clear`` remove them. A release that cannot install is
  recorded with its reason in ``envs/.failed/<key>.json`` (shown by ``compstack versions``;
  a dot folder is no store entry: retried on every use, dropped once the release builds).
* compstack itself is not installed into the env: the worker gets a ``PYTHONPATH`` of one
  folder that holds a single ``compstack`` symlink to the parent's package (``<store>/
  envs/.links/<hash>/compstack``). Envs are shared by every compstack using the store, and
  the parent's package root may be a site-packages folder (a non-editable install), which
  the env must never see; a symlink exposes compstack and nothing else.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence

from compstack.core.errors import CompstackError
from compstack.core.procs import python_module_argv
from compstack.core.store import Store

__all__ = ["EnvError", "EnvInfo", "Recipe", "env_key", "ensure_env", "failures", "find_env", "list_envs",
           "pip_sources", "registry_releases", "split_spec", "worker_environ"]

#: Seconds one env build may take (resolve + download + install).
BUILD_TIMEOUT_S = 900.0
_VERSION = re.compile(r"[0-9][A-Za-z0-9.+-]*")


class EnvError(CompstackError):
    """A release that cannot be provisioned here; the message is one line naming
    ``stack@version`` and the reason."""


@dataclass(frozen=True)
class Recipe:
    """What an env of one stack release holds.

    Attributes:
        stack: the target name without a version (``ort-cpu``).
        package: the distribution whose releases are listed (``onnxruntime``).
        module: its import name, whose ``__version__`` is read inside the env.
        requirements: pip requirement strings for that release (the stack pinned, numpy,
            onnx, onnx_ir, ml_dtypes).
        extra_modules: further import names whose versions go into the row (``{name:
            module}``; e.g. IREE's runtime beside its compiler).
    """

    stack: str
    package: str
    module: str
    requirements: tuple[str, ...]
    extra_modules: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class EnvInfo:
    """A provisioned env.

    Attributes:
        path: its folder in the store.
        python: its interpreter (``<path>/bin/python``).
        versions: package -> version read inside the env (``{"onnxruntime": "1.20.0"}``).
        bytes: its size on disk.
        built_s: seconds its build took (0.0 when it came from the store).
        tool: ``uv`` or ``pip`` (what built it).
    """

    path: Path
    python: Path
    versions: dict[str, str]
    bytes: int = 0
    built_s: float = 0.0
    tool: str = ""


def split_spec(spec: str) -> tuple[str, str]:
    """``"ort-cpu@1.24.1"`` -> ``("ort-cpu", "1.24.1")``; no ``@`` -> ``(spec, "")``.

    Raises:
        ValueError: an empty name or a version outside ``[0-9][A-Za-z0-9.+-]*``.
    """
    name, sep, version = spec.partition("@")
    if not sep:
        return spec, ""
    if not name or not _VERSION.fullmatch(version):
        raise ValueError(f"'{spec}': a versioned target is NAME@VERSION (e.g. ort-cpu@1.24.1)")
    return name, version


def env_key(stack: str, version: str, requirements: Sequence[str] = ()) -> str:
    """The store key of an env: ``<stack>-<version>-py<major><minor>`` (this Python), and,
    given the recipe's ``requirements``, ``-<8 hex digits of their SHA-256>``: an env built
    from other pins (a recipe fixed in a later compstack) is another entry, never reused."""
    key = f"{stack}-{version}-py{sys.version_info[0]}{sys.version_info[1]}"
    if requirements:
        key += "-" + hashlib.sha256("\n".join(requirements).encode()).hexdigest()[:8]
    return key


@lru_cache(maxsize=1)
def pip_sources() -> dict[str, Any]:
    """pip's configured sources (``pip config list``): ``index_url`` (str or ""),
    ``extra_index_urls`` and ``find_links`` (lists), so uv installs from the same places.
    Environment (``PIP_*``) values win over files, as in pip."""
    try:
        out = subprocess.run(python_module_argv("pip", "config", "list"), capture_output=True, text=True,
                             timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    found: dict[str, tuple[int, str]] = {}
    for line in out.splitlines():
        k, _, v = line.partition("=")
        scope, _, name = k.rpartition(".")
        rank = 2 if scope == ":env:" else 1
        if name in ("index-url", "extra-index-url", "find-links") and rank >= found.get(name, (0, ""))[0]:
            found[name] = (rank, v.strip().strip("'\""))
    return {"index_url": found.get("index-url", (0, ""))[1],
            "extra_index_urls": found.get("extra-index-url", (0, ""))[1].split(),
            "find_links": found.get("find-links", (0, ""))[1].split()}


def registry_releases(package: str) -> list[str]:
    """The releases of ``package`` the configured registry serves, oldest first, read with
    ``pip index versions`` (the order is the registry's, never computed).

    Raises:
        EnvError: pip cannot list the package (no network, unknown package).
    """
    try:
        res = subprocess.run(python_module_argv("pip", "index", "versions", package), capture_output=True,
                             text=True, timeout=180)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvError(f"{package}: cannot list releases ({type(exc).__name__}: {exc})") from None
    for line in res.stdout.splitlines():
        if line.strip().startswith("Available versions:"):
            return [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()][::-1]
    tail = (res.stderr.strip().splitlines() or ["no versions listed"])[-1]
    raise EnvError(f"{package}: the registry lists no releases ({tail[:200]})")


def _uv() -> str | None:
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin  # type: ignore[import-not-found]

        return str(find_uv_bin())
    except (ImportError, FileNotFoundError):
        return None


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env)
    except subprocess.TimeoutExpired:
        raise EnvError(f"{what}: timed out after {BUILD_TIMEOUT_S:g} s") from None
    if res.returncode:
        lines = [ln.strip() for ln in (res.stderr or res.stdout).splitlines() if ln.strip()]
        why = next((ln for ln in lines if "because" in ln.lower() or "no matching" in ln.lower()),
                   next((ln for ln in lines if ln.lower().startswith("error")), lines[-1] if lines else
                        f"exit {res.returncode}"))
        raise EnvError(f"{what}: {why.removeprefix('cause: ')[:300]}")


def _install(folder: Path, requirements: tuple[str, ...]) -> str:
    """Create a venv in ``folder`` and install ``requirements``; returns the tool used."""
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    if uv:
        _run([uv, "venv", "-q", "--python", sys.executable, str(folder)], "uv venv", env)
        src = pip_sources()
        args = [uv, "pip", "install", "-q", "--python", str(folder / "bin" / "python"),
                "--index-strategy", "unsafe-best-match"]
        args += ["--index-url", src["index_url"]] if src["index_url"] else []
        for u in src["extra_index_urls"]:
            args += ["--extra-index-url", u]
        for u in src["find_links"]:
            args += ["--find-links", u]
        _run(args + list(requirements), "uv pip install", env)
        return "uv"
    # -P: never the current folder's venv.py or pip/ (compstack.core.procs)
    _run(python_module_argv("venv", str(folder)), "python -m venv", env)
    safe = ["-P"] if sys.version_info >= (3, 11) else []  # the env is made from this interpreter
    _run([str(folder / "bin" / "python"), *safe, "-m", "pip", "install", "-q", *requirements], "pip install", env)
    return "pip"


#: Imports each module inside the env and reads its version: ``__version__``, else
#: ``VERSION`` (IREE's ``iree.compiler.version``/``iree.runtime.version`` have no
#: ``__version__``), else the distribution's metadata.
_PROBE = ("import importlib, importlib.metadata as md, json, sys\nout = {}\n"
          "for name, mod in json.loads(sys.argv[1]).items():\n"
          "    m = importlib.import_module(mod)\n"
          "    out[name] = str(getattr(m, '__version__', '') or getattr(m, 'VERSION', '') or md.version(name))\n"
          "print(json.dumps(out))\n")


def _probe(python: Path, modules: dict[str, str]) -> dict[str, str]:
    """Versions of ``modules`` (``{package: import name}``) read inside the env."""
    try:
        res = subprocess.run([str(python), "-P", "-I", "-c", _PROBE, json.dumps(modules)], capture_output=True,
                             text=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as exc:
        raise EnvError(f"env interpreter does not start ({type(exc).__name__})") from None
    if res.returncode:
        lines = res.stderr.strip().splitlines() or [f"exit {res.returncode}"]
        raise EnvError(f"does not import: {lines[-1][:300]}")
    return dict(json.loads(res.stdout.strip().splitlines()[-1]))


_VERIFIED: dict[str, EnvInfo] = {}


def find_env(store: Store, recipe: Recipe, version: str) -> EnvInfo | None:
    """The provisioned env of ``recipe`` at ``version``, verified against its manifest
    (once per process), or None (a corrupt one is deleted)."""
    k = env_key(recipe.stack, version, recipe.requirements)
    folder = store.entry("envs", k)
    hit = _VERIFIED.get(str(folder))
    if hit is not None and (folder / "meta.json").is_file():
        return hit
    entry, _ = store.lookup("envs", k)
    if entry is None:
        return None
    meta = entry.meta
    info = EnvInfo(folder, folder / "bin" / "python", dict(meta.get("versions", {})),
                   sum(int(f.get("size", 0)) for f in dict(meta.get("files", {})).values()), 0.0, str(meta.get("tool", "")))
    _VERIFIED[str(folder)] = info
    return info


def ensure_env(store: Store, recipe: Recipe, version: str) -> EnvInfo:
    """The env of ``recipe`` at ``version``: from the store, else built now (see the module
    docstring). Concurrent callers build it once.

    Raises:
        EnvError: it cannot install on this Python/platform, or the installed stack does
            not import or reports another version; recorded as an ``env-failures`` record.
    """
    found = find_env(store, recipe, version)
    if found is not None:
        return found
    k = env_key(recipe.stack, version, recipe.requirements)
    base = store.kind_dir("envs")
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f".lock-{k}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = find_env(store, recipe, version)  # built by another process while we waited
        if found is not None:
            return found
        t0 = time.monotonic()
        staging = store.staging("envs")
        try:
            tool = _install(staging, recipe.requirements)
            versions = _probe(staging / "bin" / "python", {recipe.package: recipe.module, **recipe.extra_modules})
            got = versions.get(recipe.package, "")
            if not (got == version or got.startswith(version)):
                raise EnvError(f"installed {recipe.package} reports version {got or '?'}")
        except EnvError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            reason = str(exc)
            _record_failure(store, k, {"stack": recipe.stack, "version": version, "reason": reason,
                                       "time": time.time()})
            raise EnvError(f"{recipe.stack}@{version}: cannot provision: {reason}") from None
        built = time.monotonic() - t0
        _private(staging)
        folder = store.publish(staging, "envs", k, meta={"stack": recipe.stack, "version": version,
                                                         "package": recipe.package, "versions": versions,
                                                         "tool": tool, "build_s": round(built, 2),
                                                         "requirements": list(recipe.requirements)})
        (base / ".failed" / f"{k}.json").unlink(missing_ok=True)
    info = find_env(store, recipe, version)
    if info is None:
        raise EnvError(f"{recipe.stack}@{version}: the env was built in {folder} but does not verify")
    return EnvInfo(info.path, info.python, info.versions, info.bytes, built, tool)


def _private(folder: Path) -> None:
    """Clear the group and world write bits of everything in a built env (uv leaves its
    ``.lock`` mode 666): the store's owner and mode rule (:mod:`compstack.core.ownership`)
    refuses an entry others could write."""
    for path in (folder, *folder.rglob("*")):
        if not path.is_symlink():
            mode = path.stat().st_mode
            if mode & 0o022:
                path.chmod(mode & ~0o022)


def list_envs(store: Store, stack: str | None = None) -> Iterator[dict[str, Any]]:
    """The provisioned envs (of ``stack``): ``{"stack", "version", "versions", "bytes",
    "path", "tool", "build_s"}`` read from their manifests (not re-hashed)."""
    for e in store.entries("envs"):
        try:
            meta = json.loads((e.path / "meta.json").read_text())
        except (OSError, ValueError):
            continue
        if stack is None or meta.get("stack") == stack:
            yield {"stack": meta.get("stack", ""), "version": meta.get("version", ""),
                   "versions": meta.get("versions", {}), "bytes": e.bytes, "path": str(e.path),
                   "tool": meta.get("tool", ""), "build_s": meta.get("build_s", 0.0)}


def _record_failure(store: Store, k: str, data: dict[str, Any]) -> None:
    from compstack.core.integrity import atomic_write

    folder = store.kind_dir("envs") / ".failed"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write(folder / f"{k}.json", json.dumps(data))


def failures(store: Store, stack: str | None = None) -> dict[str, str]:
    """Version -> reason of the releases (of ``stack``) whose last provisioning here
    failed (JSON data only; an unreadable record is skipped)."""
    out: dict[str, str] = {}
    for path in sorted((store.kind_dir("envs") / ".failed").glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and (stack is None or data.get("stack") == stack):
            out[str(data.get("version", ""))] = str(data.get("reason", ""))
    return out


def worker_environ(store: Store, info: EnvInfo) -> dict[str, str]:
    """Environment variables of a worker in ``info``'s env: ``PYTHONPATH`` = one folder
    holding only a ``compstack`` symlink to this process's compstack package (see the
    module docstring), ``PYTHONNOUSERSITE=1``, ``VIRTUAL_ENV``.

    Raises:
        OSError: the link folder cannot be written.
    """
    pkg = Path(__file__).resolve().parents[1]
    links = store.kind_dir("envs") / ".links" / hashlib.sha256(str(pkg).encode()).hexdigest()[:16]
    link = links / "compstack"
    if not (link.is_symlink() and Path(os.readlink(link)) == pkg):
        links.mkdir(parents=True, exist_ok=True)
        tmp = links / f".compstack-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(pkg, target_is_directory=True)
        os.replace(tmp, link)
    return {"PYTHONPATH": str(links), "PYTHONNOUSERSITE": "1", "VIRTUAL_ENV": str(info.path)}
