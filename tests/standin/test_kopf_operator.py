"""A real Kopf operator (tiny_operator.py) against the stand-in, under KopfRunner and as processes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiextensionsV1Api, CoreV1Api, CustomObjectsApi

from k8s_standin import RequestMatch, StandIn
from k8s_standin.fixtures import KubeCluster, get_object, request_json, wait_for, wait_for_absent, wait_for_object

HERE = Path(__file__).parent
OPERATOR = str(HERE / "tiny_operator.py")
TOY_CRD = yaml.safe_load((HERE / "toy-crd.yaml").read_text(encoding="utf-8"))
GROUP, VERSION, PLURAL = "standin.example.dev", "v1", "toys"
API_VERSION = f"{GROUP}/{VERSION}"


@pytest.fixture()
def toys(kube_api: Any) -> CustomObjectsApi:
    """The toy CRD, registered through the API (so this also works on a real cluster)."""
    status, body = request_json(kube_api, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", TOY_CRD)
    assert status in (201, 409), body
    wait_for(lambda: request_json(kube_api, "GET", f"/apis/{GROUP}/{VERSION}")[0] == 200, what="the toy CRD")
    return CustomObjectsApi(kube_api)


def create_toy(toys: CustomObjectsApi, namespace: str, name: str, message: str = "hello") -> dict[str, Any]:
    body = {"apiVersion": API_VERSION, "kind": "Toy", "metadata": {"name": name}, "spec": {"message": message}}
    return dict(toys.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body))


def toy_status(kube_api: Any, namespace: str, name: str, timeout: float = 10.0, **expected: Any) -> dict[str, Any]:
    """Wait until the toy's status has these values; return the toy."""

    def has_them(obj: dict[str, Any]) -> bool:
        return all(obj.get("status", {}).get(key) == value for key, value in expected.items())

    return wait_for_object(kube_api, API_VERSION, PLURAL, namespace, name, has_them, timeout=timeout)


def event_reasons(kube_api: Any, namespace: str, name: str) -> list[str]:
    events = CoreV1Api(kube_api).list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [event.reason for event in events]


def test_create_update_delete_round_trip(
    kube_api: Any, namespace: str, toys: CustomObjectsApi, kube_cluster: KubeCluster, run_operator: Any
) -> None:
    with run_operator(OPERATOR, namespaces=[namespace]):
        created = create_toy(toys, namespace, "alpha")
        toy = toy_status(kube_api, namespace, "alpha", message="hello", observedGeneration=1, handledBy="runner")
        assert (
            f"{GROUP}/finalizer" in toy["metadata"]["finalizers"]
        )  # Kopf added its finalizer (a delete handler exists)

        child = wait_for_object(kube_api, "v1", "configmaps", namespace, "alpha-child")
        assert child["data"]["message"] == "hello"
        owner = child["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
            "Toy",
            "alpha",
            created["metadata"]["uid"],
            True,
        )
        wait_for(lambda: "Reconciled" in event_reasons(kube_api, namespace, "alpha"), what="the Reconciled event")

        toys.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "alpha", {"spec": {"message": "again"}})
        toy_status(kube_api, namespace, "alpha", message="again", observedGeneration=2)
        assert wait_for_object(
            kube_api, "v1", "configmaps", namespace, "alpha-child", lambda cm: cm["data"]["message"] == "again"
        )

        toys.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "alpha")
        wait_for_absent(
            kube_api, API_VERSION, PLURAL, namespace, "alpha"
        )  # Kopf ran the handler, removed its finalizer
        wait_for(lambda: "Deleted" in event_reasons(kube_api, namespace, "alpha"), what="the Deleted event")

    standin = kube_cluster.standin
    if standin is None:  # a real cluster: its garbage collector removes the child
        wait_for_absent(kube_api, "v1", "configmaps", namespace, "alpha-child", timeout=30)
        return
    assert get_object(kube_api, "v1", "configmaps", namespace, "alpha-child") is not None  # no GC runs by itself
    assert [ref.name for ref in standin.collect_garbage()] == ["alpha-child"]
    # Create and update: one status patch each, no hot loop.
    assert standin.requests.count(verb="patch", resource=PLURAL, subresource="status", name="alpha", status=200) == 2


def test_operator_resumes_watching_after_disconnects_and_410(
    kube_api: Any, namespace: str, toys: CustomObjectsApi, standin: StandIn, run_operator: Any
) -> None:
    def toy_watches() -> list[Any]:
        return standin.watches.active(lambda w: w.resource_type.plural == PLURAL and w.namespace == namespace)

    with run_operator(OPERATOR, namespaces=[namespace]):
        create_toy(toys, namespace, "first")
        toy_status(kube_api, namespace, "first", message="hello")
        opened = standin.watches.opened

        assert standin.disconnect_watches(PLURAL, abort=True) >= 1
        create_toy(toys, namespace, "second")  # created while the operator is not watching
        toy_status(kube_api, namespace, "second", message="hello")
        wait_for(lambda: standin.watches.opened > opened and toy_watches(), what="a new watch on toys")
        resumed = standin.requests.find(verb="watch", resource=PLURAL, namespace=namespace)[-1]
        assert re.search(r"resourceVersion=\d+", resumed.query), resumed.query  # resumed, not re-listed

        lists_before = standin.requests.count(verb="list", resource=PLURAL, namespace=namespace)
        standin.compact()  # history gone and streams ended: resuming from the last version answers 410 Gone
        wait_for(
            lambda: standin.requests.count(verb="list", resource=PLURAL, namespace=namespace) > lists_before,
            what="Kopf to re-list after 410",
        )
        create_toy(toys, namespace, "third")
        toy_status(kube_api, namespace, "third", message="hello")

        for name in ("first", "second", "third"):
            toys.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
            wait_for_absent(kube_api, API_VERSION, PLURAL, namespace, name)
    # Each toy was reconciled exactly once despite the reconnections.
    for name in ("first", "second", "third"):
        assert event_reasons(kube_api, namespace, name).count("Reconciled") == 1, name


