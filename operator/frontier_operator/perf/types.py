"""The typed vocabulary shared by the performance model, the planner and the renderer.

A `ServingConfig` is one point of the search space: everything SGLang needs to know to launch the
fleet (per role: GPU, formats, parallelism, batch cap, speculation) plus replica counts. The planner
returns one inside its plan; the renderer turns it into argv and Kubernetes objects.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    UNIFIED = "unified"
    PREFILL = "prefill"
    DECODE = "decode"


class MoeA2ABackend(StrEnum):
    NONE = "none"
    DEEPEP = "deepep"


class SpeculativeAlgorithm(StrEnum):
    # SGLang spells MTP (draft layers shipped inside the checkpoint) as NEXTN; "MTP" is not a valid name.
    EAGLE3 = "EAGLE3"
    NEXTN = "NEXTN"


@dataclass(frozen=True)
class Speculative:
    algorithm: SpeculativeAlgorithm
    num_steps: int
    eagle_topk: int
    num_draft_tokens: int
    # Separate draft checkpoint (EAGLE-3); None when the draft layers ship in the target checkpoint (NEXTN).
    draft_model: str | None = None


@dataclass(frozen=True)
class WorkerConfig:
    """One SGLang server instance (one replica of one role) and the GPUs it spans."""

    gpu: str
    gpus_per_node: int
    weight_format: str
    kv_cache_format: str
    tp: int
    max_running_requests: int
    chunked_prefill_size: int
    pp: int = 1
    attention_dp: int = 1
    # Prefill context parallelism (`--attn-cp-size N --enable-prefill-cp`): the N ranks of an attention group
    # split a prompt's tokens instead of its heads. Prefill workers of DeepSeek-Sparse-Attention models only
    # (the planner's legality rules say why).
    attention_cp: int = 1
    ep: int = 1
    moe_a2a_backend: MoeA2ABackend = MoeA2ABackend.NONE
    speculative: Speculative | None = None
    # Set only when the planner's memory model wants something other than SGLang's own default.
    mem_fraction_static: float | None = None

    @property
    def gpus(self) -> int:
        return self.tp * self.pp

    @property
    def nnodes(self) -> int:
        return max(1, math.ceil(self.gpus / self.gpus_per_node))


@dataclass(frozen=True)
class RoleDeployment:
    role: Role
    worker: WorkerConfig
    replicas: int

    @property
    def gpus(self) -> int:
        return self.worker.gpus * self.replicas


@dataclass(frozen=True)
class ServingConfig:
    """A whole fleet: one unified role (aggregated serving) or a prefill and a decode role (P/D)."""

    model: str
    roles: tuple[RoleDeployment, ...]
    # KV transfer between prefill and decode; None when aggregated.
    transfer_backend: str | None = None

    @property
    def disaggregated(self) -> bool:
        return any(r.role is Role.PREFILL for r in self.roles)

    @property
    def total_gpus(self) -> int:
        return sum(r.gpus for r in self.roles)

    def role(self, role: Role) -> RoleDeployment | None:
        return next((r for r in self.roles if r.role is role), None)


@dataclass(frozen=True)
class LengthDistribution:
    """Token lengths of requests: mean, coefficient of variation (stddev / mean) and hard maximum."""

    mean: float
    cv: float = 0.0
    max: int | None = None


@dataclass(frozen=True)
class Workload:
    request_rate_per_s: float
    input_tokens: LengthDistribution
    output_tokens: LengthDistribution
    prefix_cache_hit_rate: float = 0.0
    # Free-text hint ("agentic-coding", "chat", "batch", ...): shapes speculative acceptance and burstiness.
    kind: str = "chat"
    # Coefficient of variation of inter-arrival times: 1.0 is Poisson, larger is burstier.
    arrival_cv: float = 1.0


@dataclass(frozen=True)
class Percentiles:
    """Latency percentiles in seconds."""

    p50: float
    p90: float
    p95: float
    p99: float

    def at(self, percentile: int) -> float:
        return {50: self.p50, 90: self.p90, 95: self.p95, 99: self.p99}[percentile]


@dataclass(frozen=True)
class MemoryFit:
    """Per-GPU memory budget of one worker, GB."""

    gpu_memory_gb: float
    weights_gb: float
    reserved_gb: float
    kv_pool_gb: float
    kv_tokens: int
    # Largest number of concurrent requests whose KV fits at the workload's context length.
    max_batch_at_context: int

    @property
    def fits(self) -> bool:
        return self.kv_pool_gb > 0 and self.max_batch_at_context >= 1


@dataclass(frozen=True)
class Prediction:
    ttft: Percentiles
    tpot: Percentiles
    itl: Percentiles
    e2e: Percentiles
    # Mean in-flight requests per decode worker at the workload's rate.
    mean_batch: float
    # Highest request rate the whole fleet sustains before queues grow without bound.
    max_request_rate_per_s: float
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s_per_user: float
    cost_per_mtok: float
    memory: MemoryFit
    # Relative one-sigma error of the latency predictions, from the calibration residuals of this GPU
    # family (the larger of TTFT's and TPOT's); the planner's safety margin grows with it.
    uncertainty: float
    # The same per metric (log-error one-sigma of TTFT and of TPOT, measured leave-one-model-out). None: use
    # `uncertainty`.
    ttft_uncertainty: float | None = None
    tpot_uncertainty: float | None = None
    # 90th percentile of log(measured / predicted) per metric on held-out rows of this GPU family: the
    # under-prediction nine in ten predictions stay within. The planner's margin for each SLO covers its
    # metric's. None: not measured (the margin then assumes an unbiased normal error of the sigma).
    ttft_underprediction_q90: float | None = None
    tpot_underprediction_q90: float | None = None
