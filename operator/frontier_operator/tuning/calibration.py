"""Calibration: how far this cluster's real latencies sit from the performance model, learnt per role.

For each role and latency metric (TTFT, TPOT) the state holds a log-correction `c` — the model's
prediction times `exp(c)` is the best guess of what the fleet will show — with its variance. Every window
with enough requests is one noisy measurement `y = log(observed / predicted)` (prediction at the
*observed* workload, so a traffic change is not mistaken for a model error), averaged over p50 and p90.
A scalar Kalman filter combines them:

* the prior is `c = 0` with the model's own relative error as its standard deviation;
* the measurement noise is run-to-run jitter, plus the sampling error of a percentile of `n` requests
  (shrinks as `1/√n`), plus the resolution of SGLang's histogram buckets at that latency (a quantile
  interpolated inside a wide bucket cannot be trusted to better than the bucket's width);
* a small process noise per window lets the correction follow a slowly changing truth (engine upgrade,
  thermal throttling, noisy neighbours) instead of freezing.

Confidence (0–1) is how much the standard deviation has shrunk from the prior; the planner shrinks its
safety margin with it.

**Tail.** SLOs bound p99, which the body correction (p50, p90) does not reach: bursts queue requests in ways
the model's queueing does not describe. Each metric also keeps the p99's departure from the body-corrected
model, averaged over windows (`with_tail`); corrected predictions multiply p99 by it (p95 in part).

**Drift.** The plan in force was made with some correction; when the observation departs from what that
plan assumed by more than a threshold — and by more than twice the measurement noise — for N windows in
a row, the state reports `ModelDrift` and the decision layer re-plans with the corrected model. `rebase`
records the correction the new plan uses, which clears the drift.

**Capacity.** Latency says nothing about a role that serves at its limit: its queue, not its service, sets
TTFT, and the window is slower than the model by far more than `MAX_PLAUSIBLE_SLOWDOWN`. But then the role's completion
rate *is* its capacity. For each role and parallel layout (`CapacityEstimate`) the state holds a log
service-time factor `k` — the model's capacity for that role divided by `exp(k)` is what it really serves —
learnt from two kinds of window: one where the role is saturated (more requests queued than running: the rate
it served is its capacity; Kalman-filtered like the latencies, from a wide prior), and one where it served
more than the corrected capacity allows (the rate it served is a floor of its capacity, so a `k` above it is
lowered to it). Any other window says nothing about capacity, nor does one in which pods of a retired revision
still drain their queue. A capacity factor is specific to the parallel layout it was measured on
(`structure.layout_key`, whatever the formats and caps): the part of a model error every configuration shares
(kernel speed) is what the latency corrections carry, while a layout that serves several times less than
modelled does so by how it schedules work (Kimi-K2.5's attention-DP prefill served 5.4× under the model on a
twin that let one rank prefill at a time, while a TP8 prefill of the same weights served more than modelled).
A factor that moved past the drift threshold (and twice its own standard deviation) from the one the plan in
force was made with is a `CapacityDrift`: a saturated window is not noise (the queue it shows took minutes to
build), so one window suffices.

**Other configurations.** A model's error is partly shared by every configuration on this cluster
(kernels, framework overhead) and partly specific to one layout. With the two parts of equal prior
variance, observing one configuration moves the others by half the correction (`SHARED_ERROR_SHARE`), and
their uncertainty shrinks less (see `transferred`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from statistics import NormalDist

from frontier_operator.api.units import format_duration
from frontier_operator.perf.types import Percentiles, Prediction, Role, ServingConfig
from frontier_operator.planner.types import SloMetric
from frontier_operator.tuning.budget import WINDOW_GOAL, ErrorBudget
from frontier_operator.tuning.observation import Observation, Variant
from frontier_operator.tuning.slo import latency_group
from frontier_operator.tuning.structure import latency_role, layout_key, structure_key, worker_key
from frontier_operator.tuning.workload import WorkloadEstimate, queue_free, role_saturated, update_workload

# SGLang 0.5.23's default histogram buckets, seconds (sglang-0.5.23.md §7.3).
TTFT_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS: tuple[float, ...] = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8,
)  # fmt: skip

# Percentiles each window's measurement averages: robust with a few hundred requests, unlike p99.
CALIBRATION_PERCENTILES = (50, 90)
# Share of a model's log error common to every configuration of the cluster (equal prior variances of the
# shared and the configuration-specific parts).
SHARED_ERROR_SHARE = 0.5
# A window slower than the model by more than this factor, with requests waiting in its queues, is not a model
# error but a fleet in overload (queues growing without bound) or an outage: it is left to the SLO rules and
# teaches the calibration nothing. With its queues empty (`workload.queue_free`) no backlog explains the latency:
# however slow, it is the engine's own and is learnt (the Qwen3-32B H100 table serves a first token 4.6-12x
# later than the model with nothing queued; refused as overload, every window of six hours left its TTFT
# correction at 1, and the loop removed the replicas that kept p99 TTFT under its limit, projecting 2.5 s for
# what then measured 4.7-5.0 s).
MAX_PLAUSIBLE_SLOWDOWN = 3.0
# Faster than the model, no queue distorts a window: the model's fixed per-step costs are what a faster kernel or
# engine removes (measured low-batch decode runs 3-27x over the bandwidth floor, published-figures.md §7c), so a
# fleet several times faster than modelled is a model error to learn. Only a window faster by more than this is
# taken for a broken measurement. (A twin decoding 2.5x faster than the model shows windows 3.1-3.9x under
# it at the model's batch; at 3x either way the canary that should have replaced it lost its own evidence.)
MAX_PLAUSIBLE_SPEEDUP = 10.0
# The tail. The body correction is learnt at p50 and p90 (robust), but SLOs bound p99, where the model's queueing
# misses what bursts do: GLM-5's prefill showed a p99 TTFT of 2.0-2.2 s where its corrected model said 1.3-1.7 s,
# so the model "predicted the fleet under the limit" for windows that kept missing. The p99's own departure from
# the body-corrected model is averaged over windows (a p99 of one window is too noisy to filter on its own noise):
# requests a window needs for its p99 to count (two beyond it), the half-life of the average, and the prior's
# weight in windows that shrinks a young average towards the model.
TAIL_MIN_SAMPLES = 200
TAIL_HALF_LIFE_WINDOWS = 6.0
TAIL_PRIOR_WINDOWS = 1.0
# A p99 more than this many times under the body-corrected model is not a burst the model overrates: the model is
# in its own queueing knee, at a rate within a few percent of a capacity it underestimates, where its p99 swings
# with the window's arrivals and the fleet's does not (Llama-70B on two TP4 replicas decoding 2.5x faster than
# modelled: 24-27 requests/s per window, model p99 TTFT 0.44-3.3 s, measured 0.37 s throughout). Such windows made
# the tail's spread, not the fleet's: its factor at the goal reached 2.75, and a canary whose full fleet serves a
# p99 TTFT of 0.53 s was projected at 1.38 s and rolled back against a 1.5 s limit. They leave the tail as it was.
MAX_TAIL_SPEEDUP = 3.0
# The tail is judged where the goal is: the p99 that all but 1 − WINDOW_GOAL of windows keep (normal score 1.645).
_GOAL_SCORE = NormalDist().inv_cdf(WINDOW_GOAL)
# Prior standard deviation (log space) when the prediction reports no uncertainty of its own.
DEFAULT_PRIOR_SIGMA = 0.25
# Prior standard deviation (log space) of a role's capacity factor: a factor e either way at one sigma. A layout
# can serve several times less than modelled (scheduling the model does not describe: Kimi-K2.5's attention-DP
# prefill served 5.4× less on a twin that let one rank prefill at a time), and one saturated window — a count of
# thousands of completions — must be able to say so; the latencies' prior (the model's ±10–25 %) would hold it to
# a third.
CAPACITY_PRIOR_SIGMA = 1.0


class LatencyMetric(StrEnum):
    TTFT = "ttft"
    TPOT = "tpot"


@dataclass(frozen=True)
class CalibrationSettings:
    # Requests a window needs before it counts as a measurement.
    min_samples: int = 50
    # Log-space standard deviation by which the true correction may wander per window.
    process_noise: float = 0.01
    # Window-to-window jitter of real serving at a fixed load (relative).
    jitter: float = 0.03
    # Relative standard error of the median times √n: for log-normal latencies with σ ≈ 0.5 it is
    # σ·√(p(1−p))/φ(z) ≈ 0.63.
    quantile_spread: float = 0.63
    # Drift: observed / planned departs by more than this, continuously for this many window lengths.
    drift_threshold: float = 0.20
    drift_windows: int = 3


@dataclass(frozen=True)
class Estimate:
    """The log-correction of one role's metric, its variance and the evidence behind it."""

    role: Role
    metric: LatencyMetric
    log_factor: float
    variance: float
    prior_variance: float
    # The correction the plan in force was made with (drift is measured against it).
    planned_log_factor: float
    samples: int = 0
    windows: int = 0
    # Start of the first window of the current uninterrupted departure from the plan (None: no departure).
    drifting_since: float | None = None
    # Last window: observed and raw-model values at the calibration percentiles' geometric mean.
    last_observed_s: float | None = None
    last_predicted_s: float | None = None
    # The tail (`with_tail`): the mean and variance over windows, weighted by freshness and decayed, of
    # log(observed p99 ÷ the body-corrected p99), and the windows' weight they rest on.
    tail_mean: float = 0.0
    tail_variance: float = 0.0
    tail_windows: float = 0.0

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)

    @property
    def tail_factor(self) -> float:
        """The p99 of a window at the goal's share of windows (`budget.WINDOW_GOAL`), over the body-corrected
        model's p99: the mean departure plus its spread across windows, both shrunk towards the model by one
        window's weight of prior."""
        spread = math.sqrt(self._tail_shrink * self.tail_variance)
        return self.typical_tail_factor * math.exp(_GOAL_SCORE * spread)

    @property
    def typical_tail_factor(self) -> float:
        """The p99 of a typical window over the body-corrected model's (the mean departure alone, shrunk)."""
        return math.exp(self._tail_shrink * self.tail_mean)

    @property
    def _tail_shrink(self) -> float:
        return self.tail_windows / (self.tail_windows + TAIL_PRIOR_WINDOWS)

    @property
    def sigma(self) -> float:
        return math.sqrt(self.variance)

    @property
    def confidence(self) -> float:
        if self.prior_variance <= 0:
            return 0.0
        return min(1.0, max(0.0, 1.0 - math.sqrt(self.variance / self.prior_variance)))

    @property
    def error(self) -> float | None:
        """Last window's relative error of the raw model: observed / predicted − 1."""
        if self.last_observed_s is None or not self.last_predicted_s:
            return None
        return self.last_observed_s / self.last_predicted_s - 1.0


