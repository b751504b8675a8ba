"""Per-GPU memory of one SGLang worker: weights + reserve → KV pool → how many requests fit at a context.

SGLang sizes its KV pool as ``mem_fraction_static × GPU memory − weights``; when the fraction is not given it
computes it from a reserve for activations, CUDA graphs and NCCL buffers (sglang-0.5.23.md §3.2). We follow
that arithmetic, so the largest batch predicted here is the one the real server admits.
"""

from __future__ import annotations

import math

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.formats import WorkerFormats
from frontier_operator.perf.kernels import (
    BYTES_BF16,
    HEAD_BYTES_PER_PARAM,
    WorkerShape,
    attended_tokens,
    indexer_bytes_per_token_layer,
    inventory,
    kv_elements_per_token_layer,
)
from frontier_operator.perf.types import MemoryFit, Role, Speculative, SpeculativeAlgorithm, WorkerConfig

# GPU memory in the catalog is what nvidia-smi reports, which is GiB (an "80 GB" H100 shows 81,559 MiB); we
# therefore count memory in units of 2^30 bytes throughout, and SGLang's reserve in MiB as its code does.
GB = float(2**30)
MB = float(2**20)

# sglang-0.5.23.md §3.2 (memory_hook.handle_gpu_memory_settings): tiers by GPU memory in GB.
_CHUNK_TIERS = ((20, 2048), (35, 4096), (60, 4096), (90, 8192), (160, 8192))
_LARGE_GPU_CHUNK = 16384
# SGLang's default cap on running requests per attention-DP worker, lower end of its clamp (§3.2).
DEFAULT_MAX_RUNNING_PER_RANK = 2048
# Speculative decoding sets max_running_requests to 48 when unset (§3.2, §5).
SPECULATIVE_DEFAULT_MAX_RUNNING = 48


def default_chunked_prefill_size(gpu: GpuSpec) -> int:
    for limit, chunk in _CHUNK_TIERS:
        if gpu.memory_gb < limit:
            return chunk
    return _LARGE_GPU_CHUNK


def default_cuda_graph_max_bs(gpu: GpuSpec, tp: int) -> int:
    if gpu.memory_gb < 20:
        return 8
    if gpu.memory_gb < 35:
        return 48 if tp < 4 else 160
    if gpu.memory_gb < 60:
        return 32 if tp < 4 else 160
    if gpu.memory_gb < 160:
        return 256 if tp < 4 else 512
    return 512


def shape_of(worker: WorkerConfig) -> WorkerShape:
    return WorkerShape(
        tp=worker.tp,
        pp=worker.pp,
        attention_dp=worker.attention_dp,
        attention_cp=worker.attention_cp,
        ep=worker.ep,
        deepep=worker.moe_a2a_backend.value != "none",
        gpus_per_node=worker.gpus_per_node,
    )


def draft_params(arch: ModelArch, speculative: Speculative | None) -> float:
    """Parameters of the draft model: NEXTN reuses the checkpoint's MTP layers, EAGLE-3 adds one small decoder layer."""
    if speculative is None:
        return 0.0
    inv = inventory(arch)
    if speculative.algorithm is SpeculativeAlgorithm.NEXTN:
        mtp_layer = inv.attention + (
            inv.shared_experts + inv.router + inv.experts * inv.routed_expert if arch.is_moe else inv.dense_ffn
        )
        return max(1, arch.mtp_layers) * mtp_layer
    # EAGLE-3: one Llama-style decoder layer at the target's width (FFN 8/3 × hidden, gated) with its own
    # output head over a 32k draft vocabulary (the published EAGLE-3 heads use draft_vocab_size 32000).
    hidden = arch.hidden_size
    return inv.attention + 3.0 * hidden * (8.0 * hidden / 3.0) + 32000.0 * hidden


def weights_per_gpu_bytes(arch: ModelArch, formats: WorkerFormats, worker: WorkerConfig) -> float:
    inv = inventory(arch)
    shape = shape_of(worker)
    per_stage = 1.0 / shape.pp
    kept = inv.attention_in_bf16(formats.bf16_modules)
    attention_per_layer = (inv.attention - kept) * formats.dense_bytes_per_param + kept * BYTES_BF16
    attention = arch.num_layers * attention_per_layer / shape.attention_tp
    dense = inv.dense_layers * inv.dense_ffn * formats.dense_bytes_per_param / shape.tp
    experts = inv.moe_layers * inv.experts * inv.routed_expert * formats.expert_bytes_per_param / shape.tp
    shared = inv.moe_layers * (inv.shared_experts + inv.router) * formats.dense_bytes_per_param / shape.tp
    embedding = inv.embedding * HEAD_BYTES_PER_PARAM / shape.tp
    head = inv.lm_head * HEAD_BYTES_PER_PARAM / shape.attention_tp
    # With pipeline parallelism the first stage holds the embedding and the last the head; the fullest GPU
    # carries its share of layers plus the larger of the two.
    ends = embedding + head if shape.pp == 1 else max(embedding, head)
    nextn = worker.speculative is not None and worker.speculative.algorithm is SpeculativeAlgorithm.NEXTN
    draft_bytes = BYTES_BF16 if nextn and "draft" in formats.bf16_modules else formats.dense_bytes_per_param
    draft = draft_params(arch, worker.speculative) * draft_bytes / shape.tp
    return (attention + dense + experts + shared) * per_stage + ends + draft


