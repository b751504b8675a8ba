"""The planner's vocabulary: what it is asked (`PlanRequest`) and what it answers (`Plan` | `Infeasible`).

Everything is a frozen dataclass so that plans can be cached, compared and handed to the renderer and
the tuning layer unchanged. The performance model is reached only through the `Predictor` protocol,
which keeps the planner testable with a small deterministic stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from frontier_operator.catalog.types import GpuSpec, KvCacheFormat, ModelArch, QuantFormat
from frontier_operator.perf.types import MemoryFit, Prediction, Role, ServingConfig, WorkerConfig, Workload

# --------------------------------------------------------------------------------------------- inputs


class SloMetric(StrEnum):
    TTFT = "ttft"
    TPOT = "tpot"
    ITL = "itl"
    E2E = "e2e"


# Metrics paid per generated token: the batch cap bounds them, replicas do not.
PER_TOKEN_METRICS = frozenset({SloMetric.TPOT, SloMetric.ITL})

PERCENTILES = (50, 90, 95, 99)


@dataclass(frozen=True)
class SloBound:
    """`metric` at `percentile` must stay at or below `limit_s` seconds."""

    metric: SloMetric
    percentile: int
    limit_s: float

    def __post_init__(self) -> None:
        if self.percentile not in PERCENTILES:
            raise ValueError(f"percentile {self.percentile} is not one of {PERCENTILES}")
        if not self.limit_s > 0:
            raise ValueError(f"limit {self.limit_s} s must be positive")

    @property
    def label(self) -> str:
        return f"p{self.percentile} {self.metric.value.upper()}"

    def predicted(self, prediction: Prediction) -> float:
        return getattr(prediction, self.metric.value).at(self.percentile)  # type: ignore[no-any-return]


class Objective(StrEnum):
    MINIMIZE_COST = "minimize-cost"
    MINIMIZE_GPUS = "minimize-gpus"
    MAXIMIZE_THROUGHPUT = "maximize-throughput"
    MINIMIZE_LATENCY = "minimize-latency"


@dataclass(frozen=True)
class GpuPool:
    """Identical GPU nodes the fleet may use; `max_gpus` bounds all roles and replicas together."""

    name: str
    gpu: GpuSpec
    gpus_per_node: int
    price_per_gpu_hour: float
    max_gpus: int
    rdma: bool = False

    @property
    def nvlink_spans_nodes(self) -> bool:
        """True for rack-scale NVLink (GB200/GB300 NVL72): nodes talk at scale-up speed without RDMA."""
        return self.gpu.scale_up_domain > self.gpus_per_node


class Disaggregation(StrEnum):
    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"


class SpeculativeMode(StrEnum):
    AUTO = "auto"
    OFF = "off"


@dataclass(frozen=True)
class SearchSpace:
    """Which techniques and layouts the planner may use (`spec.search`), with the formats resolved."""

    quantizations: tuple[QuantFormat, ...]
    kv_cache_formats: tuple[KvCacheFormat, ...]
    max_quality_loss_pct: float = 1.0
    disaggregation: Disaggregation = Disaggregation.AUTO
    speculative: SpeculativeMode = SpeculativeMode.AUTO
    max_tp: int | None = None
    max_ep: int | None = None
    attention_dp: bool = True
    prefill_context_parallel: bool = True
    multi_node: bool = True
    # Separate EAGLE-3 draft checkpoint; MTP (NEXTN) needs none, its layers ship in the target checkpoint.
    eagle3_draft_model: str | None = None
    # Formats the catalog knows but the spec did not allow: never chosen, only tried to tell an
    # infeasible target what would help ("… or allow FP8") and to draw the BF16 baseline.
    fallback_quantizations: tuple[QuantFormat, ...] = ()
    fallback_kv_cache_formats: tuple[KvCacheFormat, ...] = ()


@dataclass(frozen=True)
class PlanRequest:
    arch: ModelArch
    workload: Workload
    slos: tuple[SloBound, ...]
    pools: tuple[GpuPool, ...]
    search: SearchSpace
    objective: Objective = Objective.MINIMIZE_COST
    # Output tokens per second the fleet must be able to sustain, beyond what the request rate needs.
    min_output_tokens_per_s: float | None = None
    # 0 (model never checked against this cluster) … 1 (well calibrated): shrinks the safety margin.
    calibration_confidence: float = 0.0


class Predictor(Protocol):
    """What the planner needs from the performance model (`perf.model.PerformanceModel` satisfies it).

    The methods are pure and raise `perf.errors.UnpredictableConfig` for configurations the model cannot
    put a number on. `predict` reports infinite latencies for a fleet the request rate saturates; its
    `max_request_rate_per_s` is the fleet's capacity whatever the offered rate. `MemoryFit.kv_tokens` is
    per attention rank and `max_batch_at_context` per worker, capped by the worker's batch cap.
    """

    def predict(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        price_per_gpu_hour: float,
    ) -> Prediction: ...

    def memory_fit(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, context_tokens: int, *, role: Role = Role.UNIFIED
    ) -> MemoryFit: ...

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        """Seconds per output token of each of `batch` running requests, with no prefill in between."""
        ...


class PredictorWrapper:
    """A `Predictor` that changes some of `base`'s answers and passes the others through unchanged.

    Subclasses are frozen dataclasses whose first field is `base`; they override what they correct.
    """

    base: Predictor

    def memory_fit(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, context_tokens: int, *, role: Role = Role.UNIFIED
    ) -> MemoryFit:
        return self.base.memory_fit(arch, gpu, worker, context_tokens, role=role)

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        return self.base.decode_token_time(arch, gpu, worker, batch, context, kind=kind)


# ------------------------------------------------------------------------------------------ rejections


class RejectionReason(StrEnum):
    # Search-space limits set by the user.
    TP_ABOVE_LIMIT = "tp-above-limit"
    EP_ABOVE_LIMIT = "ep-above-limit"
    ATTENTION_DP_NOT_ALLOWED = "attention-dp-not-allowed"
    CONTEXT_PARALLEL_NOT_ALLOWED = "context-parallel-not-allowed"
    MULTI_NODE_NOT_ALLOWED = "multi-node-not-allowed"
    NO_POOL = "no-pool"
    # Shapes SGLang or the model's weights cannot be split into.
    HEADS_NOT_DIVISIBLE = "heads-not-divisible"
    KV_HEADS_NOT_DIVISIBLE = "kv-heads-not-divisible"
    FFN_NOT_DIVISIBLE = "ffn-not-divisible"
    QUANT_BLOCK_MISALIGNED = "quant-block-misaligned"
    ATTENTION_DP_NOT_DIVISOR = "attention-dp-not-divisor"
    ATTENTION_DP_NEEDS_MOE = "attention-dp-needs-moe"
    EP_ON_DENSE_MODEL = "ep-on-dense-model"
    EP_NOT_DIVISOR = "ep-not-divisor"
    EXPERTS_NOT_DIVISIBLE = "experts-not-divisible"
    A2A_NEEDS_EP_EQUAL_TP = "a2a-needs-ep-equal-tp"
    A2A_UNSUPPORTED_ON_GPU = "a2a-unsupported-on-gpu"
    CONTEXT_PARALLEL_LAYOUT = "context-parallel-layout"
    CONTEXT_PARALLEL_NEEDS_SPARSE_ATTENTION = "context-parallel-needs-sparse-attention"
    CONTEXT_PARALLEL_PREFILL_ONLY = "context-parallel-prefill-only"
    CONTEXT_PARALLEL_UNSUPPORTED_ON_GPU = "context-parallel-unsupported-on-gpu"
    # Multi-node layouts.
    NODES_UNEVEN = "nodes-uneven"
    MULTI_NODE_NEEDS_RDMA = "multi-node-needs-rdma"
    # Number formats.
    FORMAT_NOT_IN_SEARCH = "format-not-in-search"
    FORMAT_UNSUPPORTED_ON_GPU = "format-unsupported-on-gpu"
    FORMAT_MOE_ONLY = "format-moe-only"
    NO_CHECKPOINT = "no-checkpoint"
    QUALITY_BUDGET_EXCEEDED = "quality-budget-exceeded"
    KV_FORMAT_UNSUPPORTED_ON_GPU = "kv-format-unsupported-on-gpu"
    # Speculative decoding.
    SPEC_NEEDS_MTP_LAYERS = "spec-needs-mtp-layers"
    SPEC_NEEDS_DRAFT_MODEL = "spec-needs-draft-model"
    SPEC_PARAMS_INCONSISTENT = "spec-params-inconsistent"
    SPEC_TOPK_UNSUPPORTED = "spec-topk-unsupported"
    SPEC_WITH_PIPELINE = "spec-with-pipeline"
    # Batching.
    BATCH_CAP_INVALID = "batch-cap-invalid"
    BATCH_CAP_BELOW_ATTENTION_DP = "batch-cap-below-attention-dp"
    CHUNK_NOT_PAGE_ALIGNED = "chunk-not-page-aligned"
    # Prefill/decode disaggregation.
    PD_NEEDS_RDMA = "pd-needs-rdma"
    PD_KV_DTYPE_MISMATCH = "pd-kv-dtype-mismatch"
    PD_PAGE_SIZE_MISMATCH = "pd-page-size-mismatch"
    PD_SPEC_MISMATCH = "pd-spec-mismatch"
    PD_ROLES_INCOMPLETE = "pd-roles-incomplete"
    # Memory, physics, the model's reach, SLO and budget.
    WEIGHTS_DO_NOT_FIT = "weights-do-not-fit"
    CONTEXT_DOES_NOT_FIT = "context-does-not-fit"
    CONTEXT_BEYOND_MODEL = "context-beyond-model"
    BELOW_PHYSICAL_FLOOR = "below-physical-floor"
    UNPREDICTABLE = "unpredictable"
    SLO_UNREACHABLE = "slo-unreachable"
    OVER_BUDGET = "over-budget"


@dataclass(frozen=True)
class Rejection:
    candidate: str
    reason: RejectionReason
    detail: str
    # The worker the rule looked at, when one did: lets explanations group rejections by format or layout.
    worker: WorkerConfig | None = None

    def __str__(self) -> str:
        return f"{self.candidate}: {self.detail}"


@dataclass(frozen=True)
class RejectionSummary:
    """How many candidates one reason removed, with one example to quote."""

    reason: RejectionReason
    count: int
    example: Rejection


# --------------------------------------------------------------------------------------------- outputs


class Technique(StrEnum):
    """Techniques that can push the frontier out; the baseline uses none of them."""

    QUANTIZATION = "quantization"
    SPECULATIVE_DECODING = "speculative-decoding"
    DISAGGREGATION = "disaggregation"
    WIDE_EP = "wide-ep"


@dataclass(frozen=True)
class SloCheck:
    bound: SloBound
    predicted_s: float
    # The limit shrunk by the safety margin: what the prediction must stay under.
    required_s: float
    # The safety margin applied to this bound: required = limit / (1 + margin).
    margin: float = 0.0

    @property
    def met(self) -> bool:
        return self.predicted_s <= self.required_s

    @property
    def ratio(self) -> float:
        """The prediction over what it must stay under: ≤ 1 is met."""
        return self.predicted_s / self.required_s

    @property
    def headroom_pct(self) -> float:
        """How far below the limit, in % of the limit (negative: violated)."""
        return (self.bound.limit_s - self.predicted_s) / self.bound.limit_s * 100


@dataclass(frozen=True)
class BatchKnee:
    """Why the batch cap is where it is: the largest per-rank batch whose per-token SLOs still hold."""

    cap: int
    # The SLO that stops a larger batch (None when memory or SGLang's own bound stops it first).
    binding: SloBound | None
    # The next larger batch tried and its predicted value of the binding metric (None if none tried).
    next_cap: int | None = None
    next_value_s: float | None = None


@dataclass(frozen=True)
class Evaluated:
    """A complete candidate fleet sized for the workload, with its prediction and verdict."""

    config: ServingConfig
    pool: GpuPool
    prediction: Prediction
    techniques: frozenset[Technique]
    checks: tuple[SloCheck, ...]
    # The largest of the per-SLO safety margins (each check carries its own).
    margin: float
    knee: BatchKnee | None
    # Whether the spec allows every format and technique it uses (baseline references may not be).
    allowed: bool
    within_budget: bool
    sustains_rate: bool
    # Expected accuracy loss of its weight and KV formats against the model's reference release.
    quality_loss_pct: float = 0.0

    @property
    def meets_slo(self) -> bool:
        return all(check.met for check in self.checks)

    @property
    def feasible(self) -> bool:
        return self.meets_slo and self.within_budget and self.sustains_rate and self.allowed


@dataclass(frozen=True)
class FrontierPoint:
    """One operating point: a worker layout run at one batch cap (or a sized fleet)."""

    summary: str
    pool: str
    techniques: frozenset[Technique]
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    cost_per_mtok: float
    gpus: int
    meets_slo: bool
    # False for baseline references in formats the spec does not allow.
    allowed: bool = True


@dataclass(frozen=True)
class TechniqueCurve:
    """The frontier reachable with one set of techniques (the baseline, or the baseline plus one)."""

    label: str
    techniques: frozenset[Technique]
    points: tuple[FrontierPoint, ...]


class ShiftEffect(StrEnum):
    PUSHES_OUT = "pushes-out"
    MOVES_ALONG = "moves-along"
    NO_GAIN = "no-gain"
    NOT_ALLOWED = "not-allowed"
    NOT_APPLICABLE = "not-applicable"


@dataclass(frozen=True)
class TechniqueShift:
    """How far adding one technique to the baseline moves the frontier at the SLO, for this traffic."""

    technique: Technique
    effect: ShiftEffect
    # Cheapest SLO-meeting fleet with the baseline, and with the baseline plus this technique.
    baseline_cost_per_mtok: float | None
    cost_per_mtok: float | None
    # Best output tokens/s per GPU on the capability frontier at the SLO's per-user speed.
    baseline_tokens_per_s_per_gpu: float | None
    tokens_per_s_per_gpu: float | None
    note: str

    @property
    def cost_shift_pct(self) -> float | None:
        if self.baseline_cost_per_mtok is None or self.cost_per_mtok is None:
            return None
        return (self.cost_per_mtok / self.baseline_cost_per_mtok - 1) * 100


@dataclass(frozen=True)
class RunnerUp:
    candidate: Evaluated
    cost_delta_pct: float
    gpu_delta: int
    difference: str


@dataclass(frozen=True)
class SearchStats:
    shapes_considered: int
    candidates_evaluated: int
    predictions: int
    rejected: int
    # Shapes and P/D pairs skipped because a bound proved they cannot beat what was already found.
    pruned: int = 0
    # Shapes and P/D pairs never evaluated because the prediction budget ran out (normally 0).
    unexplored: int = 0


@dataclass(frozen=True)
class Plan:
    chosen: Evaluated
    runner_ups: tuple[RunnerUp, ...]
    frontier: tuple[FrontierPoint, ...]
    curves: tuple[TechniqueCurve, ...]
    technique_shifts: tuple[TechniqueShift, ...]
    rejections: tuple[RejectionSummary, ...]
    explanation: tuple[str, ...]
    stats: SearchStats


class InfeasibleReason(StrEnum):
    NO_LEGAL_CONFIGURATION = "no-legal-configuration"
    BELOW_PHYSICAL_FLOOR = "below-physical-floor"
    SLO_UNREACHABLE = "slo-unreachable"
    OVER_BUDGET = "over-budget"
    CONTEXT_BEYOND_MODEL = "context-beyond-model"


class SuggestionKind(StrEnum):
    RELAX_SLO = "relax-slo"
    MORE_GPUS = "more-gpus"
    ALLOW_FORMAT = "allow-format"
    ALLOW_TECHNIQUE = "allow-technique"
    RAISE_QUALITY_BUDGET = "raise-quality-budget"
    SHORTEN_REQUESTS = "shorten-requests"


@dataclass(frozen=True)
class Suggestion:
    kind: SuggestionKind
    text: str


@dataclass(frozen=True)
class Infeasible:
    reason: InfeasibleReason
    summary: str
    # The candidate closest to meeting every SLO within budget, if any candidate could be predicted.
    nearest: Evaluated | None
    suggestions: tuple[Suggestion, ...]
    frontier: tuple[FrontierPoint, ...]
    curves: tuple[TechniqueCurve, ...]
    technique_shifts: tuple[TechniqueShift, ...]
    rejections: tuple[RejectionSummary, ...]
    explanation: tuple[str, ...]
    stats: SearchStats
