"""The operators of the ``com.microsoft`` domain (ONNX Runtime's contrib ops).

The ONNX checker knows no schema of this domain, so a node of it with a misspelt or
invented op type would pass every check and fail (or be skipped) inside a stack;
:func:`compstack.core.ir.check` refuses op types missing from this list instead.

Generated from ``onnxruntime.capi.onnxruntime_pybind11_state.get_all_operator_schema()``
of onnxruntime 1.32.0 (CPU and CUDA builds register the same schemas).
"""

from __future__ import annotations

__all__ = ["COM_MICROSOFT_OPS"]

#: Every op type ONNX Runtime registers a schema for in ``com.microsoft``.
COM_MICROSOFT_OPS = frozenset({
    "Attention", "AttnLSTM", "BeamSearch", "BiasAdd", "BiasDropout", "BiasGelu", "BiasSoftmax",
    "BiasSplitGelu", "BifurcationDetector", "BitmaskBiasDropout", "BitmaskDropout", "BranchwiseRMSNorm",
    "CDist", "CausalConvWithState", "ComplexMul", "ComplexMulConj", "ConvStateReplay",
    "ConvTransposeWithDynamicPads", "CropAndResize", "DecoderAttention", "DecoderMaskedMultiHeadAttention",
    "DecoderMaskedSelfAttention", "DequantizeBFP", "DequantizeLinear", "DequantizeWithOrder",
    "DynamicQuantizeLSTM", "DynamicQuantizeMatMul", "DynamicSparseAttention", "DynamicTimeWarping",
    "EPContext", "EmbedLayerNormalization", "EngramGate", "ExpandDims", "FastGelu", "FusedConv", "FusedGemm",
    "FusedMatMul", "FusedMatMulActivation", "GatedAdd", "GatedDeltaNet", "GatedDeltaNetStateReplay",
    "GatedRMSNorm", "GatedRelativePositionBias", "GatherBlockQuantized", "GatherND", "GatherPacked", "Gelu",
    "GemmFastGelu", "GemmFloat8", "GemmaRotaryEmbedding", "GreedySearch", "GridSample", "GroupNorm",
    "GroupQueryAttention", "HyperConnectionLowRankMix", "HyperConnectionPostMix", "HyperConnectionPreMix",
    "Inverse", "Irfft", "IsAllFinite", "LinearAttention", "LinearAttentionGate", "LongformerAttention",
    "MRotaryEmbedding", "Mamba2Verify", "MatMulBlockQuantizedFp4Weight", "MatMulBlockQuantizedFp8Weight",
    "MatMulBnb4", "MatMulFpQ4", "MatMulInteger16", "MatMulIntegerToFloat", "MatMulNBits", "MatMulNBitsMlp",
    "MatMulNBitsQLoRA", "MatMulNBitsQkv", "MatMulPacked", "MaxpoolWithMask", "MoE", "MoEGroupRouter",
    "MoEPacked", "MulInteger", "MultiHeadAttention", "MurmurHash3", "NGramHashMapping", "NGramRepeatBlock",
    "NhwcConv", "NhwcFusedConv", "NhwcMaxPool", "PackedAttention", "PackedMultiHeadAttention",
    "PackedSparseAttentionIndexer", "PackedSparseAttentionIndexerMerge", "Pad", "PagedAttention", "QAttention",
    "QEmbedLayerNormalization", "QGemm", "QLinearAdd", "QLinearAveragePool", "QLinearConcat", "QLinearConv",
    "QLinearGlobalAveragePool", "QLinearLeakyRelu", "QLinearMul", "QLinearReduceMean", "QLinearSigmoid",
    "QLinearSoftmax", "QLinearWhere", "QMoE", "QOrderedAttention", "QOrderedGelu",
    "QOrderedLayerNormalization", "QOrderedLongformerAttention", "QOrderedMatMul", "QuantizeBFP",
    "QuantizeLinear", "QuantizeWithOrder", "QuickGelu", "RMSNormRotary", "Range", "ReduceSumInteger",
    "RelativePositionBias", "RemovePadding", "RestorePadding", "Rfft", "RotaryEmbedding", "RouterGateUpProj",
    "SampleOp", "Sampling", "ScaledSiLU", "SkipGroupNorm", "SkipLayerNormalization",
    "SkipSimplifiedLayerNormalization", "Snpe", "SparseAttention", "SparseAttentionIndexer",
    "SparsePagedAttention", "SparseToDenseMatMul", "SpeculativePrefixCommit", "SwiGLU", "Tokenizer",
    "TorchEmbedding", "TransposeMatMul", "Trilu", "UnfoldTensor", "Unique", "VarlenCausalConvWithState",
    "VarlenNGramHashMapping", "WhisperBeamSearch", "WordConvEmbedding",
})
