"""Each SGLang rule rejects with its own typed reason; legal configurations pass every rule."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.types import (
    MemoryFit,
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
)
from frontier_operator.planner.legality import check_fleet, check_memory, check_worker, legality_context
from frontier_operator.planner.types import GpuPool, RejectionReason, SearchSpace
from planner_support import chat_workload, model, pool, search

R = RejectionReason
LLAMA = model("Llama-3.1-70B-Instruct")
DEEPSEEK = model("DeepSeek-R1")
GLM5 = model("GLM-5")  # DeepSeek Sparse Attention: the one catalog model SGLang runs prefill CP for
H200 = pool("h200", "H200", max_gpus=64)
H200_NO_RDMA = pool("h200-plain", "H200", max_gpus=64, rdma=False)
B200 = pool("b200", "B200", max_gpus=64, rdma=True)
GB200 = pool("gb200", "GB200", max_gpus=72, rdma=False)
MI300X = pool("mi300x", "MI300X", max_gpus=64)
WIDE = search(("bf16", "fp8", "fp8-block", "nvfp4", "mxfp4"), ("bf16", "fp8_e4m3", "nvfp4"), max_quality_loss_pct=5.0)
MTP3 = Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 4)


def worker(target: GpuPool = H200, **fields: object) -> WorkerConfig:
    base = WorkerConfig(
        gpu=target.gpu.name,
        gpus_per_node=target.gpus_per_node,
        weight_format="fp8",
        kv_cache_format="bf16",
        tp=8,
        max_running_requests=64,
        chunked_prefill_size=8192,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Case:
    name: str
    arch: ModelArch
    fields: dict[str, object]
    reason: RejectionReason | None
    target: GpuPool = H200
    space: SearchSpace = WIDE
    role: Role = Role.UNIFIED
    extra: dict[str, object] = field(default_factory=dict)


BLOCK: dict[str, object] = {"weight_format": "fp8-block"}
MOE_WIDE_EP: dict[str, object] = {
    "weight_format": "fp8-block",
    "attention_dp": 8,
    "ep": 8,
    "moe_a2a_backend": MoeA2ABackend.DEEPEP,
}

CASES = [
    # Legal configurations pass every rule.
    Case("dense fp8 TP4", LLAMA, {"tp": 4}, None),
    Case("MoE wide EP with MTP", DEEPSEEK, {**MOE_WIDE_EP, "speculative": MTP3}, None),
    Case("NVFP4 TP8 on B200, top-k 1", DEEPSEEK, {"weight_format": "nvfp4", "speculative": MTP3}, None, B200),
    Case("NVL72 spans trays without RDMA", DEEPSEEK, {"weight_format": "fp8-block", "tp": 16}, None, GB200),
    # Search limits.
    Case("TP above the limit", LLAMA, {"tp": 8}, R.TP_ABOVE_LIMIT, space=replace(WIDE, max_tp=4)),
    Case(
        "EP above the limit",
        DEEPSEEK,
        {"weight_format": "fp8-block", "ep": 8},
        R.EP_ABOVE_LIMIT,
        space=replace(WIDE, max_ep=4),
    ),
    Case(
        "attention DP switched off",
        DEEPSEEK,
        MOE_WIDE_EP,
        R.ATTENTION_DP_NOT_ALLOWED,
        space=replace(WIDE, attention_dp=False),
    ),
    Case("multi-node switched off", LLAMA, {"tp": 16}, R.MULTI_NODE_NOT_ALLOWED, space=replace(WIDE, multi_node=False)),
    # Prefill context parallelism.
    Case("prefill CP on a DSA prefill worker", GLM5, {"ep": 8, "attention_cp": 8}, None, role=Role.PREFILL),
    Case(
        "prefill CP switched off",
        GLM5,
        {"ep": 8, "attention_cp": 8},
        R.CONTEXT_PARALLEL_NOT_ALLOWED,
        space=replace(WIDE, prefill_context_parallel=False),
        role=Role.PREFILL,
    ),
    Case("prefill CP on a decode worker", GLM5, {"ep": 8, "attention_cp": 8}, R.CONTEXT_PARALLEL_PREFILL_ONLY),
    Case(
        "prefill CP without sparse attention",
        DEEPSEEK,
        {**BLOCK, "ep": 8, "attention_cp": 8},
        R.CONTEXT_PARALLEL_NEEDS_SPARSE_ATTENTION,
        role=Role.PREFILL,
    ),
    Case(
        "prefill CP on AMD",
        GLM5,
        {"ep": 8, "attention_cp": 8},
        R.CONTEXT_PARALLEL_UNSUPPORTED_ON_GPU,
        MI300X,
        role=Role.PREFILL,
    ),
    Case("prefill CP not a divisor", GLM5, {"ep": 8, "attention_cp": 3}, R.CONTEXT_PARALLEL_LAYOUT, role=Role.PREFILL),
    Case(
        "prefill CP with attention DP",
        GLM5,
        {"ep": 8, "attention_dp": 2, "attention_cp": 4},
        R.CONTEXT_PARALLEL_LAYOUT,
        role=Role.PREFILL,
    ),
    # Nodes.
    Case("instance larger than the pool", LLAMA, {"tp": 32}, R.OVER_BUDGET, pool("small", "H200", max_gpus=16)),
    Case("ranks uneven over nodes", LLAMA, {"tp": 9}, R.NODES_UNEVEN),
    Case("multi-node without RDMA", LLAMA, {"tp": 16}, R.MULTI_NODE_NEEDS_RDMA, H200_NO_RDMA),
    # Divisibility.
    Case(
        "attention DP not a divisor",
        DEEPSEEK,
        {"weight_format": "fp8-block", "attention_dp": 3},
        R.ATTENTION_DP_NOT_DIVISOR,
    ),
    Case("attention DP on a dense model", LLAMA, {"attention_dp": 8}, R.ATTENTION_DP_NEEDS_MOE),
    Case("heads do not split", LLAMA, {"tp": 6}, R.HEADS_NOT_DIVISIBLE),
    Case("KV heads do not split", replace(LLAMA, num_kv_heads=12), {"tp": 8}, R.KV_HEADS_NOT_DIVISIBLE),
    Case("dense FFN does not split", replace(LLAMA, intermediate_size=28680), {"tp": 16}, R.FFN_NOT_DIVISIBLE),
    Case(
        "block-FP8 shard below its block", DEEPSEEK, {"weight_format": "fp8-block", "tp": 32}, R.QUANT_BLOCK_MISALIGNED
    ),
    # Experts.
    Case("EP on a dense model", LLAMA, {"ep": 2}, R.EP_ON_DENSE_MODEL),
    Case("EP not a divisor of TP", DEEPSEEK, {"weight_format": "fp8-block", "ep": 3}, R.EP_NOT_DIVISOR),
    Case(
        "experts do not spread",
        replace(DEEPSEEK, moe=replace(DEEPSEEK.moe, num_experts=250)),  # type: ignore[arg-type]
        {"weight_format": "fp8-block", "ep": 8},
        R.EXPERTS_NOT_DIVISIBLE,
    ),
    Case("DeepEP with EP below TP", DEEPSEEK, {**MOE_WIDE_EP, "ep": 4}, R.A2A_NEEDS_EP_EQUAL_TP),
    Case("DeepEP on AMD", DEEPSEEK, MOE_WIDE_EP | {"weight_format": "fp8"}, R.A2A_UNSUPPORTED_ON_GPU, MI300X),
    # Formats.
    Case("format outside the search", LLAMA, {"weight_format": "w4a16"}, R.FORMAT_NOT_IN_SEARCH),
    Case("NVFP4 on MI300X", LLAMA, {"weight_format": "nvfp4"}, R.FORMAT_UNSUPPORTED_ON_GPU, MI300X),
    Case("MXFP4 on a dense model", LLAMA, {"weight_format": "mxfp4"}, R.FORMAT_MOE_ONLY),
    Case("BF16 of an FP8-only release", DEEPSEEK, {"weight_format": "bf16", "tp": 16}, R.NO_CHECKPOINT),
    Case("NVFP4 KV cache on Hopper", LLAMA, {"kv_cache_format": "nvfp4"}, R.KV_FORMAT_UNSUPPORTED_ON_GPU),
    Case(
        "quality budget",
        LLAMA,
        {"weight_format": "fp8", "kv_cache_format": "fp8_e4m3"},
        R.QUALITY_BUDGET_EXCEEDED,
        space=replace(WIDE, max_quality_loss_pct=0.9),
    ),
    # Speculative decoding.
    Case(
        "draft tokens inconsistent with top-k 1",
        DEEPSEEK,
        {"weight_format": "fp8-block", "speculative": Speculative(SpeculativeAlgorithm.NEXTN, 3, 1, 5)},
        R.SPEC_PARAMS_INCONSISTENT,
    ),
    Case("MTP without MTP layers", LLAMA, {"speculative": MTP3}, R.SPEC_NEEDS_MTP_LAYERS),
    Case(
        "EAGLE-3 without a draft",
        LLAMA,
        {"speculative": Speculative(SpeculativeAlgorithm.EAGLE3, 3, 1, 4)},
        R.SPEC_NEEDS_DRAFT_MODEL,
    ),
    Case(
        "top-k 4 on Blackwell's paged backend",
        DEEPSEEK,
        {"weight_format": "nvfp4", "speculative": Speculative(SpeculativeAlgorithm.NEXTN, 3, 4, 8)},
        R.SPEC_TOPK_UNSUPPORTED,
        B200,
    ),
    Case(
        "speculation under PP on decode",
        DEEPSEEK,
        {"weight_format": "fp8-block", "tp": 4, "pp": 2, "speculative": MTP3},
        R.SPEC_WITH_PIPELINE,
        role=Role.DECODE,
    ),
    # Batching.
    Case("batch cap zero", LLAMA, {"max_running_requests": 0}, R.BATCH_CAP_INVALID),
    Case(
        "cap below the attention-DP ranks",
        DEEPSEEK,
        {**MOE_WIDE_EP, "max_running_requests": 4},
        R.BATCH_CAP_BELOW_ATTENTION_DP,
    ),
    Case("prefill chunk off the 64-token page", LLAMA, {"chunked_prefill_size": 1000}, R.CHUNK_NOT_PAGE_ALIGNED, B200),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_worker_rules(case: Case) -> None:
    ctx = legality_context(case.arch, case.target, case.space)
    rejection = check_worker(ctx, worker(case.target, **case.fields), case.role)
    if case.reason is None:
        assert rejection is None, rejection
    else:
        assert rejection is not None, f"{case.name} was accepted"
        assert rejection.reason is case.reason, rejection
        assert rejection.detail and rejection.worker is not None


def test_every_worker_reason_has_a_case() -> None:
    covered = {case.reason for case in CASES}
    worker_reasons = {
        R.TP_ABOVE_LIMIT, R.EP_ABOVE_LIMIT, R.ATTENTION_DP_NOT_ALLOWED, R.MULTI_NODE_NOT_ALLOWED, R.NODES_UNEVEN,
        R.MULTI_NODE_NEEDS_RDMA, R.HEADS_NOT_DIVISIBLE, R.KV_HEADS_NOT_DIVISIBLE, R.FFN_NOT_DIVISIBLE,
        R.QUANT_BLOCK_MISALIGNED, R.ATTENTION_DP_NOT_DIVISOR, R.ATTENTION_DP_NEEDS_MOE, R.EP_ON_DENSE_MODEL,
        R.EP_NOT_DIVISOR, R.EXPERTS_NOT_DIVISIBLE, R.A2A_NEEDS_EP_EQUAL_TP, R.A2A_UNSUPPORTED_ON_GPU,
        R.FORMAT_NOT_IN_SEARCH, R.FORMAT_UNSUPPORTED_ON_GPU, R.FORMAT_MOE_ONLY, R.NO_CHECKPOINT,
        R.KV_FORMAT_UNSUPPORTED_ON_GPU, R.QUALITY_BUDGET_EXCEEDED, R.SPEC_PARAMS_INCONSISTENT,
        R.SPEC_NEEDS_MTP_LAYERS, R.SPEC_NEEDS_DRAFT_MODEL, R.SPEC_TOPK_UNSUPPORTED, R.SPEC_WITH_PIPELINE,
        R.BATCH_CAP_INVALID, R.BATCH_CAP_BELOW_ATTENTION_DP, R.CHUNK_NOT_PAGE_ALIGNED, R.OVER_BUDGET,
    }  # fmt: skip
    assert worker_reasons <= covered


def test_eagle3_with_a_configured_draft_is_legal() -> None:
    space = replace(WIDE, eagle3_draft_model="yuhuili/EAGLE3-LLaMA3.3-Instruct-70B")
    eagle = Speculative(SpeculativeAlgorithm.EAGLE3, 3, 1, 4)
    assert check_worker(legality_context(LLAMA, H200, space), worker(speculative=eagle), Role.UNIFIED) is None


def test_prefill_chunk_alignment_is_not_checked_on_decode() -> None:
    ctx = legality_context(LLAMA, B200, WIDE)
    assert check_worker(ctx, worker(B200, chunked_prefill_size=1000), Role.DECODE) is None


# ------------------------------------------------------------------------------------------ fleet rules


def pd(prefill: WorkerConfig, decode: WorkerConfig, prefills: int = 1, decodes: int = 1) -> ServingConfig:
    return ServingConfig(
        "m",
        (RoleDeployment(Role.PREFILL, prefill, prefills), RoleDeployment(Role.DECODE, decode, decodes)),
        transfer_backend="mooncake",
    )


FLEET_CASES = [
    ("legal P/D", pd(worker(), worker()), (H200,), None),
    ("legal aggregated", ServingConfig("m", (RoleDeployment(Role.UNIFIED, worker(), 2),)), (H200,), None),
    (
        "prefill without decode",
        ServingConfig("m", (RoleDeployment(Role.PREFILL, worker(), 1),)),
        (H200,),
        R.PD_ROLES_INCOMPLETE,
    ),
    ("P/D without RDMA", pd(worker(H200_NO_RDMA), worker(H200_NO_RDMA)), (H200_NO_RDMA,), R.PD_NEEDS_RDMA),
    ("KV dtypes differ", pd(worker(), worker(kv_cache_format="fp8_e4m3")), (H200,), R.PD_KV_DTYPE_MISMATCH),
    ("page sizes differ (Hopper → Blackwell)", pd(worker(H200), worker(B200)), (H200, B200), R.PD_PAGE_SIZE_MISMATCH),
    ("speculation on decode only", pd(worker(), worker(speculative=MTP3)), (H200,), R.PD_SPEC_MISMATCH),
    ("over the pool budget", pd(worker(), worker(), 4, 5), (H200,), R.OVER_BUDGET),
    ("GPU no pool offers", ServingConfig("m", (RoleDeployment(Role.UNIFIED, worker(B200), 1),)), (H200,), R.NO_POOL),
]


@pytest.mark.parametrize(("name", "config", "pools", "reason"), FLEET_CASES, ids=[c[0] for c in FLEET_CASES])
def test_fleet_rules(
    name: str, config: ServingConfig, pools: tuple[GpuPool, ...], reason: RejectionReason | None
) -> None:
    rejection = check_fleet(config, pools)
    if reason is None:
        assert rejection is None, rejection
    else:
        assert rejection is not None and rejection.reason is reason, rejection


# ---------------------------------------------------------------------------------------------- memory


def fit(kv_pool_gb: float, kv_tokens: int, max_batch: int) -> MemoryFit:
    return MemoryFit(141.0, 70.0, 10.0, kv_pool_gb, kv_tokens, max_batch)


def test_memory_rejects_weights_that_leave_no_kv_pool() -> None:
    rejection = check_memory(worker(), fit(0.0, 0, 0), chat_workload(), Role.UNIFIED)
    assert rejection is not None and rejection.reason is R.WEIGHTS_DO_NOT_FIT


def test_memory_rejects_a_pool_shorter_than_the_longest_request() -> None:
    workload = chat_workload(input_mean=1000, output_mean=300)  # longest: 4000 + 1200 tokens
    rejection = check_memory(worker(), fit(5.0, 5000, 3), workload, Role.UNIFIED)
    assert rejection is not None and rejection.reason is R.CONTEXT_DOES_NOT_FIT
    assert "5,200" in rejection.detail


def test_memory_prefill_only_holds_the_prompt() -> None:
    workload = chat_workload(input_mean=1000, output_mean=300)
    assert check_memory(worker(), fit(5.0, 5000, 3), workload, Role.PREFILL) is None
    assert check_memory(worker(), fit(5.0, 6000, 3), workload, Role.UNIFIED) is None
