"""What a zoo builder returns (:class:`Built` for torch, :class:`JaxBuilt` for JAX), and the
seeding helper every torch builder uses."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Built", "JaxBuilt", "seeded", "uniform"]


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
        opset: ONNX opset to export at (``None``: the frontend's default).
    """

    module: Any
    inputs: dict[str, Any]
    val_ranges: dict[str, tuple[float, float]]
    output_names: list[str] = field(default_factory=list)
    opset: int | None = None


@dataclass
class JaxBuilt:
    """A freshly built JAX zoo model, before conversion.

    Attributes:
        fn: the JAX function, called as ``fn(*args)``.
        args: its example positional arguments (numpy arrays or pytrees of them), e.g.
            ``(params, x)``.
        val_ranges: ``(low, high)`` per graph-input name for random input generation.
        output_names: names of the ONNX graph outputs.
        const_argnums: positions in ``args`` baked into the graph as named initializers
            (the weights), as :func:`compstack.frontends.from_jax.import_jax` takes them.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    val_ranges: dict[str, tuple[float, float]]
    output_names: list[str] = field(default_factory=list)
    const_argnums: tuple[int, ...] = (0,)


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
