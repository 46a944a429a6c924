"""Model inputs: generated from a seed, or read from an ``.npz`` file.

Generation follows Polygraphy's data loader (``polygraphy/comparator/data_loader.py``):
floats uniform in ``[low, high)`` (default ``[0, 1)``), integers uniform in
``[low, high)`` (default ``[0, 10)``), bools 0/1; per-input ranges with
``--val-range NAME:LO,HI``. Dynamic dims need ``--input-shape NAME:1x3x224x224``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from compstack.core.errors import UserError
from compstack.core.ir import ModelInput

__all__ = [
    "DEFAULT_FLOAT_RANGE",
    "DEFAULT_INT_RANGE",
    "parse_val_ranges",
    "parse_shapes",
    "generate",
    "input_sets",
    "load_npz",
    "save_npz",
]

DEFAULT_FLOAT_RANGE = (0.0, 1.0)
DEFAULT_INT_RANGE = (0, 10)


def parse_val_ranges(specs: Sequence[str]) -> dict[str, tuple[float, float]]:
    """Parse ``["ids:0,1000", "x:-1,1"]`` (``NAME:LO,HI``; a bare ``LO,HI`` applies to all).

    Raises:
        UserError: malformed spec, a bound that is not finite, or LO >= HI, naming the
            flag value. (Whether the range fits the input's dtype is checked in
            :func:`generate`.)
    """
    out: dict[str, tuple[float, float]] = {}
    for spec in specs:
        name, sep, rng = spec.rpartition(":")
        parts = rng.split(",")
        try:
            lo, hi = (float(p) for p in parts)
        except ValueError:
            raise UserError(f"--val-range {spec}: expected NAME:LO,HI (e.g. input_ids:0,1000)") from None
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise UserError(f"--val-range {spec}: LO and HI must be finite numbers")
        if not lo < hi:
            raise UserError(f"--val-range {spec}: LO must be below HI")
        out[name if sep else ""] = (lo, hi)
    return out


#: Largest dimension ``--input-shape`` takes (numpy's own limit is 2**63 - 1 elements).
MAX_DIM = 2**62


def parse_shapes(specs: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Parse ``["x:1x3x224x224"]`` into concrete shapes for dynamic inputs.

    Raises:
        UserError: malformed spec.
    """
    out: dict[str, tuple[int, ...]] = {}
    for spec in specs:
        name, sep, dims = spec.rpartition(":")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x")) if dims else ()
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d < 0 for d in shape):
            raise UserError(f"--input-shape {spec}: expected NAME:D0xD1x... (e.g. x:1x3x224x224)")
        if any(d > MAX_DIM for d in shape):
            raise UserError(f"--input-shape {spec}: dimension {max(shape)} is too large (at most 2**62)")
        out[name] = shape
    return out


def _concrete_shape(inp: ModelInput, shapes: Mapping[str, tuple[int, ...]]) -> tuple[int, ...]:
    if inp.name in shapes:
        shape = shapes[inp.name]
        if len(shape) != len(inp.shape) or any(
            isinstance(d, int) and d != s for d, s in zip(inp.shape, shape)
        ):
            raise UserError(f"--input-shape {inp.name}: {shape} does not fit the model's {list(inp.shape)}")
        return shape
    if not inp.is_static:
        raise UserError(
            f"input '{inp.name}' has dynamic shape {list(inp.shape)}; give one with "
            f"--input-shape {inp.name}:" + "x".join(str(d) if isinstance(d, int) else "<n>" for d in inp.shape)
        )
    return tuple(int(d) for d in inp.shape)  # type: ignore[arg-type]


