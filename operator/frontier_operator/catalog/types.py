"""Typed catalog entries: what the performance model and the planner know about the world.

Every entry is a frozen dataclass so that it can be shared freely between plans and cached.
Figures carry their sources in the YAML files under ``catalog/data``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

# What a quantized checkpoint may leave in BF16 (`ModelArch.kept_in_bf16`): every attention projection; the
# attention's input projections only (the output projection quantized); the MTP draft layers.
BF16_MODULE_GROUPS = ("attention", "attention_inputs", "draft")


class AttentionKind(StrEnum):
    MHA = "mha"
    GQA = "gqa"
    MLA = "mla"


@dataclass(frozen=True)
class MlaDims:
    """Multi-head latent attention (DeepSeek-V2/V3 family): the KV cache holds one compressed latent per token."""

    kv_lora_rank: int
    q_lora_rank: int | None
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    # DeepSeek Sparse Attention (GLM-5, DeepSeek-V3.2): a "lightning indexer" scores every cached token with
    # `index_heads` × `index_head_dim` FP8 keys and the attention core reads only the `index_topk` best.
    # 0 = dense MLA.
    index_topk: int = 0
    index_heads: int = 0
    index_head_dim: int = 0


@dataclass(frozen=True)
class MoeDims:
    num_experts: int
    experts_per_token: int
    shared_experts: int
    expert_intermediate_size: int
    # The first `dense_layers` transformer layers use a dense FFN of `ModelArch.intermediate_size`.
    dense_layers: int = 0


@dataclass(frozen=True)
class LayerMix:
    """How many layers keep a full KV cache; the rest attend over a window or keep a fixed linear state."""

    full_attention: int
    sliding_window: int = 0
    sliding_window_size: int = 0
    linear_attention: int = 0


@dataclass(frozen=True)
class ModelArch:
    name: str
    hf_id: str
    architecture: str
    total_params: float
    active_params: float
    num_layers: int
    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    attention: AttentionKind
    vocab_size: int
    max_context: int
    native_dtype: str
    layers: LayerMix
    mla: MlaDims | None = None
    moe: MoeDims | None = None
    mtp_layers: int = 0
    # Hugging Face repositories of checkpoints per weight format, e.g. {"fp8": "deepseek-ai/DeepSeek-R1"}.
    checkpoints: tuple[tuple[str, str], ...] = ()
    # Module groups (`BF16_MODULE_GROUPS`) a format's checkpoint leaves in BF16, as its quantization config's
    # exclude list says, e.g. {"nvfp4": ("attention_inputs", "draft")}: weights the format does not shrink.
    kept_in_bf16: tuple[tuple[str, tuple[str, ...]], ...] = ()
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    def kv_elements_per_token(self) -> int:
        """KV-cache elements one token adds across all full-attention layers (MLA: latent + rope key)."""
        if self.mla is not None:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            per_layer = 2 * self.num_kv_heads * self.head_dim
        return per_layer * self.layers.full_attention

    def checkpoint_for(self, weight_format: str) -> str | None:
        return dict(self.checkpoints).get(weight_format)


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"


@dataclass(frozen=True)
class GpuSpec:
    name: str
    vendor: Vendor
    # Compute architecture as SGLang's capability checks see it: "sm90", "sm100", "sm103", "gfx942", "gfx950".
    arch: str
    memory_gb: float
    hbm_bandwidth_tbs: float
    # Dense (no sparsity) tensor-core peak per number format, TFLOP/s: keys "bf16", "fp8", "fp4".
    dense_tflops: tuple[tuple[str, float], ...]
    scale_up_domain: int
    scale_up_bandwidth_gbs: float
    scale_out_bandwidth_gbs: float
    gpus_per_node: int
    default_price_per_hour: float
    native_formats: frozenset[str] = field(default_factory=frozenset)
    aliases: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    def tflops(self, number_format: str) -> float | None:
        return dict(self.dense_tflops).get(number_format)


@dataclass(frozen=True)
class QuantFormat:
    """A weight/activation number format the planner may choose (`spec.search.quantizations`)."""

    name: str
    description: str
    weight_bytes_per_param: float
    # Number format the GEMMs run in where the format is native ("bf16", "fp8", "fp4").
    compute_format: str
    # GPU architectures whose tensor cores run this format natively.
    native_archs: frozenset[str]
    # Architectures that can load it but run it weight-only (dequantized to bf16 in the kernel), slower.
    weight_only_archs: frozenset[str]
    # Value for `--quantization` when a BF16 checkpoint is quantized on load; None when only a
    # pre-quantized checkpoint works (then `--quantization` stays unset, SGLang reads the checkpoint).
    sglang_online_method: str | None
    moe_only: bool
    typical_quality_loss_pct: float
    sources: tuple[str, ...] = ()
    # Other spellings users and data sets use for this format (e.g. "fp8_block", "modelopt_fp4").
    aliases: tuple[str, ...] = ()
    # Measured losses that replace the default for specific models, keyed by normalised model name
    # (lower case, no organisation prefix); see `catalog.quantization.quality_loss_pct`.
    quality_loss_by_model: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class KvCacheFormat:
    name: str
    sglang_value: str
    bytes_per_element: float
    native_archs: frozenset[str]
    typical_quality_loss_pct: float
    sources: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
