"""This machine's roofline, measured once and cached, and each kernel placed on it.

The roofline model (S. Williams, A. Waterman, D. Patterson, "Roofline: an insightful
visual performance model for multicore architectures", CACM 52(4), 2009): a kernel of
arithmetic intensity ``I = FLOPs / bytes`` can reach at most
``min(peak GFLOP/s, I * peak GB/s)``; it is *memory-bound* when ``I`` is below the ridge
point ``peak GFLOP/s / peak GB/s``, *compute-bound* above.

Peaks are measured, not looked up, with the fastest library at hand:

* compute: the best of several float32 GEMMs of two N x N matrices (``2 * N**3``
  FLOPs; all threads), N = 2048 and 1024, by ``numpy.matmul`` (its BLAS) and, when
  torch is installed, ``torch.mm`` (oneDNN/MKL; measured 231 GFLOP/s against numpy's
  98 on the 2-core development machine) in a subprocess, so this process never imports torch;
* memory: the best of several copies of a 256 MiB float32 array (bytes read plus bytes
  written), ``numpy.copyto`` and ``Tensor.copy_``.

The highest of each is the peak; :attr:`Peak.method` records every measurement and which
won. Both are *achievable* peaks of this machine, not datasheet numbers; they are
cached per host (``<cache_dir>/roofline/<host id>.json``) and reused until
``refresh=True``.

A kernel that :func:`place` finds above a roof gets no percentage: above the compute
peak it is a measurement error (its time is too short: a profiler that splits or
overlaps events, or FLOPs counted for work the stack skipped); above only the copy
roof its data came from cache (the copy peak is DRAM bandwidth), so the roofline cannot
bound it. Either way ``fraction`` is None and ``above_peak`` says which and why.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["Peak", "measure_peak", "machine_peak", "place"]

#: Version of the cached file's layout.
_VERSION = 2


@dataclass(frozen=True)
class Peak:
    """Measured peaks of this machine.

    Attributes:
        gflops: float32 GEMM throughput, GFLOP/s.
        gbs: copy bandwidth, GB/s (1e9 bytes per second, read + write).
        gemm_n: the matrix size used; ``copy_mib``: the array size copied (MiB).
        threads: CPUs visible to this process when measured.
        measured_at: UNIX time of the measurement.
        method: every measurement (``{"gemm": {"numpy": GFLOP/s, "torch": ...}, "copy":
            {...}, "best": {"gemm": "torch", "copy": "numpy"}, "load_before": ...}``).
    """

    gflops: float
    gbs: float
    gemm_n: int
    copy_mib: int
    threads: int
    measured_at: float
    method: dict[str, Any] = field(default_factory=dict)

    @property
    def ridge(self) -> float:
        """Arithmetic intensity (FLOP/byte) where the two roofs meet."""
        return self.gflops / self.gbs

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ridge_flop_per_byte": self.ridge,
                "how": "float32 N x N GEMM (GFLOP/s, 2 N^3 FLOPs) and a large array copy (GB/s, read+write), "
                       "best of repeats, fastest of numpy and torch (see method)"}


def measure_peak(gemm_n: int = 2048, copy_mib: int = 256, repeats: int = 4, use_torch: bool = True) -> Peak:
    """Measure the peaks (a few seconds on a small machine; torch's in a subprocess).

    Args:
        gemm_n: the larger GEMM size (``gemm_n // 2`` is tried too).
        copy_mib: the copied array, MiB.
        repeats: timed repeats of each (the best counts).
        use_torch: also measure with torch when it is installed.
    """
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    gemm = {"numpy": max(_gemm_gflops(gemm_n, repeats), _gemm_gflops(gemm_n // 2, repeats * 2))}
    copy = {"numpy": _copy_gbs(copy_mib, repeats)}
    notes = []
    if use_torch:
        got, note = _torch_peaks(gemm_n, copy_mib, repeats)
        if got:
            gemm["torch"], copy["torch"] = got["gflops"], got["gbs"]
        if note:
            notes.append(note)
    best = {"gemm": max(gemm, key=gemm.__getitem__), "copy": max(copy, key=copy.__getitem__)}
    method = {"gemm_gflops": gemm, "copy_gbs": copy, "best": best, "load_before": load, "notes": notes}
    return Peak(gemm[best["gemm"]], copy[best["copy"]], gemm_n, copy_mib,
                len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1,
                time.time(), method)


_TORCH_PEAK = r"""
import json, sys, time, torch
n, mib, repeats = (int(x) for x in sys.argv[1:4])
def best(fn, k):
    fn()
    ts = []
    for _ in range(k):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    return min(ts)
g = 0.0
for m, k in ((n, repeats), (n // 2, repeats * 2)):
    a = torch.full((m, m), 0.5); b = torch.full((m, m), 0.25); out = torch.empty(m, m)
    g = max(g, 2.0 * m**3 / best(lambda: torch.mm(a, b, out=out), k) / 1e9)
src = torch.ones(mib * 2**20 // 4); dst = torch.empty_like(src)
bw = 2.0 * src.numel() * 4 / best(lambda: dst.copy_(src), repeats) / 1e9
print(json.dumps({"gflops": g, "gbs": bw, "threads": torch.get_num_threads()}))
"""


def _torch_peaks(n: int, mib: int, repeats: int) -> tuple[dict[str, float] | None, str]:
    """torch's GEMM and copy peaks from a subprocess; ``(None, why)`` without torch."""
    import importlib.util
    import subprocess

    from compstack.core.procs import python_code_argv

    if importlib.util.find_spec("torch") is None:
        return None, "torch not installed: numpy only"
    try:
        proc = subprocess.run(python_code_argv(_TORCH_PEAK, str(n), str(mib), str(repeats)),
                              capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, "torch peak measurement timed out (300 s): numpy only"
    if proc.returncode != 0:
        return None, f"torch peak measurement failed: {proc.stderr.strip().splitlines()[-1:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), ""


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
    """The cached :class:`Peak` of this host, measured now when absent (or ``refresh``).

    The peak is a record of the store's ``roofline`` kind
    (:meth:`compstack.core.store.Store.read_record`: verified by its hash; an altered or
    malformed one is measured again), keyed by :func:`compstack.core.store.host_id`."""
    from compstack.core.store import Store, host_id, key

    store = Store(cache_dir)
    k = key("roofline", {"host": host_id(), "version": _VERSION}, digits=16)
    if not refresh:
        data, _ = store.read_record("roofline", k)
        try:
            if data is not None and data.get("version") == _VERSION:
                return Peak(**{f: data[f] for f in ("gflops", "gbs", "gemm_n", "copy_mib", "threads",
                                                     "measured_at", "method")})
        except (KeyError, TypeError):
            store.evict("roofline", k)
    peak = measure_peak()
    try:
        store.write_record("roofline", k, {"version": _VERSION, **asdict(peak)})
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
        has FLOPs, else GB/s over peak GB/s), at most 1. Above a roof ``fraction`` is None
        and ``above_peak`` (``measurement-error`` or ``from-cache``) with ``explanation``
        says why (module docstring). Missing inputs give None entries.
    """
    sec = time_ms / 1e3
    out: dict[str, Any] = {"gflops": None, "gbs": None, "intensity": None, "bound": None,
                           "attainable_gflops": None, "fraction": None, "above_peak": None, "explanation": None}
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
    elif flops:
        out.update(bound="compute", fraction=out["gflops"] / peak.gflops)
    if out["fraction"] is not None and out["fraction"] > 1.0:
        _above(out, peak)
    return out


def _above(out: dict[str, Any], peak: Peak) -> None:
    """Replace a fraction above 1 by the reason (never report > 100 % of a roof)."""
    gemm_by = peak.method.get("best", {}).get("gemm", "numpy") if peak.method else "numpy"
    out["fraction"] = None
    if out["gflops"] is not None and out["gflops"] > peak.gflops:
        out["above_peak"] = "measurement-error"
        out["explanation"] = (f"{out['gflops']:.1f} GFLOP/s is above the measured {gemm_by} GEMM peak "
                              f"{peak.gflops:.1f} GFLOP/s: the kernel's time is too short (a profiler event that "
                              "covers part of the work or overlaps others) or its FLOPs are over-counted, or the "
                              "peak was measured under load (`compstack profile --refresh-peak`)")
    else:
        out["above_peak"] = "from-cache"
        out["explanation"] = (f"{out['gbs']:.1f} GB/s of compulsory bytes is above the measured copy bandwidth "
                              f"{peak.gbs:.1f} GB/s (DRAM): the data came from cache, which the memory roof does "
                              "not bound")
