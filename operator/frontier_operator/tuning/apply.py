"""What an applied action does to the tuning inputs: the next `AppliedState` and `ModelContext`.

Pure bookkeeping, shared by the operator (after its Kubernetes writes succeed) and the simulator: the
desired fleet, the canary, the change history the cooldown and budget count, rejected configurations,
and, for a re-plan, the new plan with the calibration rebased on it. Readiness is not touched: after a
change the caller reports ready < desired until the pods are up.
"""

from __future__ import annotations

from dataclasses import replace

from frontier_operator.perf.types import Role
from frontier_operator.tuning.actions import (
    Action,
    PromoteCanary,
    Replan,
    RollbackCanary,
    ScaleReplicas,
    SetBatchCap,
    SetPdRatio,
    StartCanary,
    next_config,
)
from frontier_operator.tuning.calibration import rebase
from frontier_operator.tuning.state import (
    AppliedState,
    CanaryState,
    ChangeKind,
    ChangeRecord,
    ModelContext,
    RejectedConfig,
)
from frontier_operator.tuning.structure import rejection_key


def _record(action: Action, now: float, rate: float | None) -> ChangeRecord | None:
    if isinstance(action, ScaleReplicas):
        direction = (action.to_replicas > action.from_replicas) - (action.to_replicas < action.from_replicas)
        return ChangeRecord(
            now, ChangeKind.SCALE, action.role, direction, action.from_replicas, action.to_replicas, rate
        )
    if isinstance(action, SetBatchCap):
        direction = (action.to_cap > action.from_cap) * 2 - 1
        return ChangeRecord(now, ChangeKind.BATCH_CAP, action.role, direction, action.from_cap, action.to_cap, rate)
    if isinstance(action, SetPdRatio):
        return ChangeRecord(now, ChangeKind.PD_RATIO, Role.PREFILL, (action.prefill_to > action.prefill_from) * 2 - 1)
    if isinstance(action, StartCanary):
        return ChangeRecord(now, ChangeKind.CANARY_START)
    if isinstance(action, PromoteCanary):
        return ChangeRecord(now, ChangeKind.PROMOTE)
    if isinstance(action, RollbackCanary):
        return ChangeRecord(now, ChangeKind.ROLLBACK)
    return None


def applied_after(
    applied: AppliedState,
    action: Action,
    now: float,
    *,
    revision: str | None = None,
    request_rate_per_s: float | None = None,
    keep_history_s: float = 86400.0,
) -> AppliedState:
    """The applied state once `action` is carried out.

    `revision` names a new canary's revision; `request_rate_per_s` is the stable pods' rate in the window
    the decision looked at (it lets a later scale-down tell a traffic drop from noise).
    """
    record = _record(action, now, request_rate_per_s)
    history = tuple(r for r in applied.history if r.at > now - keep_history_s)
    if record is not None:
        history = (*history, record)
    state = replace(applied, history=history)
    reshaped = next_config(applied.config, action)
    if reshaped is not None:
        return replace(state, config=reshaped)
    if isinstance(action, StartCanary):
        canary = CanaryState(
            revision=revision or "canary",
            config=action.config,
            deployed=action.canary,
            pool=action.pool,
            share=action.share,
            motive=action.motive,
            started_at=now,
            image=action.image,
        )
        explored = now if action.exploration else applied.last_exploration_at
        return replace(state, canary=canary, last_exploration_at=explored)
    if isinstance(action, PromoteCanary) and applied.canary is not None:
        canary = applied.canary
        return replace(
            state,
            config=canary.config,
            pool=canary.pool,
            revision=canary.revision,
            image=canary.image or applied.image,
            canary=None,
        )
    if isinstance(action, RollbackCanary) and applied.canary is not None:
        canary = applied.canary
        rejected = RejectedConfig(rejection_key(canary.config, canary.pool, canary.image), now, action.at_rate_per_s)
        return replace(state, canary=None, rejected=(*applied.rejected, rejected))
    return state


def model_after(model: ModelContext, action: Action) -> ModelContext:
    """A re-plan becomes the plan in force, made for its workload, and drift is measured against it."""
    if isinstance(action, Replan):
        return replace(model, plan=action.result, plan_workload=action.workload, calibration=rebase(model.calibration))
    return model
