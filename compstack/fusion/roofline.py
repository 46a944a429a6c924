"""This machine's roofline, measured once and cached, and each kernel placed on it.

The roofline model (S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful
visual performance model for multicore architectures", CACM 52(4), 2009): a kernel of
arithmetic intensity ``I = FLOPs / bytes`` can reach at most
``min(peak GFLOP/s, I * peak GB/s)``; it is *memory-bound* when ``I`` is below the ridge
point ``peak GFLOP/s / peak GB/s``, *compute-bound* above.

Peaks are measured, not looked up:

* compute: the best of several float32 ``numpy.matmul`` of two N x N matrices
  (``2 * N**3`` FLOPs; numpy's BLAS with all its threads), N = 2048 and 1024;
* memory: the best of several ``numpy.copyto`` of a large float32 array (bytes read plus
  bytes written per copy).

Both are *achievable* peaks of this machine as numpy sees it, not datasheet numbers; they
are cached per host (``<cache_dir>/roofline/<host id>.json``) and reused until
``refresh=True``.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Peak", "measure_peak", "machine_peak", "place"]

#: Version of the cached file's layout.
_VERSION = 1


@dataclass(frozen=True)
class Peak:
    """Measured peaks of this machine.

    Attributes:
        gflops: float32 GEMM throughput, GFLOP/s.
        gbs: copy bandwidth, GB/s (1e9 bytes per second, read + write).
        gemm_n: the matrix size used; ``copy_mib``: the array size copied (MiB).
        threads: CPUs visible to this process when measured.
        measured_at: UNIX time of the measurement.
    """

    gflops: float
    gbs: float
    gemm_n: int
    copy_mib: int
    threads: int
    measured_at: float

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the two roofs meet."""
        return self.gflops / self.gbs

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ridge_flop_per_byte": self.ridge,
                "method": "numpy float32 matmul (GFLOP/s) and numpy.copyto (GB/s, read+write), best of repeats"}


def measure_peak(gemm_n: int = 2048, copy_mib: int = 256, repeats: int = 4) -> Peak:
    """Measure the peaks (a few seconds on a small machine)."""
    gflops = max(_gemm_gflops(gemm_n, repeats), _gemm_gflops(gemm_n // 2, repeats * 2))
    return Peak(gflops, _copy_gbs(copy_mib, repeats), gemm_n, copy_mib,
                len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
                time.time())


def _gemm_gflops(n: int, repeats: int) -> float:
    """Best float32 ``n x n`` matmul throughput, GFLOP/s (``2 n**3`` FLOPs each)."""
    a = np.full((n, n), 0.5, dtype=np.float32)
    b = np.full((n, n), 0.25, dtype=np.float32)
    out = np.empty_like(a)
    np.matmul(a, b, out=out)
    best = min(_timed(lambda: np.matmul(a, b, out=out)) for _ in range(repeats))
    return 2.0 * n**3 / best / 1e9


def _copy_gbs(mib: int, repeats: int) -> float:
    """Best ``numpy.copyto`` bandwidth of a ``mib`` MiB float32 array, GB/s (read + write)."""
    src = np.ones(mib * 2**20 // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    best = min(_timed(lambda: np.copyto(dst, src)) for _ in range(repeats))
    return 2.0 * src.nbytes / best / 1e9


def _timed(fn: Any) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def machine_peak(cache_dir: Path, refresh: bool = False) -> Peak:
    """The cached :class:`Peak` of this host, measured now when absent (or ``refresh``)."""
    import hashlib

    from compstack.cache import host_id

    path = Path(cache_dir) / "roofline" / f"{hashlib.sha256(host_id().encode()).hexdigest()[:16]}.json"
    if not refresh and path.is_file():
        try:
            data = json.loads(path.read_text())
            if data.get("version") == _VERSION:
                return Peak(**{k: data[k] for k in ("gflops", "gbs", "gemm_n", "copy_mib", "threads",
                                                     "measured_at")})
        except (OSError, ValueError, KeyError, TypeError):
            pass
    peak = measure_peak()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"version": _VERSION, **asdict(peak)}))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs a re-measure next time
    return peak


def place(flops: int | None, nbytes: int | None, time_ms: float, peak: Peak) -> dict[str, Any]:
    """A kernel on the roofline.

    Args:
        flops: the kernel's FLOPs per launch set (None: unknown).
        nbytes: its compulsory bytes (None: unknown).
        time_ms: its measured time (ms).
        peak: this machine's :class:`Peak`.

    Returns:
        ``gflops`` and ``gbs`` achieved, ``intensity`` (FLOP/byte), ``bound``
        (``compute``/``memory``), ``attainable_gflops`` and ``fraction``: achieved over
        the bound that applies (GFLOP/s over the roof at this intensity when the kernel
        has FLOPs, else GB/s over peak GB/s). Missing inputs give None entries.
    """
    sec = time_ms / 1e3
    out: dict[str, Any] = {"gflops": None, "gbs": None, "intensity": None, "bound": None,
                           "attainable_gflops": None, "fraction": None}
    if sec <= 0:
        return out
    if flops is not None:
        out["gflops"] = flops / sec / 1e9
    if nbytes is not None:
        out["gbs"] = nbytes / sec / 1e9
    if flops and nbytes:
        intensity = flops / nbytes
        roof = min(peak.gflops, intensity * peak.gbs)
        out.update(intensity=intensity, bound="compute" if intensity >= peak.ridge else "memory",
                   attainable_gflops=roof, fraction=out["gflops"] / roof)
    elif nbytes:
        out.update(bound="memory", fraction=out["gbs"] / peak.gbs)
    return out
