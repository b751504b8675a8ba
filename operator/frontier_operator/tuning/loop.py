"""One tick of the closed loop: fold the observation into the calibration, then decide.

The operator's timer and the simulator both call `tune`, so live and simulated runs follow one path.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from frontier_operator.tuning.actions import Decision
from frontier_operator.tuning.calibration import CalibrationState, update_calibration
from frontier_operator.tuning.decisions import decide
from frontier_operator.tuning.observation import Observation, Variant
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.predictor import learning_reference, role_capacities
from frontier_operator.tuning.slo import standings
from frontier_operator.tuning.state import AppliedState, ModelContext
from frontier_operator.tuning.workload import serving_group, variant_workload


@dataclass(frozen=True)
class TuningStep:
    calibration: CalibrationState
    decision: Decision


def _settled(applied: AppliedState, policy: TuningPolicy, now: float) -> bool:
    """The window holds only the current configuration: no change within it and nothing rolling out."""
    last = max((record.at for record in applied.history), default=None)
    return not applied.pending() and (last is None or now - last >= policy.window_s)


def calibrate(
    observation: Observation | None,
    applied: AppliedState,
    model: ModelContext,
    policy: TuningPolicy,
    now: float,
) -> CalibrationState:
    """`model.calibration` with a fresh window of the stable pods folded in; anything doubtful leaves it as is."""
    calibration = model.calibration
    if observation is None or now - observation.window_end > policy.max_staleness_s:
        return calibration
    if not _settled(applied, policy, now):
        return calibration
    calibration = _record_window(calibration, observation, model, policy)
    pool = model.pool(applied.pool)
    workload = variant_workload(observation, Variant.STABLE, model.plan_workload or model.request.workload)
    if pool is None or workload is None:
        return calibration
    predicted = learning_reference(
        model.predictor, model.request.arch, applied.config, pool, workload, calibration=calibration
    )
    if predicted is None:
        return calibration
    limits = role_capacities(
        model.predictor,
        model.request.arch,
        pool.gpu,
        applied.config,
        workload,
        price_per_gpu_hour=pool.price_per_gpu_hour,
        raw=predicted,
    )
    return update_calibration(calibration, observation, applied.config, predicted, now, role_capacities=limits)


def _record_window(
    calibration: CalibrationState, observation: Observation, model: ModelContext, policy: TuningPolicy
) -> CalibrationState:
    """The window in the error budget's ledger, when it has every SLO's value from enough requests."""
    standing = standings(model.request.slos, observation, Variant.STABLE)
    group = serving_group(observation, Variant.STABLE)
    if group is None or group.samples < policy.min_samples or any(x.observed_s is None for x in standing):
        return calibration
    missed = any(x.violated for x in standing)
    return replace(
        calibration, budget=calibration.budget.record(observation.window_start, observation.window_end, missed)
    )


def tune(
    observation: Observation | None,
    applied: AppliedState,
    model: ModelContext,
    policy: TuningPolicy,
    now: float,
) -> TuningStep:
    calibration = calibrate(observation, applied, model, policy, now)
    decision = decide(observation, applied, replace(model, calibration=calibration), policy, now)
    return TuningStep(calibration, decision)
