"""The notes a compare row gets from its latency measurement: noise, spread, a busy
machine, oversubscribed threads and a loop the budget or cap cut short (thresholds in
:mod:`compstack.core.latency`)."""

from __future__ import annotations

from typing import Any, Mapping

from compstack.core.latency import LatencyConfig, oversubscription_note

__all__ = ["latency_notes"]


def latency_notes(lat: Mapping[str, Any] | None, threads: Mapping[str, Any] | None,
                  config: LatencyConfig | None) -> list[str]:
    """One line per remark on a row's latency.

    Args:
        lat: the row's ``latency_ms`` dict (ms; ``cv``, ``iqr_rel``, ``runs``, ``noisy``,
            ``unstable``, ``busy``, ``cut``...), or None when timing was off or failed.
        threads: the row's ``flags["threads"]``.
        config: the protocol the row was timed with (its ``min_runs`` and ``max_time_s``).

    Returns:
        The notes, in the order the table shows them (empty without a measurement).
    """
    notes: list[str] = []
    if lat and lat.get("noisy"):
        notes.append(f"latency CV {lat['cv']:.1%} > 2.5 %: noisy measurement (std/mean; p10-p90 shows "
                     "the spread without outliers)")
    if oversubscription_note(lat, threads):
        notes.append(oversubscription_note(lat, threads))
    if lat and lat.get("unstable"):
        notes.append(f"latency IQR/median {lat['iqr_rel']:.1%} > 5 %: unstable measurement (robust spread; "
                     "not one outlier)")
    if lat and lat.get("busy"):
        notes.append(f"machine busy: load average {lat['load_before']:.2f} before / "
                     f"{lat['load_after']:.2f} after the timed loop on {lat['cpus']} CPUs; "
                     "latency includes waiting for a CPU")
    if lat and lat.get("cut"):
        why = f"the {lat.get('budget_s'):g} s latency budget" if lat["cut"] == "budget" else "the job's --timeout"
        notes.append(f"latency from {lat['runs']} runs after {lat.get('warmup_runs')} warm-up: {why} "
                     "(warm-up included) came first; the interval is wide")
    elif lat and config and lat.get("runs", 0) < config.min_runs:
        notes.append(f"latency from {lat['runs']} runs only: the {config.max_time_s:g} s cap "
                     f"came before --min-runs {config.min_runs}")
    return notes
