"""Builders of the ``tier: real`` zoo (metadata in :mod:`compstack.frontends.zoo._real`).

:func:`construct` makes the library model from its config class (``BertModel(BertConfig())``)
or diffusers ``__init__`` keywords; :func:`build` seeds it, wraps it so that it takes plain
tensors by the ONNX input names and returns one tensor, and draws the example inputs.
Nothing is downloaded: no ``from_pretrained``, and ``HF_HUB_OFFLINE`` /
``TRANSFORMERS_OFFLINE`` are set (to ``1``, only when unset) before the library is imported.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import zlib
from typing import Any

from compstack.core.errors import UserError
from compstack.frontends.zoo._common import Built, seeded
from compstack.frontends.zoo._real import REAL, RealSpec
from compstack.frontends.zoo._timm import TIMM_PIN, import_timm
from compstack.frontends.zoo._tv_layouts import googlenet_class, squeezenet_class

__all__ = ["build", "construct", "count_params", "library_version"]


def _library(spec: RealSpec) -> Any:
    """Import the spec's library offline, or say how to install it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        if spec.library == "timm":
            return import_timm()
        return importlib.import_module(spec.library)
    except ImportError as exc:
        how = f"pip install --no-deps '{TIMM_PIN}'" if spec.library == "timm" else "pip install 'compstack[all]'"
        raise UserError(f"zoo model '{spec.name}' needs the '{spec.library}' package ({exc}); {how}") from None


def library_version(spec: RealSpec) -> str:
    """Installed version of the spec's library (``torch`` for compstack's own modules)."""
    try:
        return importlib.metadata.version(spec.library)
    except importlib.metadata.PackageNotFoundError:
        return "none"


def construct(name: str, device: str = "cpu") -> Any:
    """The library model of real-tier entry ``name`` (not wrapped, not seeded), in eval mode.

    Args:
        name: a real-tier name (``bert-base``).
        device: ``"cpu"`` or ``"meta"`` (parameters without storage: builds in a fraction
            of a second, for counting parameters).

    Raises:
        KeyError: not a real-tier name. UserError: the library is not installed.
    """
    import torch

    spec = REAL[name]
    lib = _library(spec)
    with torch.device(device):
        if spec.model.startswith("compstack:"):
            model = _own()[spec.model.split(":")[1]](**spec.kwargs)
        elif spec.library == "timm":  # timm's own registry name; never pretrained (no download)
            model = lib.create_model(spec.model, pretrained=False, **spec.kwargs)
        elif spec.config:
            kwargs = dict(spec.kwargs)
            sub = kwargs.get("backbone_config")
            if isinstance(sub, dict):  # DETR's backbone: a transformers ResNet config
                sub = dict(sub)
                kwargs["backbone_config"] = lib.CONFIG_MAPPING[sub.pop("model_type")](**sub)
            model = getattr(lib, spec.model)(getattr(lib, spec.config)(**kwargs))
        else:
            model = getattr(lib, spec.model)(**spec.kwargs)
        if spec.call == "decode":  # a VAE decoder: decode() never uses the encoder half
            del model.encoder, model.quant_conv
    return model.eval()


def count_params(model: Any) -> int:
    """``sum(p.numel())`` over ``model.parameters()`` (a tied weight counts once)."""
    return int(sum(p.numel() for p in model.parameters()))


def _inputs(spec: RealSpec, gen: Any) -> dict[str, Any]:
    """Example inputs drawn from ``gen``: ids uniform in ``[low, high)``, floats uniform."""
    import torch

    out = {}
    for i in spec.inputs:
        if i.dtype == "int64":
            out[i.name] = torch.randint(int(i.low), int(i.high), i.shape, generator=gen, dtype=torch.int64)
        else:
            out[i.name] = torch.rand(i.shape, generator=gen, dtype=torch.float32) * (i.high - i.low) + i.low
    return out


def build(name: str) -> Built:
    """Build real-tier entry ``name`` with seeded random weights, wrapped for export.

    The seed is the CRC-32 of the name, so each entry draws the same weights and inputs
    on every machine. Inputs and shapes are the spec's (batch 1 unless the spec says).
    BatchNorm running statistics are calibrated on the example inputs (see
    :func:`_calibrate_batchnorm`), so activations keep a trained network's scale.

    Raises:
        KeyError: not a real-tier name. UserError: the library is not installed.
    """
    spec = REAL[name]
    gen = seeded(zlib.crc32(name.encode()) % (2**31))
    model = construct(name)
    module = _wrapper(tuple(i.name for i in spec.inputs))(model, spec.output, spec.call).eval()
    ranges = {i.name: (i.low, i.high) for i in spec.inputs}
    inputs = _inputs(spec, gen)
    _calibrate_batchnorm(module, inputs, _inputs(spec, gen))
    return Built(module, inputs, ranges, [spec.output], opset=spec.opset)


