"""Facts about number formats and SGLang defaults that the legality rules and the enumeration share.

Everything here is a pure function of catalog entries; sources are cited next to each figure.
"""

from __future__ import annotations

from frontier_operator.catalog.quantization import find_quant_format, normalize_model_name
from frontier_operator.catalog.types import GpuSpec, KvCacheFormat, ModelArch, QuantFormat

# Archs whose default attention backend pages the KV cache in blocks: trtllm_mha / trtllm_mla on
# Blackwell force a page size of 64 unless told otherwise (sglang-0.5.23.md §3.1 `--page-size`, §4.3).
_PAGED_BY_DEFAULT_ARCHS = frozenset({"sm100", "sm103"})
_BLACKWELL_DEFAULT_PAGE = 64

# Width of the quantization block or scale group along a weight's output dimension. A tensor-parallel
# shard narrower than, or not a multiple of, the block makes SGLang refuse to load ("not divisible by
# weight quantization block_n"). Sizes: fp8-block 128x128 (`weight_block_size` in DeepSeek-V3's
# config.json), MXFP4 one scale per 32, NVFP4 one scale per 16 (catalog/data/quantization.yaml).
# INT4 group sizes differ per checkpoint (32 or 128), so w4a16 is left unchecked.
QUANT_BLOCK_WIDTH: dict[str, int] = {"fp8-block": 128, "mxfp4": 32, "nvfp4": 16}

# SGLang's default `--chunked-prefill-size` by GPU memory (sglang-0.5.23.md §3.2 table), as
# (upper bound in GB, chunk tokens); at or above the last bound the chunk is 16384.
_CHUNK_BY_MEMORY: tuple[tuple[float, int], ...] = ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192))
_CHUNK_LARGE_MEMORY = 16384

BASELINE_WEIGHT_FORMAT = "bf16"
BASELINE_KV_FORMAT = "bf16"


# Unquantized releases in another float width serve exactly like BF16 ones.
_UNQUANTIZED = frozenset({"fp16", "float16", "fp32", "float32"})


def canonical_format_name(name: str) -> str:
    """The catalog's canonical weight-format name for a spelling ("int4" → "w4a16"); unknown names pass through."""
    if name.lower() in _UNQUANTIZED:
        return BASELINE_WEIGHT_FORMAT
    fmt = find_quant_format(name)
    return fmt.name if fmt is not None else name


def servable_formats(arch: ModelArch) -> frozenset[str]:
    """Weight formats the model has weights in: its reference release and every listed checkpoint.

    An FP8 reference release is block-quantized in practice (DeepSeek-V3/R1, MiniMax, Qwen3-FP8 ship
    `weight_block_size` [128, 128]), so it serves both as `fp8` and as `fp8-block`.
    """
    names = {canonical_format_name(arch.native_dtype)}
    names.update(canonical_format_name(fmt) for fmt, _ in arch.checkpoints)
    if canonical_format_name(arch.native_dtype) == "fp8":
        names.add("fp8-block")
    return frozenset(names)


def has_weights_for(arch: ModelArch, fmt: QuantFormat) -> bool:
    """Whether SGLang can obtain `fmt` weights: a checkpoint in that format, or on-load quantization from BF16.

    SGLang quantizes on load only from a BF16/FP16 checkpoint; it never upcasts a quantized release
    (sglang-0.5.23.md §4.1), so BF16 for a native-FP8 model needs a BF16 checkpoint.
    """
    servable = servable_formats(arch)
    if fmt.name in servable:
        return True
    return fmt.sglang_online_method is not None and BASELINE_WEIGHT_FORMAT in servable


def weight_quality_loss_pct(arch: ModelArch, fmt: QuantFormat) -> float:
    """Accuracy loss of `fmt` weights against the model's reference release: measured if known, else typical."""
    measured = dict(fmt.quality_loss_by_model).get(normalize_model_name(arch.name))
    return fmt.typical_quality_loss_pct if measured is None else measured


def quality_loss_pct(arch: ModelArch, fmt: QuantFormat, kv: KvCacheFormat) -> float:
    """Weight plus KV-cache loss against the model's reference release (the catalog's pessimistic sum)."""
    return weight_quality_loss_pct(arch, fmt) + kv.typical_quality_loss_pct


def default_page_size(gpu: GpuSpec) -> int:
    """KV page size of SGLang's default attention backend: 64 on Blackwell (trtllm_mha and trtllm_mla), else 1.

    MHA and MLA models agree here: FA3 (page 1) on Hopper, the trtllm family (page 64) on SM100/SM103.
    """
    return _BLACKWELL_DEFAULT_PAGE if gpu.arch in _PAGED_BY_DEFAULT_ARCHS else 1


def default_chunked_prefill_size(gpu: GpuSpec) -> int:
    for upper_gb, chunk in _CHUNK_BY_MEMORY:
        if gpu.memory_gb < upper_gb:
            return chunk
    return _CHUNK_LARGE_MEMORY
