"""SGLang 0.5.x's rules for a legal configuration, each a small pure function with a typed reason.

A worker rule looks at one `WorkerConfig` (one SGLang instance) of one role; a fleet rule at the whole
`ServingConfig`. Every rule returns `None` when the configuration passes and a `Rejection` naming the
reason otherwise, so the planner can say why an alternative was never considered. Sources are
`/work/shared/docs/reference/sglang-0.5.23.md` (cited as "§n") unless stated.

Replicas are always separate SGLang instances, never `--dp-size`, so SGLang's rules on `--dp-size`
(single node only, exclusive with attention DP) hold by construction and need no rule here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from frontier_operator.catalog.quantization import execution_mode, kv_cache_supported
from frontier_operator.catalog.types import KvCacheFormat, ModelArch, QuantFormat, Vendor
from frontier_operator.perf.kernels import sparse_topk
from frontier_operator.perf.types import (
    MemoryFit,
    MoeA2ABackend,
    Role,
    ServingConfig,
    SpeculativeAlgorithm,
    WorkerConfig,
    Workload,
)
from frontier_operator.planner.describe import describe_config, describe_worker
from frontier_operator.planner.formats import (
    QUANT_BLOCK_WIDTH,
    default_page_size,
    has_weights_for,
    quality_loss_pct,
)
from frontier_operator.planner.types import GpuPool, Rejection, RejectionReason, SearchSpace

R = RejectionReason


@dataclass(frozen=True)
class LegalityContext:
    """What the worker rules need besides the worker: the model, the pool, the search space, the formats."""

    arch: ModelArch
    pool: GpuPool
    search: SearchSpace
    weight_formats: Mapping[str, QuantFormat]
    kv_formats: Mapping[str, KvCacheFormat]


def legality_context(arch: ModelArch, pool: GpuPool, search: SearchSpace) -> LegalityContext:
    """Formats resolve among the allowed ones and the fallbacks (tried for baselines and suggestions)."""
    weight_formats = {fmt.name: fmt for fmt in (*search.fallback_quantizations, *search.quantizations)}
    kv_formats = {fmt.name: fmt for fmt in (*search.fallback_kv_cache_formats, *search.kv_cache_formats)}
    return LegalityContext(arch, pool, search, weight_formats, kv_formats)


WorkerRule = Callable[[LegalityContext, WorkerConfig, Role], Rejection | None]


def _reject(worker: WorkerConfig, reason: RejectionReason, detail: str) -> Rejection:
    return Rejection(describe_worker(worker), reason, detail, worker)


# ------------------------------------------------------------------------------------- search limits


def search_limits(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    search = ctx.search
    if search.max_tp is not None and worker.tp > search.max_tp:
        return _reject(worker, R.TP_ABOVE_LIMIT, f"TP{worker.tp} is wider than the allowed maximum TP{search.max_tp}")
    if search.max_ep is not None and worker.ep > search.max_ep:
        return _reject(worker, R.EP_ABOVE_LIMIT, f"EP{worker.ep} is wider than the allowed maximum EP{search.max_ep}")
    if not search.attention_dp and worker.attention_dp > 1:
        return _reject(worker, R.ATTENTION_DP_NOT_ALLOWED, "attention data parallelism is switched off in the search")
    if not search.prefill_context_parallel and worker.attention_cp > 1:
        return _reject(
            worker, R.CONTEXT_PARALLEL_NOT_ALLOWED, "prefill context parallelism is switched off in the search"
        )
    if not search.multi_node and worker.nnodes > 1:
        return _reject(
            worker, R.MULTI_NODE_NOT_ALLOWED, f"spans {worker.nnodes} nodes but multi-node replicas are switched off"
        )
    return None


# -------------------------------------------------------------------------------------------- nodes


def node_layout(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    nnodes = worker.nnodes
    if worker.gpus > ctx.pool.max_gpus:
        return _reject(
            worker, R.OVER_BUDGET, f"one instance needs {worker.gpus} GPUs, the pool allows {ctx.pool.max_gpus}"
        )
    # §2.3: (tp × pp) % nnodes == 0; every node runs the same share of ranks.
    if nnodes > 1 and worker.gpus % nnodes:
        return _reject(worker, R.NODES_UNEVEN, f"{worker.gpus} ranks do not split evenly over {nnodes} nodes")
    # Tensor-parallel collectives (and DeepEP) across nodes need RDMA unless NVLink spans the nodes (NVL72).
    if nnodes > 1 and not ctx.pool.rdma and worker.gpus > ctx.pool.gpu.scale_up_domain:
        return _reject(
            worker,
            R.MULTI_NODE_NEEDS_RDMA,
            f"spans {nnodes} nodes beyond the {ctx.pool.gpu.scale_up_domain}-GPU NVLink domain and pool "
            f"{ctx.pool.name} has no RDMA",
        )
    return None


# ----------------------------------------------------------------------------------- divisibility


def attention_split(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    arch = ctx.arch
    # §2.3: attn_dp ≥ 1 and tp % attn_dp == 0 (attention DP lives inside the TP group).
    if worker.attention_dp < 1 or worker.tp % worker.attention_dp:
        return _reject(
            worker, R.ATTENTION_DP_NOT_DIVISOR, f"attention DP {worker.attention_dp} does not divide TP{worker.tp}"
        )
    # SGLang implements DP attention for its MoE model families (DeepSeek, Qwen-MoE, GLM-MoE, Kimi); for a
    # dense model the FFN stays tensor-parallel and the split only adds gathers.
    if worker.attention_dp > 1 and not arch.is_moe:
        return _reject(worker, R.ATTENTION_DP_NEEDS_MOE, f"{arch.name} is dense; attention DP serves MoE models")
    attention_tp = worker.tp // (worker.attention_dp * max(1, worker.attention_cp))
    if arch.num_attention_heads % attention_tp:
        return _reject(
            worker,
            R.HEADS_NOT_DIVISIBLE,
            f"{arch.num_attention_heads} attention heads do not split over attention TP{attention_tp}",
        )
    # Grouped KV heads are split across ranks, or replicated when there are fewer heads than ranks;
    # either way one count must divide the other. MLA has a single shared latent, nothing to split.
    if arch.mla is None:
        kv_heads = arch.num_kv_heads
        splits = attention_tp % kv_heads == 0 if attention_tp >= kv_heads else kv_heads % attention_tp == 0
        if not splits:
            return _reject(
                worker, R.KV_HEADS_NOT_DIVISIBLE, f"{kv_heads} KV heads and attention TP{attention_tp} do not divide"
            )
    return None


def context_parallelism(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    """Prefill context parallelism (`--attn-cp-size N --enable-prefill-cp --cp-strategy interleave`).

    SGLang activates it for DeepSeek-Sparse-Attention models on CUDA (`is_dsa_enable_prefill_cp`; on ROCm only
    for DeepSeek-V4), inside the TP group (`tp % (attn_dp × attn_cp) == 0`, §2.3). The planner adds limits of
    its own, where the performance model does not describe the combination: only on P/D prefill workers (the
    decode path over a position-split KV cache is not modelled), and without attention DP or PP.
    """
    cp = worker.attention_cp
    if cp == 1:
        return None
    if cp < 1 or worker.tp % (worker.attention_dp * cp):
        return _reject(worker, R.CONTEXT_PARALLEL_LAYOUT, f"context parallelism {cp} does not divide TP{worker.tp}")
    if not sparse_topk(ctx.arch):
        return _reject(
            worker,
            R.CONTEXT_PARALLEL_NEEDS_SPARSE_ATTENTION,
            f"{ctx.arch.name} has no DeepSeek Sparse Attention; SGLang enables prefill CP only for DSA models",
        )
    if ctx.pool.gpu.vendor is not Vendor.NVIDIA:
        return _reject(
            worker, R.CONTEXT_PARALLEL_UNSUPPORTED_ON_GPU, "SGLang runs prefill CP of DSA models on CUDA GPUs only"
        )
    if role is not Role.PREFILL:
        return _reject(
            worker,
            R.CONTEXT_PARALLEL_PREFILL_ONLY,
            "prefill context parallelism is planned on P/D prefill workers only",
        )
    if worker.attention_dp > 1 or worker.pp > 1:
        return _reject(
            worker, R.CONTEXT_PARALLEL_LAYOUT, "prefill context parallelism is planned without attention DP or PP"
        )
    return None


def ffn_split(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    arch = ctx.arch
    weight_format = ctx.weight_formats.get(worker.weight_format)
    block = QUANT_BLOCK_WIDTH.get(worker.weight_format)
    moe_only = weight_format is not None and weight_format.moe_only
    shards: list[tuple[str, int, int, int | None]] = []
    if arch.moe is None:
        shards.append(("dense FFN", arch.intermediate_size, worker.tp, block))
    else:
        if worker.ep < 1 or worker.tp % worker.ep:
            return None  # reported by expert_layout
        shards.append(("expert FFN", arch.moe.expert_intermediate_size, worker.tp // worker.ep, block))
        if arch.moe.dense_layers and arch.intermediate_size:
            shards.append(("dense FFN", arch.intermediate_size, worker.tp, None if moe_only else block))
    for what, width, ways, block_width in shards:
        if width % ways:
            return _reject(worker, R.FFN_NOT_DIVISIBLE, f"the {what} ({width} wide) does not split {ways} ways")
        if block_width is not None and (width // ways) % block_width:
            return _reject(
                worker,
                R.QUANT_BLOCK_MISALIGNED,
                f"{worker.weight_format}: each {what} shard is {width // ways} wide, not a multiple of the "
                f"{block_width}-wide quantization block",
            )
    return None


def expert_layout(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    arch = ctx.arch
    a2a = worker.moe_a2a_backend
    if arch.moe is None:
        if worker.ep > 1 or a2a is not MoeA2ABackend.NONE:
            return _reject(worker, R.EP_ON_DENSE_MODEL, f"{arch.name} has no experts to spread")
        return None
    # §2.3: moe_tp = tp / ep, so ep must divide tp.
    if worker.ep < 1 or worker.tp % worker.ep:
        return _reject(worker, R.EP_NOT_DIVISOR, f"EP{worker.ep} does not divide TP{worker.tp}")
    # §2.3: any all-to-all backend forces ep_size = tp_size.
    if a2a is not MoeA2ABackend.NONE and worker.ep != worker.tp:
        return _reject(worker, R.A2A_NEEDS_EP_EQUAL_TP, f"{a2a.value} forces EP = TP{worker.tp}, not EP{worker.ep}")
    # DeepEP is CUDA-only; ROCm's all-to-all is MoRI, which this planner does not emit.
    if a2a is MoeA2ABackend.DEEPEP and ctx.pool.gpu.vendor is Vendor.AMD:
        return _reject(worker, R.A2A_UNSUPPORTED_ON_GPU, f"DeepEP does not run on {ctx.pool.gpu.name}")
    # §2.3: (logical experts + redundant experts) % ep == 0, asserted at load time.
    if arch.moe.num_experts % worker.ep:
        return _reject(
            worker, R.EXPERTS_NOT_DIVISIBLE, f"{arch.moe.num_experts} experts do not spread over EP{worker.ep}"
        )
    return None


# ------------------------------------------------------------------------------------------ formats


def number_formats(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    arch, gpu = ctx.arch, ctx.pool.gpu
    fmt = ctx.weight_formats.get(worker.weight_format)
    if fmt is None:
        return _reject(worker, R.FORMAT_NOT_IN_SEARCH, f"weight format {worker.weight_format} is not in the search")
    if execution_mode(fmt, gpu) == "unsupported":
        return _reject(worker, R.FORMAT_UNSUPPORTED_ON_GPU, f"{fmt.name} does not run on {gpu.name} ({gpu.arch})")
    # §4.1: MXFP4 is MoE-only; attention raises "not implemented".
    if fmt.moe_only and not arch.is_moe:
        return _reject(worker, R.FORMAT_MOE_ONLY, f"{fmt.name} quantizes experts only and {arch.name} is dense")
    if not has_weights_for(arch, fmt):
        return _reject(
            worker,
            R.NO_CHECKPOINT,
            f"no {fmt.name} checkpoint of {arch.name} and SGLang cannot quantize it on load from the "
            f"{arch.native_dtype} release",
        )
    kv = ctx.kv_formats.get(worker.kv_cache_format)
    if kv is None:
        return _reject(worker, R.FORMAT_NOT_IN_SEARCH, f"KV-cache format {worker.kv_cache_format} is not in the search")
    if not kv_cache_supported(kv, gpu):
        return _reject(
            worker, R.KV_FORMAT_UNSUPPORTED_ON_GPU, f"KV cache {worker.kv_cache_format} is not supported on {gpu.name}"
        )
    loss = quality_loss_pct(arch, fmt, kv)
    if loss > ctx.search.max_quality_loss_pct + 1e-9:
        return _reject(
            worker,
            R.QUALITY_BUDGET_EXCEEDED,
            f"{fmt.name} weights with a {kv.name} KV cache lose about {loss:.1f} % accuracy, above the "
            f"{ctx.search.max_quality_loss_pct:g} % budget",
        )
    return None


# ----------------------------------------------------------------------------- speculative decoding


def speculative_decoding(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    spec = worker.speculative
    if spec is None:
        return None
    # §5: topk == 1 forces num_draft_tokens = num_steps + 1; steps, topk ≥ 1.
    if spec.num_steps < 1 or spec.eagle_topk < 1 or spec.num_draft_tokens < 2:
        return _reject(worker, R.SPEC_PARAMS_INCONSISTENT, "speculative steps, top-k and draft tokens must be positive")
    if spec.eagle_topk == 1 and spec.num_draft_tokens != spec.num_steps + 1:
        return _reject(
            worker,
            R.SPEC_PARAMS_INCONSISTENT,
            f"with top-k 1 SGLang drafts {spec.num_steps + 1} tokens for {spec.num_steps} steps, "
            f"not {spec.num_draft_tokens}",
        )
    if spec.algorithm is SpeculativeAlgorithm.NEXTN and ctx.arch.mtp_layers == 0:
        return _reject(worker, R.SPEC_NEEDS_MTP_LAYERS, f"{ctx.arch.name} ships no MTP (NextN) layers")
    if spec.algorithm is SpeculativeAlgorithm.EAGLE3 and (spec.draft_model or ctx.search.eagle3_draft_model) is None:
        return _reject(worker, R.SPEC_NEEDS_DRAFT_MODEL, "EAGLE-3 needs a draft model and none is configured")
    # §5 / §4.3: top-k > 1 with paged KV runs only on flashinfer / fa3 / triton; Blackwell's default
    # trtllm backends page by 64 and accept top-k 1 only.
    if spec.eagle_topk > 1 and default_page_size(ctx.pool.gpu) > 1:
        return _reject(
            worker,
            R.SPEC_TOPK_UNSUPPORTED,
            f"top-k {spec.eagle_topk} drafting needs an unpaged attention backend; {ctx.pool.gpu.name} pages by "
            f"{default_page_size(ctx.pool.gpu)}",
        )
    # §2.3: under PP, speculative decoding is limited to EAGLE on PD prefill workers.
    if worker.pp > 1 and role is not Role.PREFILL:
        return _reject(worker, R.SPEC_WITH_PIPELINE, "speculative decoding with PP > 1 runs only on prefill workers")
    return None


# ---------------------------------------------------------------------------------------- batching


def batching(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    if worker.max_running_requests < 1:
        return _reject(worker, R.BATCH_CAP_INVALID, f"batch cap {worker.max_running_requests} admits nothing")
    # §2.3: under attention DP each rank admits max_running_requests // attn_dp requests.
    if worker.max_running_requests < worker.attention_dp:
        return _reject(
            worker,
            R.BATCH_CAP_BELOW_ATTENTION_DP,
            f"batch cap {worker.max_running_requests} leaves some of the {worker.attention_dp} attention-DP ranks "
            "no request",
        )
    # §3.1: chunked_prefill_size % page_size == 0 when chunking is on (unchecked on PD decode).
    page = default_page_size(ctx.pool.gpu)
    if role is not Role.DECODE and worker.chunked_prefill_size > 0 and worker.chunked_prefill_size % page:
        return _reject(
            worker,
            R.CHUNK_NOT_PAGE_ALIGNED,
            f"prefill chunk {worker.chunked_prefill_size} is not a multiple of the {page}-token KV page",
        )
    return None


# Cheap, structural rules first: most candidates fail one of them before any arithmetic on formats.
WORKER_RULES: tuple[WorkerRule, ...] = (
    search_limits,
    node_layout,
    attention_split,
    context_parallelism,
    expert_layout,
    ffn_split,
    number_formats,
    speculative_decoding,
    batching,
)


def check_worker(ctx: LegalityContext, worker: WorkerConfig, role: Role) -> Rejection | None:
    """The first rule the worker breaks, or None when SGLang would accept it on this pool."""
    for rule in WORKER_RULES:
        rejection = rule(ctx, worker, role)
        if rejection is not None:
            return rejection
    return None


# ------------------------------------------------------------------------------------------ memory


def longest_context(workload: Workload, role: Role) -> int:
    """Tokens the longest request holds in the KV cache of a worker of `role`."""
    longest_input = workload.input_tokens.max or round(workload.input_tokens.mean)
    if role is Role.PREFILL:
        return longest_input + 1
    return longest_input + (workload.output_tokens.max or round(workload.output_tokens.mean))


def check_memory(worker: WorkerConfig, fit: MemoryFit, workload: Workload, role: Role) -> Rejection | None:
    """Weights must leave room for a KV pool, and one rank's pool must hold the longest request."""
    if fit.kv_pool_gb <= 0:
        return _reject(
            worker,
            R.WEIGHTS_DO_NOT_FIT,
            f"weights {fit.weights_gb:.0f} GB + reserved {fit.reserved_gb:.0f} GB per GPU leave no room for the KV "
            f"cache in {fit.gpu_memory_gb:.0f} GB",
        )
    # Under attention DP every rank keeps its own KV pool (`kv_tokens` is per rank) and a request lives on one.
    tokens_per_rank = fit.kv_tokens
    needed = longest_context(workload, role)
    if tokens_per_rank < needed or fit.max_batch_at_context < 1:
        return _reject(
            worker,
            R.CONTEXT_DOES_NOT_FIT,
            f"the KV cache holds {tokens_per_rank:,} tokens per rank, the longest request needs {needed:,}",
        )
    return None


