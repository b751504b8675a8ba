"""Seconds per forward pass: roofline work (`kernels`) and collectives (`comm`) priced with the coefficients.

Each kernel kind costs max(bytes / achieved bandwidth, FLOPs / achieved peak); MoE kernels pay the grouped-GEMM
penalty on top. Fixed costs per layer, per scheduler iteration and per running request model what the
roofline cannot see: launches, small kernels, Python scheduling, sampling. That is why measured small-batch
decode sits 3–27× above the bandwidth floor (published-figures.md §7c) and why the fit needs them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.comm import collective_time
from frontier_operator.perf.formats import WorkerFormats, peak_tflops
from frontier_operator.perf.kernels import (
    ForwardWork,
    Layout,
    OpKind,
    WorkerShape,
    attended_tokens,
    core_attended_tokens,
    decode_work,
    indexer_bytes_per_token_layer,
    prefill_work,
    unique_kv_elements_per_token_layer,
)

# The catalog gives total and active parameters to 0.01 B each; the inventory derived from both can sit
# up to two roundings (10 M parameters) below the active count.
CATALOG_ROUNDING_PARAMS = 1e7
# Prompts of more full chunks than this are summed with Simpson's rule instead of chunk by chunk.
SIMPSON_CHUNKS = 4


@dataclass(frozen=True)
class Hardware:
    """Everything about one worker that does not change with batch or context: resolved once, reused per call."""

    layout: Layout
    gpu: GpuSpec
    coefficients: Coefficients
    # Achieved HBM bytes/s and FLOP/s per (kind, number format), coefficients applied.
    bandwidth: float
    flop_rates: tuple[tuple[tuple[OpKind, str], float], ...]

    @staticmethod
    def build(layout: Layout, gpu: GpuSpec, coefficients: Coefficients) -> Hardware:
        formats = {layout.formats.dense_compute, layout.formats.expert_compute, "bf16"}
        if (gpu.tflops("fp8") or 0.0) > 0:
            formats.add("fp8")  # the DSA indexer's logits run in FP8 whatever the weights are
        rates: list[tuple[tuple[OpKind, str], float]] = []
        efficiencies = {
            OpKind.ATTENTION: coefficients.attention_efficiency,
            OpKind.DECODE_ATTENTION: coefficients.decode_attention_efficiency,
        }
        for kind in OpKind:
            efficiency = efficiencies.get(kind, coefficients.gemm_efficiency)
            rates.extend(((kind, f), peak_tflops(gpu, f) * 1e12 * efficiency) for f in sorted(formats))
        return Hardware(
            layout, gpu, coefficients, gpu.hbm_bandwidth_tbs * 1e12 * coefficients.hbm_efficiency, tuple(rates)
        )

    @property
    def arch(self) -> ModelArch:
        return self.layout.arch

    @property
    def formats(self) -> WorkerFormats:
        return self.layout.formats

    @property
    def shape(self) -> WorkerShape:
        return self.layout.shape


def iteration_overhead_seconds(hw: Hardware) -> float:
    """Fixed cost of one scheduler iteration: scheduling, sampling, graph replay, and with attention-DP the
    host all-gather of every rank's batch that precedes each forward (SGLang's `prepare_mlp_sync_batch`, over
    the TP group's CPU group under the overlap scheduler: a chain of hops that grows with the ranks)."""
    c = hw.coefficients
    return c.step_overhead_ms * 1e-3 + (hw.shape.attention_dp - 1) * c.dp_sync_us * 1e-6


def forward_seconds(hw: Hardware, work: ForwardWork, layer_overhead_s: float, per_request_s: float) -> float:
    rates = dict(hw.flop_rates)
    moe_penalty = hw.coefficients.moe_penalty
    half_width = hw.coefficients.gemm_half_width
    kernels = 0.0
    for op in work.ops:
        rate = rates.get((op.kind, op.compute_format)) or rates[(op.kind, "bf16")]
        if math.isfinite(op.width):
            rate *= op.width / (op.width + half_width)
        seconds = max(op.hbm_bytes / hw.bandwidth, op.flops / rate)
        kernels += seconds * moe_penalty if op.kind is OpKind.MOE else seconds
    comm = sum(collective_time(col, hw.gpu, hw.shape.gpus_per_node, hw.coefficients) for col in work.collectives)
    fixed = work.layers * layer_overhead_s + iteration_overhead_seconds(hw)
    return kernels + comm + fixed + per_request_s * work.requests_per_rank


def decode_step_seconds(hw: Hardware, requests: float, context: float, query_tokens: float = 1.0) -> float:
    """One decode iteration of the whole worker: every running request advances by one forward.

    With pipeline parallelism the batch is cut into `pp` micro-batches that flow through `pp` stages, so an
    iteration lasts 2·pp − 1 stage-times of one micro-batch.
    """
    pp = hw.shape.pp
    micro = max(requests, 0.0) / pp
    work = decode_work(hw.layout, micro, context, query_tokens=query_tokens)
    c = hw.coefficients
    stage = forward_seconds(hw, work, c.layer_overhead_us * 1e-6, c.request_overhead_us * 1e-6)
    stage += hw.layout.inventory.moe_layers / pp * c.moe_layer_overhead_us * 1e-6
    return (2 * pp - 1) * stage


