"""One tick of the closed loop inside the operator, as a pure function.

The simulator drives `tuning.loop.tune` on its twin; the operator drives it here, on what Kubernetes and
Prometheus report, and adds what only a live target has: the SRE's annotations (pause, approve, rollback,
pin), the recommendation waiting for approval, and the status and Events that explain each decision. The
result is the next `TuningRecord` — the fleet to render (stable and canary) follows from it — and a
`TuningReport` the reconcile step folds into status.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from frontier_operator.api.spec import TuningMode
from frontier_operator.api.status import (
    CalibrationStatus,
    ConditionStatus,
    ConditionType,
    HistoryEntry,
    ObservedStatus,
    PercentilesMs,
    Recommendation,
)
from frontier_operator.api.units import rfc3339
from frontier_operator.perf.types import Percentiles
from frontier_operator.reconcile.conditions import ConditionUpdate
from frontier_operator.reconcile.events import EventNote
from frontier_operator.reconcile.tuning_record import (
    PlanBasis,
    Previous,
    Proposal,
    TuningRecord,
    decode_action,
    encode_action,
)
from frontier_operator.tuning.actions import (
    Action,
    Decision,
    Gated,
    Hold,
    NoAction,
    PromoteCanary,
    Replan,
    RollbackCanary,
    RollbackCause,
    ScaleReplicas,
    SetBatchCap,
    SetPdRatio,
    describe_action,
    gate,
)
from frontier_operator.tuning.apply import applied_after, model_after
from frontier_operator.tuning.calibration import CalibrationState, LatencyMetric
from frontier_operator.tuning.loop import tune
from frontier_operator.tuning.observation import Observation, Variant
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.slo import describe_standings
from frontier_operator.tuning.state import AppliedState, ChangeKind, ChangeRecord, ModelContext, RoleReadiness
from frontier_operator.tuning.workload import serving_group

# A recommendation stays approvable while the loop only waits (for data, the cooldown, a rollout); a hold
# that says nothing is needed any more withdraws it.
_WAITING = frozenset(
    {
        Hold.METRICS_UNAVAILABLE,
        Hold.STALE_METRICS,
        Hold.INSUFFICIENT_DATA,
        Hold.MISSING_METRIC,
        Hold.STEP_PENDING,
        Hold.COOLDOWN,
        Hold.CHANGE_BUDGET,
        Hold.CANARY_STARTING,
        Hold.CANARY_COMPARING,
        Hold.PAUSED,
    }
)
# Actions `frontier pin` still allows: they keep every engine's configuration.
_PIN_ALLOWS = (NoAction, Replan, ScaleReplicas, RollbackCanary)
MAX_REASON = 4000


@dataclass(frozen=True)
class FleetState:
    """What Kubernetes reports of the fleet: stable readiness per role, and the canary's health."""

    stable: tuple[RoleReadiness, ...]
    canary_ready: bool = False
    canary_crash_looping: bool = False


@dataclass(frozen=True)
class Overrides:
    """The SRE's annotations (`api.annotations`)."""

    paused: bool = False
    approve: str | None = None
    rollback: str | None = None
    pin: str | None = None


@dataclass(frozen=True)
class TickInput:
    record: TuningRecord
    model: ModelContext
    policy: TuningPolicy
    observation: Observation | None
    # Why there is no observation (Prometheus unreachable, an error, garbage), for MetricsAvailable.
    metrics_error: str | None
    fleet: FleetState
    overrides: Overrides
    now: float
    now_text: str


@dataclass(frozen=True)
class TuningReport:
    conditions: tuple[ConditionUpdate, ...]
    observed: ObservedStatus | None
    calibration: CalibrationStatus
    recommendation: Recommendation | None
    history: tuple[HistoryEntry, ...]
    events: tuple[EventNote, ...]
    evaluated_at: str
    last_decision: str
    last_decision_reason: str
    # The action the recommendation proposes (the shell renders its manifest diff), new or still pending.
    recommended: Action | None = None


