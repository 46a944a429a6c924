"""One latency protocol for every stack.

Warm-up runs first (not timed into the result); then the model runs until both a
minimum count and a minimum total time are reached (capped by a maximum count and
time), rotating among several prepared input sets so no stack gains from a cached
input. Each run is timed with ``time.perf_counter_ns`` around a call that returns only
when the outputs are ready (see :meth:`compstack.targets.base.Compiled.prepare`).

Reported: median, p10, p90, mean (ms) and the coefficient of variation
``std / mean``; a CV above 2.5 % is flagged as noisy (the threshold of the issue; cf.
pyperf's "unstable" warning). Because one preempted run inflates the CV on a shared
machine, the robust spread ``IQR / median`` ((p75 - p25) / median) is reported beside
it, and a row is *unstable* when that passes :data:`IQR_WARN` (5 %; for normal noise
IQR ~ 1.35 std, so 5 % is about a 3.7 % CV that no single outlier can fake).

The 95 % confidence interval of the median comes from a moving-block bootstrap
(:func:`median_ci`; blocks keep the time order's correlation, which a plain bootstrap
of a drifting series would ignore and report too narrow). Two targets' medians differ
significantly when their intervals do not overlap (:func:`medians_differ`; a
conservative test at about the 99 % level).

The machine's 1-minute load average (``os.getloadavg``) is recorded before and after
the timed loop; the row is marked ``busy`` when the load before it was at least the
number of usable CPUs (other processes were already asking for every core), and the
CPU time of every thread during the loop is sampled (:class:`compstack.core.threads.ThreadSampler`).
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["LatencyConfig", "LatencyStats", "measure", "CV_WARN", "IQR_WARN", "median_ci", "medians_differ",
           "compare_latencies",
           "BOOTSTRAP_RESAMPLES"]

#: Coefficient of variation above which a measurement is reported as noisy.
CV_WARN = 0.025
#: Robust spread ``(p75 - p25) / median`` above which a measurement is unstable.
IQR_WARN = 0.05
#: Resamples of the bootstrap of the median.
BOOTSTRAP_RESAMPLES = 1000
#: The bootstrap uses at most this many samples (evenly spaced, time order kept).
_BOOTSTRAP_MAX = 5000


@dataclass(frozen=True)
class LatencyConfig:
    """Latency protocol settings.

    Attributes:
        warmup: untimed runs before measuring.
        min_runs: at least this many timed runs.
        min_time_s: and at least this much total timed wall time (seconds).
        max_runs: never more runs than this.
        max_time_s: stop once this much timed wall time has passed, even below min_runs
            (a slow model still gets a result; the count is reported).
        input_sets: how many input sets to rotate.
    """

    warmup: int = 3
    min_runs: int = 20
    min_time_s: float = 1.0
    max_runs: int = 100_000
    max_time_s: float = 60.0
    input_sets: int = 3


@dataclass
class LatencyStats:
    """Latency of one (model, target) pair, in milliseconds.

    Attributes:
        median, p10, p90, p25, p75, mean, min: of the per-run times, ms.
        cv: ``std / mean``; ``noisy`` when above :data:`CV_WARN`.
        iqr_rel: ``(p75 - p25) / median``; ``unstable`` when above :data:`IQR_WARN`.
        ci95: 95 % confidence interval of the median, ms (:func:`median_ci`).
        runs: timed runs.
        load_before, load_after: 1-minute load average before / after the loop.
        busy: the machine was loaded before the loop (load_before >= usable CPUs).
        cpus: usable CPUs of the process.
        threads: :class:`compstack.core.threads.ThreadUse` of the loop, as a dict (None
            where it cannot be observed).
    """

    median: float
    p10: float
    p90: float
    mean: float
    min: float
    cv: float
    runs: int
    noisy: bool
    p25: float = 0.0
    p75: float = 0.0
    iqr_rel: float = 0.0
    unstable: bool = False
    ci95: tuple[float, float] | None = None
    load_before: float | None = None
    load_after: float | None = None
    busy: bool = False
    cpus: int = 0
    threads: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ci95"] = list(self.ci95) if self.ci95 is not None else None
        return out

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float]) -> "LatencyStats":
        """Statistics of raw per-run times (ms), in time order."""
        arr = np.asarray(samples_ms, dtype=np.float64)
        mean = float(arr.mean())
        cv = float(arr.std() / mean) if mean > 0 else 0.0
        p10, p25, med, p75, p90 = (float(x) for x in np.percentile(arr, [10, 25, 50, 75, 90]))
        iqr_rel = (p75 - p25) / med if med > 0 else 0.0
        return cls(median=med, p10=p10, p90=p90, mean=mean, min=float(arr.min()), cv=cv, runs=int(arr.size),
                   noisy=cv > CV_WARN, p25=p25, p75=p75, iqr_rel=iqr_rel, unstable=iqr_rel > IQR_WARN,
                   ci95=median_ci(arr))


def median_ci(samples: Sequence[float] | np.ndarray, level: float = 0.95, resamples: int = BOOTSTRAP_RESAMPLES,
              seed: int = 0) -> tuple[float, float]:
    """Percentile moving-block bootstrap confidence interval of the median.

    Blocks of ``ceil(sqrt(n))`` consecutive samples are drawn with replacement until
    ``n`` samples are resampled; the interval is the ``(1 - level) / 2`` and
    ``(1 + level) / 2`` quantiles of the resampled medians. Seeded: the same samples
    give the same interval. More than 5000 samples are thinned to 5000 evenly spaced
    ones first (the time order is kept).

    Args:
        samples: per-run times in time order (any unit; the interval has the same).
        level: confidence level.
        resamples: bootstrap resamples.
        seed: seed of the resampling.

    Returns:
        ``(low, high)``; both the sample itself for fewer than 2 samples.
    """
    arr = np.asarray(samples, dtype=np.float64)
    n = arr.size
    if n < 2:
        v = float(arr[0]) if n else float("nan")
        return (v, v)
    if n > _BOOTSTRAP_MAX:
        arr = arr[np.linspace(0, n - 1, _BOOTSTRAP_MAX).astype(np.int64)]
        n = arr.size
    block = max(1, int(np.ceil(np.sqrt(n))))
    nblocks = int(np.ceil(n / block))
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n - block + 1, size=(resamples, nblocks))
    idx = (starts[:, :, None] + np.arange(block)[None, None, :]).reshape(resamples, -1)[:, :n]
    meds = np.median(arr[idx], axis=1)
    lo, hi = np.quantile(meds, [(1 - level) / 2, (1 + level) / 2])
    return (float(lo), float(hi))


def medians_differ(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool | None:
    """Whether two latency dicts' medians differ significantly: their ``ci95`` do not
    overlap. None when either has no interval."""
    ca, cb = a.get("ci95"), b.get("ci95")
    if not ca or not cb:
        return None
    return bool(ca[1] < cb[0] or cb[1] < ca[0])


def compare_latencies(rows: Sequence[tuple[str, Mapping[str, Any] | None]]) -> list[dict[str, Any]]:
    """Every pair of timed targets, faster first: the ratio of their medians and whether
    they differ significantly (:func:`medians_differ`).

    Args:
        rows: ``(target, latency dict or None)``; rows without a latency are skipped.

    Returns:
        ``{"faster", "slower", "ratio" (slower median / faster median), "significant"}``
        per pair, ordered by the faster target's median.
    """
    timed = sorted(((n, lat) for n, lat in rows if lat and lat.get("median")), key=lambda r: r[1]["median"])
    out = []
    for i, (fast, a) in enumerate(timed):
        for slow, b in timed[i + 1:]:
            out.append({"faster": fast, "slower": slow, "ratio": b["median"] / a["median"],
                        "significant": medians_differ(a, b)})
    return out


def _loadavg() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def measure(calls: Sequence[Callable[[], Any]], config: LatencyConfig = LatencyConfig()) -> LatencyStats:
    """Time ``calls`` (one prepared call per input set) with the protocol above.

    Args:
        calls: zero-argument callables, each running the model once on one input set
            and returning when its outputs are ready.
        config: the protocol.

    Returns:
        :class:`LatencyStats` in milliseconds.
    """
    if not calls:
        raise ValueError("measure() needs at least one prepared call")
    k = len(calls)
    for i in range(max(config.warmup, k)):
        calls[i % k]()
    samples: list[int] = []
    from compstack.core.threads import ThreadSampler, _usable_cpus

    cpus = len(_usable_cpus())
    load_before = _loadavg()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one run is not the stack's time
    try:
        with ThreadSampler() as sampler:
            _loop(calls, config, samples)
    finally:
        if gc_was_enabled:
            gc.enable()
    stats = LatencyStats.from_samples([s / 1e6 for s in samples])
    stats.load_before, stats.load_after, stats.cpus = load_before, _loadavg(), cpus
    stats.busy = load_before is not None and load_before >= cpus
    stats.threads = sampler.use.to_dict() if sampler.use is not None else None
    return stats


def _loop(calls: Sequence[Callable[[], Any]], config: LatencyConfig, samples: list[int]) -> None:
    k = len(calls)
    total = 0
    min_ns, max_ns = int(config.min_time_s * 1e9), int(config.max_time_s * 1e9)
    clock = time.perf_counter_ns
    i = 0
    while i < config.max_runs:
        fn = calls[i % k]
        t0 = clock()
        fn()
        dt = clock() - t0
        samples.append(dt)
        total += dt
        i += 1
        if (i >= config.min_runs and total >= min_ns) or total >= max_ns:
            break
