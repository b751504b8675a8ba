"""Roofline work of one forward pass on one GPU: bytes streamed from HBM and FLOPs, per kind of kernel.

This module only counts; `steps` turns the counts into seconds with the calibration coefficients. The
counts follow SGLang's sharding: attention projections split over the attention-TP group (tp / attn_dp),
dense FFN and experts over the whole TP group (expert parallelism and MoE-TP share the same GPUs), an MLA
latent cache replicated on every attention-TP rank, GQA KV heads split across it (and replicated once the
group is wider than the number of KV heads). Identical layers are summed per kind, which keeps
``sum(max(bytes/BW, flops/peak))`` exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from functools import cache

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.formats import WorkerFormats

BYTES_BF16 = 2.0
# Embedding and output head stay BF16 in every released checkpoint we serve (FP8 and FP4 exports quantize
# the transformer blocks only), so they are counted at two bytes whatever the weight format.
HEAD_BYTES_PER_PARAM = BYTES_BF16
# DeepEP dispatches activations in FP8 and combines in BF16
# (sglang-0.5.23.md §2.1, --deepep-dispatcher-output-dtype auto).
DISPATCH_BYTES = 1.0
COMBINE_BYTES = 2.0


class OpKind(StrEnum):
    GEMM = "gemm"
    ATTENTION = "attention"
    # A decode forward's attention: a few query rows (one per request, or a verify pass's drafts) against a
    # paged cache, a different kernel from prefill's (FlashMLA / FlashInfer decode), at its own share of peak.
    DECODE_ATTENTION = "decode_attention"
    MOE = "moe"


@dataclass(frozen=True)
class OpWork:
    kind: OpKind
    hbm_bytes: float
    flops: float
    compute_format: str
    # Narrowest per-GPU output width of the GEMM (columns); thin shards run below the large-GEMM rate.
    width: float = math.inf


class CollectiveKind(StrEnum):
    ALL_REDUCE = "all_reduce"
    ALL_TO_ALL = "all_to_all"
    ALL_GATHER = "all_gather"
    P2P = "p2p"


@dataclass(frozen=True)
class CollectiveWork:
    kind: CollectiveKind
    # Bytes of the logical buffer per GPU (an all-reduce of this tensor; the bytes each GPU sends in an all-to-all).
    buffer_bytes: float
    group_size: int
    count: float


@dataclass(frozen=True)
class ForwardWork:
    ops: tuple[OpWork, ...]
    collectives: tuple[CollectiveWork, ...]
    layers: float
    requests_per_rank: float

    @property
    def hbm_bytes(self) -> float:
        return sum(op.hbm_bytes for op in self.ops)


@dataclass(frozen=True)
class ParamInventory:
    """Parameter counts by role; routed experts reconciled with the catalog's total parameter count."""

    attention: float
    dense_ffn: float
    shared_experts: float
    routed_expert: float
    router: float
    embedding: float
    lm_head: float
    dense_layers: int
    moe_layers: int
    experts: int
    experts_per_token: int
    # The attention's output projection (part of `attention`), which some checkpoints quantize alone.
    attention_output: float

    def attention_in_bf16(self, bf16_modules: tuple[str, ...]) -> float:
        """Attention parameters per layer that a checkpoint keeping `bf16_modules` in BF16 leaves unquantized."""
        if "attention" in bf16_modules:
            return self.attention
        if "attention_inputs" in bf16_modules:
            return max(0.0, self.attention - self.attention_output)
        return 0.0

    @property
    def total(self) -> float:
        layers = self.dense_layers + self.moe_layers
        per_moe_layer = self.shared_experts + self.router + self.experts * self.routed_expert
        return (
            layers * self.attention
            + self.dense_layers * self.dense_ffn
            + self.moe_layers * per_moe_layer
            + self.embedding
            + self.lm_head
        )


