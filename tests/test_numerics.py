"""Comparison rule, input generation and the latency protocol."""

from __future__ import annotations

import time

import numpy as np
import pytest

from compstack.analysis.numerics import compare_outputs, tolerance_for
from compstack.core.errors import UserError
from compstack.core.inputs import generate, input_sets, parse_shapes, parse_val_ranges
from compstack.core.ir import ModelInput
from compstack.core.latency import LatencyConfig, LatencyStats, measure


def _one(actual, ref, dtype=np.float32, **kw):
    return compare_outputs({"y": np.asarray(actual, dtype)}, {"y": np.asarray(ref)}, {"y": np.dtype(dtype)}, **kw)[0]


def test_errors_are_measured() -> None:
    c = _one([1.0, 2.0, 4.0], np.array([1.0, 2.0, 4.002]))
    assert c.max_abs_err == pytest.approx(0.002, rel=1e-3)
    assert c.max_rel_err == pytest.approx(0.002 / 4.002, rel=1e-3)
    assert c.rel_l2 == pytest.approx(0.002 / np.linalg.norm([1, 2, 4.002]), rel=1e-3)
    assert c.ok  # 0.002 <= 1e-5 + 1e-3 * 4.002


def test_outside_tolerance_is_a_mismatch() -> None:
    c = _one([1.0, 2.0, 4.0], np.array([1.0, 2.0, 4.01]))
    assert not c.ok and "outside tolerance" in c.reason


def test_nan_where_reference_has_none_is_mismatch_even_if_rest_matches() -> None:
    c = _one([np.nan, 1.0], [0.0, 1.0])
    assert not c.ok and c.nan == 1 and c.ref_nan == 0 and "NaN" in c.reason


def test_nan_in_same_place_is_ok_and_missing_nan_is_not() -> None:
    assert _one([np.nan, 1.0], [np.nan, 1.0]).ok
    c = _one([0.0, 1.0], [np.nan, 1.0])
    assert not c.ok and c.ref_nan == 1


def test_inf_sign_matters() -> None:
    assert _one([np.inf, 1.0], [np.inf, 1.0]).ok
    assert not _one([-np.inf, 1.0], [np.inf, 1.0]).ok


def test_integers_exact_shape_and_dtype_checked() -> None:
    assert not _one([1, 2], [1, 3], dtype=np.int64).ok
    assert _one([1, 2], [1, 2], dtype=np.int64).ok
    assert "shape" in _one([1.0, 2.0], [[1.0, 2.0]]).reason
    c = compare_outputs({"y": np.zeros(2, np.float64)}, {"y": np.zeros(2)}, {"y": np.dtype(np.float32)})[0]
    assert not c.ok and "dtype" in c.reason


def test_tolerance_override() -> None:
    assert tolerance_for(np.float32).rtol == 1e-3
    assert tolerance_for(np.float32, atol=0.5).atol == 0.5
    assert _one([1.0], [1.4], atol=0.5).ok


def test_generated_inputs_respect_dtype_shape_and_range() -> None:
    ins = [ModelInput("ids", np.dtype(np.int64), (2, 16)), ModelInput("mask", np.dtype(np.bool_), (2, 16)),
           ModelInput("x", np.dtype(np.float16), (3, "N"))]
    arrs = generate(ins, seed=1, val_ranges={"ids": (5, 9)}, shapes={"x": (3, 7)})
    assert arrs["ids"].dtype == np.int64 and arrs["ids"].min() >= 5 and arrs["ids"].max() < 9
    assert arrs["mask"].dtype == np.bool_ and arrs["x"].shape == (3, 7) and arrs["x"].dtype == np.float16
    again = generate(ins, seed=1, val_ranges={"ids": (5, 9)}, shapes={"x": (3, 7)})
    assert all(np.array_equal(arrs[k], again[k]) for k in arrs)
    sets = input_sets(ins, 3, seed=1, val_ranges={"ids": (5, 9)}, shapes={"x": (3, 7)})
    assert len(sets) == 3 and not np.array_equal(sets[0]["x"], sets[1]["x"])


def test_dynamic_input_without_shape_is_a_clear_error() -> None:
    with pytest.raises(UserError, match="--input-shape x:3x<n>"):
        generate([ModelInput("x", np.dtype(np.float32), (3, "N"))])


@pytest.mark.parametrize("spec", ["ids", "ids:1", "ids:a,b", "ids:5,1"])
def test_bad_val_range(spec: str) -> None:
    with pytest.raises(UserError, match="--val-range"):
        parse_val_ranges([spec])


def test_shapes_parse() -> None:
    assert parse_shapes(["x:1x3x224x224"]) == {"x": (1, 3, 224, 224)}
    with pytest.raises(UserError, match="--input-shape"):
        parse_shapes(["x:1xfoo"])


def test_latency_protocol_counts_and_stats() -> None:
    calls = [lambda: time.sleep(0.001), lambda: time.sleep(0.002)]
    stats = measure(calls, LatencyConfig(warmup=2, min_runs=10, min_time_s=0.05))
    assert stats.runs >= 10
    assert 1.0 <= stats.p10 <= stats.median <= stats.p90 < 50.0
    s = LatencyStats.from_samples([1.0, 1.0, 1.0, 1.0])
    assert s.cv == 0.0 and not s.noisy
    assert LatencyStats.from_samples([1.0, 2.0]).noisy  # CV 33 % > 2.5 %


def test_an_all_nan_output_agrees_but_says_so_and_shows_no_error_figure() -> None:
    """New-user trial: ``--inputs`` of NaNs compared ``ok`` with error 0 and no word. NaN at the
    same places still agrees (the verdict's rule), but no error was measured (NaN, shown "-"),
    and the row's note says the verdict says nothing about the numerics."""
    from compstack.core.results import Result
    from compstack.run.oracle import judge_row

    nan = {"y": np.full((2, 3), np.nan, np.float32)}
    (c,) = compare_outputs(nan, {"y": nan["y"].astype(np.float64)})
    assert c.ok and np.isnan(c.max_abs_err) and np.isnan(c.max_rel_err)
    assert c.to_dict()["max_abs_err"] is None
    row = Result(target="ort-cpu", status="ok")
    judge_row(row, nan, {"y": nan["y"].astype(np.float64)}, {"y": np.float32}, None, None, None)
    assert row.status == "ok" and any("no finite element" in n for n in row.notes)
    (e,) = compare_outputs({"y": np.zeros((0, 3), np.float32)}, {"y": np.zeros((0, 3))})
    assert e.max_abs_err == 0.0  # an empty output: nothing differs, and nothing is noted
    row = Result(target="ort-cpu", status="ok")
    judge_row(row, {"y": np.ones(3, np.float32)}, {"y": np.ones(3)}, {"y": np.float32}, None, None, None)
    assert not any("finite" in n for n in row.notes)
