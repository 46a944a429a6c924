"""Paths named by untrusted data or by the user, checked before they are opened: one line
naming the path for a symbolic-link loop, a NUL byte, a FIFO or device, or a location
that leaves its folder."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from compstack.core.errors import UserError

__all__ = ["check_input_file", "resolve_inside"]


def check_input_file(p: Path, what: str = "a file") -> None:
    """UserError (one line naming ``p``) unless ``p`` is a non-empty regular file.

    Raises:
        UserError: missing, a symbolic-link loop, a folder, a FIFO or device, or empty.
    """
    try:
        st = os.stat(p)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UserError(f"{p}: a loop of symbolic links, not {what}") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise UserError(f"{p}: no such file") from None
        raise UserError(f"{p}: cannot read: {exc.strerror or exc}") from None
    except ValueError:  # an embedded NUL byte
        raise UserError(f"{ascii(str(p))}: not a valid path (NUL byte)") from None
    if not stat.S_ISREG(st.st_mode):
        raise UserError(f"{p}: not a regular file (a folder, FIFO or device); give {what}")
    if st.st_size == 0:
        raise UserError(f"{p}: empty file, not {what}")


def resolve_inside(base: Path, location: str, what: str) -> Path | None:
    """``base / location`` with every symbolic link resolved; None when it leaves ``base``.

    Args:
        base: the folder ``location`` must stay inside (already resolved).
        location: a relative path read from a file (e.g. an ONNX external-data location).
        what: names the location in messages (``"model.onnx: external data of tensor 'w'"``).

    Raises:
        UserError: ``location`` holds a NUL byte, or resolving it meets a symbolic-link loop.
    """
    if "\0" in location:
        raise UserError(f"{what}: location {ascii(location)} holds a NUL byte")
    if os.path.isabs(location):
        return None
    try:
        target = (base / location).resolve()
    except (RuntimeError, OSError) as exc:  # Python 3.11 raises RuntimeError for a loop, 3.13 OSError
        raise UserError(f"{what}: location {location!r} is a loop of symbolic links ({exc})") from None
    return target if base in target.parents else None