@dataclass(frozen=True)
class WorkerShape:
    """The parallel layout of one SGLang server as the roofline sees it."""

    tp: int
    pp: int
    attention_dp: int
    ep: int
    deepep: bool
    gpus_per_node: int
    attention_cp: int = 1

    @property
    def attention_tp(self) -> int:
        """Ranks that split one attention's heads: SGLang's attn_tp = tp / attn_dp / attn_cp."""
        return max(1, self.tp // (self.attention_dp * self.attention_cp))

    @property
    def gpus(self) -> int:
        return self.tp * self.pp


@dataclass(frozen=True)
class Layout:
    """A model laid out on one worker: everything the work counting needs, resolved once per configuration."""

    arch: ModelArch
    inventory: ParamInventory
    formats: WorkerFormats
    shape: WorkerShape

    @staticmethod
    def of(arch: ModelArch, formats: WorkerFormats, shape: WorkerShape) -> Layout:
        return Layout(arch, inventory(arch), formats, shape)


def _attention_params(arch: ModelArch) -> float:
    hidden = arch.hidden_size
    heads = arch.num_attention_heads
    if arch.mla is not None:
        mla = arch.mla
        qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim
        q = hidden * mla.q_lora_rank + mla.q_lora_rank * heads * qk if mla.q_lora_rank else hidden * heads * qk
        kv_a = hidden * (mla.kv_lora_rank + mla.qk_rope_head_dim)
        kv_b = mla.kv_lora_rank * heads * (mla.qk_nope_head_dim + mla.v_head_dim)
        return float(q + kv_a + kv_b) + _attention_output_params(arch)
    q = hidden * heads * arch.head_dim
    kv = 2 * hidden * arch.num_kv_heads * arch.head_dim
    return float(q + kv) + _attention_output_params(arch)


def _attention_output_params(arch: ModelArch) -> float:
    value_dim = arch.mla.v_head_dim if arch.mla is not None else arch.head_dim
    return float(arch.num_attention_heads * value_dim * arch.hidden_size)


@cache
def inventory(arch: ModelArch) -> ParamInventory:
    """Parameter counts by role from the architecture's dimensions, reconciled with the catalog's counts.

    The catalog's total and active counts come from the real config.json (norms, indexers, linear-attention
    layers, unusual shared-expert widths). For a MoE model the two counts fix the routed-expert size
    ((total − active − embedding) / (MoE layers × (experts − top-k))) and whatever else differs from our
    dimension-based estimate is attributed to the per-layer attention block; for a dense model the active
    count does the same. The roofline therefore streams the bytes the real checkpoint has.
    """
    hidden = arch.hidden_size
    attention = _attention_params(arch)
    embedding = float(arch.vocab_size * hidden)
    lm_head = float(arch.vocab_size * hidden)
    layers = arch.num_layers
    if arch.moe is None:
        dense_ffn = 3.0 * hidden * arch.intermediate_size
        dims_active = layers * (attention + dense_ffn) + lm_head
        attention = max(0.0, attention + (arch.active_params - dims_active) / layers)
        return ParamInventory(
            attention=attention,
            dense_ffn=dense_ffn,
            shared_experts=0.0,
            routed_expert=0.0,
            router=0.0,
            embedding=embedding,
            lm_head=lm_head,
            dense_layers=layers,
            moe_layers=0,
            experts=0,
            experts_per_token=0,
            attention_output=_attention_output_params(arch),
        )
    moe = arch.moe
    moe_layers = layers - moe.dense_layers
    expert_from_dims = 3.0 * hidden * moe.expert_intermediate_size
    shared = moe.shared_experts * expert_from_dims
    router = float(hidden * moe.num_experts)
    dense_ffn = 3.0 * hidden * arch.intermediate_size
    routed_expert = expert_from_dims
    idle_experts = moe.num_experts - moe.experts_per_token
    if moe_layers > 0 and idle_experts > 0:
        from_counts = (arch.total_params - arch.active_params - embedding) / (moe_layers * idle_experts)
        # Trust the counts unless they disagree wildly with the dimensions (then the catalog entry is odd).
        if 0.5 * expert_from_dims < from_counts < 2.0 * expert_from_dims:
            routed_expert = from_counts
    non_expert = (
        layers * attention + moe.dense_layers * dense_ffn + moe_layers * (shared + router) + embedding + lm_head
    )
    rest = arch.total_params - moe_layers * moe.num_experts * routed_expert - non_expert
    attention = max(0.0, attention + rest / layers)
    return ParamInventory(
        attention=attention,
        dense_ffn=dense_ffn,
        shared_experts=shared,
        routed_expert=routed_expert,
        router=router,
        embedding=embedding,
        lm_head=lm_head,
        dense_layers=moe.dense_layers,
        moe_layers=moe_layers,
        experts=moe.num_experts,
        experts_per_token=moe.experts_per_token,
        attention_output=_attention_output_params(arch),
    )


def expected_distinct_experts(experts: int, experts_per_token: int, tokens: float) -> float:
    """Experts touched by `tokens` routings of `experts_per_token` each, routing assumed uniform and independent.

    E·(1 − (1 − k/E)^T): the weight traffic of a MoE layer at small batch is the experts actually touched,
    which is why decode cost grows with batch until every expert is read once per step.
    """
    if experts <= 0 or tokens <= 0:
        return 0.0
    miss: float = (1.0 - experts_per_token / experts) ** tokens
    return experts * (1.0 - miss)


def kv_elements_per_token_layer(arch: ModelArch, attention_tp: int) -> float:
    """KV elements one token adds to one layer's cache on one GPU of the attention-TP group."""
    if arch.mla is not None:
        # One compressed latent (plus the shared rope key) per token, replicated on every attention-TP rank.
        return float(arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
    heads_per_gpu = max(1.0, arch.num_kv_heads / attention_tp)
    return 2.0 * heads_per_gpu * arch.head_dim


def unique_kv_elements_per_token_layer(arch: ModelArch) -> float:
    """KV elements one token adds to one layer's cache, counted once (no TP replication)."""
    if arch.mla is not None:
        return float(arch.mla.kv_lora_rank + arch.mla.qk_rope_head_dim)
    return 2.0 * arch.num_kv_heads * arch.head_dim


def attended_tokens(arch: ModelArch, context: float) -> float:
    """Layer-tokens of KV one request reads at `context`: full layers read it all, windowed layers the window."""
    mix = arch.layers
    windowed = min(context, float(mix.sliding_window_size)) if mix.sliding_window else 0.0
    return mix.full_attention * context + mix.sliding_window * windowed


def sparse_topk(arch: ModelArch) -> int:
    """Tokens the attention core of a DeepSeek-Sparse-Attention layer reads per query (0: dense attention)."""
    return arch.mla.index_topk if arch.mla is not None else 0


def core_attended_tokens(arch: ModelArch, context: float) -> float:
    """Layer-tokens whose KV the attention *core* reads per query: all of them, or the indexer's top-k with DSA."""
    topk = sparse_topk(arch)
    if not topk:
        return attended_tokens(arch, context)
    return attended_tokens(arch, min(context, float(topk)))


def indexer_bytes_per_token_layer(arch: ModelArch) -> float:
    """DSA indexer key bytes per token per layer: FP8 elements plus one fp32 scale per 128 (SGLang NSA cache)."""
    if not sparse_topk(arch) or arch.mla is None:
        return 0.0
    return arch.mla.index_head_dim * (1.0 + 4.0 / 128.0)


def indexer_pair_flops(arch: ModelArch) -> float:
    """FLOPs per (query, cached token) pair per layer of the DSA indexer: every cached token is scored
    (per GPU: the indexer is replicated on every attention-TP rank)."""
    if not sparse_topk(arch) or arch.mla is None:
        return 0.0
    return 2.0 * arch.mla.index_heads * arch.mla.index_head_dim


def causal_pairs(arch: ModelArch, start: float, end: float) -> float:
    """(query, key) pairs summed over layers when a sequence grows from `start` to `end` tokens.

    Causal attention: the token at position x sees x keys in a full layer and min(x, window) in a windowed one.
    """
    mix = arch.layers
    full = mix.full_attention * (end * end - start * start) / 2.0
    if not mix.sliding_window:
        return full
    window = float(mix.sliding_window_size)

    def windowed_area(x: float) -> float:  # integral of min(t, window) dt from 0 to x
        return x * x / 2.0 if x <= window else window * window / 2.0 + window * (x - window)

    return full + mix.sliding_window * (windowed_area(end) - windowed_area(start))


def core_causal_pairs(arch: ModelArch, start: float, end: float) -> float:
    """Like `causal_pairs`, but the pairs the attention core computes: with DSA a query reads at most top-k keys."""
    topk = sparse_topk(arch)
    if not topk:
        return causal_pairs(arch, start, end)
    k = float(topk)

    def capped_area(x: float) -> float:  # integral of min(t, k) dt from 0 to x
        return x * x / 2.0 if x <= k else k * k / 2.0 + k * (x - k)

    return arch.layers.full_attention * (capped_area(end) - capped_area(start))


def _pair_flops(arch: ModelArch, attention_tp: int, *, absorbed: bool) -> float:
    """FLOPs per (query token, key token) pair per layer on one GPU: QK scores plus the weighted sum of V."""
    heads = arch.num_attention_heads / attention_tp
    if arch.mla is not None:
        mla = arch.mla
        if absorbed:  # decode: scores and values against the latent itself
            return 2.0 * heads * (2 * mla.kv_lora_rank + mla.qk_rope_head_dim)
        return 2.0 * heads * (mla.qk_nope_head_dim + mla.qk_rope_head_dim + mla.v_head_dim)
    return 4.0 * heads * arch.head_dim


def _indexer_op(hbm_bytes: float, flops: float) -> OpWork:
    """The DSA lightning indexer: FP8 logits of every query against every cached indexer key.

    SGLang keeps the indexer's projections replicated, so every attention-TP rank scores all of its tokens
    (no split by TP); GPUs without an FP8 tensor-core rate run it at the BF16 rate (`steps.forward_seconds`).
    """
    return OpWork(OpKind.ATTENTION, hbm_bytes, flops, "fp8")


def _gemm(params: float, bytes_per_param: float, tokens: float, compute_format: str, width: float) -> OpWork:
    """A weight GEMM: stream the parameters once, two FLOPs per parameter per token."""
    return OpWork(OpKind.GEMM, params * bytes_per_param, 2.0 * tokens * params, compute_format, width)


def _dense_and_expert_ops(
    layout: Layout,
    layer_share: float,
    ffn_tokens: float,
) -> list[OpWork]:
    inv, fmt, shape = layout.inventory, layout.formats, layout.shape
    hidden = layout.arch.hidden_size
    ops: list[OpWork] = []
    tp = shape.tp
    dense_layers = inv.dense_layers * layer_share
    moe_layers = inv.moe_layers * layer_share
    if dense_layers and inv.dense_ffn:
        params = dense_layers * inv.dense_ffn / tp
        width = inv.dense_ffn / (3.0 * hidden * tp)
        ops.append(_gemm(params, fmt.dense_bytes_per_param, ffn_tokens, fmt.dense_compute, width))
    if moe_layers:
        touched = expected_distinct_experts(inv.experts, inv.experts_per_token, ffn_tokens)
        routed_bytes = moe_layers * touched * inv.routed_expert * fmt.expert_bytes_per_param / tp
        routed_flops = 2.0 * ffn_tokens * inv.experts_per_token * moe_layers * inv.routed_expert / tp
        # Expert parallelism keeps experts whole; the remaining MoE-TP factor (tp / ep) slices each one.
        expert_width = inv.routed_expert / (3.0 * hidden) / max(1, tp // max(1, shape.ep))
        ops.append(OpWork(OpKind.MOE, routed_bytes, routed_flops, fmt.expert_compute, expert_width))
        shared_params = moe_layers * (inv.shared_experts + inv.router) / tp
        shared_width = max(inv.shared_experts / (3.0 * hidden), 1.0) / tp
        ops.append(_gemm(shared_params, fmt.dense_bytes_per_param, ffn_tokens, fmt.dense_compute, shared_width))
    return ops


def _collectives(
    inv: ParamInventory, hidden: int, shape: WorkerShape, layer_share: float, rank_tokens: float
) -> list[CollectiveWork]:
    layers = (inv.dense_layers + inv.moe_layers) * layer_share
    moe_layers = inv.moe_layers * layer_share
    out: list[CollectiveWork] = []
    activation = rank_tokens * hidden * BYTES_BF16
    if shape.attention_tp > 1:
        # Context parallelism leaves each attention group a 1/cp share of the tokens to reduce.
        attention_activation = activation / max(1, shape.attention_cp)
        out.append(CollectiveWork(CollectiveKind.ALL_REDUCE, attention_activation, shape.attention_tp, layers))
    if shape.tp > 1:
        if shape.attention_dp == 1:
            out.append(CollectiveWork(CollectiveKind.ALL_REDUCE, activation, shape.tp, layers))
        elif shape.deepep and moe_layers:
            routed = rank_tokens * inv.experts_per_token * hidden * (DISPATCH_BYTES + COMBINE_BYTES)
            out.append(CollectiveWork(CollectiveKind.ALL_TO_ALL, routed, shape.tp, moe_layers))
            if layers > moe_layers:
                gathered = activation * shape.attention_dp
                out.append(CollectiveWork(CollectiveKind.ALL_REDUCE, gathered, shape.tp, layers - moe_layers))
        else:
            # Attention-DP without an all-to-all backend: gather every rank's tokens before the FFN and
            # reduce-scatter after, about the traffic of an all-reduce of the gathered tokens.
            gathered = activation * shape.attention_dp
            out.append(CollectiveWork(CollectiveKind.ALL_REDUCE, gathered, shape.tp, layers))
    if shape.pp > 1:
        out.append(CollectiveWork(CollectiveKind.P2P, activation, 2, 1.0))
    return out


def decode_work(layout: Layout, requests: float, context: float, *, query_tokens: float = 1.0) -> ForwardWork:
    """One decode forward of `requests` sequences (whole worker, one pipeline stage) at mean `context`.

    `query_tokens` > 1 is a speculative verify pass (draft tokens scored in one forward).
    """
    arch, inv, fmt, shape = layout.arch, layout.inventory, layout.formats, layout.shape
    layer_share = 1.0 / shape.pp
    attention_tp = shape.attention_tp
    rank_requests = requests / shape.attention_dp
    rank_tokens = rank_requests * query_tokens
    ffn_tokens = requests * query_tokens
    layers = arch.num_layers * layer_share
    ops: list[OpWork] = []
    proj = layers * inv.attention / attention_tp
    proj_width = arch.num_attention_heads * arch.head_dim / attention_tp
    ops.append(_gemm(proj, fmt.dense_bytes_per_param, rank_tokens, fmt.dense_compute, proj_width))
    kv_per_token = kv_elements_per_token_layer(arch, attention_tp) * fmt.kv_bytes_per_element
    layer_tokens = attended_tokens(arch, context) * layer_share
    # With DSA the core reads the top-k tokens' latents; the indexer scores every cached token.
    core_tokens = core_attended_tokens(arch, context) * layer_share
    kv_bytes = rank_requests * core_tokens * kv_per_token
    attn_flops = rank_tokens * core_tokens * _pair_flops(arch, attention_tp, absorbed=True)
    ops.append(OpWork(OpKind.DECODE_ATTENTION, kv_bytes, attn_flops, "bf16"))
    if sparse_topk(arch):
        indexer_bytes = rank_requests * layer_tokens * indexer_bytes_per_token_layer(arch)
        ops.append(_indexer_op(indexer_bytes, rank_tokens * layer_tokens * indexer_pair_flops(arch)))
    ops.extend(_dense_and_expert_ops(layout, layer_share, ffn_tokens))
    # The output head lives on the last pipeline stage; spread over the stages it is this share per stage.
    head = inv.lm_head / attention_tp * layer_share
    ops.append(_gemm(head, HEAD_BYTES_PER_PARAM, rank_tokens, "bf16", arch.vocab_size / attention_tp))
    return ForwardWork(
        ops=tuple(ops),
        collectives=tuple(_collectives(inv, arch.hidden_size, shape, layer_share, rank_tokens)),
        layers=layers,
        requests_per_rank=rank_requests,
    )


def prefill_work(
    layout: Layout,
    *,
    requests: float,
    new_tokens_per_request: float,
    prefix_tokens: float,
    busy_ranks: float,
) -> ForwardWork:
    """One prefill forward: `busy_ranks` attention ranks each extend `requests` sequences by `new_tokens_per_request`.

    `prefix_tokens` is what each sequence already holds (a cached prefix or earlier chunks); attention over
    it is paid, its projections are not. The FFN/MoE sees the tokens of every busy rank.

    With prefill context parallelism the `attention_cp` ranks of a group each take an equal, causally balanced
    share of the new tokens (SGLang's interleave split) with the heads of attention-TP: per GPU the same
    attention FLOPs as TP, but the DSA indexer — replicated across attention-TP — scores only that share.
    The ranks then all-gather the new tokens' KV; the FFN/MoE still sees every token.
    """
    arch, inv, fmt, shape = layout.arch, layout.inventory, layout.formats, layout.shape
    layer_share = 1.0 / shape.pp
    attention_tp = shape.attention_tp
    cp = max(1, shape.attention_cp)
    rank_tokens = requests * new_tokens_per_request
    query_tokens = rank_tokens / cp
    ffn_tokens = rank_tokens * max(1.0, busy_ranks)
    layers = arch.num_layers * layer_share
    ops: list[OpWork] = []
    proj = layers * inv.attention / attention_tp
    proj_width = arch.num_attention_heads * arch.head_dim / attention_tp
    ops.append(_gemm(proj, fmt.dense_bytes_per_param, query_tokens, fmt.dense_compute, proj_width))
    kv_per_token = kv_elements_per_token_layer(arch, attention_tp) * fmt.kv_bytes_per_element
    end = prefix_tokens + new_tokens_per_request
    pairs = requests * layer_share * core_causal_pairs(arch, prefix_tokens, end) / cp
    layer_tokens = requests * layer_share * attended_tokens(arch, end)
    kv_bytes = layer_tokens * kv_per_token
    ops.append(OpWork(OpKind.ATTENTION, kv_bytes, pairs * _pair_flops(arch, attention_tp, absorbed=False), "bf16"))
    if sparse_topk(arch):
        indexed = requests * layer_share * causal_pairs(arch, prefix_tokens, end) / cp
        indexer_bytes = layer_tokens * indexer_bytes_per_token_layer(arch)
        ops.append(_indexer_op(indexer_bytes, indexed * indexer_pair_flops(arch)))
    ops.extend(_dense_and_expert_ops(layout, layer_share, ffn_tokens))
    head = inv.lm_head / attention_tp * layer_share
    ops.append(_gemm(head, HEAD_BYTES_PER_PARAM, requests, "bf16", arch.vocab_size / attention_tp))
    collectives = _collectives(inv, arch.hidden_size, shape, layer_share, rank_tokens)
    if cp > 1:
        new_kv = rank_tokens * (unique_kv_elements_per_token_layer(arch) * fmt.kv_bytes_per_element)
        new_kv += rank_tokens * indexer_bytes_per_token_layer(arch)
        collectives.append(CollectiveWork(CollectiveKind.ALL_GATHER, new_kv, cp, layers))
    return ForwardWork(
        ops=tuple(ops),
        collectives=tuple(collectives),
        layers=layers,
        requests_per_rank=requests,
    )