@dataclass(frozen=True)
class ModelDrift:
    """Observed latency departs from what the plan in force assumed, without a break for `duration_s`."""

    role: Role
    metric: LatencyMetric
    duration_s: float
    observed_s: float
    planned_s: float
    corrected_factor: float

    @property
    def error(self) -> float:
        return self.observed_s / self.planned_s - 1.0

    @property
    def message(self) -> str:
        return (
            f"{self.role.value} {self.metric.value.upper()} observed {self.observed_s * 1e3:.4g} ms vs "
            f"{self.planned_s * 1e3:.4g} ms planned ({self.error:+.0%}) for {format_duration(self.duration_s)}; "
            f"corrected model factor ×{self.corrected_factor:.3g}"
        )


@dataclass(frozen=True)
class CapacityEstimate:
    """The log service-time factor of one role's layout: the model's capacity ÷ exp(`log_factor`) is the real one."""

    role: Role
    # `structure.layout_key` of the workers it was measured on.
    layout: str
    log_factor: float
    variance: float
    prior_variance: float
    # The factor the plan in force was made with (drift is measured against it).
    planned_log_factor: float
    windows: int = 0
    # The last window departed from the plan's factor by more than the drift threshold and its noise.
    drifting: bool = False
    # Last window: the requests per second the role served, and the raw model's capacity for it.
    last_served_per_s: float | None = None
    last_modelled_per_s: float | None = None

    @property
    def factor(self) -> float:
        return math.exp(self.log_factor)


