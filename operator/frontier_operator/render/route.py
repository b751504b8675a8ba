"""Weighted traffic splitting (`spec.serving.traffic.splitting: http-route`): one Service per serving revision
and a Gateway API HTTPRoute that divides the target's traffic between them by weight.

A plain Service cannot weigh its endpoints (`traffic.service_share`); an HTTPRoute's backend weights can, in any
Gateway or mesh that implements the Gateway API. Each revision's entry Service selects that revision's entry
pods only; the route sends the serving revision the rest of the traffic and a ready canary its share. The
route carries the newest stable revision's label, so it goes with that revision when a later one replaces it,
and never with an old revision pruned beside it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from frontier_operator.api.spec import RouteParent
from frontier_operator.render.engine_args import HTTP_PORT
from frontier_operator.render.layout import FleetLayout
from frontier_operator.render.names import object_name, service_name
from frontier_operator.render.pods import (
    LABEL_ENTRYPOINT,
    LABEL_REVISION,
    LABEL_TARGET,
    TRUE,
    common_labels,
    owner_references,
)
from frontier_operator.render.workloads import http_service

ROUTE_API_VERSION = "gateway.networking.k8s.io/v1"
# Backend weights are relative integers: per mille of the traffic.
WEIGHT_SCALE = 1000


def weighted(layout: FleetLayout) -> bool:
    return layout.serving.traffic.weighted


def revision_service_name(target: str, revision: str) -> str:
    return object_name(target, revision, "entry")


def revision_service(layout: FleetLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    """The Service of one revision's entry pods: a backend of the HTTPRoute, pruned with its revision."""
    labels = {"app.kubernetes.io/name": "frontier-revision", **common_labels(layout), LABEL_REVISION: layout.revision}
    selector = {LABEL_TARGET: layout.target_label, LABEL_REVISION: layout.revision, LABEL_ENTRYPOINT: TRUE}
    return http_service(layout, revision_service_name(layout.target_name, layout.revision), labels, selector, owner)


@dataclass(frozen=True)
class RouteTemplate:
    """What the HTTPRoute of a target needs besides its weights, taken from the stable revision's layout."""

    target_name: str
    namespace: str
    labels: tuple[tuple[str, str], ...]
    parents: tuple[RouteParent, ...]
    owner: dict[str, Any] | None

    def parent_refs(self) -> list[dict[str, Any]]:
        if not self.parents:
            # A mesh (GAMMA) applies the route to traffic addressed to the target's own Service.
            return [{"group": "", "kind": "Service", "name": service_name(self.target_name), "port": HTTP_PORT}]
        refs = []
        for parent in self.parents:
            ref: dict[str, Any] = {"group": parent.group, "kind": parent.kind, "name": parent.name}
            if parent.namespace is not None:
                ref["namespace"] = parent.namespace
            if parent.section_name is not None:
                ref["sectionName"] = parent.section_name
            refs.append(ref)
        return refs


def route_template(layout: FleetLayout, owner: dict[str, Any] | None) -> RouteTemplate | None:
    """The route's template for a target whose traffic is split by HTTPRoute, else None."""
    if not weighted(layout):
        return None
    labels = {"app.kubernetes.io/name": "frontier-target", **common_labels(layout), LABEL_REVISION: layout.revision}
    return RouteTemplate(
        target_name=layout.target_name,
        namespace=layout.namespace,
        labels=tuple(labels.items()),
        parents=tuple(layout.serving.traffic.parent_refs),
        owner=owner,
    )


def http_route(template: RouteTemplate, backends: Sequence[tuple[str, int]]) -> dict[str, Any]:
    """The target's HTTPRoute sending each (revision, weight) its weight, per mille, of the traffic."""
    refs = [
        {
            "group": "",
            "kind": "Service",
            "name": revision_service_name(template.target_name, revision),
            "port": HTTP_PORT,
            "weight": weight,
        }
        for revision, weight in backends
    ]
    meta = {
        "name": service_name(template.target_name),
        "namespace": template.namespace,
        "labels": dict(template.labels),
        **owner_references(template.owner),
    }
    return {
        "apiVersion": ROUTE_API_VERSION,
        "kind": "HTTPRoute",
        "metadata": meta,
        "spec": {"parentRefs": template.parent_refs(), "rules": [{"backendRefs": refs}]},
    }
