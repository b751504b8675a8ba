"""Everything one decision looks at, bundled once so that each rule reads like its description."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

from frontier_operator.perf.types import Prediction, Role, ServingConfig, Workload
from frontier_operator.planner.types import GpuPool, SloBound
from frontier_operator.tuning.actions import Action, Decision, SloStanding, format_seconds
from frontier_operator.tuning.forecast import Forecaster
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.state import AppliedState, ModelContext
from frontier_operator.tuning.workload import effective_workload, rate_ahead, role_saturated, steady_rate


@dataclass(frozen=True)
class Proposal:
    action: Action
    reason: str
    # False for an in-place step taken although it is projected not to clear the violation it answers (the
    # most one step may add): the decision may then prefer a structural remedy.
    clears: bool = True


@dataclass(frozen=True)
class Situation:
    observation: Observation
    applied: AppliedState
    model: ModelContext
    policy: TuningPolicy
    now: float
    standing: tuple[SloStanding, ...]
    forecaster: Forecaster
    pool: GpuPool
    # What the stable pods served in the window (rate, lengths, cache hits; spec shapes).
    workload: Workload

    @property
    def slos(self) -> tuple[SloBound, ...]:
        return self.model.request.slos

    @property
    def config(self) -> ServingConfig:
        return self.applied.config

    def group(self, role: Role, variant: Variant = Variant.STABLE) -> GroupObservation | None:
        return self.observation.group(role, variant)

    def saturated(self, role: Role) -> bool:
        """`role`'s stable pods serve at their limit and their queue grows (`workload.role_saturated`)."""
        return role_saturated(self.group(role), self.observation.window_end - self.observation.window_start)

    def draining(self, role: Role) -> bool:
        """`role`'s stable group counted more pods in the window than the fleet in force has replicas: pods of a
        retired revision (after a promotion) or removed replicas still drain the requests they held."""
        group = self.group(role)
        deployment = self.config.role(role)
        return (
            group is not None and group.pods is not None and deployment is not None and group.pods > deployment.replicas
        )

    @property
    def saturated_fleet(self) -> bool:
        return any(self.saturated(deployment.role) for deployment in self.config.roles)

    def decision(self, proposal: Proposal) -> Decision:
        return Decision(proposal.action, proposal.reason, self.now, self.standing)

    @cached_property
    def current_prediction(self) -> Prediction | None:
        return self.forecaster.predict(self.config, self.pool, self.workload)

    def project(self, config: ServingConfig, workload: Workload | None = None) -> tuple[float, ...] | None:
        """Each SLO's value (in `standing` order) if the stable fleet became `config` under today's traffic
        (or under `workload`).

        Anchored on the observation: the observed value times the corrected model's ratio new / current, so
        a step is judged by what the model gets right (how latency moves with replicas or batch) rather
        than by its absolute level. Where the model has no finite current value, its corrected absolute
        prediction is used. None when the model cannot predict `config`.
        """
        new = self.forecaster.predict(config, self.pool, workload or self.workload)
        if new is None:
            return None
        current = self.current_prediction
        values = []
        for item in self.standing:
            predicted_new = item.bound.predicted(new)
            predicted_now = item.bound.predicted(current) if current is not None else math.nan
            observed = item.observed_s
            if observed is not None and math.isfinite(predicted_now) and predicted_now > 0:
                values.append(observed * predicted_new / predicted_now)
            else:
                values.append(predicted_new)
        return tuple(values)

    @cached_property
    def steady_workload(self) -> Workload:
        """Today's traffic smoothed over windows: the request shapes (lengths, prefix-cache hits), and the request
        rate unless the window's departs from the average beyond its counting noise (`workload.steady_rate`).

        A window's mean output length is a few hundred draws of a heavy tail (cv 2: ±8 % at 600 requests), and
        near the knee the model's p99 follows it steeply: DeepSeek-R1's predicted p99 TTFT went from 0.45 to
        2.2 s between two windows a minute apart, as a burst of reasoning-length requests finished.
        """
        estimate = self.model.calibration.workload
        smoothed = effective_workload(self.workload, estimate)
        rate = steady_rate(estimate, self.observation, self.workload.arrival_cv)
        return replace(
            self.workload,
            request_rate_per_s=self.workload.request_rate_per_s if rate is None else rate,
            input_tokens=smoothed.input_tokens,
            output_tokens=smoothed.output_tokens,
            prefix_cache_hit_rate=smoothed.prefix_cache_hit_rate,
        )

    def rise_over(self, horizon_s: float) -> float:
        """The factor (≥ 1) by which rising traffic grows over `horizon_s` (`workload.rate_ahead`)."""
        return rate_ahead(self.model.calibration.workload, self.observation, horizon_s, self.workload.arrival_cv)

    def workload_in(self, horizon_s: float, *, steady: bool = False) -> Workload:
        """Today's workload (or the `steady` one) at the rate its trend reaches `horizon_s` from now (today's while
        it is not rising)."""
        today = self.steady_workload if steady else self.workload
        return replace(today, request_rate_per_s=today.request_rate_per_s * self.rise_over(horizon_s))

    def predict_absolute(
        self, config: ServingConfig, workload: Workload | None = None, *, typical: bool = False
    ) -> tuple[float, ...] | None:
        """Each SLO's corrected-model value for `config` (at the window's workload, or `workload`): smoothed over
        windows by the calibration, unlike the anchored projection, which follows the last window's noise.
        `typical`: a p99 bound at a typical window's tail, not at the one 19 windows in 20 keep."""
        forecaster = self.forecaster
        if typical:
            forecaster = replace(forecaster, predictor=replace(forecaster.predictor, typical_tail=True))
        prediction = forecaster.predict(config, self.pool, workload or self.workload)
        if prediction is None:
            return None
        return tuple(item.bound.predicted(prediction) for item in self.standing)

    def serves(self, prediction: Prediction | None, workload: Workload) -> bool:
        """`prediction` meets every SLO with the planner's margins and carries `workload` with the headroom."""
        return (
            prediction is not None
            and self.forecaster.meets(prediction, self.slos)
            and self.forecaster.carries(prediction, workload, self.policy.capacity_headroom)
        )

    def fits(self, values: tuple[float, ...], band: float) -> bool:
        """Every projected value at least `band` (relative) under its limit."""
        return all(
            math.isfinite(value) and value <= item.bound.limit_s * (1.0 - band)
            for item, value in zip(self.standing, values, strict=True)
        )

    def describe_projection(self, values: tuple[float, ...]) -> str:
        return ", ".join(
            f"{item.bound.label} {format_seconds(value)}" for item, value in zip(self.standing, values, strict=True)
        )
