"""ONNX -> fx converters: elementwise ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import torch

from compstack.translate.fx import TABLE


@TABLE.op("Add", since=7)
def add(ctx, a, b):
    return torch.add(a, b)


@TABLE.op("Relu", since=6)
def relu(ctx, x):
    return torch.relu(x)