# ------------------------------------------------------------------------------------------- fleet


def _pool_of(worker: WorkerConfig, pools: Sequence[GpuPool]) -> GpuPool | None:
    return next((pool for pool in pools if pool.gpu.name == worker.gpu), None)


def check_fleet(config: ServingConfig, pools: Sequence[GpuPool]) -> Rejection | None:
    """Rules that span roles: P/D pairing, RDMA for the KV transfer, and the GPU budget of each pool."""
    name = describe_config(config)
    roles = Counter(deployment.role for deployment in config.roles)
    aggregated = roles == Counter({Role.UNIFIED: 1})
    disaggregated = roles == Counter({Role.PREFILL: 1, Role.DECODE: 1})
    if not (aggregated or disaggregated):
        return Rejection(name, R.PD_ROLES_INCOMPLETE, "a fleet is one unified role, or one prefill and one decode role")
    if any(deployment.replicas < 1 for deployment in config.roles):
        return Rejection(name, R.PD_ROLES_INCOMPLETE, "every role needs at least one replica")
    resolved = [(deployment, _pool_of(deployment.worker, pools)) for deployment in config.roles]
    for deployment, pool in resolved:
        if pool is None:
            return Rejection(name, R.NO_POOL, f"no pool offers {deployment.worker.gpu} for the {deployment.role} role")
    if disaggregated:
        rejection = _check_pd_pair(config, name, pools)
        if rejection is not None:
            return rejection
    used: Counter[str] = Counter()
    for deployment, pool in resolved:
        assert pool is not None
        used[pool.name] += deployment.gpus
    for pool in pools:
        if used[pool.name] > pool.max_gpus:
            return Rejection(
                name, R.OVER_BUDGET, f"uses {used[pool.name]} GPUs of pool {pool.name}, which allows {pool.max_gpus}"
            )
    return None


