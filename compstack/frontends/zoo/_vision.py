"""Plain-PyTorch zoo models: ``mlp`` and ``cnn`` (a small ResNet).

Written out here (not taken from torchvision, which does not install beside the CPU
torch wheel), so the exported nodes' provenance points at the lines below.
"""

from __future__ import annotations

from typing import Any

from compstack.frontends.zoo._common import Built, seeded, uniform

__all__ = ["build_cnn", "build_mlp"]


def _mlp_class() -> Any:
    import torch
    from torch import nn

    class MLP(nn.Module):
        """Linear-ReLU-Linear."""

        def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
            super().__init__()
            self.fc1 = nn.Linear(d_in, d_hidden)
            self.act = nn.ReLU()
            self.fc2 = nn.Linear(d_hidden, d_out)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = self.act(self.fc1(x))
            return self.fc2(h)

    return MLP


def build_mlp() -> Built:
    """``mlp``: x float32[8, 64] -> Linear(64, 128) -> ReLU -> Linear(128, 10) -> logits[8, 10]."""
    gen = seeded(0)
    module = _mlp_class()(64, 128, 10).eval()
    x = uniform(gen, (8, 64), -1.0, 1.0)
    return Built(module, {"x": x}, {"x": (-1.0, 1.0)}, ["logits"])


def _cnn_classes() -> Any:
    import torch
    from torch import nn

    class ConvBN(nn.Sequential):
        """Conv (no bias) + BatchNorm, optionally followed by ReLU."""

        def __init__(self, c_in: int, c_out: int, k: int, stride: int, relu: bool) -> None:
            layers: list[nn.Module] = [
                nn.Conv2d(c_in, c_out, k, stride=stride, padding=k // 2, bias=False),
                nn.BatchNorm2d(c_out),
            ]
            if relu:
                layers.append(nn.ReLU())
            super().__init__(*layers)

    class BasicBlock(nn.Module):
        """ResNet basic block: two 3x3 ConvBN, residual Add, ReLU."""

        def __init__(self, c_in: int, c_out: int, stride: int) -> None:
            super().__init__()
            self.conv1 = ConvBN(c_in, c_out, 3, stride, relu=True)
            self.conv2 = ConvBN(c_out, c_out, 3, 1, relu=False)
            self.shortcut = (
                ConvBN(c_in, c_out, 1, stride, relu=False)
                if stride != 1 or c_in != c_out
                else nn.Identity()
            )
            self.relu = nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.conv2(self.conv1(x))
            return self.relu(y + self.shortcut(x))

    class ResNetTiny(nn.Module):
        """Stem ConvBN-ReLU, two basic blocks (the second downsamples), mean pool, Linear."""

        def __init__(self, num_classes: int = 10) -> None:
            super().__init__()
            self.stem = ConvBN(3, 16, 3, 1, relu=True)
            self.layer1 = BasicBlock(16, 16, 1)
            self.layer2 = BasicBlock(16, 32, 2)
            self.fc = nn.Linear(32, num_classes)

        def forward(self, image: torch.Tensor) -> torch.Tensor:
            x = self.layer2(self.layer1(self.stem(image)))
            x = x.mean(dim=(2, 3))
            return self.fc(x)

    return ResNetTiny


def _randomize_batchnorm(module: Any, gen: Any) -> None:
    """Give every BatchNorm non-trivial statistics (fresh ones are mean 0, var 1)."""
    import torch

    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            n = m.num_features
            assert m.running_mean is not None and m.running_var is not None
            with torch.no_grad():
                m.running_mean.copy_(uniform(gen, (n,), -0.2, 0.2))
                m.running_var.copy_(uniform(gen, (n,), 0.5, 1.5))
                m.weight.copy_(uniform(gen, (n,), 0.8, 1.2))
                m.bias.copy_(uniform(gen, (n,), -0.1, 0.1))


def build_cnn() -> Built:
    """``cnn``: image float32[2, 3, 32, 32] -> small ResNet -> logits[2, 10].

    Conv-BatchNorm-ReLU stem, a basic block with identity residual and one with a
    strided 1x1 projection shortcut, global mean pool, Linear. BatchNorm statistics
    are randomised (seeded) so folding them is not a no-op.
    """
    gen = seeded(1)
    module = _cnn_classes()(10)
    _randomize_batchnorm(module, _generator(2))
    module.eval()
    image = uniform(gen, (2, 3, 32, 32), -1.0, 1.0)
    return Built(module, {"image": image}, {"image": (-1.0, 1.0)}, ["logits"])


def _generator(seed: int) -> Any:
    """A ``torch.Generator`` seeded with ``seed``."""
    import torch

    return torch.Generator().manual_seed(seed)