def prefill_forward_seconds(
    hw: Hardware, requests: float, new_tokens: float, prefix_tokens: float, busy_ranks: float = 1.0
) -> float:
    """One prefill forward extending `requests` sequences on each of `busy_ranks` attention ranks.

    Pipeline stages run one after another for a single forward.
    """
    work = prefill_work(
        hw.layout,
        requests=requests,
        new_tokens_per_request=new_tokens,
        prefix_tokens=prefix_tokens,
        busy_ranks=busy_ranks,
    )
    c = hw.coefficients
    stage = forward_seconds(hw, work, c.prefill_layer_overhead_us * 1e-6, 0.0)
    moe_layers = hw.layout.inventory.moe_layers / hw.shape.pp
    mla_layers = hw.arch.num_layers / hw.shape.pp if hw.arch.mla is not None else 0.0
    fixed = moe_layers * c.moe_prefill_layer_overhead_us + mla_layers * c.mla_prefill_layer_overhead_us
    return hw.shape.pp * (stage + fixed * 1e-6)


@dataclass(frozen=True)
class PrefillCost:
    """Prefill of one request: the latency it sees and the GPU time it takes from everyone else."""

    latency_s: float
    gpu_seconds_per_request: float
    requests_per_batch: float

    def scaled(self, factor: float) -> PrefillCost:
        """The same prefill `factor` times as long (latency and GPU time alike)."""
        return PrefillCost(self.latency_s * factor, self.gpu_seconds_per_request * factor, self.requests_per_batch)


def prefill_cost(
    hw: Hardware,
    new_tokens: float,
    prefix_tokens: float,
    chunk_tokens: int,
    requests_waiting: float,
) -> PrefillCost:
    """Prefill of a request of `new_tokens` under chunked prefill (`chunk_tokens` per attention rank).

    A prompt longer than a chunk runs as consecutive chunks, each attending to the chunks before it; shorter
    prompts share a forward with the others waiting (never more than fit in one chunk). With attention-DP,
    waiting requests spread over the ranks and every rank prefills in the same forward; a lone request
    still holds up the whole worker (the ranks meet in every MoE layer).
    """
    new_tokens = max(new_tokens, 1.0)
    chunk = max(1, chunk_tokens)
    ranks = float(hw.shape.attention_dp)
    waiting = max(requests_waiting, 1.0)
    busy = min(ranks, waiting)
    per_rank = waiting / busy
    if new_tokens <= chunk:
        batch = min(per_rank, max(1.0, math.floor(chunk / new_tokens)))
        seconds = prefill_forward_seconds(hw, batch, new_tokens, prefix_tokens, busy)
        return PrefillCost(seconds, seconds / (batch * busy), batch * busy)
    full_chunks = math.floor(new_tokens / chunk)
    rest = new_tokens - full_chunks * chunk
    size = float(chunk)

    def full_chunk(index: float) -> float:
        return prefill_forward_seconds(hw, 1.0, size, prefix_tokens + index * size, busy)

    if full_chunks <= SIMPSON_CHUNKS:
        total = sum(full_chunk(k) for k in range(full_chunks))
    else:
        # A full chunk's time is piecewise linear in its prefix (attention grows with it, the rest does not):
        # Simpson's rule over the first, middle and last chunk sums a long prompt in three forwards.
        last = full_chunks - 1
        total = full_chunks * (full_chunk(0) + 4.0 * full_chunk(last / 2.0) + full_chunk(last)) / 6.0
    if rest > 0:
        total += prefill_forward_seconds(hw, 1.0, rest, prefix_tokens + full_chunks * size, busy)
    return PrefillCost(total, total / busy, busy)


def floor_seconds(
    arch: ModelArch,
    gpu: GpuSpec,
    formats: WorkerFormats,
    shape: WorkerShape,
    *,
    requests: float,
    context: float,
    new_tokens_per_request: float,
) -> float:
    """The physical floor of one forward: bytes that must move ÷ peak HBM bandwidth vs FLOPs ÷ fastest peak.

    Deliberately independent of the roofline bookkeeping above: the active parameters of the catalog
    (what one token must read) split perfectly over every GPU of the worker, the KV-cache of the batch
    likewise, and 2 FLOPs per active parameter per token (the output head only for the last token of a
    prompt) at the fastest tensor-core rate the worker uses.
    No efficiency, overhead or communication term. Decode is `new_tokens_per_request` = 1.
    """
    gpus = shape.gpus
    bytes_per_param = min(formats.dense_bytes_per_param, formats.expert_bytes_per_param)
    active = arch.active_params - CATALOG_ROUNDING_PARAMS
    weight_bytes = active * bytes_per_param / gpus
    # Unique KV of the batch (an MLA latent, or every KV head once) spread over every GPU of the worker.
    # With DeepSeek Sparse Attention only the top-k latents are read, plus every token's indexer key.
    kv_bytes = requests * core_attended_tokens(arch, context) * unique_kv_elements_per_token_layer(arch)
    kv_bytes = kv_bytes * formats.kv_bytes_per_element
    kv_bytes = (kv_bytes + requests * attended_tokens(arch, context) * indexer_bytes_per_token_layer(arch)) / gpus
    tokens = requests * new_tokens_per_request
    # Prefill only computes logits for the last token of each prompt.
    head = float(arch.vocab_size * arch.hidden_size)
    flops = 2.0 * ((active - head) * tokens + head * requests) / gpus
    fastest = max(peak_tflops(gpu, fmt) for fmt in {formats.dense_compute, formats.expert_compute, "bf16"})
    return max((weight_bytes + kv_bytes) / (gpu.hbm_bandwidth_tbs * 1e12), flops / (fastest * 1e12))
