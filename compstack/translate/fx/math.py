"""ONNX -> fx converters: math ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import torch

from compstack.translate.fx import TABLE
