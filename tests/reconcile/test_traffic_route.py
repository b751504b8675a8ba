"""Weighted traffic splitting (spec.serving.traffic.splitting: http-route): the per-revision Services, the HTTPRoute
and the weights the reconcile step gives it as revisions and canaries become ready."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest
import yaml

from frontier_operator.api import parse_target
from frontier_operator.api.status import (
    CanaryStatus,
    ConditionStatus,
    ConditionType,
    FrontierTargetStatus,
    RouteBackend,
)
from frontier_operator.perf.types import ServingConfig
from frontier_operator.reconcile.conditions import find_condition
from frontier_operator.reconcile.core import (
    CanaryRollout,
    ObservedWorkload,
    Planned,
    ReconcileInput,
    ReconcileResult,
    reconcile,
)
from frontier_operator.reconcile.route_status import route_acceptance
from frontier_operator.render import RenderRequest, Variant, render_fleet
from frontier_operator.render.names import service_name
from frontier_operator.render.route import revision_service_name
from hardening_support import operator_outcome
from schema_tools import ROOT

NOW = "2026-12-01T12:00:00Z"
GATEWAY = {"name": "inference", "namespace": "gateways", "sectionName": "https"}


def _document(**traffic: Any) -> dict[str, Any]:
    document = yaml.safe_load((ROOT / "examples" / "llama-70b-chat.yaml").read_text(encoding="utf-8"))
    document["metadata"]["namespace"] = "serving"
    document["spec"].setdefault("serving", {})["traffic"] = traffic
    return document


def _planned(document: dict[str, Any]) -> Planned:
    outcome, _ = operator_outcome(copy.deepcopy(document), "serving")
    assert isinstance(outcome, Planned), outcome
    return outcome


def _workloads(objects: tuple[dict[str, Any], ...], revision: str, *, ready: bool) -> tuple[ObservedWorkload, ...]:
    return tuple(
        ObservedWorkload(
            o["kind"], o["metadata"]["name"], revision, o["spec"]["replicas"], o["spec"]["replicas"] * ready
        )
        for o in objects
        if o["kind"] in ("Deployment", "LeaderWorkerSet")
    )


def _step(
    planned: Planned, observed: tuple[ObservedWorkload, ...], current: FrontierTargetStatus | None = None
) -> ReconcileResult:
    current = current or FrontierTargetStatus()
    return reconcile(ReconcileInput(None, planned, observed, current, 1, NOW))


def _route(result: ReconcileResult) -> dict[str, Any] | None:
    return next((o for o in result.apply if o["kind"] == "HTTPRoute"), None)


def _weights(route: dict[str, Any]) -> dict[str, int]:
    (rule,) = route["spec"]["rules"]
    return {ref["name"]: ref["weight"] for ref in rule["backendRefs"]}


def _canary(planned: Planned, share: float) -> CanaryRollout:
    """A canary of the plan's configuration at half its batch cap: another revision."""
    config = planned.plan.chosen.config
    worker = replace(config.roles[0].worker, max_running_requests=config.roles[0].worker.max_running_requests // 2)
    changed = ServingConfig(config.model, (replace(config.roles[0], worker=worker),))
    request = RenderRequest(
        target=parse_target(_document(splitting="http-route")),
        config=changed,
        pool_name=planned.plan.chosen.pool.name,
        variant=Variant.CANARY,
    )
    objects = tuple(render_fleet(request))
    revision = objects[-1]["metadata"]["labels"]["frontier.dev/revision"]
    return CanaryRollout(
        revision,
        objects,
        CanaryStatus(revision=revision, summary="canary", traffic_share_percent=100 * share, started_at=NOW),
    )


def test_service_splitting_renders_no_route_and_no_revision_service() -> None:
    planned = _planned(_document())
    assert planned.route is None
    assert [o for o in planned.objects if o["kind"] == "Service"] == [
        o for o in planned.objects if o["metadata"]["name"] == service_name("llama-70b-chat")
    ]
    result = _step(planned, _workloads(planned.objects, planned.revision, ready=True))
    assert _route(result) is None and result.status.route == []


def test_each_revision_gets_a_service_of_its_own_entry_pods() -> None:
    planned = _planned(_document(splitting="http-route"))
    name = revision_service_name("llama-70b-chat", planned.revision)
    (service,) = [o for o in planned.objects if o["metadata"]["name"] == name]
    assert service["spec"]["selector"] == {
        "frontier.dev/target": "llama-70b-chat",
        "frontier.dev/revision": planned.revision,
        "frontier.dev/entrypoint": "true",
    }
    # Pruned with its revision.
    assert service["metadata"]["labels"]["frontier.dev/revision"] == planned.revision


def test_the_route_attaches_to_the_target_service_for_a_mesh_unless_parents_are_given() -> None:
    planned = _planned(_document(splitting="http-route"))
    route = _route(_step(planned, _workloads(planned.objects, planned.revision, ready=True)))
    assert route is not None
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["metadata"]["name"] == "llama-70b-chat"
    assert route["spec"]["parentRefs"] == [{"group": "", "kind": "Service", "name": "llama-70b-chat", "port": 30000}]
    assert _weights(route) == {revision_service_name("llama-70b-chat", planned.revision): 1000}

    gateway = _planned(_document(splitting="http-route", parentRefs=[GATEWAY]))
    route = _route(_step(gateway, _workloads(gateway.objects, gateway.revision, ready=True)))
    assert route is not None
    assert route["spec"]["parentRefs"] == [
        {
            "group": "gateway.networking.k8s.io",
            "kind": "Gateway",
            "name": "inference",
            "namespace": "gateways",
            "sectionName": "https",
        }
    ]


def test_a_new_revision_takes_the_traffic_only_once_it_is_ready() -> None:
    planned = _planned(_document(splitting="http-route"))
    old = "0ld0ld00"
    current = FrontierTargetStatus(applied_revision=old)
    observed = (ObservedWorkload("Deployment", "old", old, 1, 1),)
    waiting = _step(planned, observed + _workloads(planned.objects, planned.revision, ready=False), current)
    assert waiting.status.route == [RouteBackend(revision=old, weight_per_mille=1000)]
    assert waiting.prune == ()
    ready = _step(planned, observed + _workloads(planned.objects, planned.revision, ready=True), current)
    assert ready.status.route == [RouteBackend(revision=planned.revision, weight_per_mille=1000)]
    assert ready.prune == (old,)


def test_a_canary_gets_its_share_once_every_workload_of_it_is_ready() -> None:
    planned = _planned(_document(splitting="http-route"))
    canary = _canary(planned, 0.1)
    with_canary = replace(planned, canary=canary)
    stable = _workloads(planned.objects, planned.revision, ready=True)
    starting = _step(with_canary, stable + _workloads(canary.objects, canary.revision, ready=False))
    assert starting.status.route == [RouteBackend(revision=planned.revision, weight_per_mille=1000)]
    ready = _step(with_canary, stable + _workloads(canary.objects, canary.revision, ready=True), starting.status)
    assert ready.status.route == [
        RouteBackend(revision=planned.revision, weight_per_mille=900),
        RouteBackend(revision=canary.revision, weight_per_mille=100),
    ]
    route = _route(ready)
    assert route is not None and _weights(route) == {
        revision_service_name("llama-70b-chat", planned.revision): 900,
        revision_service_name("llama-70b-chat", canary.revision): 100,
    }
    # Nothing changed since: the route is not applied again.
    again = _step(with_canary, stable + _workloads(canary.objects, canary.revision, ready=True), ready.status)
    assert _route(again) is None and again.status.route == ready.status.route


def test_switching_back_to_the_service_withdraws_the_route_once() -> None:
    routed = _planned(_document(splitting="http-route"))
    stable = _workloads(routed.objects, routed.revision, ready=True)
    before = _step(routed, stable)
    assert before.status.route and not before.withdraw_route
    # Same engines, same revision: only the split changes.
    plain = _planned(_document(splitting="service"))
    assert plain.revision == routed.revision
    after = _step(plain, stable, before.status)
    assert after.withdraw_route and after.status.route == []
    assert _route(after) is None and after.prune == ()
    assert [e.reason for e in after.events] == ["RouteWithdrawn"]
    assert not _step(plain, stable, after.status).withdraw_route


def _reported(*parents: dict[str, Any], generation: int = 2) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"parentRefs": [{"kind": "Gateway", **GATEWAY}]},
        "status": {"parents": list(parents)},
    }


