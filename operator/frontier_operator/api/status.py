"""`FrontierTarget.status`: what the operator decided, why, and what it measured.

Follows the Kubernetes API conventions: `observedGeneration`, a list of conditions whose
`lastTransitionTime` changes only when their status flips, CamelCase reasons. Numbers are plain
(milliseconds, dollars); `summary` holds the short strings the printer columns show.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field

from frontier_operator.api.base import ApiModel
from frontier_operator.api.sweep import SweepStatus

MAX_LIST = 20


class ConditionType(StrEnum):
    READY = "Ready"
    PLAN_FEASIBLE = "PlanFeasible"
    SLO_MET = "SLOMet"
    PROGRESSING = "Progressing"
    METRICS_AVAILABLE = "MetricsAvailable"
    MODEL_DRIFT = "ModelDrift"
    DEGRADED = "Degraded"
    # spec.serving.traffic.splitting: http-route only.
    ROUTE_ACCEPTED = "RouteAccepted"


class ConditionStatus(StrEnum):
    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


class Condition(ApiModel):
    """One aspect of the target's state, in the shape of metav1.Condition."""

    type: ConditionType
    """Ready, PlanFeasible, SLOMet, Progressing, MetricsAvailable, ModelDrift, Degraded, or (with http-route
    splitting) RouteAccepted."""
    status: ConditionStatus
    """True, False or Unknown."""
    reason: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")]
    """One CamelCase word a program can switch on."""
    message: Annotated[str, Field(max_length=32768)] = ""
    """Human-readable details."""
    last_transition_time: str
    """When the status last changed (RFC 3339)."""
    observed_generation: Annotated[int | None, Field(ge=0)] = None
    """The spec generation this condition was computed from."""


class Summary(ApiModel):
    """Short strings for `kubectl get ft`."""

    slo_met: str | None = None
    """True / False / Unknown, as the SLOMet condition."""
    ttft: str | None = None
    """Observed (or predicted) TTFT against its bound, e.g. `1.2s/2s p99`."""
    tpot: str | None = None
    """Observed (or predicted) TPOT against its bound, e.g. `17ms/20ms p50`."""
    cost_per_mtok: str | None = None
    """Dollars per million tokens of the applied configuration, e.g. `$0.42`."""
    config: str | None = None
    """The applied configuration in a few words, e.g. `fp8 TP8 x4 +MTP`."""
    gpus: Annotated[int | None, Field(ge=0)] = None
    """GPUs the applied configuration uses."""
    mode: str | None = None
    """Tuning mode in force."""


class PercentilesMs(ApiModel):
    p50: float | None = None
    """Median, ms."""
    p90: float | None = None
    """90th percentile, ms."""
    p95: float | None = None
    """95th percentile, ms."""
    p99: float | None = None
    """99th percentile, ms."""


class SpeculativeStatus(ApiModel):
    algorithm: str
    """EAGLE3 or NEXTN (MTP)."""
    num_steps: int
    """Draft steps per verify."""
    num_draft_tokens: int
    """Draft tokens per verify."""


class RoleStatus(ApiModel):
    """One role of the configuration: unified, or prefill and decode."""

    role: str
    """unified, prefill or decode."""
    replicas: int
    """Server instances of this role."""
    gpus_per_replica: int
    """GPUs of one instance (tp × pp)."""
    nodes_per_replica: int
    """Nodes one instance spans."""
    tp: int
    """Tensor parallelism."""
    pp: int = 1
    """Pipeline parallelism."""
    attention_dp: int = 1
    """Attention data parallelism inside the TP group."""
    attention_cp: int = 1
    """Prefill context parallelism inside the TP group (prefill workers only)."""
    ep: int = 1
    """Expert parallelism."""
    moe_a2a_backend: str = "none"
    """MoE all-to-all backend (none or deepep)."""
    weight_format: str
    """bf16, fp8, fp8-block, mxfp4, nvfp4 or w4a16."""
    kv_cache_dtype: str
    """KV-cache dtype."""
    max_running_requests: int
    """Batch cap per instance (--max-running-requests)."""
    chunked_prefill_size: int
    """Chunked-prefill size in tokens."""
    speculative: SpeculativeStatus | None = None
    """Speculative decoding, if on."""


