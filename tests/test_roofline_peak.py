"""The measured roofline peak (fastest of numpy and torch) and kernels above a roof."""

from __future__ import annotations

import importlib.util

from compstack.analysis.fusion.roofline import Peak, measure_peak, place


def test_peak_is_the_fastest_library_and_says_how() -> None:
    peak = measure_peak(gemm_n=256, copy_mib=8, repeats=2)
    gemm, copy = peak.method["gemm_gflops"], peak.method["copy_gbs"]
    assert "numpy" in gemm and "numpy" in copy
    if importlib.util.find_spec("torch") is not None:
        assert "torch" in gemm and "torch" in copy
    assert peak.gflops == max(gemm.values()) and peak.gbs == max(copy.values())
    assert gemm[peak.method["best"]["gemm"]] == peak.gflops
    assert peak.to_json()["method"]["best"]["copy"] in copy


def test_kernel_above_a_roof_gets_a_reason_not_a_percentage() -> None:
    peak = Peak(gflops=100.0, gbs=10.0, gemm_n=64, copy_mib=1, threads=1, measured_at=0.0)
    err = place(flops=30_000_000, nbytes=10_000, time_ms=0.1, peak=peak)  # 300 GFLOP/s > 100
    assert err["fraction"] is None and err["above_peak"] == "measurement-error"
    assert "GEMM peak" in err["explanation"]
    cached = place(flops=1_000, nbytes=5_000_000, time_ms=0.1, peak=peak)  # 50 GB/s > 10, 0.01 GFLOP/s
    assert cached["fraction"] is None and cached["above_peak"] == "from-cache"
    ok = place(flops=2_000_000, nbytes=10_000, time_ms=0.1, peak=peak)
    assert ok["above_peak"] is None and 0 < ok["fraction"] <= 1