def _check_pd_pair(config: ServingConfig, name: str, pools: Sequence[GpuPool]) -> Rejection | None:
    prefill_role, decode_role = config.role(Role.PREFILL), config.role(Role.DECODE)
    assert prefill_role is not None and decode_role is not None
    prefill, decode = prefill_role.worker, decode_role.worker
    prefill_pool, decode_pool = _pool_of(prefill, pools), _pool_of(decode, pools)
    assert prefill_pool is not None and decode_pool is not None
    for pool in (prefill_pool, decode_pool):
        # The KV cache moves prefill → decode through Mooncake/NIXL; over TCP it would dominate TTFT.
        if not pool.rdma and not pool.nvlink_spans_nodes:
            return Rejection(
                name, R.PD_NEEDS_RDMA, f"pool {pool.name} has no RDMA for the prefill → decode KV transfer"
            )
    # §4.2 / §6.1: decode raises at the first bootstrap handshake unless both match.
    if prefill.kv_cache_format != decode.kv_cache_format:
        return Rejection(
            name,
            R.PD_KV_DTYPE_MISMATCH,
            f"prefill KV {prefill.kv_cache_format} and decode KV {decode.kv_cache_format} must match",
        )
    prefill_page, decode_page = default_page_size(prefill_pool.gpu), default_page_size(decode_pool.gpu)
    if prefill_page != decode_page:
        return Rejection(
            name,
            R.PD_PAGE_SIZE_MISMATCH,
            f"{prefill_pool.gpu.name} pages the KV cache by {prefill_page} and {decode_pool.gpu.name} by "
            f"{decode_page}; both roles must use one page size",
        )
    # The prefill worker runs the draft once to hand its hidden state to decode, so both roles carry the
    # same speculative configuration (sgl-project/sglang PRs #7242 and #23918).
    prefill_spec = prefill.speculative.algorithm if prefill.speculative else None
    decode_spec = decode.speculative.algorithm if decode.speculative else None
    if prefill_spec != decode_spec:
        return Rejection(
            name,
            R.PD_SPEC_MISMATCH,
            f"prefill speculative {prefill_spec or 'off'} and decode {decode_spec or 'off'} must match",
        )
    return None