def generate(
    model_inputs: Sequence[ModelInput],
    seed: int = 0,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> dict[str, np.ndarray]:
    """Random inputs, one array per model input, reproducible from ``seed``.

    Args:
        model_inputs: the model's inputs (:func:`compstack.core.ir.graph_inputs`).
        seed: NumPy ``default_rng`` seed.
        val_ranges: ``{name: (low, high)}``; key ``""`` applies to every input.
        shapes: concrete shapes for inputs with dynamic dims.

    Returns:
        ``{name: array}`` with each input's own dtype and shape.

    Raises:
        UserError: a dynamic input without a shape, or a range that names no input.
    """
    val_ranges = dict(val_ranges or {})
    shapes = shapes or {}
    names = {i.name for i in model_inputs}
    unknown = [n for n in list(val_ranges) + list(shapes) if n and n not in names]
    if unknown:
        raise UserError(f"--val-range/--input-shape name(s) {', '.join(unknown)} match no input "
                        f"(inputs: {', '.join(sorted(names))})")
    rng = np.random.default_rng(seed)
    out: dict[str, np.ndarray] = {}
    for inp in model_inputs:
        shape = _concrete_shape(inp, shapes)
        dtype = np.dtype(inp.dtype)
        if math.prod(shape) * dtype.itemsize > 2**62:
            raise MemoryError(f"input '{inp.name}' of shape {list(shape)}")
        given = val_ranges.get(inp.name, val_ranges.get(""))
        if given is not None:
            _check_range(inp.name, dtype, *given)
        if dtype == np.dtype(object):
            raise UserError(f"input '{inp.name}' is a string tensor; give its values with --inputs FILE.npz "
                            "(numpy.savez of a str array)")
        if dtype == np.bool_:
            lo_i, hi_i = (0, 2) if given is None else (int(given[0]), int(given[1]))
            out[inp.name] = rng.integers(lo_i, hi_i, size=shape).astype(np.bool_)
        elif np.issubdtype(dtype, np.integer):
            lo_i, hi_i = DEFAULT_INT_RANGE if given is None else (int(np.ceil(given[0])), int(np.ceil(given[1])))
            out[inp.name] = rng.integers(lo_i, max(hi_i, lo_i + 1), size=shape).astype(dtype)
        else:
            lo_f, hi_f = DEFAULT_FLOAT_RANGE if given is None else given
            out[inp.name] = rng.uniform(lo_f, hi_f, size=shape).astype(dtype)
    return out


def _check_range(name: str, dtype: np.dtype, lo: float, hi: float) -> None:
    """UserError when ``[lo, hi)`` does not fit ``dtype`` (or its width overflows)."""
    if dtype.kind in "iub":
        info = np.iinfo(np.int64) if dtype.kind == "b" else np.iinfo(dtype)
        ok = max(info.min, -2**63) <= math.ceil(lo) and math.ceil(hi) <= min(info.max, 2**63 - 1)
    elif dtype.kind == "f" or dtype.kind == "V":
        top = float(np.finfo(dtype).max) if dtype.kind == "f" else 3.0e38
        ok = -top <= lo and hi <= top and math.isfinite(hi - lo)
    else:
        return
    if not ok:
        raise UserError(f"--val-range {name}:{lo:g},{hi:g}: outside what input '{name}' ({dtype}) can hold")


def input_sets(
    model_inputs: Sequence[ModelInput],
    count: int,
    seed: int = 0,
    first: Mapping[str, np.ndarray] | None = None,
    val_ranges: Mapping[str, tuple[float, float]] | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
) -> list[dict[str, np.ndarray]]:
    """``count`` input sets for latency rotation; set 0 is ``first`` when given.

    Set 0 is the one every target's outputs are compared on. Without ``first``, sets
    ``1..count-1`` are generated from seeds ``seed+1...``. With ``first`` (the user's
    ``--inputs`` or the model's own example inputs) the later sets stay within what the
    user gave: an input with a known range (``val_ranges``: ``--val-range`` or the
    model's own) is drawn from that range with the shape of set 0, every other input
    keeps set 0's array, so an index or divisor input never leaves the values the user
    chose (generated integers in ``[0, 10)`` would).
    """
    sets: list[dict[str, np.ndarray]] = []
    if not first:
        sets.append(generate(model_inputs, seed, val_ranges, shapes))
        for k in range(1, count):
            sets.append(generate(model_inputs, seed + k, val_ranges, shapes))
        return sets
    sets.append(dict(first))
    ranges = dict(val_ranges or {})
    drawn = [i for i in model_inputs if i.name in first and (i.name in ranges or "" in ranges)
             and np.dtype(i.dtype) != np.dtype(object)]
    fixed = {i.name: tuple(first[i.name].shape) for i in drawn}
    own = {i.name: r for i in drawn if (r := ranges.get(i.name, ranges.get(""))) is not None}  # all of drawn
    for k in range(1, count):
        later = dict(first)
        later.update(generate(drawn, seed + k, own, fixed) if drawn else {})
        sets.append(later)
    return sets


def check_feeds(model_inputs: Sequence[ModelInput], feeds: Mapping[str, np.ndarray], source: str) -> None:
    """Check that ``feeds`` has every input with the right dtype and a fitting shape.

    Raises:
        UserError: a missing input, a wrong dtype, or a wrong shape, naming ``source``.
    """
    for inp in model_inputs:
        if inp.name not in feeds:
            raise UserError(f"{source}: no array for input '{inp.name}' (has: {', '.join(sorted(feeds))})")
        arr = feeds[inp.name]
        if arr.dtype != np.dtype(inp.dtype):
            raise UserError(f"{source}: input '{inp.name}' is {arr.dtype}, the model wants {np.dtype(inp.dtype)}")
        if len(arr.shape) != len(inp.shape) or any(
            isinstance(d, int) and d != s for d, s in zip(inp.shape, arr.shape)
        ):
            raise UserError(f"{source}: input '{inp.name}' has shape {list(arr.shape)}, "
                            f"the model wants {list(inp.shape)}")


def load_npz(path: str | Path) -> dict[str, np.ndarray]:
    """Read ``{name: array}`` from an ``.npz`` file, checking every member before it is
    allocated (:func:`compstack.core.npz.read_npz`).

    Raises:
        UserError: one line naming the file (and member): missing, a symbolic-link loop,
            empty, not a regular file (a FIFO, a device), not a zip, a single ``.npy``,
            a member that is not ``.npy``, a garbage header, a declared size the member
            cannot hold, or an array key naming an unknown dtype.
    """
    from compstack.core.npz import check_input_file, read_npz

    p = Path(path)
    check_input_file(p, "an .npz file")
    with open(p, "rb") as f:
        if f.read(6) == b"\x93NUMPY":
            raise UserError(f"{p}: a single .npy array, not an .npz of arrays by input name (use numpy.savez)")
    arrays = read_npz(p)
    try:
        # str arrays (dtype <U) stand for ONNX string tensors, which numpy holds as objects
        return decode_arrays({k: (v.astype(object) if v.dtype.kind == "U" else v) for k, v in arrays.items()})
    except UserError as exc:
        raise UserError(f"{p}: {exc}") from None


def _first(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


#: Key suffix of an ``ml_dtypes`` array (bfloat16, float8...) stored as its bits: ``.npz``
#: files hold no such dtypes (they come back as raw ``V2`` voids).
_BITS = "@bits:"
#: Key suffix of a string tensor (an object array of ``str``) saved as a fixed-width
#: unicode array, so ``np.load(..., allow_pickle=False)`` reads it back.
_STR = "@str"


def encode_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays ready for ``np.savez`` with nothing pickled: ``ml_dtypes`` arrays as
    unsigned-int bit views under ``"<name>@bits:<dtype>"``, string tensors (object arrays
    of ``str``) as unicode arrays under ``"<name>@str"`` (see :func:`decode_arrays`)."""
    out = {}
    for k, v in arrays.items():
        v = np.asarray(v)
        if v.dtype.kind == "V" and v.dtype.names is None and v.dtype.itemsize in (1, 2, 4):
            out[f"{k}{_BITS}{v.dtype.name}"] = v.view(f"uint{8 * v.dtype.itemsize}")
        elif v.dtype == object and all(isinstance(x, str) for x in v.flat):
            out[f"{k}{_STR}"] = v.astype(str) if v.size else np.zeros(v.shape, "U1")
        else:
            out[k] = v
    return out


def decode_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Inverse of :func:`encode_arrays` (``ml_dtypes`` restores the dtype).

    Raises:
        UserError: a key names an unknown dtype, or bits that do not fit it.
    """
    out: dict[str, np.ndarray] = {}
    for k, v in arrays.items():
        if k.endswith(_STR):
            out[k[: -len(_STR)]] = v.astype(object)
            continue
        name, sep, dtype = k.partition(_BITS)
        if sep:
            import ml_dtypes

            target = getattr(ml_dtypes, dtype, None)
            if not isinstance(target, type) or np.dtype(target).kind != "V":
                raise UserError(f"array '{k}': unknown dtype '{dtype}' after '{_BITS}' (an ml_dtypes type, "
                                "e.g. bfloat16)")
            try:
                out[name] = v.view(target)
            except ValueError as exc:
                raise UserError(f"array '{k}': its bits do not fit {dtype} ({_first(exc)})") from None
        else:
            out[k] = v
    return out


def save_npz(path: str | Path, arrays: Mapping[str, np.ndarray]) -> Path:
    """Write ``{name: array}`` to ``path`` (``.npz``, uncompressed).

    A regular file is written beside ``path`` and renamed over it, so a full disk leaves
    no half-written file; a device or FIFO (``/dev/full``, a pipe) is written in place.

    Raises:
        UserError: the folder cannot be written, or the device is full (one line).
    """
    import os
    import tempfile

    p = Path(path)
    special = p.exists() and not p.is_file()
    tmp = ""
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        if special:
            with open(p, "wb") as f:
                np.savez(f, **encode_arrays(arrays))  # type: ignore[arg-type]  # numpy stubs: ** may bind allow_pickle
        else:
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
            with os.fdopen(fd, "wb") as f:
                np.savez(f, **encode_arrays(arrays))  # type: ignore[arg-type]
            os.replace(tmp, p)
            tmp = ""
    except OSError as exc:
        raise UserError(f"{p}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp:
            Path(tmp).unlink(missing_ok=True)
    return p


def contiguous(arr: np.ndarray) -> np.ndarray:
    """``arr`` as a C-contiguous array of the same shape, copied only when it is not one.

    Every target hands inputs to its runtime through this, never through
    ``np.ascontiguousarray``, which returns at least one dimension: a 0-d (scalar) input
    would reach the stack as shape ``[1]`` and fail there or run another signature.
    """
    return np.asarray(arr, order="C")


__all__ += ["check_feeds", "contiguous", "input_sets_for"]


def input_sets_for(source: Any, options: Any) -> tuple[list[dict[str, np.ndarray]], str]:
    """The input sets of a comparison of ``source`` (a :class:`compstack.core.ir.SourceModel`)
    under ``options`` (a :class:`compstack.run.session.CompareOptions`), and where set 0 came
    from (``file``, ``model`` or ``generated``).

    ``--inputs`` wins; else the model's own example inputs, unless ``--val-range`` or
    ``--input-shape`` was given, which asks for generated inputs (the model's own value
    ranges still apply to the inputs the flags do not name).

    Raises:
        UserError: the arrays do not fit the model, a flag names no input, or the
            requested inputs do not fit in memory.
    """
    from compstack.core import ir as cir

    model_inputs = cir.graph_inputs(source.model)
    count = options.latency.input_sets if options.latency else 1
    ranges = {**source.val_ranges, **options.val_ranges}
    first, origin = None, "generated"
    if options.inputs is not None:
        if options.shapes:
            raise UserError("--input-shape has no effect with --inputs (the arrays fix the shapes)")
        check_feeds(model_inputs, options.inputs, "--inputs")
        extra = sorted(set(options.inputs) - {i.name for i in model_inputs})
        if extra:
            raise UserError(f"--inputs: array(s) {', '.join(extra)} match no model input "
                            f"(inputs: {', '.join(i.name for i in model_inputs)})")
        first, origin = options.inputs, "file"
    elif source.example_inputs and not options.val_ranges and not options.shapes:
        first, origin = source.example_inputs, "model"
    try:
        return input_sets(model_inputs, count, options.seed, first, ranges, options.shapes), origin
    except MemoryError:
        given = options.shapes or {}
        shapes = {i.name: (list(given.get(i.name) or i.shape), i.dtype) for i in model_inputs}
        sizes = [(math.prod(dims) * np.dtype(dtype).itemsize, name, dims) for name, (dims, dtype) in shapes.items()
                 if all(isinstance(d, int) for d in dims)]  # a static shape: its size is known
        big = max(sizes, default=None)
        origin = " (its shape from --input-shape)" if big and big[1] in given else " (the model declares that shape)"
        where = f": input {big[1]} {big[2]} alone is {big[0] / 2**30:,.1f} GiB{origin}" if big else ""
        raise UserError(f"the model's inputs do not fit in memory{where}; give smaller shapes with --input-shape "
                        "or arrays with --inputs") from None
