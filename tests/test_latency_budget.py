"""The latency protocol's time budget (issue #23, part 3): warm-up included, never fewer
than three timed runs for the budget alone, never a run past the job's deadline."""

from __future__ import annotations

import time

import pytest

from compstack.core.latency import MIN_BUDGET_RUNS, LatencyBudgetError, LatencyConfig, measure


def _sleeper(seconds: float, log: list[float]):  # noqa: ANN202
    def call() -> None:
        log.append(time.monotonic())
        time.sleep(seconds)

    return call


def test_a_slow_model_gets_three_runs_and_a_wide_interval_not_a_timeout() -> None:
    calls: list[float] = []
    t0 = time.monotonic()
    stats = measure([_sleeper(0.3, calls)], LatencyConfig(warmup=3, min_runs=20, min_time_s=5.0, budget_s=0.6))
    took = time.monotonic() - t0
    assert stats.warmup_runs == 1  # the first warm-up run used half the budget: no more
    assert stats.runs == MIN_BUDGET_RUNS and stats.cut == "budget"
    assert len(calls) == 1 + MIN_BUDGET_RUNS and took < 0.3 * (1 + MIN_BUDGET_RUNS) + 0.5
    assert stats.median >= 300 and stats.ci95 is not None and stats.ci95[0] <= stats.median <= stats.ci95[1]
    assert stats.budget_s == 0.6


def test_a_fast_model_is_not_cut_by_the_budget() -> None:
    stats = measure([lambda: sum(range(1000))], LatencyConfig(warmup=2, min_runs=50, min_time_s=0.05, budget_s=30))
    assert stats.cut == "" and stats.runs >= 50 and stats.warmup_runs == 2  # max(warmup, input sets)


def test_the_deadline_wins_over_the_three_run_floor() -> None:
    calls: list[float] = []
    deadline = time.monotonic() + 0.75
    stats = measure([_sleeper(0.3, calls)], LatencyConfig(warmup=1, min_runs=20, min_time_s=0, budget_s=100),
                    deadline=deadline)
    assert stats.cut == "deadline" and stats.runs == 1  # warm-up 0.3 s + one 0.3 s run; a second would pass it
    assert calls[-1] + 0.3 <= deadline + 0.05


def test_no_timed_run_fits_before_the_deadline() -> None:
    with pytest.raises(LatencyBudgetError, match="no timed run fits"):
        measure([_sleeper(0.3, [])], LatencyConfig(warmup=1, min_runs=3, budget_s=100), deadline=time.monotonic() + 0.4)


def test_a_slow_outputs_run_is_the_warm_up() -> None:
    calls: list[float] = []
    stats = measure([_sleeper(0.3, calls)], LatencyConfig(warmup=3, min_runs=20, budget_s=0.8), first_run_s=0.3)
    assert stats.warmup_runs == 0 and stats.runs == MIN_BUDGET_RUNS and len(calls) == MIN_BUDGET_RUNS


def test_the_timed_cap_does_not_cut_below_three_runs_under_a_budget() -> None:
    """A run longer than ``max_time_s`` (60 s by default, a 360 s TVM run on BERT-base)
    still gets three timed runs when the budget allows them."""
    stats = measure([_sleeper(0.3, [])], LatencyConfig(warmup=1, min_runs=20, max_time_s=0.2, budget_s=0.5),
                    first_run_s=0.3)
    assert stats.runs == MIN_BUDGET_RUNS
