"""The real operator (`kopf run -m frontier_operator.main`) against the Kubernetes API stand-in.

The stand-in runs no controllers: the tests mark workloads ready and collect garbage themselves.
Against a real cluster (E2E_REAL_CLUSTER=1 and KUBECONFIG) the same flows run, minus the
stand-in-only checks.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import yaml

from k8s_standin.fixtures import get_object, mark_deployment_ready, wait_for, wait_for_object
from operator_support import (
    EXAMPLES,
    FT,
    OPERATOR,
    ROOT,
    condition,
    create,
    engine_deployments,
    events_for,
    has_condition,
    labelled,
    owned,
    target_document,
)
from sweep_e2e_support import run_until, sweep_objects, sweep_status, swept_document, twin_runner

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


# ------------------------------------------------------------------------------- least privilege

# Granted but not exercised here, each for a stated reason.
GRANTED_UNUSED = {
    ("", "namespaces", "list"): "cluster-wide mode only; the tests run namespace-scoped",
    ("", "namespaces", "watch"): "cluster-wide mode only",
    ("kopf.dev", "clusterkopfpeerings", "list"): "peering of two replicas; the tests run --standalone",
    ("kopf.dev", "clusterkopfpeerings", "watch"): "peering",
    ("kopf.dev", "clusterkopfpeerings", "patch"): "peering",
    ("kopf.dev", "clusterkopfpeerings", "get"): "peering",
    ("", "pods", "get"): "held only so the operator may grant it to the router's Role",
    ("", "pods", "watch"): "held only so the operator may grant it to the router's Role",
}


def granted() -> set[tuple[str, str, str]]:
    documents = list(yaml.safe_load_all((ROOT / "manifests" / "rbac.yaml").read_text(encoding="utf-8")))
    (role,) = [doc for doc in documents if doc["kind"] == "ClusterRole"]
    rules = set()
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] + rule["resources"] + rule["apiGroups"], "no wildcards"
        rules |= {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
    return rules


def test_the_operator_uses_exactly_what_its_rbac_grants(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: Any
) -> None:
    """Every request the operator makes in a full life cycle — a benchmark sweep included — is granted, and every
    grant is used."""
    config_json = (ROOT / "tests" / "data" / "hf_configs" / "llama-3.1-8b-instruct" / "config.json").read_text()
    kubernetes.client.CoreV1Api(kube_api).create_namespaced_config_map(
        namespace, {"metadata": {"name": "llama-config"}, "data": {"config.json": config_json}}
    )

    def from_config_map(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = "custom-model"
        document["spec"]["model"] = {
            "name": "acme/custom-llama-8b",
            "config": {"configMapRef": {"name": "llama-config"}},
        }
        # Traffic split by a Gateway API HTTPRoute: its apply and its prune with the revision must be granted.
        document["spec"]["serving"] = {"traffic": {"splitting": "http-route"}}

    def multi_node(document: dict[str, Any]) -> None:
        # DeepSeek-R1 in FP8 does not fit one H100 node: a LeaderWorkerSet.
        document["metadata"]["name"] = "multi-node"
        document["spec"]["model"] = {"name": "DeepSeek-R1"}
        document["spec"]["hardware"]["pools"] = [
            {"name": "h100", "gpu": "H100", "maxGpus": 32, "rdma": {"enabled": True}}
        ]
        document["spec"]["search"] = {"quantizations": ["fp8-block"], "disaggregation": "never"}
        document["spec"]["slo"] = {"tpot": {"p50": "100ms"}, "ttft": {"p99": "20s"}}

    custom = kubernetes.client.CustomObjectsApi(kube_api)
    sweep_runner, _ = twin_runner(standin, kube_api, namespace, swept_document(namespace))
    with run_operator(OPERATOR, namespaces=[namespace], timeout=120):
        create(kube_api, swept_document(namespace))
        create(kube_api, target_document("llama-70b-chat", namespace, from_config_map))
        create(kube_api, target_document("llama-70b-chat", namespace, multi_node))
        create(kube_api, target_document("kimi-k25-batch", namespace))  # several replicas: a router with its Role
        obj = create(kube_api, target_document("llama-70b-chat", namespace))
        name = obj["metadata"]["name"]
        (first,) = wait_for(lambda: engine_deployments(kube_api, namespace, name), timeout=30)
        mark_deployment_ready(kube_api, namespace, first["metadata"]["name"])
        ready = wait_for_object(kube_api, *FT, namespace, name, has_condition("Ready", "True"), timeout=30)
        chosen_format = ready["status"]["plan"]["config"]["roles"][0]["weightFormat"]
        custom.patch_namespaced_custom_object(
            "frontier.dev",
            "v1alpha1",
            namespace,
            "frontiertargets",
            name,
            {"spec": {"search": {"quantizations": ["bf16" if chosen_format != "bf16" else "fp8"]}}},
        )
        both = wait_for(
            lambda: (
                len(engine_deployments(kube_api, namespace, name)) == 2
                and engine_deployments(kube_api, namespace, name)
            ),
            timeout=30,
        )
        for deployment in both:
            mark_deployment_ready(kube_api, namespace, deployment["metadata"]["name"])
        wait_for(
            lambda: len(engine_deployments(kube_api, namespace, name)) == 1, timeout=30, what="old revision pruned"
        )
        custom_model = wait_for_object(kube_api, *FT, namespace, "custom-model", has_condition("PlanFeasible", "True"))
        assert custom_model["status"]["plan"]["config"]["summary"]

        def routes() -> list[dict[str, Any]]:
            selector = "frontier.dev/target=custom-model"
            return labelled(kube_api, namespace, "gateway.networking.k8s.io/v1", "httproutes", selector)

        (route,) = wait_for(routes, timeout=30, what="the HTTPRoute")
        wait_for_object(kube_api, *FT, namespace, "custom-model", has_condition("RouteAccepted", "Unknown"))
        # What a mesh writes when it refuses the route: the operator reads it back (the RBAC's get).
        (parent,) = route["spec"]["parentRefs"]
        refusal = {"type": "Accepted", "status": "False", "reason": "NotAllowedByParent", "message": "no"}
        custom.patch_namespaced_custom_object_status(
            "gateway.networking.k8s.io",
            "v1",
            namespace,
            "httproutes",
            route["metadata"]["name"],
            {"status": {"parents": [{"parentRef": parent, "controllerName": "mesh", "conditions": [refusal]}]}},
        )
        wait_for_object(
            kube_api, *FT, namespace, "custom-model", has_condition("RouteAccepted", "False", "NotAccepted")
        )
        # Back to the Service's split: same engines, same revision, and the route must not outlive the setting.
        custom.patch_namespaced_custom_object(
            "frontier.dev",
            "v1alpha1",
            namespace,
            "frontiertargets",
            "custom-model",
            {"spec": {"serving": {"traffic": {"splitting": "service"}}}},
        )
        wait_for(lambda: not routes(), timeout=30, what="the HTTPRoute withdrawn")
        wait_for(
            lambda: owned(kube_api, namespace, "kimi-k25-batch", "serviceaccounts"), timeout=30, what="router identity"
        )
        wait_for(lambda: standin.requests.count(verb="patch", resource="leaderworkersets") > 0, timeout=30)
        # A benchmark sweep: Jobs applied and read, their pods' logs, the results ConfigMap, the clean-up.
        custom.patch_namespaced_custom_object(
            "frontier.dev",
            "v1alpha1",
            namespace,
            "frontiertargets",
            "swept",
            {"metadata": {"annotations": {"frontier.dev/sweep-start": "rbac"}}},
        )
        run_until(sweep_runner, lambda: sweep_status(kube_api, namespace, "swept").get("phase") == "Done")
        wait_for(lambda: sweep_objects(kube_api, namespace, "swept") == [], timeout=20, what="sweep cleaned up")

    operator_requests = [
        r for r in standin.requests.find() if r.user_agent.startswith(("frontier-operator/", "kopf/")) and r.resource
    ]
    used = {
        (r.group or "", f"{r.resource}/{r.subresource}" if r.subresource else r.resource, r.verb)
        for r in operator_requests
    }
    grants = granted()
    assert used - grants == set(), "the operator called something its ClusterRole does not grant"
    unused = grants - used - set(GRANTED_UNUSED)
    assert unused == set(), "granted but never used: remove it or say why in GRANTED_UNUSED"