@dataclass(frozen=True)
class CapacityDrift:
    """A role's measured capacity departs from the one the plan in force assumed."""

    role: Role
    layout: str
    served_per_s: float
    planned_per_s: float
    corrected_factor: float

    @property
    def message(self) -> str:
        change = self.served_per_s / self.planned_per_s - 1.0 if self.planned_per_s > 0 else math.inf
        return (
            f"{self.role.value} capacity {self.served_per_s:.3g} requests/s measured vs {self.planned_per_s:.3g} "
            f"planned ({change:+.0%}); corrected service-time factor ×{self.corrected_factor:.3g}"
        )


@dataclass(frozen=True)
class CalibrationState:
    estimates: tuple[Estimate, ...] = ()
    # Capacity (service-time) factors per role and parallel layout, from saturated windows.
    capacities: tuple[CapacityEstimate, ...] = ()
    workload: WorkloadEstimate = field(default_factory=WorkloadEstimate)
    # Structure key (`structure.structure_key`, no pool) of the configuration the estimates were observed
    # on, and the keys of its workers (`structure.worker_key`).
    reference: str | None = None
    reference_workers: frozenset[str] = frozenset()
    updated_at: float | None = None
    # The last window folded in: its end and its length (overlapping windows count only their fresh part).
    last_window_end: float | None = None
    last_window_s: float | None = None
    # Which back-to-back windows of the stable pods met the SLO (`budget`): learnt from the same windows.
    budget: ErrorBudget = field(default_factory=ErrorBudget)
    settings: CalibrationSettings = field(default_factory=CalibrationSettings)

    def estimate(self, role: Role, metric: LatencyMetric) -> Estimate | None:
        return next((e for e in self.estimates if e.role is role and e.metric is metric), None)

    def capacity(self, role: Role, layout: str) -> CapacityEstimate | None:
        return next((c for c in self.capacities if c.role is role and c.layout == layout), None)

    @property
    def capacity_drift(self) -> tuple[CapacityDrift, ...]:
        drifts = []
        for c in self.capacities:
            if not c.drifting or c.last_served_per_s is None or not c.last_modelled_per_s:
                continue
            planned = c.last_modelled_per_s / math.exp(c.planned_log_factor)
            drifts.append(CapacityDrift(c.role, c.layout, c.last_served_per_s, planned, c.factor))
        return tuple(drifts)

    def of_metric(self, metric: LatencyMetric) -> Estimate | None:
        """The estimate of `metric` whatever its role (one per metric is kept for the reference config)."""
        return next((e for e in self.estimates if e.metric is metric), None)

    @property
    def confidence(self) -> float:
        """For the planner: the least confident metric, 0 before any measurement."""
        return min((e.confidence for e in self.estimates), default=0.0)

    @property
    def model_confirmed(self) -> bool:
        """The raw model was right about the fleet in force: every latency metric measured, its last window
        within the drift threshold of the prediction, and none departing from the plan in force."""
        return bool(self.estimates) and all(
            e.drifting_since is None and e.error is not None and abs(e.error) <= self.settings.drift_threshold
            for e in self.estimates
        )

    @property
    def drift(self) -> tuple[ModelDrift, ...]:
        if self.last_window_end is None or not self.last_window_s:
            return ()
        needed = self.settings.drift_windows * self.last_window_s
        drifts = []
        for e in self.estimates:
            if e.drifting_since is None or e.last_observed_s is None or not e.last_predicted_s:
                continue
            duration = self.last_window_end - e.drifting_since
            if duration < needed:
                continue
            planned = e.last_predicted_s * math.exp(e.planned_log_factor)
            drifts.append(ModelDrift(e.role, e.metric, duration, e.last_observed_s, planned, e.factor))
        return tuple(drifts)


