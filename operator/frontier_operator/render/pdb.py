"""PodDisruptionBudgets: a node drain takes down at most one engine replica (and one router pod) at a time."""

from __future__ import annotations

from typing import Any

from frontier_operator.render.layout import FleetLayout, RoleLayout
from frontier_operator.render.pods import COMPONENT_ENGINE, COMPONENT_ROUTER, revision_labels, selector_labels
from frontier_operator.render.workloads import metadata


def _budget(
    layout: FleetLayout,
    *,
    name: str,
    labels: dict[str, str],
    selector: dict[str, str],
    rule: dict[str, int],
    owner: dict[str, Any] | None,
) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(layout, name, labels, owner),
        "spec": {**rule, "selector": {"matchLabels": selector}},
    }


def engine_budget(layout: FleetLayout, role: RoleLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    labels = revision_labels(layout, COMPONENT_ENGINE, role.role.value)
    selector = selector_labels(layout, role.role.value)
    if role.uses_leader_worker_set:
        # Losing one pod restarts its whole group, so count pods: all groups but one stay whole.
        # (LeaderWorkerSet pods are owned by StatefulSets; an integer minAvailable works for any owner.)
        rule = {"minAvailable": (role.replicas - 1) * role.pods_per_replica}
    else:
        rule = {"maxUnavailable": 1}
    return _budget(layout, name=role.workload_name, labels=labels, selector=selector, rule=rule, owner=owner)


def router_budget(layout: FleetLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    labels = revision_labels(layout, COMPONENT_ROUTER, COMPONENT_ROUTER)
    return _budget(
        layout,
        name=layout.name(COMPONENT_ROUTER),
        labels=labels,
        selector=selector_labels(layout, COMPONENT_ROUTER),
        rule={"maxUnavailable": 1},
        owner=owner,
    )