def test_injected_conflict_and_server_error_are_retried(
    kube_api: Any, namespace: str, toys: CustomObjectsApi, standin: StandIn, run_operator: Any
) -> None:
    with run_operator(OPERATOR, namespaces=[namespace]):
        create_toy(toys, namespace, "beta")
        toy_status(kube_api, namespace, "beta", message="hello")

        # The handler's own PATCH of the child gets a 409: the handler fails, Kopf retries it.
        conflict = standin.faults.add(RequestMatch(verb="patch", resource="configmaps", name="beta-child"), status=409)
        toys.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "beta", {"spec": {"message": "after-conflict"}}
        )
        toy_status(kube_api, namespace, "beta", message="after-conflict")
        assert conflict.fired == 1
        assert standin.requests.count(verb="patch", resource="configmaps", name="beta-child", status=409) == 1
        assert standin.requests.count(verb="patch", resource="configmaps", name="beta-child", status=200) == 1

        # Kopf's own status PATCH gets a 500 twice: Kopf's API client retries with its backoffs.
        outage = standin.faults.add(
            RequestMatch(verb="patch", resource=PLURAL, subresource="status", name="beta"), status=500, times=2
        )
        toys.patch_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, "beta", {"spec": {"message": "after-outage"}}
        )
        toy_status(kube_api, namespace, "beta", message="after-outage")
        assert outage.fired == 2

        toys.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "beta")
        wait_for_absent(kube_api, API_VERSION, PLURAL, namespace, "beta")


def test_operator_starts_serving_a_crd_created_after_it_started(
    kube_api: Any, namespace: str, standin: StandIn, run_operator: Any
) -> None:
    extensions = ApiextensionsV1Api(kube_api)
    if standin.get("apiextensions.k8s.io/v1", "customresourcedefinitions", None, f"{PLURAL}.{GROUP}"):
        extensions.delete_custom_resource_definition(f"{PLURAL}.{GROUP}")
    with run_operator(OPERATOR, namespaces=[namespace]):
        wait_for(
            lambda: standin.watches.active(lambda w: w.resource_type.plural == "customresourcedefinitions"),
            what="Kopf to watch CRDs",
        )
        extensions.create_custom_resource_definition(TOY_CRD)
        toys = CustomObjectsApi(kube_api)
        create_toy(toys, namespace, "late")
        toy_status(kube_api, namespace, "late", message="hello", timeout=20)
        toys.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "late")
        wait_for_absent(kube_api, API_VERSION, PLURAL, namespace, "late")


def test_two_operators_with_peering_only_one_handles(
    kube_api: Any, namespace: str, toys: CustomObjectsApi, standin: StandIn, kopf_process: Any
) -> None:
    peering = {"apiVersion": "kopf.dev/v1", "kind": "KopfPeering", "metadata": {"name": "default"}}
    toys.create_namespaced_custom_object("kopf.dev", "v1", namespace, "kopfpeerings", peering)

    def peers() -> dict[str, Any]:
        body = get_object(kube_api, "kopf.dev/v1", "kopfpeerings", namespace, "default") or {}
        return dict(body.get("status") or {})

    high = kopf_process(
        "run", "-n", namespace, "--priority=100", "--verbose", OPERATOR, env={"TOY_OPERATOR_ID": "high"}
    )
    wait_for(lambda: len(peers()) == 1, timeout=20, what="the first operator to announce itself")
    low = kopf_process("run", "-n", namespace, "--priority=10", "--verbose", OPERATOR, env={"TOY_OPERATOR_ID": "low"})
    wait_for(lambda: len(peers()) == 2, timeout=20, what="the second operator to announce itself")
    low.wait_for_log(r"Pausing operations in favour of")

    create_toy(toys, namespace, "contested")
    toy_status(kube_api, namespace, "contested", handledBy="high", timeout=20)
    assert "Handler 'reconcile' succeeded" not in low.log()

    assert high.stop() == 0  # a graceful exit marks the peer dead at once
    low.wait_for_log(r"Resuming operations after the pause")
    create_toy(toys, namespace, "handover")
    toy_status(kube_api, namespace, "handover", handledBy="low", timeout=20)
    for name in ("contested", "handover"):
        toys.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
        wait_for_absent(kube_api, API_VERSION, PLURAL, namespace, name, timeout=20)