@dataclass(frozen=True)
class TickResult:
    record: TuningRecord
    model: ModelContext
    decision: Decision
    applied: Action | None
    report: TuningReport


def tick(inputs: TickInput) -> TickResult:
    record, now = inputs.record, inputs.now
    applied = _with_fleet(record.applied, inputs.fleet, now)
    model = replace(inputs.model, calibration=record.calibration)
    policy = replace(inputs.policy, paused=inputs.policy.paused or inputs.overrides.paused)

    manual = _manual_rollback(record, applied, inputs.overrides.rollback, now)
    calibration = record.calibration
    if manual is not None:
        decision = manual
    else:
        step = tune(inputs.observation, applied, model, policy, now)
        calibration, decision = step.calibration, step.decision
    model = replace(model, calibration=calibration)
    decision = withheld_by_pin(decision, inputs.overrides.pin)

    approved = _approved(record, applied, inputs.overrides.approve) if policy.mode is TuningMode.RECOMMEND else None
    gated = gate(decision, policy.mode, approved=False)
    action = approved or gated.apply
    if manual is not None:
        # An SRE's rollback is obeyed in every mode, and is nobody's recommendation.
        gated = Gated(None, None)
        action = None if isinstance(manual.action, NoAction) else manual.action

    proposal = record.proposal
    recommendation: Recommendation | None = None
    recommended: Action | None = None
    proposed: Action | None = None
    if approved is not None:
        proposal = None
    elif gated.propose is not None:
        proposal, proposed = _propose(record, applied, gated.propose, inputs.now_text)
        recommended = gated.propose
        recommendation = _recommendation(gated.propose, decision.reason, proposal, inputs.now_text, policy.mode)
    elif isinstance(decision.action, NoAction) and decision.action.hold not in _WAITING:
        proposal = None
    if recommendation is None and proposal is not None:
        pending = decode_action(proposal.kind, proposal.action)
        if pending is not None:
            recommended = pending
            recommendation = _recommendation(pending, "awaiting approval", proposal, proposal.proposed_at, policy.mode)

    history: list[HistoryEntry] = []
    events: list[EventNote] = []
    new_record = replace(record, calibration=calibration, last_tick_at=now, proposal=proposal)
    if manual is not None and inputs.overrides.rollback is not None:
        new_record = replace(new_record, rollback_token=inputs.overrides.rollback)
    if action is not None:
        rate = calibration.workload.request_rate_per_s
        after = _applied_after(record, applied, action, now, rate)
        model = model_after(model, action)
        new_record = replace(
            new_record,
            applied=after,
            calibration=model.calibration,
            plan_basis=PlanBasis(action.workload, calibration) if isinstance(action, Replan) else record.plan_basis,
            previous=Previous(applied) if _replaces_stable(action) else record.previous,
        )
        reason = decision.reason
        if approved is not None and record.proposal is not None:
            reason = f"approved recommendation of {record.proposal.proposed_at}"
        history.append(HistoryEntry(time=inputs.now_text, action=describe_action(action), reason=reason[:MAX_REASON]))
        events.append(_event(action, reason))
    else:
        new_record = replace(new_record, applied=applied)
    if proposed is not None:
        events.append(
            EventNote("Normal", "Recommended", f"{describe_action(proposed)}: {decision.reason}"[:MAX_REASON])
        )

    report = TuningReport(
        conditions=_conditions(inputs, decision, calibration),
        observed=_observed(inputs.observation),
        calibration=_calibration_status(calibration, applied),
        recommendation=recommendation,
        history=tuple(history),
        events=tuple(events),
        evaluated_at=inputs.now_text,
        last_decision=describe_action(action if action is not None else decision.action),
        last_decision_reason=decision.reason[:MAX_REASON],
        recommended=recommended,
    )
    return TickResult(new_record, model, decision, action, report)


# ------------------------------------------------------------------------------------------- the fleet