def _calibrate_batchnorm(module: Any, inputs: dict[str, Any], more: dict[str, Any]) -> None:
    """Give every BatchNorm PyTorch's default init (scale 1, shift 0) and set its running
    mean/variance to the statistics of one forward pass on ``inputs`` and a second draw
    ``more`` stacked on the batch axis (``momentum=None``: a plain average; two samples,
    since a training-mode BatchNorm1d needs more than one value per channel), then return
    to eval mode.

    With random weights and the default statistics (mean 0, variance 1) an eval-mode
    BatchNorm is the identity, and deep CNNs initialised with small normals (HF
    MobileNetV2 and EfficientNet: std 0.02, BatchNorm scales included) then shrink their
    outputs to ~1e-25 .. 1e-34, where every stack "agrees". Calibrated, the activations
    stay near unit scale, as in a trained network.
    """
    import torch

    norms = [m for m in module.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if not norms:
        return
    for m in norms:
        m.reset_parameters()  # running stats too
        m.momentum = None
    module.train()
    with torch.no_grad():
        module(**{k: torch.cat([v, more[k]]) for k, v in inputs.items()})
    module.eval()


def _pick(out: Any, key: str) -> Any:
    """One output field of a HF ``ModelOutput`` / diffusers ``BaseOutput`` (or a tensor)."""
    if hasattr(out, "keys"):
        return out[key]
    return out


@functools.cache
def _wrapper(names: tuple[str, ...]) -> Any:
    """An ``nn.Module`` wrapper whose ``forward`` takes exactly ``names`` (the ONNX inputs)."""
    import torch
    from torch import nn

    class _Base(nn.Module):
        def __init__(self, model: nn.Module, key: str, call: str) -> None:
            super().__init__()
            self.model, self.key, self.call = model, key, call

        def run(self, **kw: torch.Tensor) -> torch.Tensor:
            fn: Any = self.model.decode if self.call == "decode" else self.model
            if self.call == "positional":  # timm: forward(x)
                return fn(*kw.values())
            return _pick(fn(**kw), self.key)

    class Ids(_Base):
        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.model(input_ids)

    class Text(_Base):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return self.run(input_ids=input_ids, attention_mask=attention_mask)

    class Text3(_Base):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            return self.run(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)

    class Seq2Seq(_Base):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    decoder_input_ids: torch.Tensor) -> torch.Tensor:
            return self.run(input_ids=input_ids, attention_mask=attention_mask, decoder_input_ids=decoder_input_ids)

    class Whisper(_Base):
        def forward(self, input_features: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
            return self.run(input_features=input_features, decoder_input_ids=decoder_input_ids)

    class Pixels(_Base):
        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.run(pixel_values=pixel_values)

    class Audio(_Base):
        def forward(self, input_values: torch.Tensor) -> torch.Tensor:
            return self.run(input_values=input_values)

    class UNet(_Base):
        def forward(self, sample: torch.Tensor, timestep: torch.Tensor,
                    encoder_hidden_states: torch.Tensor) -> torch.Tensor:
            return self.run(sample=sample, timestep=timestep, encoder_hidden_states=encoder_hidden_states)

    class Latent(_Base):
        def forward(self, latent: torch.Tensor) -> torch.Tensor:
            return self.run(z=latent)

    class Recsys(_Base):
        def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
            return self.model(dense, sparse)

    table = {("input_ids",): Ids, ("input_ids", "attention_mask"): Text,
             ("input_ids", "attention_mask", "token_type_ids"): Text3,
             ("input_ids", "attention_mask", "decoder_input_ids"): Seq2Seq,
             ("input_features", "decoder_input_ids"): Whisper, ("pixel_values",): Pixels,
             ("input_values",): Audio, ("sample", "timestep", "encoder_hidden_states"): UNet,
             ("latent",): Latent, ("dense", "sparse"): Recsys}
    return table[names]


@functools.cache
def _own() -> dict[str, Any]:
    """compstack's own real-size modules: a DLRM-style recommender, an LSTM LM, and
    SqueezeNet 1.1 and GoogLeNet (:mod:`._tv_layouts`)."""
    import torch
    from torch import nn

    def mlp(sizes: list[int], last_act: bool) -> nn.Sequential:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2 or last_act:
                layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    class DLRM(nn.Module):
        """Bottom MLP on dense features, one embedding table per sparse feature, pairwise
        dot-product interaction, top MLP -> logits[batch, 1] (Naumov et al. 2019)."""

        def __init__(self, tables: int, rows: int, dim: int, dense: int, bottom: list[int], top: list[int]) -> None:
            super().__init__()
            self.bottom = mlp([dense, *bottom], last_act=True)
            self.emb = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(tables))
            n = tables + 1
            self.top = mlp([dim + n * (n - 1) // 2, *top], last_act=False)
            self.pairs = torch.triu_indices(n, n, offset=1)

        def forward(self, dense: torch.Tensor, sparse: torch.Tensor) -> torch.Tensor:
            x = self.bottom(dense)
            feats = torch.stack([x] + [e(sparse[:, i]) for i, e in enumerate(self.emb)], dim=1)
            inter = torch.bmm(feats, feats.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
            return self.top(torch.cat([x, inter], dim=1))

    class LstmLM(nn.Module):
        """Embedding, multi-layer LSTM, tied decoder -> logits[batch, seq, vocab]."""

        def __init__(self, vocab: int, dim: int, layers: int, tie: bool) -> None:
            super().__init__()
            self.emb = nn.Embedding(vocab, dim)
            self.lstm = nn.LSTM(dim, dim, layers, batch_first=True)
            self.out = nn.Linear(dim, vocab)
            if tie:
                self.out.weight = self.emb.weight

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.out(self.lstm(self.emb(input_ids))[0])

    return {"dlrm": DLRM, "lstm_lm": LstmLM, "squeezenet": squeezenet_class(), "googlenet": googlenet_class()}