# ------------------------------------------------------------------------------------------ measurement


def bucket_resolution(value: float, buckets: tuple[float, ...]) -> float:
    """Relative standard error of a quantile interpolated inside the histogram bucket holding `value`.

    Linear interpolation inside a bucket is off by up to half its width; as a uniform error that is
    width / √12. Beyond the last finite bucket Prometheus can only answer the last bound: error 1.
    """
    if value <= 0:
        return 1.0
    index = bisect.bisect_left(buckets, value)
    if index >= len(buckets):
        return 1.0
    low = buckets[index - 1] if index > 0 else 0.0
    return (buckets[index] - low) / value / math.sqrt(12.0)


@dataclass(frozen=True)
class Measurement:
    log_ratio: float
    noise_variance: float
    observed_s: float
    predicted_s: float
    samples: int


def measure(
    observed: Percentiles | None,
    predicted: Percentiles,
    samples: int,
    buckets: tuple[float, ...],
    settings: CalibrationSettings,
    *,
    queues_empty: bool = False,
) -> Measurement | None:
    """One window's `log(observed / predicted)` with its noise variance; None without usable data.

    `queues_empty`: nothing waited in the window (`workload.queue_free`), so no slowdown is taken for an overload
    (`_plausible`).
    """
    if observed is None or samples < settings.min_samples:
        return None
    pairs = [(observed.at(p), predicted.at(p)) for p in CALIBRATION_PERCENTILES]
    usable = [(o, m) for o, m in pairs if o > 0 and math.isfinite(o) and m > 0 and math.isfinite(m)]
    if len(usable) != len(pairs):
        return None
    observed_mean = math.exp(sum(math.log(o) for o, _ in usable) / len(usable))
    predicted_mean = math.exp(sum(math.log(m) for _, m in usable) / len(usable))
    if not _plausible(observed_mean, predicted_mean, queues_empty=queues_empty):
        return None
    # The percentiles' interpolation errors come from different buckets: independent, averaged in log space.
    resolution_variance = sum(bucket_resolution(o, buckets) ** 2 for o, _ in usable) / len(usable) ** 2
    noise = settings.jitter**2 + settings.quantile_spread**2 / samples + resolution_variance
    return Measurement(math.log(observed_mean / predicted_mean), noise, observed_mean, predicted_mean, samples)


