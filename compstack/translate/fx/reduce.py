"""ONNX -> fx converters: reduce ops (see :mod:`compstack.translate` for the contract)."""

from __future__ import annotations

import torch

from compstack.translate.fx import TABLE
