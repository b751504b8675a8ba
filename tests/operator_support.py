"""Helpers shared by the operator's end-to-end tests (imported by tests/operator/*)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from k8s_standin.fixtures import request_json

ROOT = Path(__file__).resolve().parents[1]
CRD = yaml.safe_load((ROOT / "crds" / "frontiertargets.frontier.dev.yaml").read_text(encoding="utf-8"))
EXAMPLES = {path.stem: path for path in sorted((ROOT / "examples").glob("*.yaml"))}
FT = ("frontier.dev/v1alpha1", "frontiertargets")
OPERATOR = "-m frontier_operator.main"


# Fixtures of every test folder that runs the operator (imported by their conftest.py).
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


def labelled(
    api: kubernetes.client.ApiClient, namespace: str, api_version: str, plural: str, selector: str
) -> list[dict[str, Any]]:
    """The objects of one kind in `namespace` that match a label selector (a list's items carry no kind)."""
    prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
    status, body = request_json(
        api, "GET", f"{prefix}/namespaces/{namespace}/{plural}", query=[("labelSelector", selector)]
    )
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


def owned(
    api: kubernetes.client.ApiClient, namespace: str, target: str, plural: str = "deployments"
) -> list[dict[str, Any]]:
    api_version = "apps/v1" if plural == "deployments" else "v1"
    return labelled(api, namespace, api_version, plural, f"frontier.dev/target={target}")


def events_for(api: kubernetes.client.ApiClient, namespace: str, name: str | None = None) -> list[dict[str, Any]]:
    """The namespace's core/v1 Events, only those about `name` when given."""
    listed = kubernetes.client.CoreV1Api(api).list_namespaced_event(namespace, _preload_content=False)
    items: list[dict[str, Any]] = json.loads(listed.data)["items"]
    return [event for event in items if name is None or event.get("involvedObject", {}).get("name") == name]


def engine_deployments(api: kubernetes.client.ApiClient, namespace: str, target: str) -> list[dict[str, Any]]:
    return [d for d in owned(api, namespace, target) if d["metadata"]["labels"].get("frontier.dev/role") != "router"]
