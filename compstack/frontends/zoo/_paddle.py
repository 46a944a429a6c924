"""zoo:paddle-mlp — a PaddlePaddle MLP, fixed seed, offline.

Run by compstack in Paddle's own environment (``COMPSTACK_PADDLE_PYTHON``); compstack
never imports this module itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import paddle


class MLP(paddle.nn.Layer):
    """Linear-GELU-LayerNorm-Linear-softmax."""

    def __init__(self) -> None:
        super().__init__()
        self.fc1 = paddle.nn.Linear(64, 128)
        self.norm = paddle.nn.LayerNorm(128)
        self.fc2 = paddle.nn.Linear(128, 10)

    def forward(self, x: Any) -> Any:
        h = self.norm(paddle.nn.functional.gelu(self.fc1(x)))
        return paddle.nn.functional.softmax(self.fc2(h), axis=-1)


def build() -> tuple[Any, tuple[np.ndarray]]:
    """The MLP (seed 0) and x float32[8, 64]."""
    paddle.seed(0)
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    return MLP(), (x,)
