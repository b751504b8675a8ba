"""Re-planning: with the corrected model, for the effective workload, when the plan in force is outdated.

Three things outdate a plan: there is none yet; the model drifted (`calibration.ModelDrift`, or a role's
measured capacity, `calibration.CapacityDrift`); the observed workload moved away from the one it was made
for. A re-plan only rewrites the plan in status: the fleet moves toward the new plan later, through the same
guarded steps and canaries as any other change.
"""

from __future__ import annotations

from dataclasses import replace

from frontier_operator.perf.types import Workload
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Infeasible, Plan, PlanRequest, Predictor
from frontier_operator.tuning.actions import Replan, ReplanCause
from frontier_operator.tuning.calibration import CalibrationState
from frontier_operator.tuning.predictor import CalibratedPredictor
from frontier_operator.tuning.situation import Proposal
from frontier_operator.tuning.state import ModelContext
from frontier_operator.tuning.workload import effective_workload, workload_shift


def current_workload(model: ModelContext) -> Workload:
    """The spec's workload until enough traffic was observed, then the observed one."""
    return effective_workload(model.request.workload, model.calibration.workload)


def replan_trigger(
    model: ModelContext, relative_shift: float, cache_hit_shift: float
) -> tuple[ReplanCause, str] | None:
    if model.plan is None:
        return ReplanCause.NO_PLAN, "no plan yet"
    calibration = model.calibration
    messages = [d.message for d in calibration.drift] + [d.message for d in calibration.capacity_drift]
    if messages:
        return ReplanCause.MODEL_DRIFT, "model drift: " + "; ".join(messages)
    planned = model.plan_workload or model.request.workload
    shift = workload_shift(planned, current_workload(model), relative_shift, cache_hit_shift)
    if shift is not None:
        return ReplanCause.WORKLOAD_SHIFT, f"observed workload moved: {shift}"
    return None


def corrected_plan(
    request: PlanRequest, predictor: Predictor, calibration: CalibrationState, workload: Workload
) -> Plan | Infeasible:
    """The plan for `workload` with the model corrected by `calibration` (deterministic: the operator re-derives
    the plan in force from the workload and calibration it stored, rather than storing the plan)."""
    confidence = calibration.confidence
    corrected = replace(request, workload=workload, calibration_confidence=confidence)
    return make_plan(corrected, CalibratedPredictor(predictor, calibration))


def replan(model: ModelContext, cause: ReplanCause, why: str, workload: Workload | None = None) -> Proposal:
    """The corrected plan for `workload` (default: `current_workload`)."""
    workload = workload if workload is not None else current_workload(model)
    confidence = model.calibration.confidence
    result = corrected_plan(model.request, model.predictor, model.calibration, workload)
    if isinstance(result, Plan):
        outcome = (
            f"the corrected model chooses {describe_config(result.chosen.config)} at "
            f"${result.chosen.prediction.cost_per_mtok:.3g}/Mtok"
        )
    else:
        outcome = f"no configuration meets the SLO with the corrected model: {result.summary}"
    return Proposal(
        Replan(result, workload, confidence, cause),
        f"{why}; re-planned at calibration confidence {confidence:.2f}: {outcome}",
    )
