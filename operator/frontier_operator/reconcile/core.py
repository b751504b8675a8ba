"""One reconcile step as a pure function: what to apply, what to prune, the new status, the Events.

Level-triggered: the result depends only on the target, the planner's outcome and the workloads
observed now, never on what happened in earlier calls, so running it twice changes nothing. A new
revision is rolled out beside the old one; the old one is pruned only once the new one is ready.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from frontier_operator.api.errors import FieldError
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import (
    MAX_LIST,
    CanaryStatus,
    ConditionStatus,
    ConditionType,
    ConfigStatus,
    FrontierTargetStatus,
    HistoryEntry,
    ObservedStatus,
    PlanStatus,
    RouteBackend,
)
from frontier_operator.planner.types import Infeasible, Plan
from frontier_operator.reconcile.conditions import ORDER, ConditionUpdate, apply_conditions, find_condition
from frontier_operator.reconcile.events import EventNote
from frontier_operator.reconcile.plan_status import (
    frontier_points,
    infeasibility,
    plan_status,
    rejections,
    technique_status,
)
from frontier_operator.reconcile.summary import build_summary
from frontier_operator.reconcile.tuning_tick import TuningReport
from frontier_operator.render.route import WEIGHT_SCALE, RouteTemplate, http_route

WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet")
TRUE, FALSE, UNKNOWN = ConditionStatus.TRUE, ConditionStatus.FALSE, ConditionStatus.UNKNOWN


# ----------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class InvalidSpec:
    errors: tuple[FieldError, ...]


@dataclass(frozen=True)
class CanaryRollout:
    """A second revision taking a share of the traffic while the tuning loop compares it with the stable one."""

    revision: str
    objects: tuple[dict[str, Any], ...]
    status: CanaryStatus


@dataclass(frozen=True)
class Planned:
    plan: Plan
    # The stable revision and its objects.
    revision: str
    objects: tuple[dict[str, Any], ...]
    canary: CanaryRollout | None = None
    # The configuration the stable objects run when tuning changed it from the plan's (None: the plan's).
    tuned: ConfigStatus | None = None
    # With http-route splitting, the target's HTTPRoute without its weights (None: the Service splits traffic).
    route: RouteTemplate | None = None


@dataclass(frozen=True)
class RenderFailed:
    plan: Plan
    reason: str
    detail: str


@dataclass(frozen=True)
class Deferred:
    """The plan is known, but its first deployment waits: a sweep measures before it (spec.sweep.onCreate)."""

    plan: Plan
    reason: str
    message: str


Outcome = InvalidSpec | Infeasible | Planned | RenderFailed | Deferred


@dataclass(frozen=True)
class ObservedWorkload:
    """An owned Deployment or LeaderWorkerSet as the API server reports it."""

    kind: str
    name: str
    revision: str
    desired: int
    ready: int

    @property
    def is_ready(self) -> bool:
        return self.ready >= self.desired


@dataclass(frozen=True)
class ReconcileInput:
    # None when the spec could not be parsed (then `outcome` is InvalidSpec).
    spec: FrontierTargetSpec | None
    outcome: Outcome
    observed: tuple[ObservedWorkload, ...]
    current: FrontierTargetStatus
    generation: int
    now: str
    # Re-apply every object (on create, update and resume), not only what is missing.
    force_apply: bool = False
    # What the tuning loop measured and decided on this step (None: no tick this time).
    tuning: TuningReport | None = None
    # RouteAccepted, from what the Gateway or mesh wrote on the target's HTTPRoute (None: not read).
    route_acceptance: ConditionUpdate | None = None


# ---------------------------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class ReconcileResult:
    apply: tuple[dict[str, Any], ...]
    # Revisions whose owned objects are deleted (every kind, by the frontier.dev/revision label).
    prune: tuple[str, ...]
    status: FrontierTargetStatus
    events: tuple[EventNote, ...]
    # Delete the target's HTTPRoute: the Service splits the traffic again. Left in place, a mesh would keep
    # sending all of it to the revision the route last named, and a canary would get none.
    withdraw_route: bool = False


# ------------------------------------------------------------------------------------------------ logic


def _camel(kebab: str) -> str:
    return "".join(part.capitalize() for part in kebab.split("-"))


def _wanted_workloads(objects: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Name → desired replicas of the workloads among the rendered objects."""
    return {
        obj["metadata"]["name"]: int(obj.get("spec", {}).get("replicas", 1))
        for obj in objects
        if obj.get("kind") in WORKLOAD_KINDS
    }


