"""zoo:ms-mlp — a MindSpore MLP, fixed seed, offline.

Run by compstack in MindSpore's own environment (``COMPSTACK_MINDSPORE_PYTHON``);
compstack never imports this module itself.
"""

from __future__ import annotations

from typing import Any

import mindspore as ms
import numpy as np
from mindspore import nn


class MLP(nn.Cell):
    """Dense-ReLU-Dense-Tanh-Dense."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Dense(64, 128)
        self.fc2 = nn.Dense(128, 64)
        self.fc3 = nn.Dense(64, 10)
        self.relu = nn.ReLU()
        self.tanh = nn.Tanh()

    def construct(self, x: Any) -> Any:
        return self.fc3(self.tanh(self.fc2(self.relu(self.fc1(x)))))


def build() -> tuple[Any, tuple[np.ndarray]]:
    """The MLP (seed 0) and x float32[8, 64]."""
    ms.set_seed(0)
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    return MLP(), (x,)
