"""The stand-in answers the kubernetes client like an API server: metadata, codes, selectors, deletion."""

from __future__ import annotations

import json
from typing import Any

import kubernetes
import pytest
from kubernetes.client import ApiException, AppsV1Api, CoordinationV1Api, CoreV1Api, EventsV1Api

from k8s_standin import RequestMatch, StandIn, store
from k8s_standin.fixtures import get_object, object_path, request_json


def message(error: pytest.ExceptionInfo[ApiException]) -> str:
    return str(json.loads(error.value.body)["message"])


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {}}, "data": data}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "srv", "image": "sglang:0.5.23"}]},
            },
        },
    }


def test_create_assigns_server_metadata_and_answers_201(kube_api: Any, namespace: str) -> None:
    status, created = request_json(kube_api, "POST", object_path("v1", "configmaps", namespace), configmap("a", x="1"))
    assert status == 201
    metadata = created["metadata"]
    assert metadata["namespace"] == namespace  # taken from the URL
    assert metadata["uid"] and metadata["creationTimestamp"].endswith("Z")
    assert int(metadata["resourceVersion"]) > 0
    assert "generation" not in metadata  # ConfigMaps have none on a real server
    assert created["kind"] == "ConfigMap" and created["apiVersion"] == "v1"

    made = AppsV1Api(kube_api).create_namespaced_deployment(namespace, deployment("web"))
    assert made.metadata.generation == 1
    assert int(made.metadata.resource_version) > int(metadata["resourceVersion"])  # one global counter


def test_duplicate_missing_and_generate_name(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, configmap("dup"))
    with pytest.raises(ApiException) as duplicate:
        core.create_namespaced_config_map(namespace, configmap("dup"))
    assert duplicate.value.status == 409 and json.loads(duplicate.value.body)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_config_map("nope", namespace)
    assert missing.value.status == 404 and '"nope" not found' in message(missing)

    generated = [
        core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}}).metadata.name
        for _ in range(3)
    ]
    assert len(set(generated)) == 3 and all(name.startswith("gen-") and len(name) == 9 for name in generated)


def test_a_generated_name_that_collides_is_drawn_again_then_409(
    kube_api: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # KEP-4420 (GA in Kubernetes 1.32): the API server redraws a taken generateName suffix, up to eight draws.
    draws = iter(["bbbbb", "bbbbb", "ccccc", *["bbbbb"] * 8])
    monkeypatch.setattr(store, "_random_suffix", lambda: next(draws))
    core = CoreV1Api(kube_api)
    names = [core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}}) for _ in range(2)]
    assert [created.metadata.name for created in names] == ["gen-bbbbb", "gen-ccccc"]
    with pytest.raises(ApiException) as exhausted:
        core.create_namespaced_config_map(namespace, {"metadata": {"generateName": "gen-"}})
    assert exhausted.value.status == 409 and next(draws, None) is None