def _plausible(
    observed_s: float, modelled_s: float, *, queues_empty: bool, max_speedup: float = MAX_PLAUSIBLE_SPEEDUP
) -> bool:
    """Both latencies positive and finite, the observed one neither faster than the model by more than
    `max_speedup` (a broken measurement's; for a p99, the model's queueing knee: `MAX_TAIL_SPEEDUP`) nor, unless
    the window's queues were empty, an overload's (`MAX_PLAUSIBLE_SLOWDOWN`)."""
    if not (observed_s > 0 and modelled_s > 0 and math.isfinite(observed_s) and math.isfinite(modelled_s)):
        return False
    ratio = observed_s / modelled_s
    return ratio >= 1.0 / max_speedup and (queues_empty or ratio <= MAX_PLAUSIBLE_SLOWDOWN)


# ------------------------------------------------------------------------------------------- filtering


def initial_estimate(role: Role, metric: LatencyMetric, prior_sigma: float) -> Estimate:
    sigma = prior_sigma if prior_sigma > 0 else DEFAULT_PRIOR_SIGMA
    return Estimate(role, metric, 0.0, sigma**2, sigma**2, 0.0)


def transferred(source: Estimate, role: Role, prior_sigma: float) -> Estimate:
    """The prior for another configuration, from what `source` learnt about its own.

    Log error = shared + specific, each of variance u²/2 (u = the model's error). Given the source's
    posterior (c, P), the shared part is ρ·c with variance u²/2 − ρ²(u² − P), ρ = ½; adding the new
    configuration's own specific part gives u² − ρ²(u² − P).
    """
    u2 = (prior_sigma if prior_sigma > 0 else DEFAULT_PRIOR_SIGMA) ** 2
    rho = SHARED_ERROR_SHARE
    variance = u2 - rho**2 * max(0.0, u2 - source.variance)
    mean = rho * source.log_factor
    return Estimate(
        role,
        source.metric,
        mean,
        variance,
        u2,
        mean,
        samples=source.samples,
        windows=source.windows,
        tail_mean=rho * source.tail_mean,
        tail_variance=source.tail_variance,
        tail_windows=source.tail_windows,
    )


