"""SqueezeNet 1.1 and GoogLeNet in torchvision's layout, for the zoo's real tier.

Both exist only in torchvision, and the torchvision that pins torch 2.13 does not import
beside torch 2.13+cpu (see :mod:`compstack.frontends.zoo._real`), so they are written out
here from their papers, in the layout of torchvision's ports. Their parameter counts equal
the ``num_params`` torchvision's model docs publish for ``squeezenet1_1`` (1,235,496) and
``googlenet`` (6,624,904); ``tests/test_zoo_real.py`` checks both.

Each class maps an image float32[batch, 3, H, W] (224x224 in the zoo) to logits
float32[batch, 1000]. Importing this module imports torch only when a class is asked for.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["googlenet_class", "squeezenet_class"]


@functools.cache
def squeezenet_class() -> Any:
    """SqueezeNet 1.1 (Iandola et al. 2016, "SqueezeNet: AlexNet-level accuracy with 50x
    fewer parameters"; torchvision ``squeezenet1_1``): a 3x3 stride-2 stem of 64 channels,
    eight Fire modules with max pools after the stem and Fires 2 and 4, a 1x1 classifier
    conv, ReLU and global average pooling.

    Init as torchvision's: Kaiming-uniform convs, the classifier conv N(0, 0.01), zero
    biases. (PyTorch's default conv init shrinks the second moment about 6x per ReLU
    layer, which would leave logits near 1e-7; there is no BatchNorm to calibrate.)
    """
    import torch
    from torch import nn

    class Fire(nn.Module):
        """Squeeze 1x1 -> ReLU, then expand 1x1 and 3x3 (each ReLU), concatenated on channels."""

        def __init__(self, c_in: int, squeeze: int, e1: int, e3: int) -> None:
            super().__init__()
            self.squeeze = nn.Sequential(nn.Conv2d(c_in, squeeze, 1), nn.ReLU())
            self.e1 = nn.Sequential(nn.Conv2d(squeeze, e1, 1), nn.ReLU())
            self.e3 = nn.Sequential(nn.Conv2d(squeeze, e3, 3, padding=1), nn.ReLU())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            s = self.squeeze(x)
            return torch.cat([self.e1(s), self.e3(s)], 1)

    class SqueezeNet(nn.Module):
        """SqueezeNet 1.1 -> logits float32[batch, classes]."""

        def __init__(self, classes: int = 1000) -> None:
            super().__init__()

            def pool() -> nn.MaxPool2d:
                return nn.MaxPool2d(3, 2, ceil_mode=True)

            self.features = nn.Sequential(
                nn.Conv2d(3, 64, 3, stride=2), nn.ReLU(), pool(), Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), pool(),
                Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), pool(), Fire(256, 48, 192, 192),
                Fire(384, 48, 192, 192), Fire(384, 64, 256, 256), Fire(512, 64, 256, 256))
            last = nn.Conv2d(512, classes, 1)
            self.classifier = nn.Sequential(nn.Dropout(0.5), last, nn.ReLU(), nn.AdaptiveAvgPool2d(1))
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    if m is last:
                        nn.init.normal_(m.weight, 0.0, 0.01)
                    else:
                        nn.init.kaiming_uniform_(m.weight)
                    if m.bias is not None:
                        nn.init.zeros_(m.bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.flatten(self.classifier(self.features(x)), 1)

    return SqueezeNet


@functools.cache
def googlenet_class() -> Any:
    """GoogLeNet / Inception v1 (Szegedy et al. 2015, "Going deeper with convolutions") in
    torchvision's ``googlenet`` layout with ``aux_logits=False``: every conv is conv (no
    bias) + BatchNorm (eps 1e-3) + ReLU, and the "5x5" branch is a 3x3 conv, as in
    torchvision's port. Nine Inception modules, global average pooling, dropout 0.2 and a
    1024 -> classes linear layer. PyTorch's default init; the zoo calibrates BatchNorm.
    """
    import torch
    from torch import nn

    def conv(c_in: int, c_out: int, k: int, stride: int = 1, padding: int = 0) -> nn.Sequential:
        return nn.Sequential(nn.Conv2d(c_in, c_out, k, stride=stride, padding=padding, bias=False),
                             nn.BatchNorm2d(c_out, eps=0.001), nn.ReLU())

    class Inception(nn.Module):
        """Four branches (1x1; 1x1 -> 3x3; 1x1 -> 3x3; 3x3 max pool -> 1x1), concatenated."""

        def __init__(self, c_in: int, c1: int, r3: int, c3: int, r5: int, c5: int, proj: int) -> None:
            super().__init__()
            self.b1 = conv(c_in, c1, 1)
            self.b2 = nn.Sequential(conv(c_in, r3, 1), conv(r3, c3, 3, padding=1))
            self.b3 = nn.Sequential(conv(c_in, r5, 1), conv(r5, c5, 3, padding=1))
            self.b4 = nn.Sequential(nn.MaxPool2d(3, 1, padding=1, ceil_mode=True), conv(c_in, proj, 1))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)

    class GoogLeNet(nn.Module):
        """GoogLeNet -> logits float32[batch, classes]."""

        def __init__(self, classes: int = 1000) -> None:
            super().__init__()

            def pool(k: int = 3) -> nn.MaxPool2d:
                return nn.MaxPool2d(k, 2, ceil_mode=True)

            self.body = nn.Sequential(
                conv(3, 64, 7, stride=2, padding=3), pool(), conv(64, 64, 1), conv(64, 192, 3, padding=1), pool(),
                Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64), pool(),
                Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
                Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
                Inception(528, 256, 160, 320, 32, 128, 128), pool(2),
                Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128),
                nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2))
            self.fc = nn.Linear(1024, classes)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(self.body(x))

    return GoogLeNet
