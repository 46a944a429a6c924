"""One latency protocol for every stack.

Warm-up runs first (not timed into the result); then the model runs until both a
minimum count and a minimum total time are reached (capped by a maximum count and
time), rotating among several prepared input sets so no stack gains from a cached
input. Each run is timed with ``time.perf_counter_ns`` around a call that returns only
when the outputs are ready (see :meth:`compstack.target.Compiled.prepare`).

Reported: median, p10, p90, mean (ms) and the coefficient of variation
``std / mean``; a CV above 2.5 % is flagged as noisy (the threshold of the issue; cf.
pyperf's "unstable" warning).
"""

from __future__ import annotations

import gc
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["LatencyConfig", "LatencyStats", "measure", "CV_WARN"]

#: Coefficient of variation above which a measurement is reported as noisy.
CV_WARN = 0.025


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
    """Latency of one (model, target) pair, in milliseconds."""

    median: float
    p10: float
    p90: float
    mean: float
    min: float
    cv: float
    runs: int
    noisy: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_samples(cls, samples_ms: Sequence[float]) -> "LatencyStats":
        """Statistics of raw per-run times (ms)."""
        arr = np.asarray(samples_ms, dtype=np.float64)
        mean = float(arr.mean())
        cv = float(arr.std() / mean) if mean > 0 else 0.0
        return cls(median=float(np.median(arr)), p10=float(np.percentile(arr, 10)),
                   p90=float(np.percentile(arr, 90)), mean=mean, min=float(arr.min()),
                   cv=cv, runs=int(arr.size), noisy=cv > CV_WARN)


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
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one run is not the stack's time
    try:
        _loop(calls, config, samples)
    finally:
        if gc_was_enabled:
            gc.enable()
    return LatencyStats.from_samples([s / 1e6 for s in samples])


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
