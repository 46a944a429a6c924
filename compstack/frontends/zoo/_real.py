"""The ``tier: real`` zoo: metadata of real architectures at their published size.

Each :class:`RealSpec` names the library constructor (a ``transformers`` or ``diffusers``
config class and model class, or one of compstack's own modules: DLRM, the LSTM LM, and
SqueezeNet 1.1 and GoogLeNet in torchvision's layout),
the config that gives the published size, the example inputs and the exact parameter count
(``sum(p.numel() for p in model.parameters())``, computed once on ``torch.device("meta")``
and checked by ``tests/test_zoo_real.py``). Reading this module imports nothing but the
standard library, so ``compstack zoo --tier real`` lists the tier without building a model.

The builders live in :mod:`compstack.frontends.zoo._real_build`; nothing is downloaded
(configs are built in code, weights drawn from a fixed seed).

torchvision is not used: the PyPI torchvision that pins torch 2.13 is a CUDA build that
fails to import beside torch 2.13+cpu. Most CNN families come from ``transformers`` (ResNet,
MobileNet V1/V2, EfficientNet, ConvNeXt, RegNet, BiT, DeepLabV3 heads); MobileNet V3,
DenseNet, Inception, ResNeXt, GhostNet, VGG, MLP-Mixer and MaxViT come from ``timm``
(``timm.create_model(name, pretrained=False)``), installed with ``--no-deps`` and imported
through :mod:`compstack.frontends.zoo._timm`. SqueezeNet 1.1 and GoogLeNet exist only in
torchvision, so compstack writes them out in torchvision's layout (their parameter counts
equal torchvision's published ones); torchvision's detection and segmentation heads (FCN,
SSDlite, RetinaNet) are left out: DeepLabV3, SegFormer, DETR and YOLOS come from transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["REAL", "RealInput", "RealSpec", "real_names", "spec"]


@dataclass(frozen=True)
class RealInput:
    """One example input: ``name``, ``shape``, ``dtype`` (``float32``/``int64``) and the
    value range ``[low, high)`` random inputs are drawn from (ids: ``high`` exclusive)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    low: float
    high: float


@dataclass(frozen=True)
class RealSpec:
    """A real-tier zoo entry.

    Attributes:
        name: zoo name (``resnet50``), used as ``zoo:resnet50``.
        family: ``cnn``, ``segmentation``, ``detection``, ``encoder``, ``decoder``,
            ``encoder-decoder``, ``vit``, ``mlp``, ``audio``, ``diffusion``, ``clip``, ``recsys``,
            ``rnn``.
        library: the distribution whose constructor builds it (``transformers``,
            ``diffusers``, ``timm``, ``torch``); its version is read at build time.
        model: the model class in that library (``ResNetModel``), timm's model name
            (``densenet121``), or ``compstack:NAME`` for compstack's own modules (``dlrm``,
            ``lstm_lm``, ``squeezenet``, ``googlenet``).
        config: the config class (``ResNetConfig``); ``""`` for diffusers and own modules.
        kwargs: config (or diffusers ``__init__``) keyword arguments: the published size.
        inputs: the example inputs, batch 1.
        output: the output field returned (``last_hidden_state``, ``logits``, ``sample``).
        params: exact parameter count of the library model (shared weights once).
        published: the published checkpoint whose architecture this is.
        opset: ONNX opset of the export (``None``: the frontend's default, 20).
        call: ``forward``, ``decode`` (a VAE decoder) or ``positional`` (``forward(x)``:
            timm).
    """

    name: str
    family: str
    library: str
    model: str
    config: str
    kwargs: dict[str, Any]
    inputs: tuple[RealInput, ...]
    output: str
    params: int
    published: str
    opset: int | None = None
    call: str = "forward"
    extra: dict[str, Any] = field(default_factory=dict)

    def settings(self) -> dict[str, Any]:
        """Batch and sequence/image settings read off the inputs (``batch``, ``seq``,
        ``image``, ``samples``), for the listing."""
        first = self.inputs[0]
        out: dict[str, Any] = {"batch": first.shape[0]}
        if first.name in ("input_ids", "dense"):
            out["seq"] = first.shape[-1] if first.name == "input_ids" else None
        if first.name == "pixel_values":
            out["image"] = list(first.shape[2:])
        if first.name == "input_values":
            out["samples"] = list(first.shape[1:])
        dec = [i for i in self.inputs if i.name == "decoder_input_ids"]
        if dec:
            out["decoder_seq"] = dec[0].shape[-1]
        return {k: v for k, v in out.items() if v is not None}


