"""The Kubernetes side of the operator: apply, list, prune, read. The only module that writes objects.

Writes use server-side apply with the field manager `frontier-operator`, so re-applying the same
objects is a no-op and fields other controllers own (an HPA's replicas, a mesh's annotations) are
left alone. Kinds are mapped to their REST paths by a fixed table: the operator only ever touches
these kinds, and `manifests/` grants exactly these (a test compares the two).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import kubernetes
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from frontier_operator import __version__
from frontier_operator.reconcile.core import WORKLOAD_KINDS, ObservedWorkload
from frontier_operator.settings import OperatorSettings

FIELD_MANAGER = "frontier-operator"
TARGET_LABEL = "frontier.dev/target"
REVISION_LABEL = "frontier.dev/revision"
# Sweep objects (render/benchmark.py) carry this label; the serving fleet's reads and prunes never see them: a
# sweep revision must not count as an old revision to prune, nor its Deployment as part of the fleet.
SWEEP_LABEL = "frontier.dev/sweep"
NOT_SWEEP = f"!{SWEEP_LABEL}"
# A request that hangs longer fails as unreachable (status 0) and is retried like any other.
REQUEST_TIMEOUT_SECONDS = OperatorSettings.from_env().api_timeout_seconds


@dataclass(frozen=True)
class Resource:
    group: str
    version: str
    plural: str
    # Installed by an add-on (LeaderWorkerSet, prometheus-operator) rather than by Kubernetes itself.
    optional_crd: bool = False

    def collection_path(self, namespace: str) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        return f"{prefix}/namespaces/{namespace}/{self.plural}"


# Every kind the renderer emits (render/), in the order they are applied: identities first.
OWNED_KINDS: dict[str, Resource] = {
    "ServiceAccount": Resource("", "v1", "serviceaccounts"),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings"),
    "Service": Resource("", "v1", "services"),
    "HTTPRoute": Resource("gateway.networking.k8s.io", "v1", "httproutes", optional_crd=True),
    "Deployment": Resource("apps", "v1", "deployments"),
    "LeaderWorkerSet": Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", optional_crd=True),
    "PodDisruptionBudget": Resource("policy", "v1", "poddisruptionbudgets"),
    "PodMonitor": Resource("monitoring.coreos.com", "v1", "podmonitors", optional_crd=True),
}
CONFIG_MAPS = Resource("", "v1", "configmaps")


class KubeError(Exception):
    """An API call failed; `status` is the HTTP status (0 when the server could not be reached)."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(message)

    @property
    def retriable(self) -> bool:
        return self.status in (0, 409, 429) or self.status >= 500


class MissingKindError(KubeError):
    """The API server does not know the kind: its CRD (LeaderWorkerSet, PodMonitor) is not installed."""


def api_client() -> ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig (KUBECONFIG or ~/.kube/config)."""
    try:
        kubernetes.config.load_incluster_config()  # type: ignore[no-untyped-call]
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # type: ignore[no-untyped-call]
    client = ApiClient()
    # Audit logs (and the tests' RBAC check) tell the operator's requests apart by this.
    client.user_agent = f"frontier-operator/{__version__}"
    return client


def _call(
    api: ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: list[tuple[str, str]] | None = None,
    content_type: str = "application/json",
) -> Any:
    """One request through the client's configuration (auth, TLS, proxy); the parsed JSON answer."""
    _, url, headers, serialized, _ = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or [],
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    try:
        response = api.call_api(
            method, url, header_params=headers, body=serialized, _request_timeout=REQUEST_TIMEOUT_SECONDS
        )
        response.read()  # type: ignore[no-untyped-call]
    except ApiException as exc:
        raise KubeError(exc.status or 0, f"{method} {path}: {exc.status} {exc.reason}") from None
    except Exception as exc:  # urllib3 and socket errors: the server is unreachable or timed out
        raise KubeError(0, f"{method} {path}: {exc.__class__.__name__}: {exc}") from None
    if not 200 <= response.status < 300:
        raise KubeError(response.status, f"{method} {path}: {response.status} {_message(response.data)}")
    return json.loads(response.data) if response.data else None


def _message(data: bytes | None) -> str:
    try:
        return str(json.loads(data or b"{}").get("message", ""))[:300]
    except (ValueError, AttributeError):
        return ""


def _resource(kind: str) -> Resource:
    try:
        return OWNED_KINDS[kind]
    except KeyError:
        raise KubeError(422, f"the operator does not manage objects of kind {kind}") from None


def apply(api: ApiClient, obj: dict[str, Any]) -> None:
    resource = _resource(obj["kind"])
    metadata = obj["metadata"]
    path = f"{resource.collection_path(metadata['namespace'])}/{metadata['name']}"
    try:
        _call(
            api,
            "PATCH",
            path,
            body=obj,
            content_type="application/apply-patch+yaml",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
        )
    except KubeError as error:
        if error.status == 404 and resource.optional_crd:
            raise MissingKindError(404, f"{obj['kind']} is not installed in the cluster (its CRD is missing)") from None
        raise