def _readiness(wanted: dict[str, int], observed: Sequence[ObservedWorkload]) -> tuple[bool, bool, str]:
    """(all exist, all ready, a sentence) for the wanted workloads."""
    by_name = {workload.name: workload for workload in observed}
    missing = [name for name in wanted if name not in by_name]
    ready = sum(min(by_name[name].ready, want) for name, want in wanted.items() if name in by_name)
    desired = sum(wanted.values())
    # Against the wanted count, not the one observed: a Deployment scaled up in place (a promoted canary keeps
    # its revision and its Deployments) is not ready until the added replicas are.
    waiting = [name for name, want in wanted.items() if name in by_name and by_name[name].ready < want]
    if missing:
        return False, False, f"creating {', '.join(sorted(missing))}"
    if waiting:
        return True, False, f"{ready}/{desired} replicas ready; waiting for {', '.join(sorted(waiting))}"
    return True, True, f"{desired}/{desired} replicas ready"


def _revision_readiness(revision: str | None, observed: Sequence[ObservedWorkload]) -> tuple[bool, str]:
    mine = [workload for workload in observed if workload.revision == revision]
    if revision is None or not mine:
        return False, "no workloads running"
    ready = sum(min(w.ready, w.desired) for w in mine)
    desired = sum(w.desired for w in mine)
    return all(w.is_ready for w in mine), f"{ready}/{desired} replicas of revision {revision} ready"


def _history(current: FrontierTargetStatus, entry: HistoryEntry) -> list[HistoryEntry]:
    return [*current.history, entry][-MAX_LIST:]


def reconcile(inputs: ReconcileInput) -> ReconcileResult:
    """Decide one reconcile step."""
    if isinstance(inputs.outcome, Planned):
        return _planned(inputs, inputs.outcome)
    return _not_planned(inputs, inputs.outcome)