def _parent(accepted: str = "True", resolved: str = "True", seen: int = 2, **ref: str) -> dict[str, Any]:
    def condition(kind: str, status: str, reason: str) -> dict[str, Any]:
        return {"type": kind, "status": status, "reason": reason, "message": reason, "observedGeneration": seen}

    return {
        "parentRef": {"kind": "Gateway", **GATEWAY, **ref},
        "controllerName": "example.net/gateway",
        "conditions": [
            condition("Accepted", accepted, "Accepted" if accepted == "True" else "NotAllowedByListeners"),
            condition("ResolvedRefs", resolved, "ResolvedRefs" if resolved == "True" else "BackendNotFound"),
        ],
    }


def test_the_route_is_in_force_only_once_every_parent_accepted_it_and_resolved_its_backends() -> None:
    accepted = route_acceptance(_reported(_parent()))
    assert (accepted.status, accepted.reason) == (ConditionStatus.TRUE, "Accepted")
    assert accepted.message == "accepted by Gateway gateways/inference"
    refused = route_acceptance(_reported(_parent(accepted="False")))
    assert (refused.status, refused.reason) == (ConditionStatus.FALSE, "NotAccepted")
    # The refusal alone: the tuning loop's decision says what it holds back ("canaries wait: ...").
    assert refused.message == "Gateway gateways/inference: Accepted=False (NotAllowedByListeners)"
    unresolved = route_acceptance(_reported(_parent(resolved="False")))
    assert unresolved.status is ConditionStatus.FALSE and "ResolvedRefs=False (BackendNotFound)" in unresolved.message