def test_names_labels_and_namespaces_are_validated(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    for bad in (
        configmap("Upper_Case"),
        configmap("ok", labels={"bad key!": "v"}),
        configmap("ok", labels={"k": "x" * 64}),
    ):
        with pytest.raises(ApiException) as invalid:
            core.create_namespaced_config_map(namespace, bad)
        assert invalid.value.status == 422
    with pytest.raises(ApiException) as no_namespace:
        core.create_namespaced_config_map("does-not-exist", configmap("a"))
    assert no_namespace.value.status == 404 and 'namespaces "does-not-exist" not found' in message(no_namespace)


def test_label_selectors_equality_and_set_based(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, configmap("a", {"tier": "gpu", "role": "decode"}))
    core.create_namespaced_config_map(namespace, configmap("b", {"tier": "gpu", "role": "prefill"}))
    core.create_namespaced_config_map(namespace, configmap("c", {"tier": "cpu"}))

    def names(selector: str) -> list[str]:
        return [
            item.metadata.name for item in core.list_namespaced_config_map(namespace, label_selector=selector).items
        ]

    assert names("tier=gpu") == ["a", "b"]
    assert names("tier==gpu,role!=decode") == ["b"]
    assert names("role in (decode, prefill)") == ["a", "b"]
    assert names("role notin (decode)") == ["b", "c"]  # a missing label satisfies notin
    assert names("role") == ["a", "b"]
    assert names("!role") == ["c"]
    with pytest.raises(ApiException) as unparsable:
        core.list_namespaced_config_map(namespace, label_selector="role in decode")
    assert unparsable.value.status == 400


def test_field_selector_on_metadata_name_and_chunked_lists(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    for name in ("a", "b", "c", "d", "e"):
        core.create_namespaced_config_map(namespace, configmap(name))
    assert [
        i.metadata.name for i in core.list_namespaced_config_map(namespace, field_selector="metadata.name=c").items
    ] == ["c"]
    assert len(core.list_namespaced_config_map(namespace, field_selector="metadata.name!=c").items) == 4

    first = core.list_namespaced_config_map(namespace, limit=2)
    assert [i.metadata.name for i in first.items] == ["a", "b"] and first.metadata._continue
    rest = core.list_namespaced_config_map(namespace, limit=10, _continue=first.metadata._continue)
    assert [i.metadata.name for i in rest.items] == ["c", "d", "e"] and not rest.metadata._continue
    assert rest.metadata.resource_version == first.metadata.resource_version


def test_lists_are_typed_like_a_real_server(kube_api: Any, namespace: str) -> None:
    CoreV1Api(kube_api).create_namespaced_config_map(namespace, configmap("a"))
    status, listed = request_json(kube_api, "GET", object_path("v1", "configmaps", namespace))
    assert status == 200 and listed["kind"] == "ConfigMapList" and listed["apiVersion"] == "v1"
    assert "kind" not in listed["items"][0]  # items of built-in lists carry no kind/apiVersion
    status, everywhere = request_json(kube_api, "GET", "/api/v1/configmaps")
    assert any(item["metadata"]["namespace"] == namespace for item in everywhere["items"])


def test_put_replaces_with_optimistic_concurrency(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    created = core.create_namespaced_config_map(namespace, configmap("a", x="1"))
    body = configmap("a", y="2")
    body["metadata"]["resourceVersion"] = created.metadata.resource_version
    replaced = core.replace_namespaced_config_map("a", namespace, body)
    assert replaced.data == {"y": "2"} and replaced.metadata.uid == created.metadata.uid
    with pytest.raises(ApiException) as stale:
        core.replace_namespaced_config_map("a", namespace, body)  # the old resourceVersion again
    assert stale.value.status == 409 and "the object has been modified" in message(stale)
    unconditional = core.replace_namespaced_config_map("a", namespace, configmap("a", z="3"))
    assert unconditional.data == {"z": "3"}  # built-in kinds allow a PUT without resourceVersion


def test_noop_write_keeps_resource_version(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    created = core.create_namespaced_config_map(namespace, configmap("a", x="1"))
    again = core.patch_namespaced_config_map("a", namespace, {"data": {"x": "1"}})
    assert again.metadata.resource_version == created.metadata.resource_version


def test_delete_honours_finalizers(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "held", "finalizers": ["example.dev/hold"]}})
    core.delete_namespaced_config_map("held", namespace)
    held = core.read_namespaced_config_map("held", namespace)
    assert held.metadata.deletion_timestamp is not None
    with pytest.raises(ApiException) as more:
        core.patch_namespaced_config_map(
            "held", namespace, {"metadata": {"finalizers": ["example.dev/hold", "example.dev/new"]}}
        )
    assert more.value.status == 422
    core.patch_namespaced_config_map("held", namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_config_map("held", namespace)
    assert gone.value.status == 404


def test_deleting_a_namespace_terminates_it_and_its_content(kube_api: Any) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespace({"metadata": {"name": "doomed"}})
    assert core.read_namespace("doomed").status.phase == "Active"
    core.create_namespaced_config_map("doomed", configmap("a"))
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "held", "finalizers": ["example.dev/hold"]}})
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(ApiException) as terminating:
        core.create_namespaced_config_map("doomed", configmap("late"))
    assert terminating.value.status == 403
    assert [i.metadata.name for i in core.list_namespaced_config_map("doomed").items] == ["held"]
    # A strategic merge patch merges finalizers (patchStrategy=merge): [] would keep them, null clears.
    core.patch_namespaced_config_map("held", "doomed", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespace("doomed")
    assert gone.value.status == 404


def test_owner_references_are_recorded_and_tests_play_the_gc(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    owner = core.create_namespaced_config_map(namespace, configmap("owner"))
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
        "controller": True,
    }
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "child", "ownerReferences": [reference]}})
    grandchild_ref = {
        **reference,
        "name": "child",
        "uid": core.read_namespaced_config_map("child", namespace).metadata.uid,
    }
    core.create_namespaced_config_map(
        namespace, {"metadata": {"name": "grandchild", "ownerReferences": [grandchild_ref]}}
    )
    core.create_namespaced_config_map(namespace, configmap("bystander"))

    core.delete_namespaced_config_map("owner", namespace)
    assert core.read_namespaced_config_map("child", namespace)  # no controller runs: nothing cascades
    collected = standin.collect_garbage()
    assert sorted(ref.name for ref in collected) == ["child", "grandchild"]
    assert [i.metadata.name for i in core.list_namespaced_config_map(namespace).items] == ["bystander"]


