"""Say the right thing (issue #28 part 6): the oversubscription note names the knobs."""

from __future__ import annotations

from compstack.core.latency import OVERSUBSCRIBED, oversubscription_note


def test_oversubscription_note_names_the_knobs() -> None:
    threads = {"requested": 2, "knob": "torch.set_num_threads(2)"}
    note = oversubscription_note({"median": 27.9, "p10": 0.9}, threads)
    assert "thread oversubscription (asked for 2)" in note
    assert "--threads N" in note and "OMP_NUM_THREADS" in note and "torch.set_num_threads(2)" in note
    assert "p10 0.9 ms" in note and "median 27.9 ms" in note
    # a spread within the rule is no note; nor is a row without latency
    assert oversubscription_note({"median": 1.0, "p10": OVERSUBSCRIBED}, threads) == ""
    assert oversubscription_note(None, threads) == "" and oversubscription_note({"median": 0.0, "p10": 0.0}, None) == ""
    assert "the stack's intra-op thread option" in oversubscription_note({"median": 10.0, "p10": 1.0}, None)


def test_a_timeout_names_the_phase_it_cut() -> None:
    """``--timeout`` past the torch export says "the torch export", not "the function"."""
    import torch

    from compstack.frontends.from_pyfile import _export_phase

    assert _export_phase((torch.nn.Linear(2, 2), (torch.zeros(1, 2),))).startswith("the torch export")
    assert _export_phase(object()) == "the check of the model it returned"