@pytest.mark.parametrize(
    ("route", "says"),
    [
        (None, "does not exist yet"),
        (_reported(), "no Gateway API implementation has reported on it"),
        # A status about an older generation says nothing of the weights applied since.
        (_reported(_parent(seen=1)), "Accepted not reported for generation 2"),
        # Another listener of the same Gateway is not this parent.
        (_reported(_parent(sectionName="http")), "no Gateway API implementation has reported on it"),
    ],
)
def test_until_an_implementation_reports_on_this_generation_acceptance_is_unknown(
    route: dict[str, Any] | None, says: str
) -> None:
    unknown = route_acceptance(route)
    assert unknown.status is ConditionStatus.UNKNOWN and says in unknown.message


def test_route_accepted_is_a_condition_of_http_route_splitting_only() -> None:
    routed = _planned(_document(splitting="http-route", parentRefs=[GATEWAY]))
    stable = _workloads(routed.objects, routed.revision, ready=True)
    acceptance = route_acceptance(_reported(_parent("False")))
    refused = reconcile(
        ReconcileInput(None, routed, stable, FrontierTargetStatus(), 1, NOW, route_acceptance=acceptance)
    )
    condition = find_condition(refused.status.conditions, ConditionType.ROUTE_ACCEPTED)
    assert condition is not None and condition.status is ConditionStatus.FALSE
    plain = _planned(_document(splitting="service"))
    after = _step(plain, stable, refused.status)
    assert find_condition(after.status.conditions, ConditionType.ROUTE_ACCEPTED) is None
