"""The SGLang router in front of P/D workers or several aggregated replicas: argv, Deployment, Service, RBAC.

Flags are those of `python -m sglang_router.launch_router` (sglang-0.5.23.md §6.2), full names only.
Routing is cache-aware (prefix reuse across requests, the KV-aware routing the planner's seeds
assume). Workers are found either by Kubernetes service discovery on the engine pods' labels, or
from the stable DNS names of LeaderWorkerSet group leaders.
"""

from __future__ import annotations

from typing import Any

from frontier_operator.api.spec import WorkerDiscovery
from frontier_operator.perf.types import Role
from frontier_operator.render.engine_args import HTTP_PORT
from frontier_operator.render.layout import FleetLayout, RoleLayout
from frontier_operator.render.pods import (
    COMPONENT_ROUTER,
    LABEL_ENTRYPOINT,
    LABEL_LEADER,
    TRUE,
    container_security,
    drain_seconds,
    grace_seconds,
    pre_stop,
    revision_labels,
    selector_labels,
    serves_users,
)
from frontier_operator.render.workloads import leader_addresses, metadata

ROUTER_COMMAND = ("python3", "-m", "sglang_router.launch_router")
ROUTER_METRICS_PORT = 29000
ROUTER_POLICY = "cache_aware"
# Matches the engines' startup budget: the router waits this long for workers to come up (§6.2, §8.5).
WORKER_STARTUP_TIMEOUT_SECONDS = 3600
# `/health` runs a real generation and times out under load; `/ready` is the cheap readiness signal (§8.1).
WORKER_HEALTH_ENDPOINT = "/ready"
ROUTER_CPU = "2"
ROUTER_MEMORY = "4Gi"


def router_argv(layout: FleetLayout) -> list[str]:
    argv = [
        "--host",
        "0.0.0.0",
        "--port",
        str(HTTP_PORT),
        "--prometheus-host",
        "0.0.0.0",
        "--prometheus-port",
        str(ROUTER_METRICS_PORT),
        "--policy",
        ROUTER_POLICY,
        "--worker-startup-timeout-secs",
        str(WORKER_STARTUP_TIMEOUT_SECONDS),
        "--health-check-endpoint",
        WORKER_HEALTH_ENDPOINT,
        "--shutdown-grace-period-secs",
        str(drain_seconds(layout.spec)),
    ]
    if layout.disaggregated:
        argv.append("--pd-disaggregation")
    if _discovers(layout):
        return argv + _discovery_argv(layout)
    return argv + _address_argv(layout)


def _discovers(layout: FleetLayout) -> bool:
    return layout.serving.router.worker_discovery is WorkerDiscovery.LABEL_SELECTOR


def _selector(layout: FleetLayout, role: RoleLayout) -> list[str]:
    labels = {**selector_labels(layout, role.role.value), LABEL_LEADER: TRUE}
    return [f"{key}={value}" for key, value in labels.items()]


def _discovery_argv(layout: FleetLayout) -> list[str]:
    argv = [
        "--service-discovery",
        "--service-discovery-namespace",
        layout.namespace,
        "--service-discovery-port",
        str(HTTP_PORT),
    ]
    roles = {role.role: role for role in layout.roles}
    if layout.disaggregated:
        # The prefill pods carry their bootstrap port in the `sglang.ai/bootstrap-port` annotation.
        return [
            *argv,
            "--prefill-selector",
            *_selector(layout, roles[Role.PREFILL]),
            "--decode-selector",
            *_selector(layout, roles[Role.DECODE]),
        ]
    return [*argv, "--selector", *_selector(layout, roles[Role.UNIFIED])]


def _address_argv(layout: FleetLayout) -> list[str]:
    roles = {role.role: role for role in layout.roles}
    if not layout.disaggregated:
        return ["--worker-urls", *leader_addresses(layout, roles[Role.UNIFIED])]
    argv: list[str] = []
    prefill = roles[Role.PREFILL]
    bootstrap = prefill.engine.disaggregation.bootstrap_port if prefill.engine.disaggregation else None
    for url in leader_addresses(layout, prefill):
        argv += ["--prefill", url, str(bootstrap) if bootstrap is not None else "none"]
    for url in leader_addresses(layout, roles[Role.DECODE]):
        argv += ["--decode", url]
    return argv


def router_objects(layout: FleetLayout, owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    """ServiceAccount, Role and RoleBinding (service discovery only), the router Deployment and its Service."""
    objects = rbac(layout, owner) if _discovers(layout) else []
    return [*objects, router_deployment(layout, owner), router_service(layout, owner)]


def router_name(layout: FleetLayout) -> str:
    return layout.name(COMPONENT_ROUTER)


def _labels(layout: FleetLayout) -> dict[str, str]:
    return revision_labels(layout, COMPONENT_ROUTER, COMPONENT_ROUTER)


def rbac(layout: FleetLayout, owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Discovery watches pods in the target's namespace, nothing else (§6.2: get/list/watch on pods)."""
    name, labels = router_name(layout), _labels(layout)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": metadata(layout, name, labels, owner),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": metadata(layout, name, labels, owner),
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": metadata(layout, name, labels, owner),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": layout.namespace}],
        },
    ]


def router_pod_labels(layout: FleetLayout) -> dict[str, str]:
    if not serves_users(layout):
        return _labels(layout)
    return {**_labels(layout), LABEL_ENTRYPOINT: TRUE}


def _router_container(layout: FleetLayout) -> dict[str, Any]:
    settings = layout.serving.router
    cpu = settings.resources.cpu or ROUTER_CPU
    memory = settings.resources.memory or ROUTER_MEMORY
    tcp_probe = {"tcpSocket": {"port": "http"}, "periodSeconds": 10, "timeoutSeconds": 5}
    return {
        "name": COMPONENT_ROUTER,
        "image": settings.image or layout.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(ROUTER_COMMAND),
        "args": router_argv(layout),
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": ROUTER_METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
        "readinessProbe": {**tcp_probe, "failureThreshold": 3},
        "livenessProbe": {**tcp_probe, "failureThreshold": 6},
        "lifecycle": pre_stop(),
        "securityContext": container_security(rdma=False),
    }


def router_deployment(layout: FleetLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    discovers = _discovers(layout)
    pod_spec: dict[str, Any] = {
        "enableServiceLinks": False,
        "automountServiceAccountToken": discovers,
        "terminationGracePeriodSeconds": grace_seconds(layout.spec),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
    }
    if discovers:
        pod_spec["serviceAccountName"] = router_name(layout)
    pod_spec["containers"] = [_router_container(layout)]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata(layout, router_name(layout), _labels(layout), owner),
        "spec": {
            "replicas": layout.serving.router.replicas,
            "selector": {"matchLabels": selector_labels(layout, COMPONENT_ROUTER)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "revisionHistoryLimit": 3,
            "template": {"metadata": {"labels": router_pod_labels(layout)}, "spec": pod_spec},
        },
    }


def router_service(layout: FleetLayout, owner: dict[str, Any] | None) -> dict[str, Any]:
    """This revision's router on its own (the target's Service spans revisions)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(layout, router_name(layout), _labels(layout), owner),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(layout, COMPONENT_ROUTER),
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                {"name": "metrics", "port": ROUTER_METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"},
            ],
        },
    }