def _planned(inputs: ReconcileInput, outcome: Planned) -> ReconcileResult:
    current, observed = inputs.current, inputs.observed
    revision = outcome.revision
    wanted = _wanted_workloads(outcome.objects)
    _exist, ready, readiness = _readiness(wanted, [w for w in observed if w.revision == revision])
    new_plan = plan_status(outcome.plan, revision)
    events: list[EventNote] = []
    previous_revision = current.plan.revision if current.plan else None
    if previous_revision != revision and outcome.tuned is None:
        first = outcome.plan.explanation[0] if outcome.plan.explanation else new_plan.config.summary
        events.append(EventNote("Normal", "PlanChosen", f"revision {revision}: {first}"))

    changed = inputs.force_apply or previous_revision != revision
    apply = outcome.objects if changed or not _in_place(wanted, observed, revision) else ()
    keep = {revision}
    if outcome.canary is not None:
        canary = outcome.canary
        keep.add(canary.revision)
        if changed or not _in_place(_wanted_workloads(canary.objects), observed, canary.revision):
            apply = (*apply, *canary.objects)
    route = _route_backends(outcome, observed, revision if ready else current.applied_revision or revision)
    if outcome.route is not None and (changed or route != current.route):
        apply = (*apply, http_route(outcome.route, [(b.revision, b.weight_per_mille) for b in route]))
    withdraw_route = outcome.route is None and bool(current.route)
    if withdraw_route:
        why = "spec.serving.traffic.splitting is service: removed the HTTPRoute; the target's Service splits traffic"
        events.append(EventNote("Normal", "RouteWithdrawn", why))
    old = {w.revision for w in observed if w.revision not in keep}
    if current.applied_revision and current.applied_revision not in keep:
        old.add(current.applied_revision)
    prune = tuple(sorted(old)) if ready else ()
    if prune:
        events.append(EventNote("Normal", "Pruned", f"revision {revision} is ready; removed {', '.join(prune)}"))

    history = list(current.history)
    if ready and current.applied_revision != revision:
        # What the revision runs: the tuning loop's configuration when it changed the plan's.
        running = outcome.tuned or new_plan.config
        events.append(EventNote("Normal", "RolledOut", f"revision {revision} serves traffic: {running.summary}"))
        history = _history(
            current,
            HistoryEntry(
                time=inputs.now,
                action=f"rolled out {running.summary}",
                reason=_reason(outcome.plan) if outcome.tuned is None else "the tuning loop's change (entry above)",
                revision=revision,
            ),
        )
    updates = [
        ConditionUpdate(ConditionType.PLAN_FEASIBLE, TRUE, "PlanChosen", new_plan.config.summary),
        ConditionUpdate(
            ConditionType.READY, TRUE if ready else FALSE, "WorkloadsReady" if ready else "WorkloadsNotReady", readiness
        ),
        ConditionUpdate(
            ConditionType.PROGRESSING, FALSE if ready else TRUE, "RolledOut" if ready else "RollingOut", readiness
        ),
        ConditionUpdate(ConditionType.DEGRADED, FALSE, "AsExpected", "the plan rendered and applied"),
        *_unknown_until_observed(current),
    ]
    if outcome.route is not None and inputs.route_acceptance is not None:
        updates.append(inputs.route_acceptance)
    report = inputs.tuning
    if report is not None:
        updates += report.conditions
        history = [*history, *report.history][-MAX_LIST:]
        events += report.events
        drift = next((u for u in report.conditions if u.type is ConditionType.MODEL_DRIFT), None)
        if drift is not None and drift.status is TRUE:
            event = EventNote("Warning", "ModelDrift", drift.message)
            events += _once(current, ConditionType.MODEL_DRIFT, drift, event)
    result = _result(
        inputs,
        updates,
        events,
        apply=apply,
        prune=prune,
        plan=new_plan,
        applied=revision if ready else current.applied_revision,
        history=history,
        outcome=outcome.plan,
        observed=report.observed if report is not None else None,
        dropped=() if outcome.route is not None else (ConditionType.ROUTE_ACCEPTED,),
    )
    return replace(_with_tuning(result, outcome, report, new_plan, route), withdraw_route=withdraw_route)


def _route_backends(outcome: Planned, observed: Sequence[ObservedWorkload], serving: str) -> list[RouteBackend]:
    """Where the HTTPRoute sends traffic: the revision that serves (the new stable one once it is ready, until
    then the one it replaces) and a canary at its share once every one of its workloads is ready — a backend
    without ready pods would fail its share of the requests."""
    if outcome.route is None:
        return []
    canary = outcome.canary
    if canary is not None:
        mine = [w for w in observed if w.revision == canary.revision]
        if _readiness(_wanted_workloads(canary.objects), mine)[1]:
            share = round(canary.status.traffic_share_percent / 100 * WEIGHT_SCALE)
            return [
                RouteBackend(revision=serving, weight_per_mille=WEIGHT_SCALE - share),
                RouteBackend(revision=canary.revision, weight_per_mille=share),
            ]
    return [RouteBackend(revision=serving, weight_per_mille=WEIGHT_SCALE)]


def _with_tuning(
    result: ReconcileResult,
    outcome: Planned,
    report: TuningReport | None,
    plan: PlanStatus,
    route: list[RouteBackend],
) -> ReconcileResult:
    """Fold the tuning loop's side of the status in: the configuration it runs, the canary, what it saw."""
    status = result.status
    applied = outcome.tuned or plan.config
    tuning = status.tuning.model_copy(update={"applied": applied})
    changes: dict[str, Any] = {
        "canary": outcome.canary.status if outcome.canary is not None else None,
        "route": route,
        "summary": status.summary.model_copy(update={"config": applied.summary, "gpus": applied.total_gpus}),
    }
    if report is not None:
        tuning = tuning.model_copy(
            update={
                "last_evaluated_at": report.evaluated_at,
                "last_decision": report.last_decision,
                "last_decision_reason": report.last_decision_reason,
            }
        )
        changes |= {
            "calibration": report.calibration,
            "recommendation": report.recommendation,
        }
    changes["tuning"] = tuning
    return replace(result, status=status.model_copy(update=changes))


