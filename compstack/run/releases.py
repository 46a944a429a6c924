"""Workers of versioned targets (``ort-cpu@1.24.1``): the interpreter and environment a
worker of that release runs with, and the check, inside the worker, that the stack it
imported is the release asked for.

The executors call :func:`interpreter` before they start a worker: a plain target runs
``sys.executable``; a versioned one gets its env from the store (built on first use,
:func:`compstack.core.envs.ensure_env`) and runs ``<env>/bin/python -P -m
compstack.run.worker`` with :func:`compstack.core.envs.worker_environ`. Only the worker
runs there: the reference, the comparison and the database stay in the parent.
"""

from __future__ import annotations

import sys
from typing import Any, Mapping

from compstack.core.errors import UnavailableError

__all__ = ["check_version", "describe", "env_versions", "interpreter", "provision_single", "versioned"]


def versioned(target: str) -> tuple[str, str]:
    """``(base, version)`` of a target name; version ``""`` for a plain target."""
    base, _, version = target.partition("@")
    return base, version


def interpreter(target: str, cache_dir: str | None = None) -> tuple[str, dict[str, str]]:
    """The Python a worker of ``target`` runs and the variables added to its environment.

    Args:
        target: a target name, ``NAME`` or ``NAME@VERSION``.
        cache_dir: the store root (None: the configured one).

    Returns:
        ``(sys.executable, {})`` for a plain target, else the env's interpreter and its
        :func:`~compstack.core.envs.worker_environ`.

    Raises:
        compstack.core.envs.EnvError: the release cannot be provisioned (one line:
            ``NAME@VERSION: cannot provision: <reason>``).
        UserError: the stack has no versioned form.
    """
    base, version = versioned(target)
    if not version:
        return sys.executable, {}
    from compstack import targets as registry
    from compstack.core.envs import ensure_env, find_env, worker_environ
    from compstack.core.store import open_store
    from compstack.targets.releases import recipe

    registry.split(target)  # UserError for a stack without versioned form
    store = open_store(cache_dir)
    rec = recipe(base, version)
    if find_env(store, rec, version) is None:
        _listed(target, rec.package, version)
    info = ensure_env(store, rec, version)
    return str(info.python), worker_environ(store, info)


def _listed(target: str, package: str, version: str) -> None:
    """Before an env is built: ``version`` must be a release the registry lists, spelled as
    it lists it (``0.25`` is PEP 440-equal to ``0.25.0``, but would build a second env).
    A registry that cannot be read lets the build try (and say why it fails).

    Raises:
        UserError: not listed (one line naming the nearest spelling or the listed range).
    """
    from packaging.version import InvalidVersion, Version

    from compstack.core.envs import EnvError, registry_releases
    from compstack.core.errors import UserError

    try:
        listed = registry_releases(package)
    except EnvError:
        return
    if version in listed:
        return
    try:
        same = [v for v in listed if Version(v) == Version(version)]
    except InvalidVersion:
        same = []
    if same:
        raise UserError(f"{target}: give the release as the registry lists it: {target.split('@')[0]}@{same[0]}")
    raise UserError(f"{target}: {package} {version} is not on the registry ({len(listed)} releases, "
                    f"{listed[0]} .. {listed[-1]}; compstack versions {target.split('@')[0]} lists them)")


def check_version(target: str, versions: Mapping[str, str]) -> None:
    """In the worker: the stack imported here is the release ``target`` names.

    Args:
        target: the job's target name.
        versions: the versions the target's ``availability()`` read in this process.

    Raises:
        UnavailableError: the imported package reports another version (this worker is
            not running in that release's env).
    """
    base, version = versioned(target)
    if not version:
        return
    from compstack.targets.releases import release_of

    rel = release_of(base)
    got = versions.get(rel.package, "") if rel else ""
    if rel and got and not (got == version or got.startswith(version)):
        raise UnavailableError(f"{target}: the worker imported {rel.package} {got}, not {version} "
                               f"(interpreter {sys.executable})")


def provision_single(names: list[str], cache_dir: str | None = None) -> list[str]:
    """When ``names`` is one versioned target alone, provision its env now, so a release
    that cannot install is the command's error (exit 2), not a lone ``unavailable`` row;
    with other targets beside it, its row says why instead and the others run.

    Returns:
        ``names``.

    Raises:
        UserError: that release cannot be provisioned (one line: version and reason).
    """
    if len(names) != 1 or "@" not in names[0]:
        return names
    from compstack.core.envs import EnvError
    from compstack.core.errors import UserError

    try:
        interpreter(names[0], cache_dir)
    except (EnvError, OSError) as exc:
        raise UserError(str(exc)) from None
    return names


def env_versions(target: str, cache_dir: str | None = None) -> dict[str, str]:
    """The versions the env of the release ``target`` reported when it was built (read
    from its manifest; nothing is built).

    Raises:
        LookupError: no env of that release is provisioned.
    """
    from compstack.core.envs import find_env
    from compstack.core.store import open_store
    from compstack.targets.releases import recipe

    base, version = versioned(target)
    info = find_env(open_store(cache_dir), recipe(base, version), version)
    if info is None:
        raise LookupError(f"{target}: not provisioned")
    return dict(info.versions)


def describe(target: str, cache_dir: str | None = None) -> dict[str, Any]:
    """``compstack versions TARGET``: the releases of ``target``'s stack the registry serves
    (read with pip, oldest first), the provisioned envs and their size, the releases that
    failed to provision here and why, the checked range of compstack's adapter, and the
    release installed beside compstack itself.

    Returns:
        ``{"target", "package", "releases": [str], "registry_error": str, "provisioned":
        [{"version", "versions", "bytes", "path", "tool", "build_s"}], "failed": {version:
        reason}, "supported": str, "parent": str}``.

    Raises:
        UserError: unknown target, or one without versioned form.
    """
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    from compstack import targets as registry
    from compstack.core.envs import EnvError, failures, list_envs, registry_releases
    from compstack.core.errors import UserError
    from compstack.core.store import open_store
    from compstack.targets.releases import SUPPORTED, release_of

    base = versioned(target)[0]
    registry.ref(base)  # UserError for an unknown name
    rel = release_of(base)
    if rel is None:
        from compstack.targets.releases import RELEASES

        raise UserError(f"compstack versions {target}: no versioned form (versioned targets: {', '.join(RELEASES)})")
    releases: list[str] = []
    error = ""
    try:
        releases = registry_releases(rel.package)
    except EnvError as exc:
        error = str(exc)
    store = open_store(cache_dir)
    try:
        parent = dist_version(rel.package)
    except PackageNotFoundError:
        parent = ""
    envs = sorted(list_envs(store, base), key=lambda e: releases.index(e["version"])
                  if e["version"] in releases else -1)
    return {"target": base, "package": rel.package, "releases": releases, "registry_error": error,
            "provisioned": envs, "failed": failures(store, base), "supported": SUPPORTED.get(base, ""),
            "parent": parent}