def _text(vocab: int, seq: int = 128, types: bool = False, mask: bool = True) -> tuple[RealInput, ...]:
    ins = [RealInput("input_ids", (1, seq), "int64", 0, vocab)]
    if mask:
        ins.append(RealInput("attention_mask", (1, seq), "int64", 1, 2))
    if types:
        ins.append(RealInput("token_type_ids", (1, seq), "int64", 0, 2))
    return tuple(ins)


def _img(size: int = 224, ch: int = 3) -> tuple[RealInput, ...]:
    return (RealInput("pixel_values", (1, ch, size, size), "float32", -1.0, 1.0),)


def _s2s(vocab: int, seq: int = 128, dec: int = 32) -> tuple[RealInput, ...]:
    return (*_text(vocab, seq), RealInput("decoder_input_ids", (1, dec), "int64", 0, vocab))


_TF = "transformers"
_BERT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}

# fmt: off
_ROWS: list[tuple[Any, ...]] = [
    # name, family, model, config, kwargs, inputs, output, published
    # --- encoders ---
    ("bert-base", "encoder", "BertModel", "BertConfig", {}, _text(30522, types=True), "last_hidden_state", "bert-base-uncased"),
    ("bert-large", "encoder", "BertModel", "BertConfig",
     {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "intermediate_size": 4096},
     _text(30522, types=True), "last_hidden_state", "bert-large-uncased"),
    ("distilbert", "encoder", "DistilBertModel", "DistilBertConfig", {}, _text(30522), "last_hidden_state", "distilbert-base-uncased"),
    ("roberta-base", "encoder", "RobertaModel", "RobertaConfig",
     {"vocab_size": 50265, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1},
     _text(50265), "last_hidden_state", "roberta-base"),
    ("xlm-roberta-base", "encoder", "XLMRobertaModel", "XLMRobertaConfig",
     {"vocab_size": 250002, "max_position_embeddings": 514, "type_vocab_size": 1, "pad_token_id": 1},
     _text(250002), "last_hidden_state", "xlm-roberta-base"),
    ("albert-base", "encoder", "AlbertModel", "AlbertConfig",
     {**_BERT_BASE, "embedding_size": 128, "vocab_size": 30000}, _text(30000, types=True), "last_hidden_state", "albert-base-v2"),
    ("electra-base", "encoder", "ElectraModel", "ElectraConfig",
     {**_BERT_BASE, "embedding_size": 768}, _text(30522, types=True), "last_hidden_state", "google/electra-base-discriminator"),
    ("deberta-base", "encoder", "DebertaModel", "DebertaConfig", {"vocab_size": 50265}, _text(50265), "last_hidden_state", "microsoft/deberta-base"),
    ("deberta-v3-base", "encoder", "DebertaV2Model", "DebertaV2Config",
     {**_BERT_BASE, "vocab_size": 128100, "relative_attention": True, "position_buckets": 256, "norm_rel_ebd": "layer_norm",
      "share_att_key": True, "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1, "position_biased_input": False,
      "type_vocab_size": 0}, _text(128100), "last_hidden_state", "microsoft/deberta-v3-base"),
    ("mpnet-base", "encoder", "MPNetModel", "MPNetConfig", {}, _text(30527), "last_hidden_state", "microsoft/mpnet-base"),
    ("mobilebert", "encoder", "MobileBertModel", "MobileBertConfig", {}, _text(30522, types=True), "last_hidden_state", "google/mobilebert-uncased"),
    ("squeezebert", "encoder", "SqueezeBertModel", "SqueezeBertConfig", {}, _text(30528, types=True), "last_hidden_state", "squeezebert/squeezebert-uncased"),
    ("modernbert-base", "encoder", "ModernBertModel", "ModernBertConfig", {}, _text(50368), "last_hidden_state", "answerdotai/ModernBERT-base"),
    # --- decoders: one forward step at a fixed length, no KV cache ---
    ("gpt2-124m", "decoder", "GPT2LMHeadModel", "GPT2Config", {"use_cache": False}, _text(50257), "logits", "gpt2 (124M)"),
    ("distilgpt2", "decoder", "GPT2LMHeadModel", "GPT2Config", {"n_layer": 6, "use_cache": False}, _text(50257), "logits", "distilgpt2"),
    ("opt-125m", "decoder", "OPTForCausalLM", "OPTConfig", {"use_cache": False}, _text(50272), "logits", "facebook/opt-125m"),
    ("gpt-neo-125m", "decoder", "GPTNeoForCausalLM", "GPTNeoConfig",
     {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "attention_types": [[["global", "local"], 6]],
      "max_position_embeddings": 2048, "use_cache": False}, _text(50257), "logits", "EleutherAI/gpt-neo-125m"),
    ("pythia-160m", "decoder", "GPTNeoXForCausalLM", "GPTNeoXConfig",
     {"vocab_size": 50304, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
      "rotary_pct": 0.25, "max_position_embeddings": 2048, "use_cache": False}, _text(50304), "logits", "EleutherAI/pythia-160m"),
    ("smollm-135m", "decoder", "LlamaForCausalLM", "LlamaConfig",
     {"vocab_size": 49152, "hidden_size": 576, "intermediate_size": 1536, "num_hidden_layers": 30, "num_attention_heads": 9,
      "num_key_value_heads": 3, "max_position_embeddings": 2048, "tie_word_embeddings": True, "use_cache": False},
     _text(49152), "logits", "HuggingFaceTB/SmolLM-135M (Llama, GQA 9/3)"),
    ("mistral-style-200m", "decoder", "MistralForCausalLM", "MistralConfig",
     {"vocab_size": 32000, "hidden_size": 768, "intermediate_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 12,
      "num_key_value_heads": 4, "sliding_window": 4096, "use_cache": False},
     _text(32000), "logits", "Mistral architecture, 200M config (GQA 12/4; no published checkpoint)"),
    ("qwen2.5-0.5b", "decoder", "Qwen2ForCausalLM", "Qwen2Config",
     {"vocab_size": 151936, "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14,
      "num_key_value_heads": 2, "max_position_embeddings": 32768, "tie_word_embeddings": True, "use_cache": False},
     _text(151936), "logits", "Qwen/Qwen2.5-0.5B"),
    ("gemma3-270m", "decoder", "Gemma3ForCausalLM", "Gemma3TextConfig",
     {"vocab_size": 262144, "hidden_size": 640, "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
      "num_key_value_heads": 1, "head_dim": 256, "sliding_window": 512, "use_cache": False},
     _text(262144), "logits", "google/gemma-3-270m"),
    # --- encoder-decoders ---
    # T5 with eager attention: torch 2.13's ONNX export of its SDPA path fails while decomposing
    # (a reshape of SDPA's transposed output becomes a view of a non-contiguous tensor)
    ("t5-small", "encoder-decoder", "T5Model", "T5Config", {"use_cache": False, "attn_implementation": "eager"},
     _s2s(32128), "last_hidden_state", "t5-small (eager attention)"),
    ("flan-t5-small", "encoder-decoder", "T5Model", "T5Config",
     {"d_model": 512, "d_ff": 1024, "d_kv": 64, "num_layers": 8, "num_heads": 6, "feed_forward_proj": "gated-gelu",
      "tie_word_embeddings": False, "use_cache": False, "attn_implementation": "eager"}, _s2s(32128),
     "last_hidden_state", "google/flan-t5-small (eager attention)"),
    ("bart-base", "encoder-decoder", "BartModel", "BartConfig",
     {"d_model": 768, "encoder_layers": 6, "decoder_layers": 6, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
      "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "use_cache": False}, _s2s(50265), "last_hidden_state", "facebook/bart-base"),
    ("marian-en-de", "encoder-decoder", "MarianMTModel", "MarianConfig",
     {"vocab_size": 58101, "decoder_start_token_id": 58100, "pad_token_id": 58100, "d_model": 512, "encoder_layers": 6,
      "decoder_layers": 6, "encoder_attention_heads": 8, "decoder_attention_heads": 8, "encoder_ffn_dim": 2048,
      "decoder_ffn_dim": 2048, "use_cache": False}, _s2s(58101), "logits", "Helsinki-NLP/opus-mt-en-de"),
    ("whisper-tiny", "encoder-decoder", "WhisperModel", "WhisperConfig", {"use_cache": False},
     (RealInput("input_features", (1, 80, 3000), "float32", -1.0, 1.0), RealInput("decoder_input_ids", (1, 32), "int64", 0, 51865)),
     "last_hidden_state", "openai/whisper-tiny"),
    # --- CNNs ---
    ("resnet18", "cnn", "ResNetForImageClassification", "ResNetConfig",
     {"layer_type": "basic", "depths": [2, 2, 2, 2], "hidden_sizes": [64, 128, 256, 512], "num_labels": 1000},
     _img(), "logits", "microsoft/resnet-18"),
    ("resnet50", "cnn", "ResNetForImageClassification", "ResNetConfig", {"num_labels": 1000}, _img(), "logits", "microsoft/resnet-50"),
    ("resnet101", "cnn", "ResNetForImageClassification", "ResNetConfig", {"depths": [3, 4, 23, 3], "num_labels": 1000},
     _img(), "logits", "microsoft/resnet-101"),
    ("mobilenet-v1", "cnn", "MobileNetV1ForImageClassification", "MobileNetV1Config", {"num_labels": 1001}, _img(),
     "logits", "google/mobilenet_v1_1.0_224"),
    ("mobilenet-v2", "cnn", "MobileNetV2ForImageClassification", "MobileNetV2Config", {"num_labels": 1001}, _img(),
     "logits", "google/mobilenet_v2_1.0_224"),
    ("efficientnet-b0", "cnn", "EfficientNetForImageClassification", "EfficientNetConfig",
     {"width_coefficient": 1.0, "depth_coefficient": 1.0, "image_size": 224, "dropout_rate": 0.2, "hidden_dim": 1280,
      "num_labels": 1000},
     _img(), "logits", "google/efficientnet-b0"),
    ("convnext-tiny", "cnn", "ConvNextForImageClassification", "ConvNextConfig", {"num_labels": 1000}, _img(), "logits",
     "facebook/convnext-tiny-224"),
    ("convnextv2-tiny", "cnn", "ConvNextV2ForImageClassification", "ConvNextV2Config",
     {"hidden_sizes": [96, 192, 384, 768], "depths": [3, 3, 9, 3], "num_labels": 1000}, _img(), "logits",
     "facebook/convnextv2-tiny-1k-224"),
    ("regnet-y-040", "cnn", "RegNetForImageClassification", "RegNetConfig", {"num_labels": 1000}, _img(), "logits",
     "facebook/regnet-y-040"),
    ("bit-50", "cnn", "BitForImageClassification", "BitConfig", {"num_labels": 1000}, _img(), "logits", "google/bit-50"),
    ("poolformer-s12", "cnn", "PoolFormerForImageClassification", "PoolFormerConfig", {"num_labels": 1000}, _img(),
     "logits", "sail/poolformer_s12"),
    # --- vision transformers ---
    ("vit-b16", "vit", "ViTForImageClassification", "ViTConfig", {"num_labels": 1000}, _img(), "logits", "google/vit-base-patch16-224"),
    ("deit-small", "vit", "DeiTForImageClassification", "DeiTConfig",
     {"hidden_size": 384, "num_attention_heads": 6, "intermediate_size": 1536, "num_labels": 1000}, _img(), "logits",
     "facebook/deit-small-patch16-224"),
    # Swin and BEiT with eager attention, as T5 (below): the ONNX export of their SDPA path fails
    # with "Cannot view a tensor with shape ... and strides ..." (torch 2.13)
    ("swin-tiny", "vit", "SwinForImageClassification", "SwinConfig", {"num_labels": 1000, "attn_implementation": "eager"},
     _img(), "logits", "microsoft/swin-tiny-patch4-window7-224 (eager attention)"),
    ("swinv2-tiny", "vit", "Swinv2ForImageClassification", "Swinv2Config", {"image_size": 256, "window_size": 8, "num_labels": 1000},
     _img(256), "logits", "microsoft/swinv2-tiny-patch4-window8-256"),
    ("mobilevit-small", "vit", "MobileViTForImageClassification", "MobileViTConfig", {"num_labels": 1000}, _img(256), "logits",
     "apple/mobilevit-small"),
    ("beit-base", "vit", "BeitForImageClassification", "BeitConfig",
     {"use_relative_position_bias": True, "use_mean_pooling": True, "layer_scale_init_value": 0.1, "num_labels": 1000,
      "attn_implementation": "eager"},
     _img(), "logits", "microsoft/beit-base-patch16-224 (eager attention)"),
    ("dinov2-small", "vit", "Dinov2Model", "Dinov2Config",
     {"hidden_size": 384, "num_attention_heads": 6, "image_size": 518, "patch_size": 14}, _img(224), "last_hidden_state",
     "facebook/dinov2-small"),
    ("levit-128s", "vit", "LevitForImageClassification", "LevitConfig",
     {"hidden_sizes": [128, 256, 384], "num_attention_heads": [4, 6, 8], "depths": [2, 3, 4], "key_dim": [16, 16, 16],
      "drop_path_rate": 0, "num_labels": 1000}, _img(), "logits", "facebook/levit-128S"),
    ("pvt-v2-b0", "vit", "PvtV2ForImageClassification", "PvtV2Config", {"num_labels": 1000}, _img(), "logits", "OpenGVLab/pvt_v2_b0"),
    ("cvt-13", "vit", "CvtForImageClassification", "CvtConfig", {"num_labels": 1000}, _img(), "logits", "microsoft/cvt-13"),
    # --- segmentation and detection ---
    ("segformer-b0", "segmentation", "SegformerForSemanticSegmentation", "SegformerConfig", {"num_labels": 150}, _img(512),
     "logits", "nvidia/segformer-b0-finetuned-ade-512-512"),
    ("mobilevit-deeplabv3", "segmentation", "MobileViTForSemanticSegmentation", "MobileViTConfig", {"num_labels": 21},
     _img(512), "logits", "apple/deeplabv3-mobilevit-small"),
    ("mobilenetv2-deeplabv3", "segmentation", "MobileNetV2ForSemanticSegmentation", "MobileNetV2Config",
     {"num_labels": 21, "image_size": 513}, _img(513), "logits", "google/deeplabv3_mobilenet_v2_1.0_513"),
    ("detr-resnet50", "detection", "DetrForObjectDetection", "DetrConfig",
     {"use_timm_backbone": False, "use_pretrained_backbone": False, "backbone": None,
      "backbone_config": {"model_type": "resnet", "out_features": ["stage4"]}, "num_labels": 91},
     _img(512), "logits", "facebook/detr-resnet-50 (transformers ResNet-50 backbone)"),
    ("yolos-tiny", "detection", "YolosForObjectDetection", "YolosConfig",
     {"hidden_size": 192, "num_attention_heads": 3, "intermediate_size": 768, "image_size": [800, 1333], "num_labels": 91,
      "use_mid_position_embeddings": False},
     _img(512), "logits", "hustvl/yolos-tiny"),
    # --- audio ---
    ("wav2vec2-base", "audio", "Wav2Vec2Model", "Wav2Vec2Config", {}, (RealInput("input_values", (1, 16000), "float32", -1.0, 1.0),),
     "last_hidden_state", "facebook/wav2vec2-base (1 s at 16 kHz)"),
    ("hubert-base", "audio", "HubertModel", "HubertConfig", {}, (RealInput("input_values", (1, 16000), "float32", -1.0, 1.0),),
     "last_hidden_state", "facebook/hubert-base-ls960 (1 s at 16 kHz)"),
    ("ast-base", "audio", "ASTForAudioClassification", "ASTConfig", {"num_labels": 527},
     (RealInput("input_values", (1, 1024, 128), "float32", -1.0, 1.0),), "logits", "MIT/ast-finetuned-audioset-10-10-0.4593"),
    # --- CLIP towers ---
    ("clip-vision-b32", "clip", "CLIPVisionModel", "CLIPVisionConfig", {"patch_size": 32}, _img(), "pooler_output",
     "openai/clip-vit-base-patch32 (vision tower)"),
    ("clip-text-b32", "clip", "CLIPTextModel", "CLIPTextConfig", {}, _text(49408, seq=77), "pooler_output",
     "openai/clip-vit-base-patch32 (text tower)"),
]
# fmt: on

_SD_UNET = {"sample_size": 64, "in_channels": 4, "out_channels": 4, "cross_attention_dim": 768,
            "block_out_channels": [320, 640, 1280, 1280], "layers_per_block": 2, "attention_head_dim": 8}
_SD_VAE = {"in_channels": 3, "out_channels": 3, "latent_channels": 4, "block_out_channels": [128, 256, 512, 512],
           "layers_per_block": 2, "sample_size": 512,
           "down_block_types": ["DownEncoderBlock2D"] * 4, "up_block_types": ["UpDecoderBlock2D"] * 4}
_LATENT = RealInput("sample", (1, 4, 64, 64), "float32", -1.0, 1.0)

#: Entries that are not a transformers (config, model) pair, plus the two-opset pair.
_OTHER: list[RealSpec] = [
    RealSpec("sd-unet", "diffusion", "diffusers", "UNet2DConditionModel", "", _SD_UNET,
             (_LATENT, RealInput("timestep", (1,), "float32", 0.0, 1000.0),
              RealInput("encoder_hidden_states", (1, 77, 768), "float32", -1.0, 1.0)),
             "sample", 0, "runwayml/stable-diffusion-v1-5 unet (64x64 latent)"),
    RealSpec("sd-vae-decoder", "diffusion", "diffusers", "AutoencoderKL", "", _SD_VAE,
             (RealInput("latent", (1, 4, 64, 64), "float32", -1.0, 1.0),), "sample", 0,
             "runwayml/stable-diffusion-v1-5 vae decoder half, decode(): 64x64 latent -> 512x512 image", call="decode"),
    RealSpec("dlrm-small", "recsys", "torch", "compstack:dlrm", "",
             {"tables": 26, "rows": 100000, "dim": 64, "dense": 13, "bottom": [512, 256, 64], "top": [512, 256, 1]},
             (RealInput("dense", (128, 13), "float32", 0.0, 1.0), RealInput("sparse", (128, 26), "int64", 0, 100000)),
             "logits", 0, "DLRM-style (Criteo layout: 13 dense, 26 sparse; tables capped at 100k rows), batch 128"),
    RealSpec("lstm-lm", "rnn", "torch", "compstack:lstm_lm", "",
             {"vocab": 33278, "dim": 650, "layers": 2, "tie": True},
             (RealInput("input_ids", (1, 35), "int64", 0, 33278),), "logits", 0,
             "PyTorch word_language_model medium LSTM (Zaremba 2014; WikiText-2 vocab), bptt 35"),
    RealSpec("squeezenet-1.1", "cnn", "torch", "compstack:squeezenet", "", {}, _img(), "logits", 0,
             "SqueezeNet 1.1 (Iandola 2016), torchvision squeezenet1_1 layout", call="positional"),
    RealSpec("googlenet", "cnn", "torch", "compstack:googlenet", "", {}, _img(), "logits", 0,
             "GoogLeNet (Szegedy 2015), torchvision googlenet layout, no aux heads", call="positional"),
]

#: timm entries: (zoo name, family, timm name, image size, the published model).
_TIMM: list[tuple[str, str, str, int, str]] = [
    ("mobilenet-v3-large", "cnn", "mobilenetv3_large_100", 224, "MobileNetV3-Large 1.0 (Howard 2019)"),
    ("mobilenet-v3-small", "cnn", "mobilenetv3_small_100", 224, "MobileNetV3-Small 1.0 (Howard 2019)"),
    ("densenet121", "cnn", "densenet121", 224, "DenseNet-121 (Huang 2017)"),
    ("inception-v3", "cnn", "inception_v3", 299, "Inception v3 (Szegedy 2016), 299x299"),
    ("resnext50-32x4d", "cnn", "resnext50_32x4d", 224, "ResNeXt-50 32x4d (Xie 2017)"),
    ("ghostnet-100", "cnn", "ghostnet_100", 224, "GhostNet 1.0 (Han 2020)"),
    ("vgg16", "cnn", "vgg16", 224, "VGG-16 (Simonyan 2015)"),
    ("mixer-b16", "mlp", "mixer_b16_224", 224, "MLP-Mixer B/16 (Tolstikhin 2021)"),
    ("maxvit-tiny", "vit", "maxvit_tiny_tf_224", 224, "MaxViT-T (Tu 2022)"),
]
_OTHER += [RealSpec(name, fam, "timm", model, "", {}, _img(size), "logits", 0, f"{pub}; timm {model}",
                    call="positional")
           for name, fam, model, size, pub in _TIMM]


def _from_rows() -> list[RealSpec]:
    out = [RealSpec(name, fam, _TF, model, cfg, kw, ins, outp, 0, pub)
           for name, fam, model, cfg, kw, ins, outp, pub in _ROWS]
    base = next(s for s in out if s.name == "resnet50")
    for opset in (18, 23):
        out.append(RealSpec(f"resnet50-opset{opset}", "cnn", _TF, base.model, base.config, base.kwargs, base.inputs,
                            base.output, 0, f"{base.published}, ONNX opset {opset}", opset=opset))
    return out


def _with_params(specs: list[RealSpec]) -> dict[str, RealSpec]:
    out = {}
    for s in specs:
        out[s.name] = RealSpec(**{**s.__dict__, "params": _PARAMS.get(s.name.split("-opset")[0], 0)})
    return out


#: Exact parameter counts, computed once with ``scripts/real_zoo_params.py`` (meta device).
_PARAMS: dict[str, int] = {
    "bert-base": 109482240,
    "bert-large": 335141888,
    "distilbert": 66362880,
    "roberta-base": 124645632,
    "xlm-roberta-base": 278043648,
    "albert-base": 11683584,
    "electra-base": 108891648,
    "deberta-base": 124043520,
    "deberta-v3-base": 183831552,
    "mpnet-base": 109484928,
    "mobilebert": 24844544,
    "squeezebert": 51089664,
    "modernbert-base": 149014272,
    "gpt2-124m": 124439808,
    "distilgpt2": 81912576,
    "opt-125m": 125239296,
    "gpt-neo-125m": 125198592,
    "pythia-160m": 162322944,
    "smollm-135m": 134515008,
    "mistral-style-200m": 149840640,
    "qwen2.5-0.5b": 494032768,
    "gemma3-270m": 268098176,
    "t5-small": 60506624,
    "flan-t5-small": 60511616,
    "bart-base": 139420416,
    "marian-en-de": 74934784,
    "whisper-tiny": 37760640,
    "resnet18": 11689512,
    "resnet50": 25557032,
    "resnet101": 44549160,
    "mobilenet-v1": 4233001,
    "mobilenet-v2": 3506153,
    "efficientnet-b0": 5288548,
    "convnext-tiny": 28589128,
    "convnextv2-tiny": 28635496,
    "regnet-y-040": 20646656,
    "bit-50": 25549352,
    "poolformer-s12": 11915176,
    "vit-b16": 86567656,
    "deit-small": 22051432,
    "swin-tiny": 28288354,
    "swinv2-tiny": 28347154,
    "mobilevit-small": 5578632,
    "beit-base": 86530984,
    "dinov2-small": 22056576,
    "levit-128s": 7391290,
    "pvt-v2-b0": 3666760,
    "cvt-13": 19997480,
    "segformer-b0": 3752694,
    "mobilevit-deeplabv3": 6357941,
    "mobilenetv2-deeplabv3": 2525717,
    "detr-resnet50": 41524768,
    "yolos-tiny": 6488736,
    "wav2vec2-base": 94371712,
    "hubert-base": 94371712,
    "ast-base": 86594063,
    "clip-vision-b32": 87456000,
    "clip-text-b32": 63165952,
    "sd-unet": 859520964,
    "dlrm-small": 166899521,
    "lstm-lm": 28434378,
    "squeezenet-1.1": 1235496,
    "googlenet": 6624904,
    "sd-vae-decoder": 49490199,
    "mobilenet-v3-large": 5483032,
    "mobilenet-v3-small": 2542856,
    "densenet121": 7978856,
    "inception-v3": 23834568,
    "resnext50-32x4d": 25028904,
    "ghostnet-100": 5182508,
    "vgg16": 138357544,
    "mixer-b16": 59880472,
    "maxvit-tiny": 30916528,
}

#: The real tier by name, in table order.
REAL: dict[str, RealSpec] = _with_params(_from_rows() + _OTHER)


def real_names() -> list[str]:
    """Names of the real-tier entries, in table order."""
    return list(REAL)


def spec(name: str) -> RealSpec:
    """The :class:`RealSpec` of ``name`` (``KeyError`` if it is not a real-tier name)."""
    return REAL[name]