def sglang_reserved_bytes(arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, role: Role = Role.UNIFIED) -> float:
    """What SGLang keeps outside weights + KV when mem_fraction_static is unset (sglang-0.5.23.md §3.2)."""
    chunk_per_rank = max(1, worker.chunked_prefill_size // max(1, worker.attention_dp))
    if role is Role.DECODE:
        draft_tokens = worker.speculative.num_draft_tokens if worker.speculative else 1
        running_per_rank = max(1, worker.max_running_requests // max(1, worker.attention_dp))
        activation_mb = 1.5 * max(running_per_rank * draft_tokens, 2048)
    else:
        activation_mb = 1.5 * max(chunk_per_rank, 2048)
    running_per_rank = max(1, worker.max_running_requests // max(1, worker.attention_dp))
    graph_bs = min(default_cuda_graph_max_bs(gpu, worker.tp), running_per_rank)
    reserved_mb = 512 + activation_mb + 1024 * worker.tp * worker.pp / 8 + 2 * graph_bs
    reserved_mb += 1536 if arch.mla is not None else 8 * 40
    if worker.moe_a2a_backend.value == "deepep":
        reserved_mb += 2048
    if gpu.memory_gb > 60:
        reserved_mb = max(reserved_mb, 10 * 1024)
    return reserved_mb * MB


def kv_bytes_per_request(arch: ModelArch, formats: WorkerFormats, worker: WorkerConfig, context: float) -> float:
    """KV bytes one request at `context` tokens occupies on each GPU of its attention rank (draft cache included)."""
    shape = shape_of(worker)
    per_layer_token = kv_elements_per_token_layer(arch, shape.attention_tp) * formats.kv_bytes_per_element
    # DeepSeek Sparse Attention keeps an FP8 indexer key per token per layer beside the latent.
    per_layer_token += indexer_bytes_per_token_layer(arch)
    layer_tokens = attended_tokens(arch, context)
    if worker.speculative is not None:
        layer_tokens += max(1, arch.mtp_layers) * context  # the draft layer keeps its own cache
    return layer_tokens * per_layer_token / shape.pp


def memory_fit(
    arch: ModelArch,
    gpu: GpuSpec,
    formats: WorkerFormats,
    worker: WorkerConfig,
    context_tokens: int,
    *,
    role: Role = Role.UNIFIED,
) -> MemoryFit:
    weights = weights_per_gpu_bytes(arch, formats, worker)
    memory = gpu.memory_gb * GB
    if worker.mem_fraction_static is not None:
        reserved = memory * (1.0 - worker.mem_fraction_static)
    else:
        reserved = sglang_reserved_bytes(arch, gpu, worker, role)
    pool = max(0.0, memory - reserved - weights)
    shape = shape_of(worker)
    per_token = kv_bytes_per_request(arch, formats, worker, 1.0) or 1.0
    per_request = kv_bytes_per_request(arch, formats, worker, float(max(1, context_tokens)))
    per_rank = math.floor(pool / per_request) if per_request > 0 else 0
    max_batch = min(per_rank * shape.attention_dp, max(0, worker.max_running_requests)) if pool > 0 else 0
    return MemoryFit(
        gpu_memory_gb=gpu.memory_gb,
        weights_gb=weights / GB,
        reserved_gb=reserved / GB,
        kv_pool_gb=pool / GB,
        kv_tokens=int(pool / per_token),
        max_batch_at_context=max_batch,
    )


def concurrent_capacity(
    arch: ModelArch, formats: WorkerFormats, worker: WorkerConfig, fit: MemoryFit, mean_occupancy_tokens: float
) -> float:
    """Requests the worker runs at once when each holds `mean_occupancy_tokens` of KV on average.

    Requests grow from their prompt to prompt + output while they run, so in steady state the pool holds
    requests at their mean length, not at their final length (used by the queueing model, not for fit checks).
    """
    per_request = kv_bytes_per_request(arch, formats, worker, max(1.0, mean_occupancy_tokens))
    per_rank = fit.kv_pool_gb * GB / per_request if per_request > 0 else 0.0
    return float(min(per_rank * worker.attention_dp, worker.max_running_requests))
