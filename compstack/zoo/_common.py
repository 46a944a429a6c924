"""What a zoo builder returns, and the seeding helper every builder uses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Built", "seeded", "uniform"]


@dataclass
class Built:
    """A freshly built zoo model, before export.

    Attributes:
        module: the ``torch.nn.Module`` in eval mode.
        inputs: example inputs by ``forward`` keyword name (torch tensors); they become
            the ONNX input names.
        val_ranges: ``(low, high)`` per input for random input generation (integer
            inputs: ``high`` is exclusive).
        output_names: names of the ONNX graph outputs.
    """

    module: Any
    inputs: dict[str, Any]
    val_ranges: dict[str, tuple[float, float]]
    output_names: list[str] = field(default_factory=list)


def seeded(seed: int) -> Any:
    """Seed torch's global RNG (weight init) and return a generator for inputs.

    Args:
        seed: the model's fixed seed.

    Returns:
        A ``torch.Generator`` seeded with ``seed + 1`` for example inputs, so input
        draws never shift the weights.
    """
    import torch

    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed + 1)


def uniform(gen: Any, shape: tuple[int, ...], low: float, high: float) -> Any:
    """A float32 tensor uniform in ``[low, high)`` drawn from ``gen``."""
    import torch

    return torch.rand(shape, generator=gen, dtype=torch.float32) * (high - low) + low
