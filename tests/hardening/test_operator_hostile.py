"""The running operator (real Kopf, the stand-in API server) under a batch of hostile FrontierTargets.

What the API server refuses never reaches the operator (422 at create). What it admits but the operator
refuses — invalid values only the models catch, unknown names, impossible SLOs, flags the operator owns
— gets a condition and one Warning per problem, is not retried in a loop, and the good targets created
alongside reconcile and become Ready meanwhile.
"""

from __future__ import annotations

import time
import urllib.parse
from collections import Counter
from typing import Any

import kubernetes

from hardening_support import ready_when_marked
from hostile_corpus import CASES, Case
from k8s_standin.fixtures import request_json, wait_for, wait_for_object
from operator_support import FT, OPERATOR, condition, create, engine_deployments, events_for, target_document

IDENTITY_CASES = {"api-version-v2", "kind-deployment", "no-name"}  # the API server cannot even route these
ADMITTED = [
    c
    for c in CASES
    if isinstance(c.document, dict) and not {"crd", "cel"} & c.refused_by and c.name not in IDENTITY_CASES
]
REFUSED_AT_THE_DOOR = [
    c
    for c in CASES
    if isinstance(c.document, dict)
    and isinstance(c.document.get("spec"), dict)
    and {"crd", "cel"} & c.refused_by
    and not {"model", "catalog"}.isdisjoint(c.refused_by)
    # Unknown fields: the stand-in prunes them (kubectl's strict field validation is what refuses them);
    # NaN and infinity: JSON cannot carry them; beyond int64: the stand-in's JSON layer answers 500.
    and not any(word in c.name for word in ("unknown", "nan", "inf", "int64"))
]
GOOD = ("llama-70b-chat", "kimi-k25-batch")
# Seconds of re-checks (FRONTIER_RECHECK_SECONDS=1) the hot-loop check watches.
WINDOW_RECHECKS = 6


def _named(hostile: Case, namespace: str) -> dict[str, Any]:
    document = dict(hostile.document)
    document["metadata"] = {"name": hostile.name, "namespace": namespace}
    return document


def _settled(hostile: Case, obj: dict[str, Any]) -> bool:
    """The condition each refusing layer leads to."""
    feasible, degraded = condition(obj, "PlanFeasible"), condition(obj, "Degraded")
    if "render" in hostile.refused_by:
        return degraded is not None and degraded["status"] == "True" and degraded["reason"] == "RenderFailed"
    if feasible is None or feasible["status"] != "False":
        return False
    invalid = feasible["reason"] == "InvalidSpec"
    return invalid if {"model", "catalog"} & hostile.refused_by else not invalid


def _warnings(api: kubernetes.client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    return [e for e in events_for(api, namespace, name) if e["type"] == "Warning"]


def _event_posts(api: kubernetes.client.ApiClient, standin: Any, namespace: str) -> str:
    """What tells a lost Event from a poster that posted none: the Events there are, and how POSTs were answered."""
    answered = Counter(r.status for r in standin.requests.find(verb="create", resource="events", namespace=namespace))
    kinds = Counter(f"{e['type']}/{e['reason']}" for e in events_for(api, namespace))
    return f"Events in the namespace: {dict(kinds)}; Event POSTs answered: {dict(answered)}"


def _selects(record: Any, target: str) -> bool:
    query = dict(urllib.parse.parse_qsl(record.query))
    return query.get("labelSelector") == f"frontier.dev/target={target}"


def test_the_api_server_refuses_what_the_schema_and_cel_refuse(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, standin: Any
) -> None:
    path = f"/apis/frontier.dev/v1alpha1/namespaces/{namespace}/frontiertargets"
    assert len(REFUSED_AT_THE_DOOR) >= 40
    for hostile in REFUSED_AT_THE_DOOR:
        status, body = request_json(kube_api, "POST", path, _named(hostile, namespace))
        assert status == 422, f"{hostile.name}: {status} {str(body)[:300]}"


def test_hostile_targets_get_one_warning_each_no_hot_loop_and_good_ones_reconcile(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: Any
) -> None:
    config_map_cases = {"configmap-missing"}
    assert len(ADMITTED) >= 40
    with run_operator(OPERATOR, namespaces=[namespace], timeout=180) as runner:
        for hostile in ADMITTED:
            create(kube_api, _named(hostile, namespace))
        for name in GOOD:
            create(kube_api, target_document(name, namespace))

        # Good targets reconcile while the hostile ones are being refused.
        for name in GOOD:
            wait_for(lambda n=name: ready_when_marked(kube_api, namespace, n), timeout=60, what=f"{name} Ready")

        for hostile in ADMITTED:
            settled = wait_for_object(
                kube_api, *FT, namespace, hostile.name, lambda o, h=hostile: _settled(h, o), timeout=60
            )
            refusal = condition(settled, "Degraded" if "render" in hostile.refused_by else "PlanFeasible")
            assert refusal is not None and 0 < len(refusal["message"]) <= 4000, hostile.name
            if {"model", "catalog"} & hostile.refused_by and hostile.name not in config_map_cases:
                assert refusal["message"].startswith(("spec.", "(document)")), refusal["message"][:200]
            assert settled["status"]["observedGeneration"] == settled["metadata"]["generation"]
            assert not engine_deployments(kube_api, namespace, hostile.name), f"{hostile.name} deployed something"

        # Kopf posts Events in the background, so the status written with one can land first: wait for each
        # Warning to be delivered, so that the count below is of Events, not of a race with the poster.
        names = [h.name for h in ADMITTED]
        for name in names:
            try:
                wait_for(lambda n=name: _warnings(kube_api, namespace, n), timeout=30, interval=0.2, what=name)
            except AssertionError as error:
                raise AssertionError(f"{error}: {_event_posts(kube_api, standin, namespace)}") from None

        # The hot-loop check: several re-checks of every target later, each has been looked at about once
        # per second, its status has not been rewritten, and it carries exactly one Warning.
        started, before = time.monotonic(), len(standin.requests.find())
        patches_before = {n: standin.requests.count(verb="patch", resource="frontiertargets", name=n) for n in names}

        def rechecks(target: str, records: list[Any] | None = None) -> int:
            window = standin.requests.find()[before:] if records is None else records
            return sum(1 for r in window if r.verb == "list" and _selects(r, target))

        wait_for(
            lambda: all(rechecks(n) >= 2 * WINDOW_RECHECKS for n in names),  # Deployments + LeaderWorkerSets
            timeout=WINDOW_RECHECKS * 4,
            interval=0.5,
            what=f"{WINDOW_RECHECKS} re-checks of every hostile target",
        )
        window, elapsed = standin.requests.find()[before:], time.monotonic() - started
        counts = {name: rechecks(name, window) for name in names}
        for name in names:
            # At most one re-check per second per target (two list calls each), plus one in flight.
            assert counts[name] <= 2 * (elapsed / 1.0 + 1), f"{name}: {counts[name]} lists in {elapsed:.1f} s"
            patches = standin.requests.count(verb="patch", resource="frontiertargets", name=name)
            assert patches == patches_before[name], f"{name}: status rewritten {patches - patches_before[name]}x"
            warnings = _warnings(kube_api, namespace, name)
            assert len(warnings) == 1, f"{name}: {[(w['reason'], w.get('count')) for w in warnings]}"
            assert warnings[0].get("count", 1) == 1
    assert "Traceback" not in runner.output
    # Printed outside the operator's context: KopfRunner captures stdout while it runs.
    print(
        f"\nFIGURE hostile re-checks: {elapsed:.1f} s, {min(counts.values())}-{max(counts.values())} lists per target"
    )
