"""Engine workloads (a Deployment, or a LeaderWorkerSet when a replica spans nodes) and the target's Service."""

from __future__ import annotations

from typing import Any

from frontier_operator.render.engine_args import HTTP_PORT
from frontier_operator.render.layout import FleetLayout, RoleLayout
from frontier_operator.render.names import service_name
from frontier_operator.render.pods import (
    LABEL_ENTRYPOINT,
    LABEL_TARGET,
    TRUE,
    common_labels,
    engine_pod_template,
    owner_references,
    revision_labels,
    selector_labels,
)

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
# Large checkpoints can take most of an hour to load and warm up (see pods.STARTUP_BUDGET_SECONDS).
PROGRESS_DEADLINE_SECONDS = 3900


def metadata(layout: FleetLayout, name: str, labels: dict[str, str], owner: dict[str, Any] | None) -> dict[str, Any]:
    return {"name": name, "namespace": layout.namespace, "labels": labels, **owner_references(owner)}


def engine_workload(layout: FleetLayout, role: RoleLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    if role.uses_leader_worker_set:
        return leader_worker_set(layout, role, owner)
    return deployment(layout, role, owner)


def deployment(layout: FleetLayout, role: RoleLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    labels = revision_labels(layout, "engine", role.role.value)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(layout, role.workload_name, labels, owner),
        "spec": {
            "replicas": role.replicas,
            "selector": {"matchLabels": selector_labels(layout, role.role.value)},
            # Never ask for a GPU node more than the fleet has: replace one pod at a time.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "revisionHistoryLimit": 3,
            "progressDeadlineSeconds": PROGRESS_DEADLINE_SECONDS,
            "template": engine_pod_template(layout, role, leader=True),
        },
    }


def leader_worker_set(layout: FleetLayout, role: RoleLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    """One group per replica: the leader runs node rank 0 and the HTTP server, workers ranks 1…n-1.

    Settings as in SGLang's own LWS examples (sglang-0.5.23.md §6.3): the whole group restarts when one
    pod does (a replica cannot lose a rank and live), and workers start once the leader exists.
    """
    labels = revision_labels(layout, "engine", role.role.value)
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": metadata(layout, role.workload_name, labels, owner),
        "spec": {
            "replicas": role.replicas,
            "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0},
            },
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {
                "size": role.nnodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": engine_pod_template(layout, role, leader=True),
                "workerTemplate": engine_pod_template(layout, role, leader=False),
            },
        },
    }


def leader_addresses(layout: FleetLayout, role: RoleLayout) -> list[str]:
    """Stable DNS names of each group leader: `<lws>-<i>.<lws>.<namespace>.svc` (Shared subdomain policy)."""
    name = role.workload_name
    return [f"http://{name}-{index}.{name}.{layout.namespace}.svc:{HTTP_PORT}" for index in range(role.replicas)]


def target_service(layout: FleetLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    """The address clients use: `<target>.<namespace>.svc:30000`, the same for every revision.

    It selects entry-point pods of any revision (the router, else the engine leaders), so a canary's
    entry pods join it without the Service changing. Sweep revisions carry no entry-point label and never
    receive user traffic (`pods.serves_users`). kube-proxy spreads connections evenly over the selected
    endpoints, so a canary's share of user traffic is its entry pods over all entry pods of stable and canary
    (`traffic.service_share`).
    """
    labels = {"app.kubernetes.io/name": "frontier-target", **common_labels(layout)}
    selector = {LABEL_TARGET: layout.target_label, LABEL_ENTRYPOINT: TRUE}
    return http_service(layout, _service_name(layout), labels, selector, owner)


def http_service(
    layout: FleetLayout, name: str, labels: dict[str, str], selector: dict[str, str], owner: dict[str, Any] | None
) -> dict[str, Any]:
    """A ClusterIP Service of the engines' (or routers') HTTP port for the pods `selector` picks."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(layout, name, labels, owner),
        "spec": {
            "type": "ClusterIP",
            "selector": selector,
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _service_name(layout: FleetLayout) -> str:
    return service_name(layout.target_name)
