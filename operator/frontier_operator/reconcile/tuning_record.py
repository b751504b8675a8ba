"""The tuning loop's memory between ticks, kept on the target itself in the `frontier.dev/tuning` annotation.

What the loop must remember is not in any object the operator could read back: the calibration learnt
from past windows, the change history the cooldown and the hourly budget count, the canary's motive and
start, configurations already rolled back, and the basis of a re-plan. Kept as an annotation (like Kopf's
own bookkeeping), it survives operator restarts and fail-overs, moves with the object in a backup, and is
never a spec field a GitOps pipeline would fight over; status shows its human-readable summary.

The record belongs to one spec: `spec_key` hashes the spec without the fields tuning itself acts on (the
`tuning` section and, outside observe mode, the engine image, which is rolled out by canary). Any other
spec change starts a fresh record from the new plan.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import TypeAdapter, ValidationError

from frontier_operator.api.annotations import PREFIX
from frontier_operator.api.spec import FrontierTargetSpec, TuningMode
from frontier_operator.perf.types import Workload
from frontier_operator.reconcile.record_codec import RecordCodec
from frontier_operator.tuning.actions import (
    Action,
    NoAction,
    PromoteCanary,
    Replan,
    RollbackCanary,
    ScaleReplicas,
    SetBatchCap,
    SetPdRatio,
    StartCanary,
)
from frontier_operator.tuning.calibration import CalibrationState
from frontier_operator.tuning.state import AppliedState

ANNOTATION = f"{PREFIX}tuning"
RECORD_VERSION = 1

# Actions a recommendation can hold (a re-plan is applied in every mode, so it is never pending).
_PROPOSABLE: dict[str, type[Any]] = {
    kind.__name__: kind for kind in (ScaleReplicas, SetBatchCap, SetPdRatio, StartCanary, PromoteCanary, RollbackCanary)
}


@dataclass(frozen=True)
class Proposal:
    """A recommendation waiting for `frontier approve` (the annotation's value must equal `proposed_at`)."""

    proposed_at: str
    kind: str
    action: dict[str, Any]
    # The stable revision it was proposed for: approving it after the fleet changed applies nothing.
    for_revision: str


@dataclass(frozen=True)
class PlanBasis:
    """What the plan in force was made from after a re-plan (None in the record: the spec's own plan)."""

    workload: Workload
    calibration: CalibrationState


@dataclass(frozen=True)
class Previous:
    """The stable fleet before the last change that replaced it, for `frontier rollback` without a canary."""

    applied: AppliedState


@dataclass(frozen=True)
class TuningRecord:
    spec_key: str
    applied: AppliedState
    calibration: CalibrationState = field(default_factory=CalibrationState)
    plan_basis: PlanBasis | None = None
    last_tick_at: float | None = None
    proposal: Proposal | None = None
    previous: Previous | None = None
    # The last `frontier.dev/rollback` value acted on: an annotation left in place is not obeyed twice.
    rollback_token: str | None = None
    version: int = RECORD_VERSION


_CODEC = RecordCodec(TuningRecord, RECORD_VERSION)
encode_record = _CODEC.encode
decode_record = _CODEC.decode


def spec_key(spec: FrontierTargetSpec) -> str:
    excluded: dict[str, Any] = {"tuning": True}
    if spec.tuning.mode is not TuningMode.OBSERVE:
        excluded["serving"] = {"image"}
    text = spec.model_dump_json(by_alias=True, exclude=excluded)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode_action(action: Action) -> tuple[str, dict[str, Any]]:
    kind = type(action).__name__
    if kind not in _PROPOSABLE:
        raise ValueError(f"{kind} is never proposed")
    data: dict[str, Any] = TypeAdapter(_PROPOSABLE[kind]).dump_python(action, mode="json")
    return kind, json.loads(json.dumps(data))


def decode_action(kind: str, data: dict[str, Any]) -> Action | None:
    action_type = _PROPOSABLE.get(kind)
    if action_type is None:
        return None
    try:
        action: Action = TypeAdapter(action_type).validate_python(data)
    except ValidationError:
        return None
    return action


def is_proposable(action: Action) -> bool:
    return not isinstance(action, NoAction | Replan)