def test_core_and_events_k8s_io_events(kube_api: Any, namespace: str) -> None:
    involved = {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "namespace": namespace, "uid": "u-1"}
    core_event = {
        "metadata": {"generateName": "a-"},
        "involvedObject": involved,
        "reason": "Planned",
        "message": "m",
        "type": "Normal",
    }
    made = CoreV1Api(kube_api).create_namespaced_event(namespace, core_event)
    assert made.metadata.name.startswith("a-")
    listed = CoreV1Api(kube_api).list_namespaced_event(namespace, field_selector="involvedObject.name=a")
    assert [event.reason for event in listed.items] == ["Planned"]
    new_event = {
        "metadata": {"generateName": "a-"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": involved,
        "reason": "Applied",
        "action": "Apply",
        "note": "n",
        "type": "Normal",
        "reportingController": "frontier.dev/operator",
        "reportingInstance": "op-0",
    }
    assert EventsV1Api(kube_api).create_namespaced_event(namespace, new_event).reason == "Applied"


def test_leases(kube_api: Any, namespace: str) -> None:
    leases = CoordinationV1Api(kube_api)
    lease = leases.create_namespaced_lease(
        namespace, {"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}
    )
    lease.spec.holder_identity = "b"
    assert leases.replace_namespaced_lease("leader", namespace, lease).spec.holder_identity == "b"


def test_discovery_lists_builtins_with_correct_group_versions(kube_api: Any) -> None:
    status, core = request_json(kube_api, "GET", "/api/v1")
    assert status == 200 and core["groupVersion"] == "v1"
    assert "namespaces" in {resource["name"] for resource in core["resources"]}
    _, apps = request_json(kube_api, "GET", "/apis/apps/v1")
    by_name = {resource["name"]: resource for resource in apps["resources"]}
    assert by_name["deployments"]["shortNames"] == ["deploy"] and "shortNames" not in by_name["deployments/status"]
    _, groups = request_json(kube_api, "GET", "/apis")
    autoscaling = next(group for group in groups["groups"] if group["name"] == "autoscaling")
    assert autoscaling["preferredVersion"]["version"] == "v2"
    versions = kubernetes.client.VersionApi(kube_api).get_code()
    assert versions.major == "1"


def test_request_log_counts_requests_per_target(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, configmap("a"))
    core.patch_namespaced_config_map("a", namespace, {"data": {"k": "v"}})
    core.patch_namespaced_config_map("a", namespace, {"data": {"k": "w"}})
    with pytest.raises(ApiException):
        core.read_namespaced_config_map("b", namespace)
    assert standin.requests.count(verb="patch", resource="configmaps", name="a", status=200) == 2
    assert standin.requests.count(RequestMatch(verb="get", namespace=namespace), status=404) == 1
    assert get_object(kube_api, "v1", "configmaps", namespace, "a") is not None
