"""The real operator (`kopf run -m frontier_operator.main`) against the Kubernetes API stand-in.

The stand-in runs no controllers: the tests mark workloads ready and collect garbage themselves.
Against a real cluster (E2E_REAL_CLUSTER=1 and KUBECONFIG) the same flows run, minus the
stand-in-only checks.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from k8s_standin.fixtures import get_object, mark_deployment_ready, request_json, wait_for, wait_for_object

ROOT = Path(__file__).resolve().parents[2]
CRD = yaml.safe_load((ROOT / "crds" / "frontiertargets.frontier.dev.yaml").read_text(encoding="utf-8"))
EXAMPLES = {path.stem: path for path in sorted((ROOT / "examples").glob("*.yaml"))}
FT = ("frontier.dev/v1alpha1", "frontiertargets")
OPERATOR = "-m frontier_operator.main"


@pytest.fixture(autouse=True)
def fast_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    # Re-check every second and serve no metrics port (several operators run in one process).
    monkeypatch.setenv("FRONTIER_RECHECK_SECONDS", "1")
    monkeypatch.setenv("FRONTIER_METRICS_PORT", "0")
    monkeypatch.setenv("FRONTIER_RETRY_SECONDS", "1")


@pytest.fixture(scope="module")
def crd(kube_cluster: Any, kube_api: kubernetes.client.ApiClient) -> Iterator[None]:
    extensions = kubernetes.client.ApiextensionsV1Api(kube_api)
    try:
        extensions.create_custom_resource_definition(CRD)
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise
    yield


def target_document(
    name: str, namespace: str, mutate: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    document = yaml.safe_load(EXAMPLES[name].read_text(encoding="utf-8"))
    document["metadata"] = {"name": document["metadata"]["name"], "namespace": namespace}
    if mutate is not None:
        mutate(document)
    return document


def create(api: kubernetes.client.ApiClient, document: dict[str, Any]) -> dict[str, Any]:
    namespace = document["metadata"]["namespace"]
    created: dict[str, Any] = kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        "frontier.dev", "v1alpha1", namespace, "frontiertargets", document
    )
    return created


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    return next((c for c in obj.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def has_condition(kind: str, status: str, reason: str | None = None) -> Callable[[dict[str, Any]], bool]:
    def check(obj: dict[str, Any]) -> bool:
        found = condition(obj, kind)
        return found is not None and found["status"] == status and (reason is None or found["reason"] == reason)

    return check


def owned(
    api: kubernetes.client.ApiClient, namespace: str, target: str, plural: str = "deployments"
) -> list[dict[str, Any]]:
    group = "apps/v1" if plural == "deployments" else "v1"
    prefix = f"/apis/{group}" if "/" in group else f"/api/{group}"
    status, body = request_json(
        api,
        "GET",
        f"{prefix}/namespaces/{namespace}/{plural}",
        query=[("labelSelector", f"frontier.dev/target={target}")],
    )
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


def events_for(api: kubernetes.client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    listed = kubernetes.client.CoreV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    import json

    items: list[dict[str, Any]] = json.loads(listed.data)["items"]
    return [event for event in items if event.get("involvedObject", {}).get("name") == name]


def engine_deployments(api: kubernetes.client.ApiClient, namespace: str, target: str) -> list[dict[str, Any]]:
    return [d for d in owned(api, namespace, target) if d["metadata"]["labels"].get("frontier.dev/role") != "router"]


# --------------------------------------------------------------------------------------------- tests


def test_every_example_is_reconciled_with_status_events_and_owned_children(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any
) -> None:
    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        created = {name: create(kube_api, target_document(name, namespace)) for name in EXAMPLES}
        for name, obj in created.items():
            target = obj["metadata"]["name"]
            done = wait_for_object(
                kube_api, *FT, namespace, target, lambda o: condition(o, "PlanFeasible") is not None, timeout=60
            )
            status = done["status"]
            assert status["observedGeneration"] == done["metadata"]["generation"]
            assert status["summary"]["mode"] == obj["spec"].get("tuning", {}).get("mode", "recommend")
            feasible = condition(done, "PlanFeasible")
            assert feasible is not None
            if feasible["status"] == "True":
                assert status["plan"]["config"]["totalGpus"] > 0
                assert status["plan"]["reasons"], "the plan explains itself"
                children = wait_for(lambda t=target: owned(kube_api, namespace, t), timeout=20, what=f"{name} children")
                for child in children:
                    (reference,) = child["metadata"]["ownerReferences"]
                    assert reference["uid"] == obj["metadata"]["uid"] and reference["controller"] is True
                assert condition(done, "Ready")["status"] == "False"  # nothing is ready yet
                reasons = {
                    e["reason"] for e in wait_for(lambda t=target: events_for(kube_api, namespace, t), timeout=20)
                }
                assert "PlanChosen" in reasons
            else:
                assert feasible["reason"] != "InvalidSpec", feasible["message"]
                assert status["infeasible"]["nearest"]


def test_rollout_of_a_new_revision_prunes_the_old_one_only_once_ready(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: Any
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        obj = create(kube_api, target_document("llama-70b-chat", namespace))
        name = obj["metadata"]["name"]
        (first,) = wait_for(lambda: engine_deployments(kube_api, namespace, name), timeout=30, what="first revision")
        first_revision = first["metadata"]["labels"]["frontier.dev/revision"]
        mark_deployment_ready(kube_api, namespace, first["metadata"]["name"])
        ready = wait_for_object(kube_api, *FT, namespace, name, has_condition("Ready", "True"), timeout=30)
        assert ready["status"]["appliedRevision"] == first_revision
        assert has_condition("Progressing", "False", "RolledOut")(ready)
        transition = condition(ready, "PlanFeasible")["lastTransitionTime"]

        # Forbid the format the planner chose: a different configuration, so a new revision.
        chosen_format = ready["status"]["plan"]["config"]["roles"][0]["weightFormat"]
        other = "bf16" if chosen_format != "bf16" else "fp8"
        custom.patch_namespaced_custom_object(
            "frontier.dev",
            "v1alpha1",
            namespace,
            "frontiertargets",
            name,
            {"spec": {"search": {"quantizations": [other]}}},
        )
        both = wait_for(
            lambda: (
                len(engine_deployments(kube_api, namespace, name)) == 2
                and engine_deployments(kube_api, namespace, name)
            ),
            timeout=30,
            what="second revision beside the first",
        )
        (second,) = [d for d in both if d["metadata"]["labels"]["frontier.dev/revision"] != first_revision]
        progressing = wait_for_object(
            kube_api, *FT, namespace, name, has_condition("Progressing", "True", "RollingOut")
        )
        assert progressing["status"]["appliedRevision"] == first_revision  # the old one still serves
        assert condition(progressing, "PlanFeasible")["lastTransitionTime"] == transition  # no flip, no new time

        # Not ready yet: after several re-checks the old revision is still there.
        wait_for(
            lambda: standin.requests.count(verb="list", resource="deployments", namespace=namespace) >= 6, timeout=30
        )
        assert get_object(kube_api, "apps/v1", "deployments", namespace, first["metadata"]["name"]) is not None

        mark_deployment_ready(kube_api, namespace, second["metadata"]["name"])
        done = wait_for_object(
            kube_api,
            *FT,
            namespace,
            name,
            lambda o: o["status"].get("appliedRevision") == second["metadata"]["labels"]["frontier.dev/revision"],
            timeout=30,
        )
        assert has_condition("Ready", "True")(done)
        wait_for(
            lambda: get_object(kube_api, "apps/v1", "deployments", namespace, first["metadata"]["name"]) is None,
            timeout=30,
            what="old revision pruned",
        )
        assert done["status"]["history"][-1]["revision"] == second["metadata"]["labels"]["frontier.dev/revision"]
        assert {"PlanChosen", "RolledOut", "Pruned"} <= {e["reason"] for e in events_for(kube_api, namespace, name)}


def test_invalid_and_impossible_targets_are_reported_and_do_not_stop_others(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any
) -> None:
    def unknown_gpu(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = "unknown-gpu"
        document["spec"]["hardware"]["pools"][0]["gpu"] = "H900"

    def impossible(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = "impossible"
        document["spec"]["slo"] = {"tpot": {"p50": "500us"}, "ttft": {"p99": "5ms"}}

    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        create(kube_api, target_document("llama-70b-chat", namespace, unknown_gpu))
        create(kube_api, target_document("llama-70b-chat", namespace, impossible))
        create(kube_api, target_document("llama-70b-chat", namespace))

        invalid = wait_for_object(
            kube_api, *FT, namespace, "unknown-gpu", has_condition("PlanFeasible", "False", "InvalidSpec")
        )
        assert 'spec.hardware.pools[0].gpu: "H900" is not a known GPU' in condition(invalid, "PlanFeasible")["message"]
        warnings = wait_for(
            lambda: [e for e in events_for(kube_api, namespace, "unknown-gpu") if e["type"] == "Warning"]
        )
        assert warnings[0]["reason"] == "InvalidSpec"

        hopeless = wait_for_object(
            kube_api,
            *FT,
            namespace,
            "impossible",
            lambda o: (c := condition(o, "PlanFeasible")) is not None and c["status"] == "False",
        )
        assert condition(hopeless, "PlanFeasible")["reason"] != "InvalidSpec"
        assert hopeless["status"]["infeasible"]["nearest"]
        assert not owned(kube_api, namespace, "impossible")

        healthy = wait_for_object(kube_api, *FT, namespace, "llama-70b-chat", has_condition("PlanFeasible", "True"))
        assert healthy["status"]["plan"]["revision"]

        # A few re-checks later the invalid target has posted no second Warning (no hot loop).
        wait_for(lambda: len(events_for(kube_api, namespace, "llama-70b-chat")) >= 1, timeout=20)
        before = len([e for e in events_for(kube_api, namespace, "unknown-gpu") if e["type"] == "Warning"])
        wait_for_object(kube_api, *FT, namespace, "llama-70b-chat", has_condition("PlanFeasible", "True"))
        assert before == 1


def test_deleting_a_target_leaves_its_children_to_the_garbage_collector(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: Any
) -> None:
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        obj = create(kube_api, target_document("llama-70b-chat", namespace))
        name = obj["metadata"]["name"]
        wait_for(lambda: engine_deployments(kube_api, namespace, name), timeout=30)
        custom.delete_namespaced_custom_object("frontier.dev", "v1alpha1", namespace, "frontiertargets", name)
        wait_for(lambda: get_object(kube_api, *FT, namespace, name) is None, timeout=20, what="target deleted")
    collected = standin.collect_garbage()
    assert {ref.kind for ref in collected} >= {"Deployment", "Service"}
    assert not owned(kube_api, namespace, name)
    assert not owned(kube_api, namespace, name, "services")
