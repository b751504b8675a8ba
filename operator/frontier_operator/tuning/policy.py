"""`TuningPolicy`: the safety rules of the closed loop, from `spec.tuning` plus the fixed rules of the operator.

The spec sets what a platform team should decide (mode, interval, window, cooldown, change budget, canary
share and duration, promotion margin, exploration, pause). The rest are engineering constants with a stated
reason; they live here rather than in the CRD so that every target behaves alike.
"""

from __future__ import annotations

from dataclasses import dataclass

from frontier_operator.api.spec import TuningMode, TuningSpec

HOUR_S = 3600.0

# A window whose end is older than this many intervals was not refreshed by the last tick: stale.
STALE_AFTER_INTERVALS = 2.0
# Requests completed in the window below which percentiles are not trusted: a p99 of fewer than 100
# requests is the single slowest one.
MIN_SAMPLES = 100
# Relative band around each SLO limit inside which nothing is loosened: act up on a violation, but act
# down (fewer replicas, cheaper configuration) only when the result is predicted at least this far below.
HYSTERESIS = 0.10
# Spare capacity a fleet needs beyond the mean request rate: one window's rate fluctuates by a few
# percent (Poisson: 1/√(rate × window), 3 % at 4 requests/s over 5 min), and queues grow without bound
# whenever it exceeds capacity, which latency percentiles predicted at the mean rate do not show.
CAPACITY_HEADROOM = 0.05
# Replicas one step may add or remove per role, and the factor by which one step may move the batch cap.
MAX_REPLICA_STEP = 2
MAX_BATCH_CAP_FACTOR = 2.0
# No replica removal within this long after an addition for the same role (like HPA's scale-down
# stabilisation window): a scale-up followed by a scale-down within half an hour is flapping.
SCALE_DOWN_STABILIZATION_S = 1800.0
# A replica count that violated the SLO is not returned to for this long, unless the traffic has since
# fallen by the hysteresis band: under noise, the step back down is the first half of a flap.
REVERSAL_GUARD_S = 6 * 3600.0
# Large models take 10–30 min to load and capture graphs (sglang-0.5.23.md §8.5): a canary not ready
# after this long is rolled back.
CANARY_STARTUP_DEADLINE_S = 2700.0
# A ready canary that still has too few requests after this many minimum durations is rolled back.
CANARY_DATA_DEADLINE_FACTOR = 2.0
# Exploration: at most one neighbour canary per this long, optimism of one sigma of the neighbour's
# prediction error, and a rolled-back configuration is not tried again for a day.
EXPLORATION_INTERVAL_S = 6 * HOUR_S
EXPLORATION_OPTIMISM = 1.0
RETRY_REJECTED_AFTER_S = 24 * HOUR_S
# ... save one whose full fleet was projected to fail at the traffic of its verdict: that fleet is tried again
# once the traffic it would be judged on is this fraction of that rate or less (a quarter lighter). Steady
# traffic never falls that far; a diurnal trough does, where the fleet the peak rejected is the cheapest.
RETRY_REJECTED_BELOW = 0.75
# A canary's share behind a weighted HTTPRoute when spec.tuning.canary.trafficShare is not set: enough requests
# to judge at a few requests/s (a tenth of 4/s is 120 per 5-min window), few users exposed. Under that rate the
# share grows to what a verdict needs (`tuning.canary._routed_share`).
ROUTED_CANARY_SHARE = 0.10
# The most traffic an exploration canary takes when spec.tuning.canary.trafficShare is not set. It runs a
# fleet the model does not believe in (that is why it is exploration); through a Service that gives any canary
# half of the traffic, half of the users would be its test. In the closed-loop bench's runs through the
# Service none of the exploration canaries was promoted, and at least three breached the SLO while serving
# that half (DeepSeek-R1 seed 2, GLM-5 seeds 1 and 2).
EXPLORATION_MAX_SHARE = 0.25
# The observed workload triggers a re-plan when it departs from the planned one by this much
# (rate and mean lengths, relative; prefix-cache hit rate, absolute).
WORKLOAD_SHIFT = 0.25
CACHE_HIT_SHIFT = 0.15


@dataclass(frozen=True)
class TuningPolicy:
    mode: TuningMode = TuningMode.RECOMMEND
    interval_s: float = 60.0
    window_s: float = 300.0
    cooldown_s: float = 600.0
    max_changes_per_hour: int = 4
    # The share spec.tuning.canary.trafficShare asks for (None: not set; see `tuning.canary._routed_share`).
    canary_share: float | None = None
    canary_min_duration_s: float = 900.0
    promote_margin: float = 0.03
    exploration: bool = True
    paused: bool = False
    min_samples: int = MIN_SAMPLES
    hysteresis: float = HYSTERESIS
    capacity_headroom: float = CAPACITY_HEADROOM
    max_replica_step: int = MAX_REPLICA_STEP
    max_batch_cap_factor: float = MAX_BATCH_CAP_FACTOR
    scale_down_stabilization_s: float = SCALE_DOWN_STABILIZATION_S
    reversal_guard_s: float = REVERSAL_GUARD_S
    canary_startup_deadline_s: float = CANARY_STARTUP_DEADLINE_S
    exploration_interval_s: float = EXPLORATION_INTERVAL_S
    exploration_optimism: float = EXPLORATION_OPTIMISM
    retry_rejected_after_s: float = RETRY_REJECTED_AFTER_S
    retry_rejected_below: float = RETRY_REJECTED_BELOW
    workload_shift: float = WORKLOAD_SHIFT
    cache_hit_shift: float = CACHE_HIT_SHIFT

    @property
    def max_staleness_s(self) -> float:
        return STALE_AFTER_INTERVALS * self.interval_s

    @property
    def canary_data_deadline_s(self) -> float:
        return CANARY_DATA_DEADLINE_FACTOR * self.canary_min_duration_s

    @property
    def exploration_share(self) -> float:
        """The most an exploration canary may take: the spec's share, else a quarter."""
        return self.canary_share if self.canary_share is not None else EXPLORATION_MAX_SHARE

    @property
    def step_aim(self) -> float:
        """How far under every limit a step that adds capacity aims (relative): half the hysteresis band, while a
        removal must land the full band under, so a step and its reverse are never both attractive."""
        return self.hysteresis / 2


def policy_from_spec(spec: TuningSpec, *, paused_annotation: bool = False) -> TuningPolicy:
    """The policy of a target; the `frontier.dev/paused` annotation pauses it like `spec.tuning.paused`."""
    return TuningPolicy(
        mode=spec.mode,
        interval_s=float(spec.interval),
        window_s=float(spec.window),
        cooldown_s=float(spec.cooldown),
        max_changes_per_hour=spec.max_changes_per_hour,
        canary_share=float(spec.canary.traffic_share) if spec.canary.traffic_share is not None else None,
        canary_min_duration_s=float(spec.canary.min_duration),
        promote_margin=float(spec.canary.promote_margin),
        exploration=spec.exploration,
        paused=spec.paused or paused_annotation,
    )