def _selector(target: str, revision: str | None = None) -> str:
    selector = f"{TARGET_LABEL}={target}"
    return f"{selector},{REVISION_LABEL}={revision}" if revision else selector


def list_workloads(api: ApiClient, namespace: str, target: str) -> list[ObservedWorkload]:
    """The target's Deployments and LeaderWorkerSets with their desired and ready replica counts (sweep
    deployments left out: they are no revision of the fleet)."""
    workloads = []
    for kind in WORKLOAD_KINDS:
        resource = OWNED_KINDS[kind]
        try:
            listed = _call(
                api, "GET", resource.collection_path(namespace), query=[("labelSelector", _selector(target))]
            )
        except KubeError as error:
            if error.status == 404 and resource.optional_crd:
                continue
            raise
        workloads += [
            _observed(kind, item)
            for item in listed.get("items", [])
            if SWEEP_LABEL not in (item["metadata"].get("labels") or {})
        ]
    return workloads


def _observed(kind: str, item: dict[str, Any]) -> ObservedWorkload:
    metadata, spec, status = item["metadata"], item.get("spec", {}), item.get("status") or {}
    desired = int(spec.get("replicas", 1))
    if kind == "LeaderWorkerSet":
        # An LWS replica is a whole group; the controller counts groups whose every pod is ready.
        ready = int(status.get("readyReplicas", 0))
    else:
        ready = (
            int(status.get("readyReplicas", 0))
            if status.get("observedGeneration", 0) >= metadata.get("generation", 0)
            else 0
        )
    return ObservedWorkload(
        kind=kind,
        name=metadata["name"],
        revision=metadata.get("labels", {}).get(REVISION_LABEL, ""),
        desired=desired,
        ready=ready,
    )


# A container restarted this often, or waiting in back-off, is crash-looping (not merely slow to load).
CRASH_RESTARTS = 3
PODS = Resource("", "v1", "pods")


def crash_looping(api: ApiClient, namespace: str, target: str, revision: str) -> bool:
    """Whether any pod of the revision is crash-looping (CrashLoopBackOff, or restarted CRASH_RESTARTS times)."""
    listed = _call(api, "GET", PODS.collection_path(namespace), query=[("labelSelector", _selector(target, revision))])
    for pod in listed.get("items", []):
        for container in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (container.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") == "CrashLoopBackOff" or int(container.get("restartCount", 0)) >= CRASH_RESTARTS:
                return True
    return False


def prune_revisions(api: ApiClient, namespace: str, target: str, revisions: Iterable[str]) -> None:
    """Delete every owned object of the given revisions, kind by kind."""
    for revision in revisions:
        for resource in OWNED_KINDS.values():
            _delete_collection(api, namespace, resource, _selector(target, revision))


def read_route(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    """An HTTPRoute with the status its Gateway or mesh wrote (None: none, or no Gateway API CRDs)."""
    try:
        route: dict[str, Any] = _call(api, "GET", f"{OWNED_KINDS['HTTPRoute'].collection_path(namespace)}/{name}")
    except KubeError as error:
        if error.status == 404:
            return None
        raise
    return route


def delete_route(api: ApiClient, namespace: str, target: str) -> None:
    """Delete the target's HTTPRoute, whichever revision's label it carries."""
    _delete_collection(api, namespace, OWNED_KINDS["HTTPRoute"], _selector(target))


def _delete_collection(api: ApiClient, namespace: str, resource: Resource, selector: str) -> None:
    try:
        _call(
            api,
            "DELETE",
            resource.collection_path(namespace),
            query=[("labelSelector", f"{selector},{NOT_SWEEP}"), ("propagationPolicy", "Background")],
        )
    except KubeError as error:
        # An optional CRD the cluster does not have (the Gateway API's HTTPRoute): nothing of that kind to delete.
        if not (error.status == 404 and resource.optional_crd):
            raise


def read_config_map_key(api: ApiClient, namespace: str, name: str, key: str) -> str | None:
    try:
        config_map = _call(api, "GET", f"{CONFIG_MAPS.collection_path(namespace)}/{name}")
    except KubeError as error:
        if error.status == 404:
            return None
        raise
    value = (config_map.get("data") or {}).get(key)
    return value if isinstance(value, str) else None


def _target_path(namespace: str, name: str) -> str:
    return f"/apis/frontier.dev/v1alpha1/namespaces/{namespace}/frontiertargets/{name}"


def get_target(api: ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = _call(api, "GET", _target_path(namespace, name))
    return found


def annotate_target(api: ApiClient, namespace: str, name: str, annotations: dict[str, str | None]) -> dict[str, Any]:
    """Set (or, with None, remove) annotations on a FrontierTarget with a merge patch."""
    patched: dict[str, Any] = _call(
        api,
        "PATCH",
        _target_path(namespace, name),
        body={"metadata": {"annotations": annotations}},
        content_type="application/merge-patch+json",
    )
    return patched


def patch_target_status(api: ApiClient, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Merge `status` into a FrontierTarget's status subresource."""
    _call(
        api,
        "PATCH",
        f"{_target_path(namespace, name)}/status",
        body={"status": status},
        content_type="application/merge-patch+json",
    )
