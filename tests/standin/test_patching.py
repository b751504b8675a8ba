"""PATCH flavours, status-subresource semantics, generation, and server-side apply."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiException, AppsV1Api, CoreV1Api, CustomObjectsApi

from k8s_standin import StandIn
from k8s_standin.fixtures import object_path, request_json

TOY_CRD = yaml.safe_load((Path(__file__).parent / "toy-crd.yaml").read_text(encoding="utf-8"))
GROUP, VERSION, PLURAL = "standin.example.dev", "v1", "toys"


@pytest.fixture()
def toys(standin: StandIn, kube_api: Any) -> CustomObjectsApi:
    standin.register_crd(TOY_CRD)
    return CustomObjectsApi(kube_api)


def toy(name: str, message: str = "hi", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Toy",
        "metadata": {"name": name},
        "spec": {"message": message, **spec},
    }


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    container = {
        "name": "srv",
        "image": "sglang:0.5.23",
        "env": [{"name": "A", "value": "1"}],
        "ports": [{"containerPort": 30000}],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


def test_strategic_merge_patch_merges_keyed_lists_of_builtin_kinds(kube_api: Any, namespace: str) -> None:
    apps = AppsV1Api(kube_api)
    apps.create_namespaced_deployment(namespace, deployment("web"))
    sidecar = {"name": "side", "image": "busybox"}
    patched = apps.patch_namespaced_deployment(
        "web",
        namespace,
        {
            "spec": {
                "template": {"spec": {"containers": [{"name": "srv", "env": [{"name": "B", "value": "2"}]}, sidecar]}}
            }
        },
    )
    containers = patched.spec.template.spec.containers
    assert [c.name for c in containers] == ["srv", "side"]
    assert [e.name for e in containers[0].env] == ["A", "B"] and containers[0].image == "sglang:0.5.23"
    removed = apps.patch_namespaced_deployment(
        "web", namespace, {"spec": {"template": {"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}}}
    )
    assert [c.name for c in removed.spec.template.spec.containers] == ["srv"]


def test_merge_patch_replaces_lists(kube_api: Any, namespace: str) -> None:
    path = object_path("apps/v1", "deployments", namespace, "web")
    AppsV1Api(kube_api).create_namespaced_deployment(namespace, deployment("web"))
    patch = {"spec": {"template": {"spec": {"containers": [{"name": "other", "image": "x"}]}}}}
    status, patched = request_json(kube_api, "PATCH", path, patch, content_type="application/merge-patch+json")
    assert status == 200 and [c["name"] for c in patched["spec"]["template"]["spec"]["containers"]] == ["other"]


def test_json_patch_failed_test_is_422(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    created = core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    path = object_path("v1", "configmaps", namespace, "a")
    version = created.metadata.resource_version
    ok = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "replace", "path": "/data/k", "value": "w"},
    ]
    status, patched = request_json(kube_api, "PATCH", path, ok, content_type="application/json-patch+json")
    assert status == 200 and patched["data"] == {"k": "w"}
    status, failure = request_json(
        kube_api, "PATCH", path, ok, content_type="application/json-patch+json"
    )  # stale version
    assert status == 422 and failure["reason"] == "Invalid"
    missing = [{"op": "replace", "path": "/data/nope/deeper", "value": "x"}]
    assert request_json(kube_api, "PATCH", path, missing, content_type="application/json-patch+json")[0] == 422
    assert request_json(kube_api, "PATCH", path, [{"op": "jump"}], content_type="application/json-patch+json")[0] == 400


def test_status_subresource_semantics_and_generation(kube_api: Any, namespace: str, toys: CustomObjectsApi) -> None:
    created = toys.create_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, {**toy("t"), "status": {"ignored": True}}
    )
    assert created["metadata"]["generation"] == 1 and "status" not in created  # status is not set on create

    with_status = toys.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, PLURAL, "t", {"status": {"phase": "Ready"}, "spec": {"message": "sneaky"}}
    )
    assert (
        with_status["status"] == {"phase": "Ready"} and with_status["spec"]["message"] == "hi"
    )  # /status changes only status
    assert with_status["metadata"]["generation"] == 1

    spec_change = toys.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "t", {"spec": {"message": "new"}, "status": {"phase": "Lost"}}
    )
    assert spec_change["status"] == {"phase": "Ready"}  # the main resource ignores status
    assert spec_change["metadata"]["generation"] == 2
    labelled = toys.patch_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "t", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled["metadata"]["generation"] == 2  # metadata changes do not bump it
    assert int(labelled["metadata"]["resourceVersion"]) > int(spec_change["metadata"]["resourceVersion"])


def test_custom_resources_refuse_strategic_merge_and_need_resource_version_on_put(
    kube_api: Any, namespace: str, toys: CustomObjectsApi
) -> None:
    toys.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, toy("t"))
    path = object_path(f"{GROUP}/{VERSION}", PLURAL, namespace, "t")
    status, refused = request_json(
        kube_api, "PATCH", path, {"spec": {"message": "x"}}, content_type="application/strategic-merge-patch+json"
    )
    assert status == 415 and refused["reason"] == "UnsupportedMediaType"
    with pytest.raises(ApiException) as unconditional:
        toys.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "t", toy("t", "replaced"))
    assert unconditional.value.status == 422
    current = toys.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "t")
    current["spec"]["message"] = "replaced"
    assert (
        toys.replace_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "t", current)["spec"]["message"]
        == "replaced"
    )


def apply(kube_api: Any, namespace: str, body: dict[str, Any], manager: str, *, force: bool = False) -> tuple[int, Any]:
    path = object_path(
        body["apiVersion"],
        "deployments" if body["kind"] == "Deployment" else "configmaps",
        namespace,
        body["metadata"]["name"],
    )
    query = [("fieldManager", manager)] + ([("force", "true")] if force else [])
    return request_json(kube_api, "PATCH", path, body, content_type="application/apply-patch+yaml", query=query)


def test_server_side_apply_creates_merges_and_removes_dropped_fields(kube_api: Any, namespace: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"a": "1"}},
        "data": {"x": "1", "y": "2"},
    }
    status, created = apply(kube_api, namespace, config, "frontier-operator")
    assert status == 201 and created["data"] == {"x": "1", "y": "2"}
    manager = created["metadata"]["managedFields"][0]
    assert manager["manager"] == "frontier-operator" and manager["operation"] == "Apply"
    assert manager["fieldsV1"]["f:data"] == {"f:x": {}, "f:y": {}}

    CoreV1Api(kube_api).patch_namespaced_config_map("cfg", namespace, {"data": {"z": "someone else's"}})
    status, reapplied = apply(kube_api, namespace, {**config, "data": {"x": "10"}}, "frontier-operator")
    assert status == 200 and reapplied["data"] == {"x": "10", "z": "someone else's"}  # y was ours and is gone


def test_server_side_apply_conflicts_between_managers_unless_forced(kube_api: Any, namespace: str) -> None:
    mine = deployment("web")
    assert apply(kube_api, namespace, mine, "frontier-operator")[0] == 201
    theirs = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": 3}}
    status, conflict = apply(kube_api, namespace, theirs, "autoscaler")
    assert status == 409 and conflict["reason"] == "Conflict" and "spec.replicas" in conflict["message"]
    status, forced = apply(kube_api, namespace, theirs, "autoscaler", force=True)
    assert status == 200 and forced["spec"]["replicas"] == 3
    assert forced["spec"]["template"]["spec"]["containers"][0]["image"] == "sglang:0.5.23"  # still owned by us

    # Keyed lists merge per item: adding a container keeps the other manager's fields intact.
    mine["spec"]["template"]["spec"]["containers"].append({"name": "side", "image": "busybox"})
    del mine["spec"]["replicas"]
    status, merged = apply(kube_api, namespace, mine, "frontier-operator")
    assert status == 200 and [c["name"] for c in merged["spec"]["template"]["spec"]["containers"]] == ["srv", "side"]
    assert merged["spec"]["replicas"] == 3


def test_dry_run_does_not_persist(kube_api: Any, namespace: str) -> None:
    path = object_path("v1", "configmaps", namespace)
    status, _ = request_json(kube_api, "POST", path, {"metadata": {"name": "dry"}}, query=[("dryRun", "All")])
    assert status == 201
    assert request_json(kube_api, "GET", f"{path}/dry")[0] == 404
