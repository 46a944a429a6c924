"""A small PyTorch model that calls compstack's custom ops.

A pre-norm transformer MLP block: ``compstack::rms_norm`` normalises the input, a
linear layer projects up, ``compstack::bias_gelu`` adds the bias and applies GELU in one
kernel (returning the pre-activation too), and a linear layer projects back with a
residual connection. Each custom op is one C++ kernel (``csrc/cpu``) that every stack
runs through its own adapter::

    compstack compare examples/custom_op_model.py:build --targets all

PyTorch sees the ops as ``torch.library`` custom ops (``torch.ops.compstack.*``), the
ONNX export has them as nodes of the ``compstack`` domain, and the other stacks get
them from there.
"""

from __future__ import annotations

import torch

from compstack.ops import torch_op

rms_norm = torch_op("compstack::rms_norm")
bias_gelu = torch_op("compstack::bias_gelu")


class RMSNormMLP(torch.nn.Module):
    """x [batch, seq, dim] -> (x + down(gelu(up(rms_norm(x)) + b)), the pre-activation)."""

    def __init__(self, dim: int = 64, hidden: int = 128) -> None:
        super().__init__()
        self.norm_weight = torch.nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.up = torch.nn.Linear(dim, hidden, bias=False)
        self.up_bias = torch.nn.Parameter(0.02 * torch.randn(hidden))
        self.down = torch.nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = rms_norm(x, self.norm_weight, epsilon=1e-5)
        act, pre = bias_gelu(self.up(h), self.up_bias)
        return x + self.down(act), pre


def build() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The model (fixed seed, eval mode) and one input of shape [2, 8, 64]."""
    torch.manual_seed(0)
    return RMSNormMLP().eval(), (torch.randn(2, 8, 64),)
