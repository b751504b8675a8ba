"""Candidate generation: every worker layout worth predicting, on every pool, for every role.

A `Shape` is a worker without its batch cap (set later at the SLO knee) and without a replica count
(sized later for the request rate). Shapes come from the product of weight format × KV format ×
TP width × attention/expert layout × speculative setting; the legality rules and the physical floors
remove what SGLang would refuse or what can never meet the SLO before the performance model is asked.

The baseline of the technique comparison (BF16 weights, BF16 KV, no speculation, narrow experts) is
always enumerated, even when the spec does not allow BF16: such shapes are marked `allowed=False`
and serve only as the reference frontier, never as the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import product

from frontier_operator.catalog.types import KvCacheFormat, ModelArch, QuantFormat
from frontier_operator.perf.kernels import sparse_topk
from frontier_operator.perf.types import (
    MoeA2ABackend,
    Role,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
)
from frontier_operator.planner.describe import describe_worker
from frontier_operator.planner.floor import per_token_floor_s, weights_floor_gb_per_gpu
from frontier_operator.planner.formats import (
    BASELINE_KV_FORMAT,
    BASELINE_WEIGHT_FORMAT,
    canonical_format_name,
    default_chunked_prefill_size,
    has_weights_for,
    servable_formats,
    weight_quality_loss_pct,
)
from frontier_operator.planner.legality import LegalityContext, check_worker
from frontier_operator.planner.types import (
    PER_TOKEN_METRICS,
    GpuPool,
    Rejection,
    RejectionReason,
    SearchSpace,
    SloBound,
    SpeculativeMode,
    Technique,
)

# Draft depths tried: one step (cheap, wins at large batches) and SGLang's default of three (wins at
# small batches); top-k 1 so that the Blackwell default attention backend accepts it (§5).
SPECULATIVE_STEPS = (1, 3)

# The batch cap a shape carries before the knee search sets it; any positive value passes legality.
_UNSET_CAP = 1 << 20


@dataclass(frozen=True)
class Shape:
    pool: GpuPool
    role: Role
    worker: WorkerConfig
    techniques: frozenset[Technique]
    # False for baseline references the spec does not allow; they are drawn, never chosen.
    allowed: bool

    @property
    def summary(self) -> str:
        return f"{self.pool.name}: {describe_worker(self.worker)}"


def baseline_weight_format(arch: ModelArch, known: tuple[QuantFormat, ...]) -> QuantFormat | None:
    """BF16 when the model has BF16 weights, else the format of its reference release.

    The reference release is the servable format that loses nothing against itself (block FP8 for
    DeepSeek-R1, INT4 experts for Kimi-K2.5, per the catalog's quality table); failing that, the
    format the release's `config.json` declares.
    """
    by_name = {fmt.name: fmt for fmt in known}
    bf16 = by_name.get(BASELINE_WEIGHT_FORMAT)
    if bf16 is not None and has_weights_for(arch, bf16):
        return bf16
    servable = [fmt for fmt in known if fmt.name in servable_formats(arch)]
    lossless = [fmt for fmt in servable if weight_quality_loss_pct(arch, fmt) == 0.0]
    if lossless:
        return lossless[0]
    return by_name.get(canonical_format_name(arch.native_dtype))


def worker_techniques(worker: WorkerConfig, pool: GpuPool, baseline_format: str) -> frozenset[Technique]:
    techniques: set[Technique] = set()
    if worker.weight_format != baseline_format or worker.kv_cache_format != BASELINE_KV_FORMAT:
        techniques.add(Technique.QUANTIZATION)
    if worker.speculative is not None:
        techniques.add(Technique.SPECULATIVE_DECODING)
    # Narrow EP (the baseline) keeps experts inside one node's TP group with TP attention; attention DP,
    # an all-to-all backend or experts spread past one node is wide EP.
    if worker.attention_dp > 1 or worker.moe_a2a_backend is not MoeA2ABackend.NONE or worker.ep > pool.gpus_per_node:
        techniques.add(Technique.WIDE_EP)
    return frozenset(techniques)


def tp_widths(pool: GpuPool, search: SearchSpace) -> tuple[int, ...]:
    """Powers of two up to the pool size (and the TP limit): head counts and expert counts are powers of two."""
    limit = min(pool.max_gpus, search.max_tp or pool.max_gpus)
    if not search.multi_node:
        limit = min(limit, pool.gpus_per_node)
    widths, width = [], 1
    while width <= limit:
        widths.append(width)
        width *= 2
    return tuple(widths)


def moe_layouts(arch: ModelArch, tp: int, search: SearchSpace) -> tuple[tuple[int, int, MoeA2ABackend], ...]:
    """(attention DP, EP, all-to-all backend) combinations for one TP width.

    The three layouts SGLang's MoE recipes use: experts tensor-parallel (`--tp N`), experts spread over
    the TP group (`--tp N --ep N`), and wide EP with DP attention and DeepEP's all-to-all
    (`--tp N --attn-dp-size N --moe-a2a-backend deepep`). Mixed forms (DP attention over TP experts)
    sit between these on the frontier and are left out to keep the search fast.
    """
    if arch.moe is None or tp == 1:
        return ((1, 1, MoeA2ABackend.NONE),)
    layouts = [(1, 1, MoeA2ABackend.NONE), (1, tp, MoeA2ABackend.NONE)]
    if search.attention_dp:
        layouts.append((tp, tp, MoeA2ABackend.DEEPEP))
    max_ep = search.max_ep or tp
    return tuple(layout for layout in layouts if layout[1] <= max_ep)


def context_parallel_widths(
    arch: ModelArch, tp: int, attention_dp: int, role: Role, search: SearchSpace
) -> tuple[int, ...]:
    """Prefill context-parallel widths tried: none, and the whole TP group on a DSA model's prefill worker.

    With DeepSeek Sparse Attention the indexer is replicated over attention-TP, so a long prompt's scoring
    does not shrink with TP; CP = TP splits it over every GPU (intermediate widths split it less and
    are left out to keep the search fast).
    """
    if (
        role is not Role.PREFILL
        or not sparse_topk(arch)
        or not search.prefill_context_parallel
        or attention_dp > 1
        or tp == 1
    ):
        return (1,)
    return (1, tp)


def speculative_options(arch: ModelArch, search: SearchSpace) -> tuple[Speculative | None, ...]:
    options: list[Speculative | None] = [None]
    if search.speculative is SpeculativeMode.OFF:
        return tuple(options)
    if arch.mtp_layers > 0:
        options += [Speculative(SpeculativeAlgorithm.NEXTN, steps, 1, steps + 1) for steps in SPECULATIVE_STEPS]
    if search.eagle3_draft_model is not None:
        options += [
            Speculative(SpeculativeAlgorithm.EAGLE3, steps, 1, steps + 1, search.eagle3_draft_model)
            for steps in SPECULATIVE_STEPS
        ]
    return tuple(options)


@dataclass(frozen=True)
class _FormatPair:
    weight: QuantFormat
    kv: KvCacheFormat
    allowed: bool


def _format_pairs(arch: ModelArch, search: SearchSpace) -> list[_FormatPair]:
    pairs = [_FormatPair(weight, kv, True) for weight in search.quantizations for kv in search.kv_cache_formats]
    baseline = baseline_weight_format(arch, (*search.quantizations, *search.fallback_quantizations))
    baseline_kv = next(
        (kv for kv in (*search.kv_cache_formats, *search.fallback_kv_cache_formats) if kv.name == BASELINE_KV_FORMAT),
        None,
    )
    if (
        baseline is not None
        and baseline_kv is not None
        and not any(pair.weight.name == baseline.name and pair.kv.name == baseline_kv.name for pair in pairs)
    ):
        pairs.append(_FormatPair(baseline, baseline_kv, False))
    return pairs


@dataclass(frozen=True)
class Enumeration:
    shapes: tuple[Shape, ...]
    rejections: tuple[Rejection, ...]


def enumerate_shapes(
    ctx: LegalityContext,
    role: Role,
    slos: tuple[SloBound, ...],
    speculative: tuple[Speculative | None, ...] | None = None,
) -> Enumeration:
    """Every legal worker shape of `role` on the context's pool, with the reason for each one left out.

    `speculative` restricts the speculative settings tried (a prefill worker mirrors its decode partner);
    None tries every setting the model and the search allow.
    """
    shapes: list[Shape] = []
    rejections: list[Rejection] = []
    options = speculative_options(ctx.arch, ctx.search) if speculative is None else speculative
    for shape_or_rejection in _candidates(ctx, role, slos, options):
        if isinstance(shape_or_rejection, Rejection):
            rejections.append(shape_or_rejection)
        else:
            shapes.append(shape_or_rejection)
    return Enumeration(tuple(shapes), tuple(rejections))


def _candidates(
    ctx: LegalityContext,
    role: Role,
    slos: tuple[SloBound, ...],
    spec_options: tuple[Speculative | None, ...],
) -> Iterator[Shape | Rejection]:
    arch, pool, search = ctx.arch, ctx.pool, ctx.search
    baseline = baseline_weight_format(arch, (*search.quantizations, *search.fallback_quantizations))
    baseline_name = baseline.name if baseline is not None else BASELINE_WEIGHT_FORMAT
    per_token_limit = min((b.limit_s for b in slos if b.metric in PER_TOKEN_METRICS), default=None)
    chunk = default_chunked_prefill_size(pool.gpu)
    for pair in _format_pairs(arch, search):
        for tp in tp_widths(pool, search):
            weights_gb = weights_floor_gb_per_gpu(arch, pair.weight, tp)
            if weights_gb >= pool.gpu.memory_gb:
                # One rejection per width: every layout of this width fails the same way.
                yield Rejection(
                    f"{pair.weight.name} TP{tp}",
                    RejectionReason.WEIGHTS_DO_NOT_FIT,
                    f"at least {weights_gb:.0f} GB of weights per GPU, more than the {pool.gpu.memory_gb:g} GB "
                    f"of a {pool.gpu.name}",
                )
                continue
            for attention_dp, ep, a2a in moe_layouts(arch, tp, search):
                for spec, cp in product(spec_options, context_parallel_widths(arch, tp, attention_dp, role, search)):
                    worker = WorkerConfig(
                        gpu=pool.gpu.name,
                        gpus_per_node=pool.gpus_per_node,
                        weight_format=pair.weight.name,
                        kv_cache_format=pair.kv.name,
                        tp=tp,
                        max_running_requests=_UNSET_CAP,
                        chunked_prefill_size=chunk,
                        attention_dp=attention_dp,
                        attention_cp=cp,
                        ep=ep,
                        moe_a2a_backend=a2a,
                        speculative=spec,
                    )
                    techniques = worker_techniques(worker, pool, baseline_name)
                    # References outside the allowed formats stay technique-free: they only draw the baseline.
                    if not pair.allowed and techniques:
                        continue
                    rejection = check_worker(ctx, worker, role)
                    if rejection is None and per_token_limit is not None and role is not Role.PREFILL:
                        rejection = _below_floor(ctx, pair.weight, worker, per_token_limit)
                    if rejection is not None:
                        yield rejection
                        continue
                    yield Shape(pool, role, worker, techniques, pair.allowed)


def _below_floor(ctx: LegalityContext, fmt: QuantFormat, worker: WorkerConfig, limit_s: float) -> Rejection | None:
    floor = per_token_floor_s(ctx.arch, ctx.pool.gpu, fmt, worker)
    if floor <= limit_s:
        return None
    return Rejection(
        describe_worker(worker),
        RejectionReason.BELOW_PHYSICAL_FLOOR,
        f"streaming the weights one token activates takes at least {floor * 1e3:.2f} ms per token on "
        f"{ctx.pool.gpu.name}, above the {limit_s * 1e3:g} ms limit",
        worker,
    )