def _with_fleet(applied: AppliedState, fleet: FleetState, now: float) -> AppliedState:
    state = replace(applied, readiness=fleet.stable)
    canary = applied.canary
    if canary is None:
        return state
    if canary.ready_at is None and fleet.canary_ready:
        canary = replace(canary, ready_at=now)
    return replace(state, canary=replace(canary, crash_looping=fleet.canary_crash_looping))


def _replaces_stable(action: Action) -> bool:
    """Changes after which `frontier rollback` (with no canary) returns to the fleet before them."""
    return isinstance(action, PromoteCanary | SetBatchCap | SetPdRatio)


def _applied_after(
    record: TuningRecord, applied: AppliedState, action: Action, now: float, rate: float | None
) -> AppliedState:
    if isinstance(action, RollbackCanary) and applied.canary is None and record.previous is not None:
        # `frontier rollback` without a canary: back to the fleet before the last replacing change.
        back = record.previous.applied
        change = ChangeRecord(now, ChangeKind.ROLLBACK)
        return replace(back, readiness=applied.readiness, history=(*applied.history, change), canary=None)
    return applied_after(applied, action, now, request_rate_per_s=rate)


# ------------------------------------------------------------------------------------------ annotations


def _manual_rollback(record: TuningRecord, applied: AppliedState, token: str | None, now: float) -> Decision | None:
    if token is None or token == record.rollback_token:
        return None
    if applied.canary is not None:
        revision = applied.canary.revision
        return Decision(RollbackCanary(revision, RollbackCause.MANUAL), "rolled back by frontier rollback", now)
    if record.previous is not None:
        revision = record.previous.applied.revision
        why = f"frontier rollback: back to revision {revision}, the stable fleet before the last change"
        return Decision(RollbackCanary(revision, RollbackCause.MANUAL), why, now)
    return Decision(NoAction(Hold.NO_REMEDY), "frontier rollback: no canary and no earlier fleet to return to", now)


def withheld_by_pin(decision: Decision, pin: str | None) -> Decision:
    if not pin or isinstance(decision.action, _PIN_ALLOWS):
        return decision
    why = f"pinned to revision {pin} (frontier pin): {describe_action(decision.action)} withheld; {decision.reason}"
    return Decision(NoAction(Hold.PINNED), why, decision.at, decision.standing)


def _approved(record: TuningRecord, applied: AppliedState, approve: str | None) -> Action | None:
    """The pending recommendation, if the approve annotation names it and the fleet has not changed since."""
    proposal = record.proposal
    if proposal is None or approve != proposal.proposed_at or proposal.for_revision != applied.revision:
        return None
    return decode_action(proposal.kind, proposal.action)


def _propose(
    record: TuningRecord, applied: AppliedState, action: Action, now_text: str
) -> tuple[Proposal, Action | None]:
    """(the pending proposal, the action if it is newly proposed). The same action proposed again keeps its
    time — an approval given against it stays valid, and its Event is not posted again."""
    kind, data = encode_action(action)
    previous = record.proposal
    if previous is not None and previous.kind == kind and previous.action == data:
        return previous, None
    return Proposal(now_text, kind, data, applied.revision), action


def _recommendation(
    action: Action, reason: str, proposal: Proposal | None, now_text: str, mode: TuningMode
) -> Recommendation:
    note = "" if mode is TuningMode.RECOMMEND else " (observe mode: reported, never applied)"
    return Recommendation(
        action=describe_action(action) + note,
        reason=reason[:MAX_REASON],
        proposed_at=proposal.proposed_at if proposal is not None else now_text,
    )


def _event(action: Action, reason: str) -> EventNote:
    text = f"{describe_action(action)}: {reason}"[:MAX_REASON]
    if isinstance(action, RollbackCanary):
        return EventNote("Warning", "CanaryRolledBack", text)
    if isinstance(action, Replan):
        return EventNote("Normal", "Replanned", text)
    return EventNote("Normal", type(action).__name__, text)


# ---------------------------------------------------------------------------------------------- status


