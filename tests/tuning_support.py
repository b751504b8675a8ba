"""Scenarios for the tuning tests.

The "model" is the planner tests' deterministic fake (`planner_support.FakePredictor`); the "truth" is that
same model with hidden multipliers and log-normal noise, so calibration has something to learn. A long-
context chat workload (8k in, 1k out, 4 requests/s, TPOT p50 ≤ 40 ms, TTFT p99 ≤ 4 s) makes the decode step
depend strongly on the batch, as it does for real long-context serving. The plan for it is
`fp8 TP2 cap 32 ×5` on an H200 pool of 32 GPUs; its runner-ups cost about 20 % more.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field, replace
from functools import cache

from frontier_operator.api.spec import TuningMode
from frontier_operator.perf.types import Percentiles, Prediction, Role, ServingConfig, Workload
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Disaggregation, GpuPool, Plan, PlanRequest
from frontier_operator.tuning.actions import Decision, gate
from frontier_operator.tuning.apply import applied_after, model_after
from frontier_operator.tuning.budget import ErrorBudget
from frontier_operator.tuning.calibration import CalibrationState, Estimate, LatencyMetric
from frontier_operator.tuning.loop import tune
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.predictor import CalibratedPredictor, learning_reference
from frontier_operator.tuning.state import AppliedState, ModelContext, RoleReadiness
from frontier_operator.tuning.structure import latency_role, structure_key
from frontier_operator.tuning.workload import FAST_HALF_LIFE_WINDOWS, WorkloadEstimate, averaging_lag_s
from planner_support import FakePredictor, chat_workload, pool, request, search

NOW = 1_000_000.0
WINDOW_S = 300.0
IMAGE = "lmsysorg/sglang:v0.5.23-cu130"
POOL = "h200"
# The fake model's percentile shape (p50, p90, p95, p99 over p50).
SHAPE = (1.0, 1.15, 1.25, 1.5)
WORKLOAD = chat_workload(rate=4.0, input_mean=8000, output_mean=1000)
POLICY = TuningPolicy(mode=TuningMode.AUTO)


def scenario_request(max_gpus: int = 32, disaggregation: Disaggregation = Disaggregation.NEVER) -> PlanRequest:
    return request(
        tpot_ms=40.0,
        ttft_ms=4000.0,
        pools=(pool(max_gpus=max_gpus),),
        workload=WORKLOAD,
        space=search(disaggregation=disaggregation),
    )


@cache
def base_plan() -> Plan:
    plan = make_plan(scenario_request(), FakePredictor())
    assert isinstance(plan, Plan)
    return plan


def the_pool(max_gpus: int = 32) -> GpuPool:
    return scenario_request(max_gpus).pools[0]


def percentiles(p50: float) -> Percentiles:
    return Percentiles(*(p50 * factor for factor in SHAPE))


def group(
    role: Role = Role.UNIFIED,
    variant: Variant = Variant.STABLE,
    *,
    ttft_p99: float | None = 1.6,
    tpot_p50: float | None = 0.029,
    rate: float = 4.0,
    running: float | None = 115.0,
    queued: float | None = 0.0,
    kv_usage: float | None = 0.5,
    samples: int | None = None,
) -> GroupObservation:
    """A window of one role and variant; defaults match the plan's fleet under the spec's traffic."""
    ttft = percentiles(ttft_p99 / SHAPE[3]) if ttft_p99 is not None else None
    tpot = percentiles(tpot_p50) if tpot_p50 is not None else None
    e2e = (
        Percentiles(*(ttft.at(p) + (WORKLOAD.output_tokens.mean - 1) * tpot.at(p) for p in (50, 90, 95, 99)))
        if ttft is not None and tpot is not None
        else None
    )
    return GroupObservation(
        role=role,
        variant=variant,
        ttft=ttft,
        tpot=tpot,
        itl=tpot,
        e2e=e2e,
        request_rate_per_s=rate,
        input_tokens_per_s=rate * WORKLOAD.input_tokens.mean,
        output_tokens_per_s=rate * WORKLOAD.output_tokens.mean,
        running_requests=running,
        queued_requests=queued,
        kv_usage=kv_usage,
        cache_hit_rate=0.0,
        samples=samples if samples is not None else round(rate * WINDOW_S),
    )


def ramp_estimate(slope: float, now_rate: float = 4.0) -> WorkloadEstimate:
    """The two rate averages, settled, of traffic rising by `slope` requests/s per second to `now_rate`."""
    return WorkloadEstimate(
        request_rate_per_s=now_rate - slope * averaging_lag_s(WINDOW_S),
        recent_request_rate_per_s=now_rate - slope * averaging_lag_s(WINDOW_S, FAST_HALF_LIFE_WINDOWS),
        windows=30,
    )


def observation(*groups: GroupObservation, end: float = NOW) -> Observation:
    return Observation(window_start=end - WINDOW_S, window_end=end, groups=groups)


def applied(config: ServingConfig | None = None, **fields: object) -> AppliedState:
    config = config or base_plan().chosen.config
    readiness = tuple(RoleReadiness(r.role, r.replicas, r.replicas) for r in config.roles)
    state = AppliedState(config=config, pool=POOL, revision="rev-stable", image=IMAGE, readiness=readiness)
    return replace(state, **fields)  # type: ignore[arg-type]


def context(**fields: object) -> ModelContext:
    model = ModelContext(
        request=scenario_request(),
        predictor=FakePredictor(),
        calibration=CalibrationState(),
        plan=base_plan(),
        plan_workload=WORKLOAD,
        image=IMAGE,
    )
    return replace(model, **fields)  # type: ignore[arg-type]


def ledger(windows: int, missed: int = 0, *, end: float = NOW - WINDOW_S) -> CalibrationState:
    """A calibration whose error budget recorded `windows` back-to-back windows, the last ending at `end`, the
    oldest `missed` of them missed."""
    budget = ErrorBudget()
    for index in range(windows):
        window_end = end - (windows - 1 - index) * WINDOW_S
        budget = budget.record(window_end - WINDOW_S, window_end, index < missed)
    return CalibrationState(budget=budget)


def budget_spent(missed: int = 3, *, end: float = NOW - WINDOW_S) -> CalibrationState:
    """A calibration whose error budget the last `missed` back-to-back windows (ending at `end`) spent: the next
    violation is acted on even where the model does not confirm it — what the remedy tests are about."""
    return ledger(missed, missed, end=end)


def runner_up(index: int = 0) -> ServingConfig:
    return base_plan().runner_ups[index].candidate.config


# ---------------------------------------------------------------------------------------------- the truth


@dataclass
class Truth:
    """The fleet as it really behaves: the fake model with hidden TTFT and TPOT factors (applied the way the
    calibrated predictor applies corrections), plus Poisson request counts and log-normal latency noise."""

    ttft_factor: float = 1.0
    tpot_factor: float = 1.0
    noise: float = 0.05
    seed: int = 7
    model: FakePredictor = field(default_factory=FakePredictor)
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def model_prediction(self, config: ServingConfig, workload: Workload) -> Prediction:
        """What the (uncalibrated) model predicts, which calibration measures the truth against."""
        pool_spec = the_pool()
        return self.model.predict(
            scenario_request().arch, pool_spec.gpu, config, workload, pool_spec.price_per_gpu_hour
        )

    def reference(self, config: ServingConfig, workload: Workload, calibration: CalibrationState) -> Prediction:
        """What the loop measures a window against (`learning_reference`): the model, its first token queued
        as `calibration` says the fleet is loaded."""
        pool_spec = the_pool()
        reference = learning_reference(
            self.model, scenario_request().arch, config, pool_spec, workload, calibration=calibration
        )
        assert reference is not None
        return reference

    def predict(self, config: ServingConfig, workload: Workload) -> Prediction:
        """The model with the hidden factors applied consistently: slower decode steps also mean less capacity."""
        pool_spec = the_pool()
        hidden = CalibrationState(
            estimates=tuple(
                Estimate(role, metric, math.log(factor), 0.0, 0.0, 0.0)
                for role, metric, factor in (
                    (latency_role(config, True), LatencyMetric.TTFT, self.ttft_factor),
                    (latency_role(config, False), LatencyMetric.TPOT, self.tpot_factor),
                )
            ),
            reference=structure_key(config),
        )
        perturbed = CalibratedPredictor(self.model, hidden)
        return perturbed.predict(scenario_request().arch, pool_spec.gpu, config, workload, pool_spec.price_per_gpu_hour)

    def group(self, config: ServingConfig, workload: Workload, variant: Variant) -> GroupObservation:
        """One window: Poisson-like request counts, and latencies of the rate actually served."""
        expected = workload.request_rate_per_s * WINDOW_S
        requests = max(1.0, expected + self.rng.gauss(0.0, math.sqrt(expected)))
        served = replace(workload, request_rate_per_s=requests / WINDOW_S)
        truth = self.predict(config, served)
        ttft_scale = math.exp(self.rng.gauss(0.0, self.noise))
        tpot_scale = math.exp(self.rng.gauss(0.0, self.noise))
        overloaded = not math.isfinite(truth.tpot.p50)
        decoding = config.roles[-1]
        return group(
            variant=variant,
            ttft_p99=60.0 if overloaded else truth.ttft.p99 * ttft_scale,
            tpot_p50=0.5 if overloaded else truth.tpot.p50 * tpot_scale,
            rate=served.request_rate_per_s,
            running=(decoding.worker.max_running_requests if overloaded else truth.mean_batch) * decoding.replicas,
            queued=0.0,
            samples=round(requests),
        )


@dataclass
class Loop:
    """A miniature closed loop: the truth serves, `tune` decides, actions apply at once (pods start in 2 min)."""

    truth: Truth
    applied: AppliedState
    model: ModelContext
    policy: TuningPolicy = POLICY
    workload: Workload = WORKLOAD
    now: float = NOW
    interval_s: float = 60.0
    canary_startup_s: float = 120.0
    decisions: list[Decision] = field(default_factory=list)

    def observe(self) -> Observation:
        canary = self.applied.canary
        share = canary.share if canary is not None and canary.ready_at is not None else 0.0
        stable_load = replace(self.workload, request_rate_per_s=self.workload.request_rate_per_s * (1 - share))
        groups = [self.truth.group(self.applied.config, stable_load, Variant.STABLE)]
        if canary is not None and share > 0:
            canary_load = replace(self.workload, request_rate_per_s=self.workload.request_rate_per_s * share)
            groups.append(self.truth.group(canary.deployed, canary_load, Variant.CANARY))
        return observation(*groups, end=self.now)

    def tick(self) -> Decision:
        seen = self.observe()
        step = tune(seen, self.applied, self.model, self.policy, self.now)
        self.model = replace(self.model, calibration=step.calibration)
        decision = step.decision
        self.decisions.append(decision)
        action = gate(decision, self.policy.mode, approved=False).apply
        if action is not None:
            revision = f"rev-{len(self.decisions)}"
            rate = self.model.calibration.workload.request_rate_per_s
            self.applied = applied_after(self.applied, action, self.now, revision=revision, request_rate_per_s=rate)
            self.model = model_after(self.model, action)
        canary = self.applied.canary
        if canary is not None and canary.ready_at is None and self.now - canary.started_at >= self.canary_startup_s:
            self.applied = replace(self.applied, canary=replace(canary, ready_at=self.now))
        self.now += self.interval_s
        return decision

    def run(self, hours: float) -> list[Decision]:
        ticks = round(hours * 3600 / self.interval_s)
        return [self.tick() for _ in range(ticks)]

    @property
    def changes(self) -> list[Decision]:
        return [d for d in self.decisions if d.changes_fleet]
