"""Inputs a PyTorch model mutates in place are outputs of the row (``<input>@mutated``),
compared on the native Inductor path and on every stack that runs the common IR."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from conftest import run_cli

torch = pytest.importorskip("torch")

MODEL = '''\
import torch


class Accumulate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def forward(self, state, x):
        h = torch.tanh(self.fc(x))
        state.mul_(0.5).add_(h)  # the running state is updated in place
        return h.sum(dim=1)


def build():
    torch.manual_seed(0)
    return Accumulate().eval(), (torch.randn(4, 8), torch.randn(4, 8))
'''


def _eager_state(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(state before, state after) of one eager call of the model, computed here."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("mut_model_eager", folder / "mut_model.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    module, (state, x) = mod.build()
    before = state.clone().numpy()
    with torch.no_grad():
        module(state, x)
    return before, state.numpy()


def test_mutated_input_is_compared_on_the_native_path(isolated_env: Path) -> None:
    (isolated_env / "mut_model.py").write_text(MODEL)
    outs = isolated_env / "outs.npz"
    proc = run_cli("compare", f"{isolated_env / 'mut_model.py'}:build", "--targets", "inductor-cpu,ort-cpu", "--json",
                   "--no-latency", "--save-outputs", str(outs))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["target"]: r for r in json.loads(proc.stdout)["results"]}
    assert rows["inductor-cpu"]["flags"]["path"] == "native"
    for name, row in rows.items():
        assert row["status"] == "ok", (name, row["stage"], row["error"])
        by_name = {o["name"]: o for o in row["outputs"]}
        assert set(by_name) == {"sum_1", "state@mutated"}, name
        assert by_name["state@mutated"]["ok"] and by_name["state@mutated"]["max_abs_err"] < 1e-5, name
    before, after = _eager_state(isolated_env)
    saved = np.load(outs)
    assert not np.allclose(before, after)  # the model really changes its input
    for key in ("reference::state@mutated", "inductor-cpu::state@mutated", "ort-cpu::state@mutated"):
        np.testing.assert_allclose(saved[key], after, rtol=1e-5, atol=1e-6, err_msg=key)