def _conditions(inputs: TickInput, decision: Decision, calibration: CalibrationState) -> tuple[ConditionUpdate, ...]:
    true, false, unknown = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN
    observation = inputs.observation
    updates: list[ConditionUpdate] = []
    if observation is None:
        message = inputs.metrics_error or "no metrics for the target's pods"
        updates.append(ConditionUpdate(ConditionType.METRICS_AVAILABLE, false, "MetricsUnavailable", message))
        return tuple(updates)
    stale = inputs.now - observation.window_end > inputs.policy.max_staleness_s
    group = serving_group(observation, Variant.STABLE)
    samples = group.samples if group is not None else 0
    if stale:
        updates.append(
            ConditionUpdate(ConditionType.METRICS_AVAILABLE, false, "StaleMetrics", "the newest window is stale")
        )
    else:
        message = f"{samples} requests completed in the last {inputs.policy.window_s:.0f} s window"
        updates.append(ConditionUpdate(ConditionType.METRICS_AVAILABLE, true, "MetricsFresh", message))
    standing = decision.standing
    if standing and all(x.observed_s is not None for x in standing) and samples >= inputs.policy.min_samples:
        violated = any(x.violated for x in standing)
        updates.append(
            ConditionUpdate(
                ConditionType.SLO_MET,
                false if violated else true,
                "SLOViolated" if violated else "SLOMet",
                describe_standings(standing),
            )
        )
    else:
        updates.append(ConditionUpdate(ConditionType.SLO_MET, unknown, "NotEnoughData", decision.reason[:MAX_REASON]))
    drifts = calibration.drift
    if drifts:
        message = "; ".join(d.message for d in drifts)
        updates.append(ConditionUpdate(ConditionType.MODEL_DRIFT, true, "ModelDrift", message[:MAX_REASON]))
    elif calibration.estimates:
        updates.append(
            ConditionUpdate(ConditionType.MODEL_DRIFT, false, "WithinThreshold", "observed latency tracks the model")
        )
    return tuple(updates)


def _ms(values: Percentiles | None) -> PercentilesMs:
    if values is None:
        return PercentilesMs()
    return PercentilesMs(**{f"p{q}": round(values.at(q) * 1e3, 3) for q in (50, 90, 95, 99)})


def _observed(observation: Observation | None) -> ObservedStatus | None:
    if observation is None:
        return None
    group = serving_group(observation, Variant.STABLE)
    if group is None:
        return None
    return ObservedStatus(
        window_start=rfc3339(observation.window_start),
        window_end=rfc3339(observation.window_end),
        ttft_ms=_ms(group.ttft),
        tpot_ms=_ms(group.tpot),
        request_rate=group.request_rate_per_s,
        input_tokens_mean=group.mean_input_tokens,
        output_tokens_mean=group.mean_output_tokens,
        cache_hit_rate=group.cache_hit_rate,
        samples=group.samples,
    )


def _calibration_status(calibration: CalibrationState, applied: AppliedState) -> CalibrationStatus:
    ttft, tpot = calibration.of_metric(LatencyMetric.TTFT), calibration.of_metric(LatencyMetric.TPOT)
    budget = calibration.budget.standing(applied.fleet_changed_at)

    def percent(error: float | None) -> float | None:
        return None if error is None else round(100 * error, 1)

    return CalibrationStatus(
        ttft_factor=round(ttft.factor, 4) if ttft else 1.0,
        tpot_factor=round(tpot.factor, 4) if tpot else 1.0,
        ttft_tail_factor=round(ttft.tail_factor, 4) if ttft else 1.0,
        tpot_tail_factor=round(tpot.tail_factor, 4) if tpot else 1.0,
        ttft_error_percent=percent(ttft.error) if ttft else None,
        tpot_error_percent=percent(tpot.error) if tpot else None,
        confidence=round(calibration.confidence, 3),
        samples=max((e.windows for e in calibration.estimates), default=0),
        slo_windows=budget.windows,
        slo_windows_missed=budget.missed,
        slo_windows_allowed=budget.allowed,
    )
