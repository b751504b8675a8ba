"""`render_fleet`: a plan and its target → every Kubernetes object of one revision, in a stable order.

The order is the one `kubectl apply -f` would want: identities and permissions, Services, workloads,
then budgets and monitors. The same request always gives the same list, byte for byte once dumped.
"""

from __future__ import annotations

from typing import Any

from frontier_operator.render.layout import FleetLayout, resolve_layout
from frontier_operator.render.monitoring import pod_monitors
from frontier_operator.render.pdb import engine_budget, router_budget
from frontier_operator.render.pods import serves_users
from frontier_operator.render.request import RenderRequest
from frontier_operator.render.route import WEIGHT_SCALE, http_route, revision_service, route_template, weighted
from frontier_operator.render.router import router_objects
from frontier_operator.render.workloads import engine_workload, target_service

KIND_ORDER = (
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Service",
    "HTTPRoute",
    "Deployment",
    "LeaderWorkerSet",
    "PodDisruptionBudget",
    "PodMonitor",
)


def render_layout(layout: FleetLayout, owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [target_service(layout, owner)]
    if weighted(layout) and serves_users(layout):
        objects.append(revision_service(layout, owner))
    objects += [engine_workload(layout, role, owner) for role in layout.roles]
    objects += [engine_budget(layout, role, owner) for role in layout.roles]
    if layout.has_router:
        objects += router_objects(layout, owner)
        objects.append(router_budget(layout, owner))
    objects += pod_monitors(layout, owner)
    # Stable sort: within a kind, the build order above (prefill, decode, unified, router) is kept.
    return sorted(objects, key=lambda obj: KIND_ORDER.index(obj["kind"]))


def render_fleet(request: RenderRequest, *, with_route: bool = False) -> list[dict[str, Any]]:
    """Every object of the request's revision; raises `RenderError` when the plan cannot be rendered.

    `with_route`: with http-route splitting, also the target's HTTPRoute sending this revision all the traffic —
    what a target without a canary runs (`frontier render` for a GitOps pipeline; the operator sets the weights).
    """
    owner = request.owner.to_dict() if request.owner is not None else None
    layout = resolve_layout(request)
    objects = render_layout(layout, owner)
    template = route_template(layout, owner) if with_route else None
    if template is not None:
        objects.append(http_route(template, [(layout.revision, WEIGHT_SCALE)]))
    return sorted(objects, key=lambda obj: KIND_ORDER.index(obj["kind"]))