class ConfigStatus(ApiModel):
    pool: str
    """GPU pool the configuration runs on."""
    gpu: str
    """GPU type."""
    disaggregated: bool
    """Prefill and decode on separate workers."""
    total_gpus: int
    """GPUs in use, all roles and replicas."""
    summary: str
    """The configuration in a few words."""
    roles: Annotated[list[RoleStatus], Field(max_length=2)]
    """Per-role settings."""


class SloCheck(ApiModel):
    metric: str
    """ttft, tpot, itl or e2e."""
    percentile: int
    """50, 90, 95 or 99."""
    limit_ms: float
    """The bound from the spec, ms."""
    value_ms: float
    """Predicted or observed value, ms."""
    headroom_percent: float
    """How far below the bound, % of the bound (negative: violated)."""


class PlanStatus(ApiModel):
    """The configuration the planner chose and what it predicts."""

    revision: str
    """Hash of the engine configuration; also the frontier.dev/revision label."""
    config: ConfigStatus
    """The chosen configuration."""
    predicted_ttft_ms: PercentilesMs
    """Predicted time to first token."""
    predicted_tpot_ms: PercentilesMs
    """Predicted time per output token."""
    cost_per_mtok: float
    """Predicted dollars per million tokens (input and output)."""
    output_tokens_per_second_per_gpu: float
    """Predicted output throughput per GPU."""
    max_request_rate: float
    """Request rate the fleet sustains before queueing takes off, per second."""
    slo: Annotated[list[SloCheck], Field(max_length=16)] = []
    """Each SLO bound with its predicted value and headroom."""
    reasons: Annotated[list[str], Field(max_length=MAX_LIST)] = []
    """Why this configuration: the deciding facts, in sentences."""


class FrontierPoint(ApiModel):
    summary: str
    """Configuration in a few words."""
    cost_per_mtok: float
    """Predicted dollars per million tokens."""
    output_tokens_per_second_per_user: float
    """Predicted per-user decode speed."""
    output_tokens_per_second_per_gpu: float
    """Predicted output throughput per GPU."""
    gpus: int
    """GPUs it uses."""
    meets_slo: bool
    """Whether it meets every SLO bound with the safety margin."""
    delta_cost_percent: float | None = None
    """Cost relative to the chosen configuration, %."""


class Rejection(ApiModel):
    alternative: str
    """The alternative, in a few words."""
    reason: str
    """Why it lost or was not allowed."""


class TechniqueShift(ApiModel):
    technique: str
    """quantization, speculative-decoding, disaggregation or wide-ep."""
    cost_per_mtok_at_slo: float | None = None
    """Best $/Mtok meeting the SLO with the technique added to the baseline (empty: none meets it)."""
    shift_percent: float | None = None
    """Cost change against the baseline frontier at the SLO, % (negative: cheaper)."""
    note: str = ""
    """What the technique did for this traffic."""


class Infeasibility(ApiModel):
    nearest: str
    """The frontier point closest to meeting the SLO."""
    suggestions: Annotated[list[str], Field(max_length=10)] = []
    """What would make the target feasible."""


class ObservedStatus(ApiModel):
    """Metrics measured over the last window."""

    window_start: str
    """Start of the window (RFC 3339)."""
    window_end: str
    """End of the window (RFC 3339)."""
    ttft_ms: PercentilesMs = PercentilesMs()
    """Observed time to first token."""
    tpot_ms: PercentilesMs = PercentilesMs()
    """Observed time per output token."""
    request_rate: float | None = None
    """Requests per second."""
    input_tokens_mean: float | None = None
    """Mean prompt length."""
    output_tokens_mean: float | None = None
    """Mean output length."""
    cache_hit_rate: float | None = None
    """Prefix-cache hit rate, 0–1."""
    samples: int = 0
    """Requests the percentiles rest on."""