def with_tail(
    estimate: Estimate,
    observed: Percentiles | None,
    predicted: Percentiles,
    samples: int,
    fresh_fraction: float,
    *,
    queues_empty: bool = False,
) -> Estimate:
    """Fold one window's p99 into the tail average: log(observed ÷ raw p99 × the body factor just learnt); a p99
    far under that (`MAX_TAIL_SPEEDUP`) or an overload's is left out (`_plausible`)."""
    if observed is None or samples < TAIL_MIN_SAMPLES or fresh_fraction <= 0:
        return estimate
    seen, modelled = observed.p99, predicted.p99 * estimate.factor
    if not _plausible(seen, modelled, queues_empty=queues_empty, max_speedup=MAX_TAIL_SPEEDUP):
        return estimate
    kept = estimate.tail_windows * 0.5 ** (fresh_fraction / TAIL_HALF_LIFE_WINDOWS)
    weight = kept + fresh_fraction
    departure = math.log(seen / modelled) - estimate.tail_mean
    mean = estimate.tail_mean + departure * fresh_fraction / weight
    # Weighted incremental variance: the kept sum of squares plus the new window's share of it.
    squares = estimate.tail_variance * kept + fresh_fraction * departure * (departure - (mean - estimate.tail_mean))
    return replace(estimate, tail_mean=mean, tail_variance=max(0.0, squares / weight), tail_windows=weight)


def _drifting(estimate: Estimate, measurement: Measurement, threshold: float) -> bool:
    departure = measurement.log_ratio - estimate.planned_log_factor
    beyond_threshold = abs(math.expm1(departure)) > threshold
    beyond_noise = abs(departure) > 2.0 * math.sqrt(measurement.noise_variance)
    return beyond_threshold and beyond_noise


def filtered(
    estimate: Estimate, measurement: Measurement, settings: CalibrationSettings, window_start: float
) -> Estimate:
    prior_variance = estimate.variance + settings.process_noise**2
    gain = prior_variance / (prior_variance + measurement.noise_variance)
    if _drifting(estimate, measurement, settings.drift_threshold):
        since = estimate.drifting_since if estimate.drifting_since is not None else window_start
    else:
        since = None
    return replace(
        estimate,
        log_factor=estimate.log_factor + gain * (measurement.log_ratio - estimate.log_factor),
        variance=(1.0 - gain) * prior_variance,
        samples=estimate.samples + measurement.samples,
        windows=estimate.windows + 1,
        drifting_since=since,
        last_observed_s=measurement.observed_s,
        last_predicted_s=measurement.predicted_s,
    )


# ------------------------------------------------------------------------------------------ the update


def _rebased_on(state: CalibrationState, config: ServingConfig, prior_sigma: float) -> CalibrationState:
    """Estimates moved to a new reference configuration: same structure keeps them, another transfers them."""
    key = structure_key(config)
    if state.reference == key:
        return state
    moved = []
    for metric in LatencyMetric:
        role = latency_role(config, metric is LatencyMetric.TTFT)
        source = state.of_metric(metric)
        if source is None:
            continue
        moved.append(transferred(source, role, prior_sigma) if state.reference is not None else source)
    workers = frozenset(worker_key(role.worker) for role in config.roles)
    return replace(state, estimates=tuple(moved), reference=key, reference_workers=workers)


