"""The latency statistics: robust spread, bootstrap CI of the median, significance, load."""

from __future__ import annotations

import numpy as np

from compstack.core.latency import (
    IQR_WARN,
    LatencyConfig,
    LatencyStats,
    compare_latencies,
    measure,
    median_ci,
    medians_differ,
)


def _series(center: float, spread: float, n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(center, spread, n)


def test_ci_contains_the_median_and_narrows_with_more_samples() -> None:
    small, large = _series(10.0, 1.0, 50, 1), _series(10.0, 1.0, 2000, 2)
    lo_s, hi_s = median_ci(small)
    lo_l, hi_l = median_ci(large)
    assert lo_s <= float(np.median(small)) <= hi_s
    assert lo_l <= float(np.median(large)) <= hi_l
    assert (hi_l - lo_l) < (hi_s - lo_s)
    assert median_ci(small) == median_ci(small)  # seeded


def test_one_outlier_moves_cv_not_robust_spread() -> None:
    base = list(_series(1.0, 0.005, 400, 3))
    stats = LatencyStats.from_samples(base + [50.0])
    assert stats.noisy  # std/mean is dominated by the one outlier
    assert not stats.unstable and stats.iqr_rel < IQR_WARN
    wide = LatencyStats.from_samples(list(_series(1.0, 0.2, 400, 4)))
    assert wide.unstable and wide.iqr_rel > IQR_WARN
    assert wide.p10 <= wide.p25 <= wide.median <= wide.p75 <= wide.p90


def test_significance_of_two_medians() -> None:
    a = LatencyStats.from_samples(list(_series(1.0, 0.05, 300, 5))).to_dict()
    b = LatencyStats.from_samples(list(_series(1.5, 0.05, 300, 6))).to_dict()
    a2 = LatencyStats.from_samples(list(_series(1.0, 0.05, 300, 7))).to_dict()
    assert medians_differ(a, b) is True
    assert medians_differ(a, {"median": 1.0}) is None
    pairs = compare_latencies([("slow", b), ("fast", a), ("none", None)])
    assert pairs == [{"faster": "fast", "slower": "slow", "ratio": b["median"] / a["median"], "significant": True}]
    same = compare_latencies([("x", a), ("y", a2)])
    assert len(same) == 1 and same[0]["ratio"] >= 1.0
    overlap = max(a["ci95"][0], a2["ci95"][0]) <= min(a["ci95"][1], a2["ci95"][1])
    assert same[0]["significant"] is (not overlap)


def test_measure_records_load_and_threads() -> None:
    stats = measure([lambda: sum(range(5000))], LatencyConfig(warmup=1, min_runs=20, min_time_s=0.3))
    assert stats.load_before is not None and stats.load_after is not None
    assert stats.busy == (stats.load_before >= stats.cpus)
    assert stats.threads is not None and stats.threads["busy"] == 1
    d = stats.to_dict()
    assert d["ci95"][0] <= d["median"] <= d["ci95"][1]