def _in_place(wanted: dict[str, int], observed: Sequence[ObservedWorkload], revision: str) -> bool:
    """Every wanted workload of the revision exists with the wanted replica count (a scale step changes it)."""
    by_name = {w.name: w for w in observed if w.revision == revision}
    return all(name in by_name and by_name[name].desired == want for name, want in wanted.items())


def _reason(plan: Plan) -> str:
    return plan.explanation[0] if plan.explanation else "chosen by the planner"


def _unknown_until_observed(current: FrontierTargetStatus) -> list[ConditionUpdate]:
    """SLOMet and MetricsAvailable belong to the tuning loop; until it reports they are Unknown."""
    return [
        ConditionUpdate(kind, UNKNOWN, "NotObservedYet", "no metrics window has been evaluated yet")
        for kind in (ConditionType.SLO_MET, ConditionType.METRICS_AVAILABLE)
        if find_condition(current.conditions, kind) is None
    ]


def _not_planned(
    inputs: ReconcileInput, outcome: InvalidSpec | Infeasible | RenderFailed | Deferred
) -> ReconcileResult:
    """Nothing new is applied; whatever already runs keeps running and Ready keeps telling its truth."""
    current = inputs.current
    running_ready, running = _revision_readiness(current.applied_revision, inputs.observed)
    ready = ConditionUpdate(
        ConditionType.READY,
        TRUE if running_ready else FALSE,
        "WorkloadsReady" if running_ready else "NoServingRevision",
        running,
    )
    if isinstance(outcome, Deferred):
        summary = plan_status(outcome.plan, "").config.summary
        updates = [
            ConditionUpdate(ConditionType.PLAN_FEASIBLE, TRUE, "PlanChosen", summary),
            ConditionUpdate(ConditionType.PROGRESSING, TRUE, outcome.reason, outcome.message[:4000]),
            ready,
            *_unknown_until_observed(current),
        ]
        return _result(
            inputs,
            updates,
            [],
            plan=current.plan,
            applied=current.applied_revision,
            history=list(current.history),
            outcome=outcome.plan,
        )
    if isinstance(outcome, InvalidSpec):
        message = "; ".join(str(error) for error in outcome.errors)[:4000]
        updates = [
            ConditionUpdate(ConditionType.PLAN_FEASIBLE, FALSE, "InvalidSpec", message),
            ConditionUpdate(ConditionType.PROGRESSING, FALSE, "InvalidSpec", "fix the spec to continue"),
            ready,
        ]
        event = EventNote("Warning", "InvalidSpec", message)
        return _result(
            inputs,
            updates,
            _once(current, ConditionType.PLAN_FEASIBLE, updates[0], event),
            plan=current.plan,
            applied=current.applied_revision,
            history=list(current.history),
        )
    if isinstance(outcome, RenderFailed):
        message = f"{outcome.reason}: {outcome.detail}"
        updates = [
            ConditionUpdate(ConditionType.PLAN_FEASIBLE, TRUE, "PlanChosen", "a configuration meets the SLO"),
            ConditionUpdate(ConditionType.DEGRADED, TRUE, "RenderFailed", message),
            ConditionUpdate(ConditionType.PROGRESSING, FALSE, "RenderFailed", message),
            ready,
        ]
        event = EventNote("Warning", "RenderFailed", message)
        return _result(
            inputs,
            updates,
            _once(current, ConditionType.DEGRADED, updates[1], event),
            plan=current.plan,
            applied=current.applied_revision,
            history=list(current.history),
        )
    message = " ".join([outcome.summary, *(s.text for s in outcome.suggestions[:3])])[:4000]
    updates = [
        ConditionUpdate(ConditionType.PLAN_FEASIBLE, FALSE, _camel(outcome.reason.value), message),
        ConditionUpdate(ConditionType.PROGRESSING, FALSE, "PlanInfeasible", "no configuration meets the SLO"),
        ready,
        *_unknown_until_observed(current),
    ]
    event = EventNote("Warning", "Infeasible", message)
    return _result(
        inputs,
        updates,
        _once(current, ConditionType.PLAN_FEASIBLE, updates[0], event),
        plan=current.plan,
        applied=current.applied_revision,
        history=list(current.history),
        outcome=outcome,
    )


