"""The store's owner and mode rule (issue #27, class 2): load nothing another user could write.

A store entry that compstack loads as native code (a compiled ``model.so``, a ``.vmfb``,
a custom-op library, JAX's and Inductor's programs) runs in the loading process, so a
consistent entry (good manifest, good hashes) planted by another user would run as the
user who loads it. The rule, the one ``ssh`` applies to ``~/.ssh`` and JAX's cache docs
ask for ("whoever can write to the cache can run code"):

* the store root, each folder from it down to the entry, the entry and every file in it
  belong to the user (the effective uid), and
* none of those folders or files is group- or world-writable (a sticky folder such as
  ``/tmp`` is no exception: another user could have created the entry in it), except
  group-writable with the user's own private group (a group of the user's name with no
  other member: the ``umask 002`` of user-private-group systems), as OpenSSH allows.

An entry that breaks the rule is refused (a miss, never loaded, never deleted) and the
reason is reported once per process (:func:`report_once`).

``--shared-store`` (``COMPSTACK_SHARED_STORE=1``, :func:`compstack.core.config.shared_store`)
is for a store that several users really share: there, entries of the kinds in
:data:`NATIVE_KINDS` are never loaded (compstack recompiles them; what it writes is still
published for others), and entries of the other kinds, which are data verified by their
hashes (models, stage texts, records), are read whoever wrote them.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

__all__ = ["NATIVE_KINDS", "path_problem", "report_once", "store_problem"]

#: Store kinds whose entries are loaded as native code (or code JAX/Inductor run).
NATIVE_KINDS = frozenset({"artifacts", "conformance", "ops", "xla", "inductor"})

_log = logging.getLogger("compstack.store")
_REPORTED: set[str] = set()


def path_problem(path: Path, follow: bool = False, within: Path | None = None) -> str:
    """Why ``path`` breaks the owner and mode rule, or ``""`` (also when it does not exist).

    Args:
        path: a folder or file.
        follow: follow a symbolic link (the store root may be one); below the root a
            link is judged by its own owner, and a link to a folder is refused, except
            one that resolves inside ``within``.
        within: the entry being checked, whose every file and folder is checked too: a
            link to a folder of the entry itself (a venv's ``lib64 -> lib``) adds nothing
            another user could write.
    """
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"{path}: cannot be checked ({exc.strerror or exc})"
    uid = os.geteuid()
    if st.st_uid != uid:
        return f"{path} belongs to uid {st.st_uid}, not to you (uid {uid})"
    if stat.S_ISLNK(st.st_mode) and Path(path).is_dir() and not _inside(Path(path), within):
        return f"{path} is a symbolic link to a folder"
    writable = st.st_mode & (stat.S_IWOTH | (0 if _private_group(st.st_gid) else stat.S_IWGRP))
    if not stat.S_ISLNK(st.st_mode) and writable:
        return f"{path} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def _inside(link: Path, folder: Path | None) -> bool:
    """``link`` resolves to ``folder`` or below it."""
    if folder is None:
        return False
    try:
        return link.resolve(strict=True).is_relative_to(folder.resolve(strict=True))
    except (OSError, RuntimeError):  # a dangling link, a loop
        return False


def _private_group(gid: int) -> bool:
    """``gid`` is the user's private group: named as the user, no other member."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(os.geteuid()).pw_name, grp.getgrgid(gid)
    except (KeyError, ImportError):
        return False
    return group.gr_name == user and set(group.gr_mem) <= {user}


def store_problem(root: Path, entry: Path) -> str:
    """Why ``entry`` (a folder or record under the store ``root``) must not be loaded, or ``""``.

    Checks the root, each folder between it and the entry, the entry and, for a folder
    entry, every file and folder inside it.
    """
    problem = path_problem(root, follow=True)
    if problem:
        return problem
    try:
        rel = entry.relative_to(root)
    except ValueError:
        return f"{entry} is not inside the store {root}"
    here = root
    for part in rel.parts:
        here = here / part
        problem = path_problem(here)
        if problem:
            return problem
    if entry.is_dir() and not entry.is_symlink():
        for dirpath, dirs, files in os.walk(entry):
            for name in (*dirs, *files):
                problem = path_problem(Path(dirpath) / name, within=entry)
                if problem:
                    return problem
    return ""


def report_once(reason: str) -> None:
    """Warn about a refused store entry once per process (logger ``compstack.store``; with
    no logging configured Python prints the warning on stderr)."""
    if reason not in _REPORTED:
        _REPORTED.add(reason)
        _log.warning("compstack: warning: %s", reason)