class CalibrationStatus(ApiModel):
    ttft_factor: float = 1.0
    """Multiplier learned on predicted TTFT."""
    tpot_factor: float = 1.0
    """Multiplier learned on predicted TPOT."""
    ttft_tail_factor: float = 1.0
    """Further multiplier on predicted p99 TTFT: where 19 windows in 20 keep it, over the corrected model's."""
    tpot_tail_factor: float = 1.0
    """Further multiplier on predicted p99 TPOT (and ITL), likewise."""
    ttft_error_percent: float | None = None
    """Last prediction error of TTFT, %."""
    tpot_error_percent: float | None = None
    """Last prediction error of TPOT, %."""
    confidence: float = 0.0
    """0–1; grows with evidence and shrinks the planner's safety margin."""
    samples: int = 0
    """Observation windows folded in."""
    slo_windows: int = 0
    """Back-to-back metric windows of the fleet in force over the last 6 h (the SLO's error budget)."""
    slo_windows_missed: int = 0
    """Of those, windows that missed an SLO."""
    slo_windows_allowed: int = 0
    """Misses the goal (every SLO in 95 % of windows) allows before a violation the model does not confirm is
    acted on."""


class Recommendation(ApiModel):
    action: str
    """The proposed action."""
    reason: str
    """Why."""
    proposed_at: str
    """When (RFC 3339)."""
    manifest_diff: Annotated[str, Field(max_length=65536)] = ""
    """Unified diff of the objects that would change."""


class CanaryStatus(ApiModel):
    revision: str
    """Revision under test."""
    summary: str
    """Its configuration in a few words."""
    traffic_share_percent: float
    """Share of traffic it receives, %."""
    started_at: str
    """When it started (RFC 3339)."""


class RouteBackend(ApiModel):
    """One revision behind the target's HTTPRoute (spec.serving.traffic.splitting: http-route)."""

    revision: str
    """The revision whose entry Service receives this share."""
    weight_per_mille: Annotated[int, Field(ge=0, le=1000)]
    """Its weight: the share of the route's traffic, per mille."""


class TuningStatus(ApiModel):
    """What the closed loop runs and what it decided last."""

    applied: ConfigStatus | None = None
    """The configuration serving stable traffic: the plan's until tuning changes it (batch cap, replicas, P:D,
    a promoted canary)."""
    last_evaluated_at: str | None = None
    """When metrics were last read and a decision taken (RFC 3339)."""
    last_decision: str | None = None
    """The last decision, e.g. `scale decode replicas 2 → 3` or `no action (Cooldown)`."""
    last_decision_reason: Annotated[str | None, Field(max_length=4096)] = None
    """Why, in a sentence."""


class HistoryEntry(ApiModel):
    time: str
    """When (RFC 3339)."""
    action: str
    """What changed."""
    reason: str
    """Why."""
    revision: str | None = None
    """Revision in force afterwards."""


class FrontierTargetStatus(ApiModel):
    observed_generation: Annotated[int | None, Field(ge=0)] = None
    """The spec generation the status describes."""
    conditions: Annotated[list[Condition], Field(max_length=16)] = []
    """Ready, PlanFeasible, SLOMet, Progressing, MetricsAvailable, ModelDrift, Degraded."""
    summary: Summary = Summary()
    """Short strings for kubectl get."""
    plan: PlanStatus | None = None
    """The chosen configuration and its predictions."""
    frontier: Annotated[list[FrontierPoint], Field(max_length=MAX_LIST)] = []
    """Top points of the predicted frontier (runner-ups)."""
    rejected: Annotated[list[Rejection], Field(max_length=MAX_LIST)] = []
    """Main reasons alternatives were rejected."""
    techniques: Annotated[list[TechniqueShift], Field(max_length=8)] = []
    """How far each technique moves the frontier for this traffic."""
    infeasible: Infeasibility | None = None
    """Set when no configuration meets the SLO."""
    observed: ObservedStatus | None = None
    """Measured metrics of the last window."""
    calibration: CalibrationStatus = CalibrationStatus()
    """State of the model's calibration against observations."""
    applied_revision: str | None = None
    """Revision serving stable traffic."""
    canary: CanaryStatus | None = None
    """Revision under canary, if any."""
    route: Annotated[list[RouteBackend], Field(max_length=2)] = []
    """With http-route splitting, where the target's HTTPRoute sends user traffic: the serving revision, and a
    ready canary at its share."""
    recommendation: Recommendation | None = None
    """Pending proposal (recommend mode)."""
    tuning: TuningStatus = TuningStatus()
    """The closed loop: the configuration it runs and its last decision."""
    history: Annotated[list[HistoryEntry], Field(max_length=MAX_LIST)] = []
    """Recent changes with reasons, newest last."""
    sweep: SweepStatus = SweepStatus()
    """The last benchmark sweep: measured against predicted points and GPU time used."""
