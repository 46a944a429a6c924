"""Reading an ``.npz`` file as untrusted data: each member is checked before numpy
allocates anything for it.

``numpy.load`` trusts a member's header: a header that declares a 2**44-element array
makes it allocate the whole array before it finds 64 bytes behind it, a member that is
not ``.npy`` comes back as ``bytes``, and a garbage header ends in whatever exception
the parser hits. Here each member must be a ``NAME.npy`` with a well-formed header
(``numpy.lib.format``, versions 1.0-3.0), a plain dtype (no objects: nothing is
unpickled), and a declared size that the member's bytes can hold: at most its
uncompressed size in the zip directory, and for a compressed member at most what
DEFLATE can expand its compressed bytes to (1032:1, zlib's documented maximum ratio).
"""

from __future__ import annotations

import math
import zipfile
from pathlib import Path
from typing import IO

import numpy as np

from compstack.core.errors import UserError
from compstack.core.paths import check_input_file

__all__ = ["read_npz"]

#: Most bytes DEFLATE can expand one compressed byte to (zlib's technical notes: 1032:1).
_DEFLATE_RATIO = 1032


def _header(f: IO[bytes], where: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    """``(shape, dtype, fortran_order)`` of the ``.npy`` header at ``f``'s position."""
    fmt = np.lib.format
    try:
        version = fmt.read_magic(f)
        read = {(1, 0): fmt.read_array_header_1_0, (2, 0): fmt.read_array_header_2_0}.get(version)
        if read is None:
            raise ValueError(f"unsupported .npy format version {version}")
        shape, fortran, dtype = read(f, max_header_size=10000)
    except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
        text = str(exc).strip().splitlines()
        raise UserError(f"{where}: not a valid .npy header ({text[0] if text else type(exc).__name__})") from None
    if dtype.hasobject:
        raise UserError(f"{where}: object arrays are not read (they would be unpickled)")
    return tuple(shape), dtype, fortran


def _member(z: zipfile.ZipFile, info: zipfile.ZipInfo, source: str) -> tuple[str, np.ndarray]:
    where = f"{source}: member {info.filename!r}"
    if not info.filename.endswith(".npy"):
        raise UserError(f"{where} is not a .npy array (an .npz holds only NAME.npy members)")
    with z.open(info) as f:
        shape, dtype, fortran = _header(f, where)
        header_len = f.tell()
        declared = math.prod(shape) * dtype.itemsize
        room = info.file_size - header_len
        if info.compress_type != zipfile.ZIP_STORED:
            room = min(room, info.compress_size * _DEFLATE_RATIO)
        if declared > room:
            raise UserError(f"{where}: header declares {declared} bytes of {dtype} {list(shape)}, "
                            f"the member holds at most {max(room, 0)}")
        data = f.read(declared)
    if len(data) != declared:
        raise UserError(f"{where}: truncated ({len(data)} of {declared} bytes)")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return info.filename[: -len(".npy")], arr.copy()


def read_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file, each member checked before it is read.

    Args:
        path: the ``.npz`` file (a zip of ``NAME.npy`` members, as ``numpy.savez`` writes).

    Returns:
        ``{name: array}`` in member order; arrays are writable copies.

    Raises:
        UserError: one line naming the file (and the member): see :func:`check_input_file`,
            not a zip, a member that is not ``.npy``, a garbage header, an object dtype,
            a declared size larger than the member, a truncated or corrupt member.
    """
    p = Path(path)
    check_input_file(p, "an .npz file")
    try:
        with zipfile.ZipFile(p) as z:
            out: dict[str, np.ndarray] = {}
            for info in z.infolist():
                if info.is_dir():
                    continue
                name, arr = _member(z, info, str(p))
                out[name] = arr
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, NotImplementedError) as exc:
        text = str(exc).strip().splitlines()
        if zipfile.is_zipfile(p):
            raise UserError(f"{p}: a corrupt .npz member ({text[0] if text else type(exc).__name__})") from None
        raise UserError(f"{p}: not a .npz (zip) file; write one with numpy.savez(path, name=array, ...)") from None
    if not out:
        raise UserError(f"{p}: an .npz with no arrays")
    return out
