"""Whether the target's HTTPRoute is in force: what the Gateway or mesh wrote in its status.

A weighted route only splits traffic once an implementation of the Gateway API has accepted it for its parents;
until then the weights are a wish, and the traffic follows whatever else routes it (the target's Service,
which gives a canary half). Each implementation reports per parent (`status.parents[]`): `Accepted` (it
attached the route) and `ResolvedRefs` (it found every backend Service), each stamped with the route's
generation it saw.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from frontier_operator.api.status import ConditionStatus, ConditionType
from frontier_operator.reconcile.conditions import ConditionUpdate

# The conditions an implementation sets on each parent of a route, both of which must hold.
REQUIRED = ("Accepted", "ResolvedRefs")


def _parent_label(ref: Mapping[str, Any]) -> str:
    namespace = f"{ref['namespace']}/" if ref.get("namespace") else ""
    return f"{ref.get('kind', 'Gateway')} {namespace}{ref.get('name', '?')}"


def _same_parent(wanted: Mapping[str, Any], reported: Mapping[str, Any]) -> bool:
    keys = ("kind", "name", "namespace", "sectionName")
    return all(wanted.get(key) == reported.get(key) for key in keys if wanted.get(key) is not None)


def _refusals(parent: Mapping[str, Any], generation: int) -> tuple[list[str], list[str]]:
    """(why the parent refuses the route, what it has not reported on this generation yet)."""
    conditions = {c.get("type"): c for c in parent.get("conditions") or []}
    label = _parent_label(parent.get("parentRef") or {})
    refused, pending = [], []
    for kind in REQUIRED:
        condition = conditions.get(kind)
        if condition is None or int(condition.get("observedGeneration", generation)) < generation:
            pending.append(f"{label}: {kind} not reported for generation {generation}")
        elif condition.get("status") != "True":
            detail = condition.get("message") or condition.get("reason") or "no reason given"
            refused.append(f"{label}: {kind}={condition.get('status')} ({detail})")
    return refused, pending


def route_acceptance(route: Mapping[str, Any] | None) -> ConditionUpdate:
    """RouteAccepted from the HTTPRoute as the API server holds it (None: it does not exist)."""
    kind = ConditionType.ROUTE_ACCEPTED
    if route is None:
        return ConditionUpdate(kind, ConditionStatus.UNKNOWN, "RouteMissing", "the HTTPRoute does not exist yet")
    generation = int(route.get("metadata", {}).get("generation", 0))
    wanted: Sequence[Mapping[str, Any]] = route.get("spec", {}).get("parentRefs") or []
    reported: Sequence[Mapping[str, Any]] = (route.get("status") or {}).get("parents") or []
    refused, pending = [], []
    for ref in wanted:
        parent = next((p for p in reported if _same_parent(ref, p.get("parentRef") or {})), None)
        if parent is None:
            pending.append(f"{_parent_label(ref)}: no Gateway API implementation has reported on it")
            continue
        no, waiting = _refusals(parent, generation)
        refused += no
        pending += waiting
    if refused:
        message = "; ".join(refused)
        return ConditionUpdate(kind, ConditionStatus.FALSE, "NotAccepted", message)
    if pending:
        message = "; ".join(pending)
        return ConditionUpdate(kind, ConditionStatus.UNKNOWN, "NotReportedYet", message)
    parents = ", ".join(_parent_label(ref) for ref in wanted)
    return ConditionUpdate(kind, ConditionStatus.TRUE, "Accepted", f"accepted by {parents}")


def route_refusal(acceptance: ConditionUpdate | None) -> str | None:
    """Why a Gateway or mesh refuses the route (RouteAccepted=False), or None: then no canary starts."""
    return acceptance.message if acceptance is not None and acceptance.status is ConditionStatus.FALSE else None
