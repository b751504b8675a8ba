"""Kubernetes-style conditions: `lastTransitionTime` moves only when a condition's status flips.

Reasons are CamelCase constants so that programs (Argo CD health checks, alerts) can switch on
them; messages are for people.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from frontier_operator.api.status import Condition, ConditionStatus, ConditionType


@dataclass(frozen=True)
class ConditionUpdate:
    type: ConditionType
    status: ConditionStatus
    reason: str
    message: str


# Conditions appear in this order, whatever order they were set in.
ORDER = list(ConditionType)


def apply_conditions(
    current: Sequence[Condition], updates: Sequence[ConditionUpdate], now: str, generation: int | None
) -> list[Condition]:
    """Merge updates into the current conditions; untouched conditions stay as they are."""
    by_type = {condition.type: condition for condition in current}
    for update in updates:
        previous = by_type.get(update.type)
        flipped = previous is None or previous.status is not update.status
        by_type[update.type] = Condition(
            type=update.type,
            status=update.status,
            reason=update.reason,
            message=update.message,
            last_transition_time=now if flipped or previous is None else previous.last_transition_time,
            observed_generation=generation,
        )
    return [by_type[kind] for kind in ORDER if kind in by_type]


def find_condition(conditions: Sequence[Condition], kind: ConditionType) -> Condition | None:
    return next((condition for condition in conditions if condition.type is kind), None)