def update_calibration(
    state: CalibrationState,
    observation: Observation | None,
    config: ServingConfig,
    prediction: Prediction,
    now: float,
    *,
    variant: Variant = Variant.STABLE,
    role_capacities: Mapping[Role, float] | None = None,
) -> CalibrationState:
    """Fold one window of `variant`'s pods into the state.

    `prediction` is the raw model's for `config` at the workload those pods served in the window
    (`workload.variant_workload`); no observation, or too few requests, leaves the estimates as they were.
    `role_capacities` is the raw model's capacity (requests/s) of each role of the stable fleet
    (`predictor.role_capacities`); without it, capacity is not learnt.
    """
    if observation is None:
        return state
    window = observation.window_end - observation.window_start
    previous = state.last_window_end if variant is Variant.STABLE else None
    fresh = window if previous is None else min(window, observation.window_end - previous)
    if window <= 0 or fresh <= 0:
        return state  # the same window again
    settings = state.settings
    state = _rebased_on(state, config, prediction.uncertainty)
    if variant is Variant.STABLE:
        state = replace(
            state,
            workload=update_workload(state.workload, observation, fresh_fraction=fresh / window),
            last_window_end=observation.window_end,
            last_window_s=window,
        )
    estimates = {(e.role, e.metric): e for e in state.estimates}
    for metric in LatencyMetric:
        is_ttft = metric is LatencyMetric.TTFT
        group = latency_group(observation, variant, SloMetric.TTFT if is_ttft else SloMetric.TPOT)
        if group is None and not is_ttft:
            group = latency_group(observation, variant, SloMetric.ITL)
        if group is None:
            continue
        if is_ttft:
            observed, predicted, buckets = group.ttft, prediction.ttft, TTFT_BUCKETS
        elif group.tpot is not None:
            observed, predicted, buckets = group.tpot, prediction.tpot, ITL_BUCKETS
        else:
            observed, predicted, buckets = group.itl, prediction.itl, ITL_BUCKETS
        unqueued = queue_free(group)
        measurement = measure(observed, predicted, group.samples, buckets, settings, queues_empty=unqueued)
        if measurement is None:
            continue
        # A window overlapping the previous one brings only its fresh part as new evidence.
        measurement = replace(measurement, noise_variance=measurement.noise_variance * window / fresh)
        role = latency_role(config, is_ttft)
        current = estimates.get((role, metric)) or initial_estimate(role, metric, prediction.uncertainty)
        learnt = filtered(current, measurement, settings, observation.window_start)
        estimates[(role, metric)] = with_tail(
            learnt, observed, predicted, group.samples, fresh / window, queues_empty=unqueued
        )
    state = replace(state, estimates=tuple(estimates.values()), updated_at=now)
    if variant is Variant.STABLE and role_capacities is not None:
        state = _learn_capacities(
            state,
            observation=observation,
            config=config,
            role_capacities=role_capacities,
            staleness=window / fresh,
        )
    return state


# -------------------------------------------------------------------------------------------- capacity


def default_capacity_log_factor(state: CalibrationState, role: Role) -> float:
    """The service-time factor a role has before any capacity window: the decode step's correction for the
    roles that decode (a slower step serves fewer requests, `predictor.CalibratedPredictor`), none for prefill."""
    if role is Role.PREFILL:
        return 0.0
    estimate = state.of_metric(LatencyMetric.TPOT)
    return estimate.log_factor if estimate is not None else 0.0


def measure_capacity(
    served_per_s: float, modelled_per_s: float, samples: int, settings: CalibrationSettings
) -> Measurement | None:
    """`log(modelled / served)` of one window with its noise: the Poisson error of the count, plus jitter."""
    if samples < settings.min_samples or not (served_per_s > 0 and modelled_per_s > 0):
        return None
    if not (math.isfinite(served_per_s) and math.isfinite(modelled_per_s)):
        return None
    noise = settings.jitter**2 + 1.0 / samples
    return Measurement(math.log(modelled_per_s / served_per_s), noise, served_per_s, modelled_per_s, samples)


