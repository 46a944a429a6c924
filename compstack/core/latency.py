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

A time budget scales the protocol to real models (issue #23, part 3):
``LatencyConfig.budget_s`` bounds the whole latency phase, warm-up included. Warm-up
stops after its first run once it has used :data:`WARMUP_SHARE` of the budget; the timed
loop stops once the next run (predicted from the last one) would end past the budget,
but never before :data:`MIN_BUDGET_RUNS` timed runs (nor does the ``max_time_s`` cap,
when there is a budget). A hard ``deadline`` (the job's
wall-clock limit, less a margin, from the worker) wins over both: the loop never starts
a run that would not end before it. A model at 60 s per run thus gives one warm-up and
three timed runs (a wide interval, reported as such), not a timeout.
"""

from __future__ import annotations

import gc
import os
import time
from dataclasses import InitVar, asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

__all__ = ["LatencyConfig", "LatencyStats", "measure", "CV_WARN", "IQR_WARN", "median_ci", "medians_differ",
           "compare_latencies",
           "BOOTSTRAP_RESAMPLES", "MIN_BUDGET_RUNS", "WARMUP_SHARE", "LatencyBudgetError", "OVERSUBSCRIBED",
           "oversubscription_note"]

#: Coefficient of variation above which a measurement is reported as noisy.
CV_WARN = 0.025
#: Robust spread ``(p75 - p25) / median`` above which a measurement is unstable.
IQR_WARN = 0.05
#: Resamples of the bootstrap of the median.
BOOTSTRAP_RESAMPLES = 1000
#: The bootstrap uses at most this many samples (evenly spaced, time order kept).
_BOOTSTRAP_MAX = 5000
#: Timed runs the budget never cuts below (only the hard deadline does).
MIN_BUDGET_RUNS = 3
#: Share of the budget after which warm-up stops (it always makes one run).
WARMUP_SHARE = 0.25


class LatencyBudgetError(RuntimeError):
    """No timed run fits before the job's deadline (the row keeps its other fields)."""


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
        budget_s: wall time of the whole latency phase, warm-up included, seconds
            (see the module docstring); 0 or less: no budget.
        min_time, max_time: the CLI's names (``--min-time``), accepted as aliases of
            ``min_time_s`` / ``max_time_s`` (seconds) at construction; not stored.

    Raises:
        TypeError: an alias and its field both given with different values.
    """

    warmup: int = 3
    min_runs: int = 20
    min_time_s: float = 1.0
    max_runs: int = 100_000
    max_time_s: float = 60.0
    input_sets: int = 3
    budget_s: float = 120.0
    min_time: InitVar[float | None] = None
    max_time: InitVar[float | None] = None

    def __post_init__(self, min_time: float | None, max_time: float | None) -> None:
        for alias, value, name in (("min_time", min_time, "min_time_s"), ("max_time", max_time, "max_time_s")):
            if value is None:
                continue
            default = type(self).__dataclass_fields__[name].default
            if getattr(self, name) not in (default, value):
                raise TypeError(f"LatencyConfig: {alias}={value} and {name}={getattr(self, name)}; give one")
            object.__setattr__(self, name, float(value))


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
        warmup_runs: untimed runs made (fewer than asked when the budget cut warm-up;
            0 when the run before, for the outputs, was slow enough to be the warm-up).
        budget_s: the budget the phase ran under (None: none); ``cut`` says it (or the
            job's deadline) stopped the loop before ``min_runs``/``min_time_s``.
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
    warmup_runs: int = 0
    budget_s: float | None = None
    cut: str = ""

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


def measure(calls: Sequence[Callable[[], Any]], config: LatencyConfig = LatencyConfig(),
            deadline: float | None = None, first_run_s: float | None = None) -> LatencyStats:
    """Time ``calls`` (one prepared call per input set) with the protocol above.

    Args:
        calls: zero-argument callables, each running the model once on one input set
            and returning when its outputs are ready.
        config: the protocol.
        deadline: ``time.monotonic()`` value no run may end after (the job's limit, less
            a margin), or None.
        first_run_s: how long the run just before took (the harness's run for the
            outputs), seconds: when that alone used :data:`WARMUP_SHARE` of the budget,
            it was the warm-up and none is added.

    Returns:
        :class:`LatencyStats` in milliseconds.

    Raises:
        ValueError: no calls.
        LatencyBudgetError: not one timed run fits before ``deadline``.
    """
    if not calls:
        raise ValueError("measure() needs at least one prepared call")
    start = time.monotonic()
    budget_end = start + config.budget_s if config.budget_s > 0 else None
    share = config.budget_s * WARMUP_SHARE if config.budget_s > 0 else None
    if first_run_s is not None and share is not None and first_run_s >= share:
        warm = (0, int(first_run_s * 1e9))  # the outputs run was the warm-up
    else:
        warm = _warm_up(calls, config, start, deadline)
    samples: list[int] = []
    from compstack.core.threads import ThreadSampler, _usable_cpus

    cpus = len(_usable_cpus())
    load_before = _loadavg()
    gc_was_enabled = gc.isenabled()
    gc.disable()  # as timeit does: a collection inside one run is not the stack's time
    try:
        with ThreadSampler() as sampler:
            cut = _loop(calls, config, samples, budget_end, deadline, warm[1])
    finally:
        if gc_was_enabled:
            gc.enable()
    if not samples:
        raise LatencyBudgetError(f"no timed run fits before the job's time limit (one run takes {warm[1] / 1e9:.1f} s)")
    stats = LatencyStats.from_samples([s / 1e6 for s in samples])
    stats.load_before, stats.load_after, stats.cpus = load_before, _loadavg(), cpus
    stats.busy = load_before is not None and load_before >= cpus
    stats.threads = sampler.use.to_dict() if sampler.use is not None else None
    stats.warmup_runs, stats.cut = warm[0], cut
    stats.budget_s = config.budget_s if config.budget_s > 0 else None
    return stats


def _warm_up(calls: Sequence[Callable[[], Any]], config: LatencyConfig, start: float,
             deadline: float | None) -> tuple[int, int]:
    """Untimed runs: ``max(warmup, len(calls))``, stopping after the first once
    :data:`WARMUP_SHARE` of the budget is used or the next would pass ``deadline``.
    Returns ``(runs, ns of the last run)``."""
    k = len(calls)
    share = config.budget_s * WARMUP_SHARE if config.budget_s > 0 else None
    last = 0
    runs = 0
    for i in range(max(config.warmup, k)):
        now = time.monotonic()
        if runs and ((share is not None and now - start >= share)
                     or (deadline is not None and now + last / 1e9 > deadline)):
            break
        t0 = time.perf_counter_ns()
        calls[i % k]()
        last = time.perf_counter_ns() - t0
        runs += 1
    return runs, last


def _loop(calls: Sequence[Callable[[], Any]], config: LatencyConfig, samples: list[int],
          budget_end: float | None = None, deadline: float | None = None, last_ns: int = 0) -> str:
    """The timed loop; returns why it stopped early (``budget``, ``deadline``) or ``""``."""
    k = len(calls)
    total = 0
    min_ns, max_ns = int(config.min_time_s * 1e9), int(config.max_time_s * 1e9)
    clock = time.perf_counter_ns
    i = 0
    dt = last_ns
    while i < config.max_runs:
        if deadline is not None or budget_end is not None:
            end = time.monotonic() + dt / 1e9  # when the next run would end
            if deadline is not None and end > deadline:
                return "deadline"
            if budget_end is not None and i >= MIN_BUDGET_RUNS and end > budget_end:
                return "budget"
        fn = calls[i % k]
        t0 = clock()
        fn()
        dt = clock() - t0
        samples.append(dt)
        total += dt
        i += 1
        if (i >= config.min_runs and total >= min_ns) or (total >= max_ns and (budget_end is None or
                                                                              i >= MIN_BUDGET_RUNS)):
            break
    return ""


#: ``p10 < OVERSUBSCRIBED * median``: the spread points to thread oversubscription.
OVERSUBSCRIBED = 0.5


def oversubscription_note(lat: Mapping[str, Any] | None, threads: Mapping[str, Any] | None) -> str:
    """A note when a row's spread points to thread oversubscription, naming the knobs; ``""``
    otherwise.

    The fast runs (p10) show what the stack does when its threads get the cores; a median
    more than twice as slow (``p10 < OVERSUBSCRIBED * median``) means most runs waited,
    typically for more threads than free cores (the stack's own pool on top of another
    runtime's, or of other processes). Rule of thumb as in PyTorch's CPU performance
    tuning guide (OMP_NUM_THREADS, ``torch.set_num_threads``).

    Args:
        lat: the row's latency dict (ms: ``median``, ``p10``).
        threads: the row's ``flags["threads"]`` (``requested``, ``knob``) or None.
    """
    if not lat or not lat.get("median") or lat.get("p10") is None or lat["p10"] >= OVERSUBSCRIBED * lat["median"]:
        return ""
    info = threads or {}
    knob = info.get("knob") or "the stack's intra-op thread option"
    asked = f" (asked for {info['requested']})" if info.get("requested") else ""
    return (f"p10 {lat['p10']:.3g} ms is under half the median {lat['median']:.3g} ms: the spread points to "
            f"thread oversubscription{asked}; try fewer threads with --threads N (sets OMP_NUM_THREADS and {knob})")
