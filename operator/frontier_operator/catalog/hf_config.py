"""Turns a Hugging Face ``config.json`` into a catalog :class:`ModelArch`.

Understands the families the operator serves: Llama / Qwen dense (GQA through
``num_key_value_heads``), Qwen2/Qwen3-MoE (``num_experts``, ``decoder_sparse_step``,
``mlp_only_layers``), DeepSeek-V3 / Kimi-K2 / GLM-5 (multi-head latent attention, routed + shared
experts, ``first_k_dense_replace``, NextN draft layers, GLM-5's sparse-attention indexer), gpt-oss
(``num_local_experts``, alternating sliding/full layers), MiniMax-M2 (per-layer QK norm, MTP
modules), Qwen3-Next / Qwen3.5 (Gated DeltaNet linear-attention layers between full-attention ones),
and multimodal wrappers whose language model sits in ``text_config``.

Parameter counts are computed from the architecture, not read from a model card:

* ``total`` = input embedding + every decoder layer (attention, dense or MoE FFN with router and
  shared experts, RMSNorms) + final norm + output head (skipped when ``tie_word_embeddings``).
  It leaves out the NextN/MTP draft layers (reported separately as ``mtp``) and vision encoders, as
  the published figures do (DeepSeek-V3's 671B excludes its 14B MTP module).
* ``active`` = what one decoded token reads: everything above except the input-embedding table (a
  single row is gathered) and the routed experts it was not sent to. This is the convention of the
  DeepSeek-V3 (37B incl. 0.9B head) and gpt-oss (5.1B) model cards.

Bad input raises :class:`HfConfigError` naming the offending key; nothing else escapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from frontier_operator.catalog.types import AttentionKind, LayerMix, MlaDims, ModelArch, MoeDims

FULL_ATTENTION = "full_attention"
SLIDING_ATTENTION = "sliding_attention"
LINEAR_ATTENTION = "linear_attention"
_LAYER_TYPES = frozenset({FULL_ATTENTION, SLIDING_ATTENTION, LINEAR_ATTENTION})

# Keys under which multimodal wrappers nest their language model.
_TEXT_SECTIONS = ("text_config", "llm_config", "language_config")

_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32"}
_MODELOPT_ALGOS = {"FP8": "fp8", "NVFP4": "nvfp4", "MXFP4": "mxfp4", "MXFP8": "mxfp8"}
_INTEGER_METHODS = frozenset({"awq", "awq_marlin", "gptq", "gptq_marlin", "auto-round", "moe_wna16"})


class HfConfigError(ValueError):
    """A ``config.json`` that does not describe a model we can reason about.

    ``field`` is the (dotted) config key that is missing or wrong, so that the operator can point the
    user at it in the FrontierTarget status; ``hint`` says how to fix it.
    """

    def __init__(self, field: str, message: str, hint: str = "") -> None:
        self.field = field
        self.message = message
        self.hint = hint
        text = f"{field}: {message}"
        super().__init__(f"{text} ({hint})" if hint else text)


@dataclass(frozen=True)
class ParameterCounts:
    """Parameter counts derived from the architecture (see the module docstring for what each covers)."""

    total: int
    active: int
    # Weights of the NextN/MTP draft layers shipped in the checkpoint (not part of `total`); they are
    # loaded only when speculative decoding uses them (SGLang `--speculative-algorithm NEXTN`).
    mtp: int


def model_from_hf_config(config: Mapping[str, Any], name: str, hf_id: str = "") -> ModelArch:
    """Build the catalog entry of the model that ``config`` (a parsed ``config.json``) describes."""
    if not isinstance(name, str) or not name.strip():
        raise HfConfigError("name", "the model needs a non-empty name", "pass the catalog name to use")
    shape = _read_shape(config)
    counts = _count_parameters(shape)
    checkpoints = ((shape.native_dtype, hf_id),) if hf_id else ()
    sources = (f"https://huggingface.co/{hf_id}/blob/main/config.json",) if hf_id else ()
    return ModelArch(
        name=name.strip(),
        hf_id=hf_id,
        architecture=shape.architecture,
        total_params=float(counts.total),
        active_params=float(counts.active),
        num_layers=shape.num_layers,
        hidden_size=shape.hidden_size,
        intermediate_size=shape.dense_intermediate_size,
        num_attention_heads=shape.num_heads,
        num_kv_heads=shape.num_kv_heads,
        head_dim=shape.head_dim,
        attention=shape.attention,
        vocab_size=shape.vocab_size,
        max_context=shape.max_context,
        native_dtype=shape.native_dtype,
        layers=shape.layer_mix(),
        mla=shape.mla,
        moe=shape.moe,
        mtp_layers=shape.mtp_layers,
        checkpoints=checkpoints,
        sources=sources,
    )


def parameter_counts(config: Mapping[str, Any]) -> ParameterCounts:
    """Total, active and MTP parameter counts of the model that ``config`` describes."""
    return _count_parameters(_read_shape(config))


# --------------------------------------------------------------------------------------------------
# Typed access to one JSON object, with errors that name the key.


@dataclass(frozen=True)
class _Section:
    values: Mapping[str, Any]
    # Dotted path of this object inside config.json ("" at the top, "text_config." when nested).
    prefix: str

    def field(self, key: str) -> str:
        return self.prefix + key

    def has(self, key: str) -> bool:
        return self.values.get(key) is not None

    def integer(self, key: str, *, minimum: int = 1, default: int | None = None) -> int:
        value = self.values.get(key)
        if value is None:
            if default is None:
                raise HfConfigError(self.field(key), "is required", "copy it from the model's config.json")
            return default
        return self._checked_int(key, value, minimum)

    def optional_integer(self, key: str, *, minimum: int = 1) -> int | None:
        value = self.values.get(key)
        return None if value is None else self._checked_int(key, value, minimum)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.values.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise HfConfigError(self.field(key), f"must be true or false, got {value!r}")
        return value

    def text(self, key: str) -> str | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise HfConfigError(self.field(key), f"must be a string, got {value!r}")
        return value

    def integer_list(self, key: str) -> tuple[int, ...]:
        value = self.values.get(key)
        if value is None:
            return ()
        if not isinstance(value, list):
            raise HfConfigError(self.field(key), f"must be a list of integers, got {value!r}")
        return tuple(self._checked_int(key, item, 0) for item in value)

    def text_list(self, key: str) -> tuple[str, ...] | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise HfConfigError(self.field(key), f"must be a list of strings, got {value!r}")
        return tuple(value)

    def child(self, key: str) -> _Section | None:
        value = self.values.get(key)
        if value is None:
            return None
        if not isinstance(value, Mapping):
            raise HfConfigError(self.field(key), f"must be a JSON object, got {type(value).__name__}")
        return _Section(value, f"{self.field(key)}.")

    def _checked_int(self, key: str, value: Any, minimum: int) -> int:
        # bool is an int subclass in Python; `true` is never a valid size.
        if isinstance(value, bool) or not isinstance(value, int):
            raise HfConfigError(self.field(key), f"must be an integer, got {value!r}")
        if value < minimum:
            raise HfConfigError(self.field(key), f"must be at least {minimum}, got {value}")
        return value


@dataclass(frozen=True)
class _Config:
    """The language-model section (nested or not) plus the top level, searched in that order."""

    text: _Section
    root: _Section

    def section_with(self, key: str) -> _Section | None:
        for section in (self.text, self.root):
            if section.has(key):
                return section
        return None


def _split_config(config: Mapping[str, Any]) -> _Config:
    if not isinstance(config, Mapping):
        raise HfConfigError("config", f"must be a JSON object, got {type(config).__name__}")
    root = _Section(config, "")
    for key in _TEXT_SECTIONS:
        nested = root.child(key)
        if nested is not None:
            return _Config(text=nested, root=root)
    return _Config(text=root, root=root)


# --------------------------------------------------------------------------------------------------
# The architecture, read once.


@dataclass(frozen=True)
class _MoeShape:
    num_experts: int
    experts_per_token: int
    expert_intermediate_size: int
    # Summed width of the always-on shared experts (DeepSeek: n × moe width; Qwen: one wider expert).
    shared_intermediate_size: int
    shared_experts: int
    # Qwen's shared expert is scaled by a sigmoid gate (hidden → 1).
    shared_expert_gate: bool
    router_bias: bool
    # DeepSeek "noaux_tc" / MiniMax routing keep a per-expert score-correction bias.
    score_correction_bias: bool
    expert_biases: bool


@dataclass(frozen=True)
class _LinearAttentionShape:
    """Gated DeltaNet (Qwen3-Next / Qwen3.5) dimensions."""

    key_heads: int
    key_head_dim: int
    value_heads: int
    value_head_dim: int
    conv_kernel: int


@dataclass(frozen=True)
class _IndexerShape:
    """DeepSeek Sparse Attention "lightning indexer" (GLM-5, DeepSeek-V3.2)."""

    heads: int
    head_dim: int


@dataclass(frozen=True)
class _Shape:
    architecture: str
    model_type: str
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    attention: AttentionKind
    mla: MlaDims | None
    indexer: _IndexerShape | None
    vocab_size: int
    max_context: int
    native_dtype: str
    layer_types: tuple[str, ...]
    sliding_window_size: int
    linear: _LinearAttentionShape | None
    moe_layers: tuple[bool, ...]
    moe_shape: _MoeShape | None
    # Width of the dense FFN layers; 0 when every layer is an MoE layer.
    dense_intermediate_size: int
    mtp_layers: int
    tied_embeddings: bool
    attention_bias: bool
    qkv_bias_only: bool
    attention_output_gate: bool
    qk_norm_params_per_layer: int
    attention_sinks: bool
    mlp_bias: bool

    @property
    def moe(self) -> MoeDims | None:
        if self.moe_shape is None:
            return None
        return MoeDims(
            num_experts=self.moe_shape.num_experts,
            experts_per_token=self.moe_shape.experts_per_token,
            shared_experts=self.moe_shape.shared_experts,
            expert_intermediate_size=self.moe_shape.expert_intermediate_size,
            dense_layers=self.moe_layers.count(False),
        )

    def layer_mix(self) -> LayerMix:
        sliding = self.layer_types.count(SLIDING_ATTENTION)
        return LayerMix(
            full_attention=self.layer_types.count(FULL_ATTENTION),
            sliding_window=sliding,
            sliding_window_size=self.sliding_window_size if sliding else 0,
            linear_attention=self.layer_types.count(LINEAR_ATTENTION),
        )


def _read_shape(config: Mapping[str, Any]) -> _Shape:
    parts = _split_config(config)
    text = parts.text
    hidden = text.integer("hidden_size")
    num_layers = text.integer("num_hidden_layers")
    num_heads = text.integer("num_attention_heads")
    vocab = text.integer("vocab_size")
    model_type = (text.text("model_type") or parts.root.text("model_type") or "").lower()

    mla = _mla_dims(text)
    if mla is not None:
        # MLA up-projects the latent into every head, so each query head has its own key and value.
        num_kv_heads = num_heads
        head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        attention = AttentionKind.MLA
    else:
        num_kv_heads = text.integer("num_key_value_heads", default=num_heads)
        if num_kv_heads > num_heads or num_heads % num_kv_heads:
            raise HfConfigError(
                text.field("num_key_value_heads"),
                f"{num_heads} attention heads cannot be shared evenly by {num_kv_heads} KV heads",
                "num_attention_heads must be a multiple of num_key_value_heads",
            )
        head_dim = _head_dim(text, hidden, num_heads)
        attention = AttentionKind.GQA if num_kv_heads < num_heads else AttentionKind.MHA

    layer_types = _layer_types(text, num_layers)
    sliding_window_size = 0
    if SLIDING_ATTENTION in layer_types:
        sliding_window_size = text.integer("sliding_window")
    linear = _linear_attention(text) if LINEAR_ATTENTION in layer_types else None

    moe_shape = _moe_shape(text, model_type)
    moe_layers = _moe_layer_flags(text, num_layers) if moe_shape else (False,) * num_layers
    has_dense_layers = not all(moe_layers)
    dense_intermediate = text.integer("intermediate_size") if has_dense_layers else 0

    return _Shape(
        architecture=_architecture(parts, model_type),
        model_type=model_type,
        hidden_size=hidden,
        num_layers=num_layers,
        num_heads=num_heads,
        num_kv_heads=num_kv_heads,
        head_dim=head_dim,
        attention=attention,
        mla=mla,
        indexer=_indexer(text),
        vocab_size=vocab,
        max_context=_max_context(text),
        native_dtype=_native_dtype(parts),
        layer_types=layer_types,
        sliding_window_size=sliding_window_size,
        linear=linear,
        moe_layers=moe_layers,
        moe_shape=moe_shape,
        dense_intermediate_size=dense_intermediate,
        mtp_layers=_mtp_layers(text),
        tied_embeddings=_tied_embeddings(parts),
        attention_bias=text.flag("attention_bias"),
        # Qwen2-family attention always carries q/k/v biases without saying so in the config.
        qkv_bias_only=model_type.startswith("qwen2") and not text.has("attention_bias"),
        attention_output_gate=text.flag("attn_output_gate"),
        qk_norm_params_per_layer=_qk_norm_params(text, model_type, num_heads, num_kv_heads, head_dim),
        attention_sinks=model_type == "gpt_oss",
        mlp_bias=text.flag("mlp_bias"),
    )


def _architecture(parts: _Config, model_type: str) -> str:
    # The top-level class is what SGLang dispatches on (e.g. KimiK25ForConditionalGeneration).
    for section in (parts.root, parts.text):
        names = section.text_list("architectures")
        if names:
            return names[0]
    if model_type:
        return model_type
    raise HfConfigError("architectures", "is required", 'name the model class, e.g. ["LlamaForCausalLM"]')


def _head_dim(text: _Section, hidden: int, num_heads: int) -> int:
    if text.has("head_dim"):
        return text.integer("head_dim")
    if hidden % num_heads:
        raise HfConfigError(
            text.field("num_attention_heads"),
            f"hidden_size {hidden} is not divisible by {num_heads} attention heads",
            "set head_dim explicitly when heads do not split hidden_size evenly",
        )
    return hidden // num_heads


def _mla_dims(text: _Section) -> MlaDims | None:
    if not text.has("kv_lora_rank"):
        return None
    return MlaDims(
        kv_lora_rank=text.integer("kv_lora_rank"),
        q_lora_rank=text.optional_integer("q_lora_rank"),
        qk_nope_head_dim=text.integer("qk_nope_head_dim"),
        qk_rope_head_dim=text.integer("qk_rope_head_dim"),
        v_head_dim=text.integer("v_head_dim"),
        index_topk=(text.optional_integer("index_topk") or 0) if text.has("index_n_heads") else 0,
        index_heads=text.integer("index_n_heads") if text.has("index_n_heads") else 0,
        index_head_dim=text.integer("index_head_dim") if text.has("index_n_heads") else 0,
    )


def _indexer(text: _Section) -> _IndexerShape | None:
    if not text.has("index_n_heads"):
        return None
    return _IndexerShape(heads=text.integer("index_n_heads"), head_dim=text.integer("index_head_dim"))


def _layer_types(text: _Section, num_layers: int) -> tuple[str, ...]:
    declared = text.text_list("layer_types")
    if declared is not None:
        if len(declared) != num_layers:
            raise HfConfigError(
                text.field("layer_types"),
                f"lists {len(declared)} layers but num_hidden_layers is {num_layers}",
            )
        unknown = sorted(set(declared) - _LAYER_TYPES)
        if unknown:
            raise HfConfigError(
                text.field("layer_types"),
                f"unsupported layer type(s) {', '.join(unknown)}",
                f"supported: {', '.join(sorted(_LAYER_TYPES))}",
            )
        return declared
    if text.has("full_attention_interval"):
        # Qwen3-Next: every `interval`-th layer is full attention, the others Gated DeltaNet.
        interval = text.integer("full_attention_interval")
        return tuple(FULL_ATTENTION if (index + 1) % interval == 0 else LINEAR_ATTENTION for index in range(num_layers))
    return tuple(_sliding_or_full(text, index) for index in range(num_layers))


def _sliding_or_full(text: _Section, index: int) -> str:
    if not text.has("sliding_window"):
        return FULL_ATTENTION
    if text.has("use_sliding_window"):
        # Qwen2/Qwen3 semantics: the window applies only when enabled, from `max_window_layers` up.
        if not text.flag("use_sliding_window"):
            return FULL_ATTENTION
        first_windowed = text.integer("max_window_layers", minimum=0, default=0)
        return SLIDING_ATTENTION if index >= first_windowed else FULL_ATTENTION
    # Mistral semantics: a window on every layer, unless it covers the whole context anyway.
    window = text.integer("sliding_window")
    return SLIDING_ATTENTION if window < _max_context(text) else FULL_ATTENTION


def _linear_attention(text: _Section) -> _LinearAttentionShape:
    if not text.has("linear_num_value_heads"):
        raise HfConfigError(
            text.field("linear_num_value_heads"),
            "linear-attention layers need Gated DeltaNet dimensions",
            "only Qwen3-Next/Qwen3.5 style linear attention (linear_* keys) is understood",
        )
    return _LinearAttentionShape(
        key_heads=text.integer("linear_num_key_heads"),
        key_head_dim=text.integer("linear_key_head_dim"),
        value_heads=text.integer("linear_num_value_heads"),
        value_head_dim=text.integer("linear_value_head_dim"),
        conv_kernel=text.integer("linear_conv_kernel_dim"),
    )


def _expert_count_key(text: _Section) -> str | None:
    for key in ("n_routed_experts", "num_experts", "num_local_experts"):
        if text.has(key):
            return key
    return None


def _moe_shape(text: _Section, model_type: str) -> _MoeShape | None:
    count_key = _expert_count_key(text)
    if count_key is None or text.integer(count_key, minimum=0) == 0:
        return None
    num_experts = text.integer(count_key)
    top_k_key = next(
        (key for key in ("num_experts_per_tok", "experts_per_token", "moe_topk") if text.has(key)),
        "num_experts_per_tok",
    )
    top_k = text.integer(top_k_key)
    if top_k > num_experts:
        raise HfConfigError(text.field(top_k_key), f"routes to {top_k} of only {num_experts} experts")
    # Mixtral-style configs (gpt-oss, MiniMax: `num_local_experts`) name the expert width
    # `intermediate_size`; the DeepSeek and Qwen families keep that key for their dense layers.
    mixtral_style = count_key == "num_local_experts" and not text.has("moe_intermediate_size")
    expert_width = text.integer("intermediate_size" if mixtral_style else "moe_intermediate_size")

    shared_experts, shared_width, gated_shared = 0, 0, False
    if text.has("n_shared_experts"):
        shared_experts = text.integer("n_shared_experts", minimum=0)
        shared_width = shared_experts * expert_width
    elif text.has("shared_expert_intermediate_size"):
        shared_width = text.integer("shared_expert_intermediate_size", minimum=0)
        gated_shared = shared_width > 0
        # Qwen describes one wide shared expert; in units of the routed width it is n experts.
        shared_experts = max(1, round(shared_width / expert_width)) if shared_width else 0
    elif text.has("shared_intermediate_size"):
        shared_width = text.integer("shared_intermediate_size", minimum=0)
        shared_experts = 1 if shared_width else 0

    return _MoeShape(
        num_experts=num_experts,
        experts_per_token=top_k,
        expert_intermediate_size=expert_width,
        shared_intermediate_size=shared_width,
        shared_experts=shared_experts,
        shared_expert_gate=gated_shared,
        router_bias=model_type == "gpt_oss",
        score_correction_bias=text.text("topk_method") == "noaux_tc" or text.flag("use_routing_bias"),
        expert_biases=model_type == "gpt_oss",
    )


def _moe_layer_flags(text: _Section, num_layers: int) -> tuple[bool, ...]:
    if text.has("first_k_dense_replace") or text.has("moe_layer_freq"):
        # DeepSeek family: the first k layers are dense, then every `moe_layer_freq`-th layer is MoE.
        first_moe = text.integer("first_k_dense_replace", minimum=0, default=0)
        frequency = text.integer("moe_layer_freq", default=1)
        return tuple(index >= first_moe and index % frequency == 0 for index in range(num_layers))
    if text.has("decoder_sparse_step") or text.has("mlp_only_layers"):
        # Qwen MoE family: listed layers stay dense; otherwise every `decoder_sparse_step`-th is MoE.
        step = text.integer("decoder_sparse_step", default=1)
        dense_only = set(text.integer_list("mlp_only_layers"))
        return tuple(index not in dense_only and (index + 1) % step == 0 for index in range(num_layers))
    return (True,) * num_layers


def _mtp_layers(text: _Section) -> int:
    if text.has("num_nextn_predict_layers"):
        return text.integer("num_nextn_predict_layers", minimum=0)
    if text.has("mtp_num_hidden_layers"):
        return text.integer("mtp_num_hidden_layers", minimum=0)
    if text.flag("use_mtp"):
        # MiniMax-M2: `num_mtp_modules` modules of `mtp_transformer_layers` decoder layers each.
        return text.integer("num_mtp_modules", minimum=0, default=0) * text.integer("mtp_transformer_layers", default=1)
    return 0


def _max_context(text: _Section) -> int:
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions"):
        if text.has(key):
            return text.integer(key)
    raise HfConfigError(text.field("max_position_embeddings"), "is required", "the longest context the model supports")


def _tied_embeddings(parts: _Config) -> bool:
    section = parts.section_with("tie_word_embeddings")
    # Large checkpoints almost always ship a separate head; assume so when the key is absent.
    return section.flag("tie_word_embeddings") if section else False


def _qk_norm_params(text: _Section, model_type: str, heads: int, kv_heads: int, head_dim: int) -> int:
    if text.flag("use_qk_norm"):
        if text.text("qk_norm_type") == "per_layer":
            # MiniMax-M2 normalises the concatenated heads: one weight per q and per k channel.
            return (heads + kv_heads) * head_dim
        return 2 * head_dim
    # Qwen3 and its successors RMS-normalise each query and key head.
    return 2 * head_dim if model_type.startswith("qwen3") else 0


def _native_dtype(parts: _Config) -> str:
    section = parts.section_with("quantization_config")
    if section is not None:
        quantization = section.child("quantization_config")
        if quantization is not None:
            return _quantized_dtype(quantization)
    for key in ("torch_dtype", "dtype"):
        dtype_section = parts.section_with(key)
        if dtype_section is not None:
            value = dtype_section.text(key)
            if value is not None:
                name = value.lower().removeprefix("torch.")
                if name not in _TORCH_DTYPES:
                    raise HfConfigError(
                        dtype_section.field(key),
                        f"unknown dtype {value!r}",
                        f"expected one of {', '.join(sorted(_TORCH_DTYPES))}",
                    )
                return _TORCH_DTYPES[name]
    # transformers writes torch_dtype into every saved config; hand-written ones get the usual default.
    return "bf16"


def _quantized_dtype(quantization: _Section) -> str:
    method = (quantization.text("quant_method") or "").lower()
    if not method:
        raise HfConfigError(quantization.field("quant_method"), "is required", "e.g. fp8, mxfp4, modelopt")
    if method in ("fp8", "fbgemm_fp8", "w8a8_fp8"):
        return "fp8"
    if method == "mxfp4":
        return "mxfp4"
    if method.startswith("modelopt"):
        algo = (quantization.text("quant_algo") or "").upper()
        if algo not in _MODELOPT_ALGOS:
            raise HfConfigError(
                quantization.field("quant_algo"),
                f"unknown ModelOpt algorithm {algo or 'None'!r}",
                f"supported: {', '.join(sorted(_MODELOPT_ALGOS))}",
            )
        return _MODELOPT_ALGOS[algo]
    if method == "compressed-tensors":
        return _compressed_tensors_dtype(quantization)
    if method in _INTEGER_METHODS:
        bits = quantization.integer("bits") if quantization.has("bits") else quantization.integer("w_bit")
        return f"int{bits}"
    raise HfConfigError(
        quantization.field("quant_method"),
        f"unknown quantization method {method!r}",
        "supported: fp8, mxfp4, modelopt (FP8/NVFP4), compressed-tensors, awq, gptq",
    )


def _compressed_tensors_dtype(quantization: _Section) -> str:
    groups = quantization.child("config_groups")
    if groups is None or not groups.values:
        raise HfConfigError(quantization.field("config_groups"), "is required for compressed-tensors")
    first_group = groups.child(next(iter(groups.values)))
    weights = first_group.child("weights") if first_group else None
    if weights is None:
        raise HfConfigError(groups.field("<group>.weights"), "is required for compressed-tensors")
    bits = weights.integer("num_bits")
    number_type = (weights.text("type") or "int").lower()
    if number_type == "float" and bits == 4:
        # NVFP4 scales blocks of 16 elements; MXFP4 blocks of 32.
        return "nvfp4" if weights.integer("group_size", default=16) == 16 else "mxfp4"
    if number_type == "float" and bits == 8:
        return "fp8"
    if number_type == "int":
        return f"int{bits}"
    raise HfConfigError(weights.field("type"), f"unsupported weight format {number_type}{bits}")


# --------------------------------------------------------------------------------------------------
# Parameter counting.


def _count_parameters(shape: _Shape) -> ParameterCounts:
    hidden = shape.hidden_size
    embedding = shape.vocab_size * hidden
    head = 0 if shape.tied_embeddings else embedding
    norms_per_layer = 2 * hidden

    total_layers = 0
    active_layers = 0
    for layer_type, is_moe in zip(shape.layer_types, shape.moe_layers, strict=True):
        attention = _attention_params(shape, layer_type)
        ffn_total, ffn_active = _ffn_params(shape, is_moe)
        total_layers += attention + ffn_total + norms_per_layer
        active_layers += attention + ffn_active + norms_per_layer

    total = embedding + total_layers + hidden + head
    # One decoded token gathers a single embedding row but multiplies by the whole output head
    # (which is the embedding table itself when tied).
    active = active_layers + hidden + embedding
    return ParameterCounts(total=total, active=active, mtp=_mtp_params(shape))


def _mtp_params(shape: _Shape) -> int:
    if shape.mtp_layers == 0:
        return 0
    hidden = shape.hidden_size
    # Each draft module: one decoder layer like the last main layer (full attention, same FFN kind),
    # a projection of [embedding; hidden state] (2h → h) and its RMSNorms; embedding and head are shared.
    ffn_total, _ = _ffn_params(shape, shape.moe_layers[-1])
    layer = _attention_params(shape, FULL_ATTENTION) + ffn_total + 2 * hidden
    return shape.mtp_layers * (layer + 2 * hidden * hidden + 3 * hidden)


def _attention_params(shape: _Shape, layer_type: str) -> int:
    if layer_type == LINEAR_ATTENTION:
        assert shape.linear is not None  # guaranteed by _read_shape
        return _gated_deltanet_params(shape.hidden_size, shape.linear)
    if shape.mla is not None:
        return _mla_params(shape, shape.mla)
    return _softmax_attention_params(shape)


def _softmax_attention_params(shape: _Shape) -> int:
    hidden, heads, kv_heads, head_dim = shape.hidden_size, shape.num_heads, shape.num_kv_heads, shape.head_dim
    query_width = heads * head_dim
    # Qwen3-Next/3.5 project a per-channel output gate alongside the query.
    query_projection = hidden * query_width * (2 if shape.attention_output_gate else 1)
    params = query_projection + 2 * hidden * kv_heads * head_dim + query_width * hidden
    if shape.attention_bias:
        params += query_width * (2 if shape.attention_output_gate else 1) + 2 * kv_heads * head_dim + hidden
    elif shape.qkv_bias_only:
        params += query_width + 2 * kv_heads * head_dim
    if shape.attention_sinks:
        params += heads
    return params + shape.qk_norm_params_per_layer


def _mla_params(shape: _Shape, mla: MlaDims) -> int:
    hidden, heads = shape.hidden_size, shape.num_heads
    qk_head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    if mla.q_lora_rank is not None:
        # q_a_proj, q_a_layernorm, q_b_proj
        query = hidden * mla.q_lora_rank + mla.q_lora_rank + mla.q_lora_rank * heads * qk_head_dim
    else:
        query = hidden * heads * qk_head_dim
    # kv_a_proj_with_mqa (latent + shared rope key), kv_a_layernorm, kv_b_proj, o_proj
    key_value = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim) + mla.kv_lora_rank
    key_value += mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
    output = heads * mla.v_head_dim * hidden
    return query + key_value + output + _indexer_params(shape, mla)


def _indexer_params(shape: _Shape, mla: MlaDims) -> int:
    if shape.indexer is None:
        return 0
    indexer = shape.indexer
    query_source = mla.q_lora_rank if mla.q_lora_rank is not None else shape.hidden_size
    # wq_b (from the query latent), wk and its LayerNorm (weight + bias), per-head weights_proj.
    return (
        query_source * indexer.heads * indexer.head_dim
        + shape.hidden_size * indexer.head_dim
        + 2 * indexer.head_dim
        + shape.hidden_size * indexer.heads
    )


def _gated_deltanet_params(hidden: int, linear: _LinearAttentionShape) -> int:
    key_width = linear.key_heads * linear.key_head_dim
    value_width = linear.value_heads * linear.value_head_dim
    in_projections = hidden * (2 * key_width + 2 * value_width) + hidden * 2 * linear.value_heads  # qkvz, ba
    convolution = (2 * key_width + value_width) * linear.conv_kernel
    decay_and_norm = 2 * linear.value_heads + linear.value_head_dim  # A_log, dt_bias, gated RMSNorm
    return in_projections + convolution + decay_and_norm + value_width * hidden


def _ffn_params(shape: _Shape, is_moe: bool) -> tuple[int, int]:
    """(total, active) parameters of one layer's feed-forward block (gated SwiGLU: 3 matrices)."""
    hidden = shape.hidden_size
    if not is_moe or shape.moe_shape is None:
        width = shape.dense_intermediate_size
        params = 3 * hidden * width + ((2 * width + hidden) if shape.mlp_bias else 0)
        return params, params
    moe = shape.moe_shape
    expert = 3 * hidden * moe.expert_intermediate_size
    if moe.expert_biases:
        expert += 2 * moe.expert_intermediate_size + hidden
    router = hidden * moe.num_experts
    router += moe.num_experts * (int(moe.router_bias) + int(moe.score_correction_bias))
    shared = 3 * hidden * moe.shared_intermediate_size + (hidden if moe.shared_expert_gate else 0)
    always_on = router + shared
    return moe.num_experts * expert + always_on, moe.experts_per_token * expert + always_on