def _learn_capacities(
    state: CalibrationState,
    *,
    observation: Observation,
    config: ServingConfig,
    role_capacities: Mapping[Role, float],
    staleness: float,
) -> CalibrationState:
    settings = state.settings
    capacities = {(c.role, c.layout): c for c in state.capacities}
    for deployment in config.roles:
        role = deployment.role
        group = observation.group(role, Variant.STABLE)
        modelled = role_capacities.get(role)
        if group is None or group.request_rate_per_s is None or modelled is None:
            continue
        if group.pods is not None and group.pods > deployment.replicas:
            # Pods of a retired revision drain what they queued: neither their queue nor their completions are
            # this fleet's (Kimi-K2.5 after a promotion: old prefill pods held 40 000 requests for an hour).
            continue
        measurement = measure_capacity(group.request_rate_per_s, modelled, group.samples, settings)
        if measurement is None:
            continue
        key = (role, layout_key(deployment.worker))
        current = capacities.get(key)
        if current is None:
            start = default_capacity_log_factor(state, role)
            current = CapacityEstimate(role, key[1], start, CAPACITY_PRIOR_SIGMA**2, CAPACITY_PRIOR_SIGMA**2, start)
        measurement = replace(measurement, noise_variance=measurement.noise_variance * staleness)
        if role_saturated(group, observation.window_end - observation.window_start):
            capacities[key] = filtered_capacity(current, measurement, settings)
        elif measurement.log_ratio < current.log_factor:
            # A role that is not saturated served what was offered: a floor of its capacity, which says
            # something only when it is above the capacity the factor allows — and then it is a fact, not a
            # noisy reading: the factor drops to what the served rate allows.
            capacities[key] = floored_capacity(current, measurement, settings)
    return replace(state, capacities=tuple(capacities.values()))


def _capacity_drifting(log_factor: float, variance: float, planned: float, settings: CalibrationSettings) -> bool:
    # Drift is the estimate's departure from the plan's, not one window's: a re-plan rebases on the estimate,
    # and a window that departs from the estimate moves it only by the gain.
    departure = log_factor - planned
    return abs(math.expm1(departure)) > settings.drift_threshold and abs(departure) > 2.0 * math.sqrt(variance)


def floored_capacity(
    estimate: CapacityEstimate, measurement: Measurement, settings: CalibrationSettings
) -> CapacityEstimate:
    """The estimate lowered to the largest factor under which the role could have served what it did."""
    log_factor = min(estimate.log_factor, measurement.log_ratio)
    return _moved(estimate, measurement, settings, log_factor, max(estimate.variance, measurement.noise_variance))


def filtered_capacity(
    estimate: CapacityEstimate, measurement: Measurement, settings: CalibrationSettings
) -> CapacityEstimate:
    """The estimate moved toward a saturated window's measurement by the Kalman gain."""
    prior_variance = estimate.variance + settings.process_noise**2
    gain = prior_variance / (prior_variance + measurement.noise_variance)
    log_factor = estimate.log_factor + gain * (measurement.log_ratio - estimate.log_factor)
    return _moved(estimate, measurement, settings, log_factor, (1.0 - gain) * prior_variance)


def _moved(
    estimate: CapacityEstimate,
    measurement: Measurement,
    settings: CalibrationSettings,
    log_factor: float,
    variance: float,
) -> CapacityEstimate:
    return replace(
        estimate,
        log_factor=log_factor,
        variance=variance,
        windows=estimate.windows + 1,
        drifting=_capacity_drifting(log_factor, variance, estimate.planned_log_factor, settings),
        last_served_per_s=measurement.observed_s,
        last_modelled_per_s=measurement.predicted_s,
    )


def rebase(state: CalibrationState) -> CalibrationState:
    """The plan was just re-made with the current corrections: measure drift against them from now on."""
    return replace(
        state,
        estimates=tuple(replace(e, planned_log_factor=e.log_factor, drifting_since=None) for e in state.estimates),
        capacities=tuple(replace(c, planned_log_factor=c.log_factor, drifting=False) for c in state.capacities),
    )
