"""Creating a CRD registers its resource; custom objects are pruned, defaulted and validated."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes.client import ApiException, ApiextensionsV1Api, CustomObjectsApi

from k8s_standin import StandIn
from k8s_standin.fixtures import request_json, wait_for

TOY_CRD = yaml.safe_load((Path(__file__).parent / "toy-crd.yaml").read_text(encoding="utf-8"))
GROUP, VERSION = "standin.example.dev", "v1"


def gadget_crd() -> dict[str, Any]:
    """The toy CRD renamed, so this module can create and delete it without touching the toys."""
    crd = copy.deepcopy(TOY_CRD)
    crd["metadata"]["name"] = f"gadgets.{GROUP}"
    crd["spec"]["names"] = {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "shortNames": ["gd"]}
    return crd


@pytest.fixture()
def gadgets(kube_api: Any, standin: StandIn) -> Any:
    extensions = ApiextensionsV1Api(kube_api)
    created = extensions.create_custom_resource_definition(gadget_crd())
    yield created
    extensions.delete_custom_resource_definition(f"gadgets.{GROUP}")


def test_crd_create_registers_discovery_and_establishes(kube_api: Any, gadgets: Any) -> None:
    conditions = {c.type: c.status for c in gadgets.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    _, group = request_json(kube_api, "GET", f"/apis/{GROUP}")
    assert group["preferredVersion"]["groupVersion"] == f"{GROUP}/{VERSION}"
    _, resources = request_json(kube_api, "GET", f"/apis/{GROUP}/{VERSION}")
    by_name = {r["name"]: r for r in resources["resources"]}
    assert by_name["gadgets"]["kind"] == "Gadget" and by_name["gadgets"]["namespaced"] is True
    assert "gadgets/status" in by_name
    _, groups = request_json(kube_api, "GET", "/apis")
    assert GROUP in {g["name"] for g in groups["groups"]}


def test_deleting_the_crd_unregisters_the_resource_and_its_objects(kube_api: Any, namespace: str) -> None:
    extensions, objects = ApiextensionsV1Api(kube_api), CustomObjectsApi(kube_api)
    extensions.create_custom_resource_definition(gadget_crd())
    objects.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        "gadgets",
        {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": "g"}, "spec": {"message": "m"}},
    )
    extensions.delete_custom_resource_definition(f"gadgets.{GROUP}")
    with pytest.raises(ApiException) as gone:
        objects.list_namespaced_custom_object(GROUP, VERSION, namespace, "gadgets")
    assert gone.value.status == 404


def test_custom_objects_are_pruned_defaulted_and_validated(kube_api: Any, namespace: str, gadgets: Any) -> None:
    objects = CustomObjectsApi(kube_api)

    def create(spec: dict[str, Any], name: str = "g") -> dict[str, Any]:
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}
        return dict(objects.create_namespaced_custom_object(GROUP, VERSION, namespace, "gadgets", body))

    created = create({"message": "hi", "unknownField": 1})
    assert created["spec"] == {"message": "hi", "replicas": 1}  # unknown field pruned, default filled

    for bad_spec, expected in (
        ({"replicas": 1}, "message"),
        ({"message": "hi", "replicas": -1}, "spec.replicas"),
        ({"message": "hi", "colour": "purple"}, "spec.colour"),
        ({"message": "forbidden"}, "must not be 'forbidden'"),  # the CEL rule
    ):
        with pytest.raises(ApiException) as refused:
            create(bad_spec, name="bad")
        assert refused.value.status == 422, bad_spec
        assert expected in json.loads(refused.value.body)["message"], bad_spec

    status = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "gadgets", "g", {"status": {"anything": {"goes": True}}}
    )
    assert status["status"] == {"anything": {"goes": True}}  # status preserves unknown fields here


def test_stock_crds_are_served(kube_api: Any) -> None:
    _, lws = request_json(kube_api, "GET", "/apis/leaderworkerset.x-k8s.io/v1")
    assert {r["name"] for r in lws["resources"]} >= {
        "leaderworkersets",
        "leaderworkersets/status",
        "leaderworkersets/scale",
    }
    _, kopf = request_json(kube_api, "GET", "/apis/kopf.dev/v1")
    assert {r["name"] for r in kopf["resources"]} == {"clusterkopfpeerings", "kopfpeerings"}
    wait_for(lambda: request_json(kube_api, "GET", "/apis/monitoring.coreos.com/v1")[0] == 200, timeout=1)