def refused_by_api(inputs: ReconcileInput, result: ReconcileResult, message: str) -> ReconcileResult:
    """The API server refused objects this step applied with an error retrying cannot fix (422: invalid
    for this cluster's validation; 403: forbidden): Degraded and not Progressing, one Warning naming the
    objects and the server's reason, whatever already runs left running. The next re-check applies again,
    so a fixed cluster (or spec) recovers without a restart."""
    updates = [
        ConditionUpdate(ConditionType.DEGRADED, TRUE, "ApplyRefused", message),
        ConditionUpdate(ConditionType.PROGRESSING, FALSE, "ApplyRefused", message),
    ]
    # Transition times come from the stored conditions: a refusal found again on the next re-check
    # changes nothing (no status write, no second Warning).
    refusal = {c.type: c for c in apply_conditions(inputs.current.conditions, updates, inputs.now, inputs.generation)}
    by_type = {c.type: c for c in result.status.conditions} | {u.type: refusal[u.type] for u in updates}
    conditions = [by_type[kind] for kind in ORDER if kind in by_type]
    event = EventNote("Warning", "ApplyRefused", message)
    events = [*result.events, *_once(inputs.current, ConditionType.DEGRADED, updates[0], event)]
    return replace(result, status=result.status.model_copy(update={"conditions": conditions}), events=tuple(events))


def _once(
    current: FrontierTargetStatus, kind: ConditionType, update: ConditionUpdate, event: EventNote
) -> list[EventNote]:
    """A Warning only when the condition changes, not on every timer tick that finds the same problem."""
    before = find_condition(current.conditions, kind)
    unchanged = before is not None and (before.status, before.reason, before.message) == (
        update.status,
        update.reason,
        update.message,
    )
    return [] if unchanged else [event]


def _result(
    inputs: ReconcileInput,
    updates: list[ConditionUpdate],
    events: list[EventNote],
    *,
    plan: PlanStatus | None,
    applied: str | None,
    history: list[HistoryEntry],
    apply: tuple[dict[str, Any], ...] = (),
    prune: tuple[str, ...] = (),
    outcome: Plan | Infeasible | None = None,
    observed: ObservedStatus | None = None,
    dropped: tuple[ConditionType, ...] = (),
) -> ReconcileResult:
    current, spec = inputs.current, inputs.spec
    kept = [c for c in current.conditions if c.type not in dropped]
    conditions = apply_conditions(kept, updates, inputs.now, inputs.generation)
    changes: dict[str, Any] = {
        "observed_generation": inputs.generation,
        "conditions": conditions,
        "plan": plan,
        "applied_revision": applied,
        "history": history,
    }
    if isinstance(outcome, Plan):
        chosen_cost = outcome.chosen.prediction.cost_per_mtok
        changes |= {
            "frontier": frontier_points(outcome.frontier, chosen_cost),
            "rejected": rejections(outcome.runner_ups, outcome.rejections),
            "techniques": technique_status(outcome.technique_shifts),
            "infeasible": None,
        }
    elif isinstance(outcome, Infeasible):
        changes |= {
            "frontier": frontier_points(outcome.frontier, None),
            "rejected": rejections((), outcome.rejections),
            "techniques": technique_status(outcome.technique_shifts),
            "infeasible": infeasibility(outcome),
        }
    if spec is not None:
        observed = observed or current.observed
        changes["observed"] = observed
        changes["summary"] = build_summary(
            spec, conditions, plan, observed.ttft_ms if observed else None, observed.tpot_ms if observed else None
        )
    status = current.model_copy(update=changes)
    return ReconcileResult(apply=apply, prune=prune, status=status, events=tuple(events))
