"""Pod template pieces for engine pods: labels, container, probes, volumes, resources, drain.

Choices follow sglang-0.5.23.md §8: readiness on `/ready` (cheap; 200 once warm-up succeeded),
liveness on `/ping` (no generation, so a busy server is never killed for being busy), a startup
budget of an hour (large checkpoints on H200/AMD take that long in SGLang's own tests), and a grace
period that covers the longest generation the target allows, because SGLang drains in-flight
requests on SIGTERM without a time limit of its own.
"""

from __future__ import annotations

import math
from typing import Any

from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.catalog.types import Vendor
from frontier_operator.perf.types import Role
from frontier_operator.render.engine_args import BOOTSTRAP_PORT, DIST_INIT_PORT, HTTP_PORT, LAUNCH_COMMAND
from frontier_operator.render.errors import RenderError, RenderErrorReason
from frontier_operator.render.layout import FleetLayout, RoleLayout
from frontier_operator.render.request import Variant

LABEL_TARGET = "frontier.dev/target"
LABEL_ROLE = "frontier.dev/role"
LABEL_REVISION = "frontier.dev/revision"
LABEL_VARIANT = "frontier.dev/variant"
# Pods that answer the OpenAI API for the whole replica: Deployment pods and LeaderWorkerSet leaders.
LABEL_LEADER = "frontier.dev/leader"
# Pods that receive client traffic through the target's Service: the router, else the engine leaders.
LABEL_ENTRYPOINT = "frontier.dev/entrypoint"
# The router's Kubernetes discovery reads a prefill pod's bootstrap port from this annotation (§6.2).
BOOTSTRAP_PORT_ANNOTATION = "sglang.ai/bootstrap-port"

COMPONENT_ENGINE = "engine"
COMPONENT_ROUTER = "router"
TRUE = "true"

SHM_VOLUME = "dshm"
CACHE_VOLUME = "model-cache"
ENGINE_CONTAINER = "engine"

# Seconds the pod keeps serving after it is marked for deletion, so endpoint removal reaches the
# router and kube-proxy before SGLang stops accepting requests.
PRE_STOP_SECONDS = 15
# SGLang's health/warm-up budgets (§8.5): 600 s by default, up to 3600 s for large models on H200/AMD.
STARTUP_BUDGET_SECONDS = 3600
STARTUP_PERIOD_SECONDS = 10
MIN_GRACE_SECONDS = 60
MAX_GRACE_SECONDS = 3600
# Used for the drain budget when the target bounds neither TPOT/ITL nor E2E latency.
FALLBACK_SECONDS_PER_TOKEN = 0.1

CPU_PER_GPU = 8
MEMORY_GI_PER_GPU = 96

OWNED_ENV = frozenset({"SGLANG_CACHE_DIR", "HF_HOME", "HF_TOKEN", "LWS_LEADER_ADDRESS", "LWS_WORKER_INDEX"})


def common_labels(layout: FleetLayout) -> dict[str, str]:
    return {
        "app.kubernetes.io/instance": layout.target_label,
        "app.kubernetes.io/managed-by": "frontier-operator",
        "app.kubernetes.io/part-of": "frontier",
        LABEL_TARGET: layout.target_label,
    }


def revision_labels(layout: FleetLayout, component: str, role: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "sglang" if component == COMPONENT_ENGINE else "sglang-router",
        "app.kubernetes.io/component": component,
        **common_labels(layout),
        LABEL_ROLE: role,
        LABEL_REVISION: layout.revision,
        LABEL_VARIANT: layout.variant.value,
    }


def selector_labels(layout: FleetLayout, role: str) -> dict[str, str]:
    """Immutable workload selector: the variant is left out so a canary can be promoted in place."""
    return {LABEL_TARGET: layout.target_label, LABEL_REVISION: layout.revision, LABEL_ROLE: role}


def serves_users(layout: FleetLayout) -> bool:
    """Whether the revision's entry pods join the target's Service: stable and canary do, a sweep never.

    The Service selects `frontier.dev/entrypoint=true` (a Service selector cannot exclude a label value), so a
    sweep's entry pods simply do not carry that label; its benchmark reaches them through a Service of its own.
    """
    return layout.variant is not Variant.SWEEP


def engine_pod_labels(layout: FleetLayout, role: RoleLayout, leader: bool) -> dict[str, str]:
    labels = revision_labels(layout, COMPONENT_ENGINE, role.role.value)
    if leader:
        labels[LABEL_LEADER] = TRUE
        if not layout.has_router and serves_users(layout):
            labels[LABEL_ENTRYPOINT] = TRUE
    return labels


def engine_pod_annotations(role: RoleLayout, leader: bool) -> dict[str, str]:
    if leader and role.engine.disaggregation is not None and role.role is Role.PREFILL:
        return {BOOTSTRAP_PORT_ANNOTATION: str(role.engine.disaggregation.bootstrap_port)}
    return {}


def owner_references(owner: dict[str, Any] | None) -> dict[str, Any]:
    return {"ownerReferences": [owner]} if owner is not None else {}


# ----------------------------------------------------------------------------------------- timings


def drain_seconds(spec: FrontierTargetSpec) -> int:
    """How long the slowest request the target allows can take: its TTFT bound plus its longest output
    at the slowest per-token bound (or the E2E bound, whichever is longer)."""
    output = spec.workload.output_tokens
    longest_output = (
        output.max if output.max is not None else 4 * (output.p90 if output.p90 is not None else output.mean)
    )
    slo = spec.slo
    per_token = max(
        (float(bound) for metric in (slo.tpot, slo.itl) if metric is not None for _, bound in metric.bounds()),
        default=FALLBACK_SECONDS_PER_TOKEN,
    )
    first_token = max((float(bound) for _, bound in slo.ttft.bounds()), default=0.0) if slo.ttft else 0.0
    end_to_end = max((float(bound) for _, bound in slo.e2e.bounds()), default=0.0) if slo.e2e else 0.0
    return math.ceil(max(first_token + float(longest_output) * per_token, end_to_end))


def grace_seconds(spec: FrontierTargetSpec) -> int:
    return min(MAX_GRACE_SECONDS, max(MIN_GRACE_SECONDS, drain_seconds(spec) + PRE_STOP_SECONDS))


def pre_stop() -> dict[str, Any]:
    return {"preStop": {"exec": {"command": ["sleep", str(PRE_STOP_SECONDS)]}}}


def _http_probe(path: str, period: int, timeout: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failures,
    }


def engine_probes(leader: bool) -> dict[str, Any]:
    # Ranks >= 1 of a multi-node replica only serve /ping, /health and /health_generate (§2.2, §8.1).
    ready_path = "/ready" if leader else "/ping"
    return {
        "startupProbe": _http_probe(
            ready_path, STARTUP_PERIOD_SECONDS, 5, STARTUP_BUDGET_SECONDS // STARTUP_PERIOD_SECONDS
        ),
        "readinessProbe": _http_probe(ready_path, 10, 5, 3),
        "livenessProbe": _http_probe("/ping", 30, 10, 6),
    }


# ----------------------------------------------------------------------------------------- container


def _quantity_gi(gib: int) -> str:
    return f"{gib}Gi"


def engine_resources(layout: FleetLayout, role: RoleLayout) -> dict[str, Any]:
    gpus = role.gpus_per_pod
    settings = layout.serving.resources
    cpu = settings.cpu or str(CPU_PER_GPU * gpus)
    memory = settings.memory or _quantity_gi(MEMORY_GI_PER_GPU * gpus)
    gpu_resource = "amd.com/gpu" if layout.gpu.vendor is Vendor.AMD else "nvidia.com/gpu"
    # No CPU limit: throttling a scheduler process shows up directly as TPOT.
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory, gpu_resource: gpus}
    limits: dict[str, Any] = {"memory": memory, gpu_resource: gpus}
    if layout.rdma:
        rdma = layout.pool.rdma
        requests[rdma.resource_name] = rdma.devices_per_pod
        limits[rdma.resource_name] = rdma.devices_per_pod
    return {"requests": requests, "limits": limits}


def engine_env(layout: FleetLayout) -> list[dict[str, Any]]:
    serving = layout.serving
    cache = serving.cache.mount_path.rstrip("/")
    env: list[dict[str, Any]] = [
        {"name": "SGLANG_CACHE_DIR", "value": f"{cache}/sglang"},
        {"name": "HF_HOME", "value": f"{cache}/huggingface"},
    ]
    if serving.hf_token_secret_ref is not None:
        ref = serving.hf_token_secret_ref
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}})
    for variable in serving.env:
        if variable.name in OWNED_ENV:
            raise RenderError(
                RenderErrorReason.ENV_OWNED,
                f"environment variable {variable.name} is set by the operator; remove it from spec.serving.env",
            )
        entry: dict[str, Any] = {"name": variable.name}
        if variable.value is not None:
            entry["value"] = variable.value
        if variable.value_from is not None:
            source = variable.value_from
            if source.secret_key_ref is not None:
                ref = source.secret_key_ref
                entry["valueFrom"] = {"secretKeyRef": {"name": ref.name, "key": ref.key}}
            elif source.config_map_key_ref is not None:
                cm = source.config_map_key_ref
                entry["valueFrom"] = {"configMapKeyRef": {"name": cm.name, "key": cm.key}}
        env.append(entry)
    return env


def engine_ports(role: RoleLayout) -> list[dict[str, Any]]:
    ports: list[dict[str, Any]] = [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"}]
    if role.role is Role.PREFILL:
        ports.append({"name": "bootstrap", "containerPort": BOOTSTRAP_PORT, "protocol": "TCP"})
    if role.nnodes > 1:
        ports.append({"name": "dist-init", "containerPort": DIST_INIT_PORT, "protocol": "TCP"})
    return ports


def container_security(rdma: bool) -> dict[str, Any]:
    # Root is kept (the SGLang image writes its caches as root); every capability is dropped except
    # IPC_LOCK, which RDMA needs to pin memory for the NICs.
    capabilities: dict[str, Any] = {"drop": ["ALL"]}
    if rdma:
        capabilities["add"] = ["IPC_LOCK"]
    return {"allowPrivilegeEscalation": False, "capabilities": capabilities}


def engine_container(layout: FleetLayout, role: RoleLayout, leader: bool) -> dict[str, Any]:
    return {
        "name": ENGINE_CONTAINER,
        "image": layout.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(LAUNCH_COMMAND),
        "args": role.engine.to_argv(),
        "ports": engine_ports(role),
        "env": engine_env(layout),
        "resources": engine_resources(layout, role),
        "volumeMounts": [
            {"name": SHM_VOLUME, "mountPath": "/dev/shm"},
            {"name": CACHE_VOLUME, "mountPath": layout.serving.cache.mount_path},
        ],
        **engine_probes(leader),
        "lifecycle": pre_stop(),
        "securityContext": container_security(layout.rdma),
    }


# ----------------------------------------------------------------------------------------- pod spec


def volumes(layout: FleetLayout) -> list[dict[str, Any]]:
    cache = layout.serving.cache
    cache_source: dict[str, Any] = (
        {"persistentVolumeClaim": {"claimName": cache.claim_name}}
        if cache.claim_name
        else {"emptyDir": {"sizeLimit": cache.size}}
    )
    return [
        {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": layout.serving.shm_size}},
        {"name": CACHE_VOLUME, **cache_source},
    ]


def scheduling(layout: FleetLayout) -> dict[str, Any]:
    pool = layout.pool
    placement: dict[str, Any] = {}
    if pool.node_selector:
        placement["nodeSelector"] = dict(sorted(pool.node_selector.items()))
    if pool.tolerations:
        placement["tolerations"] = [
            toleration.model_dump(mode="json", by_alias=True, exclude_none=True) for toleration in pool.tolerations
        ]
    return placement


def engine_pod_spec(layout: FleetLayout, role: RoleLayout, leader: bool) -> dict[str, Any]:
    return {
        # Service links would put variables such as SGLANG_PORT into the environment of every pod in a
        # namespace with a Service called "sglang", and SGLang reads SGLANG_* variables as settings.
        "enableServiceLinks": False,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": grace_seconds(layout.spec),
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        **scheduling(layout),
        "containers": [engine_container(layout, role, leader)],
        "volumes": volumes(layout),
    }


def engine_pod_template(layout: FleetLayout, role: RoleLayout, leader: bool) -> dict[str, Any]:
    metadata: dict[str, Any] = {"labels": engine_pod_labels(layout, role, leader)}
    annotations = engine_pod_annotations(role, leader)
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": engine_pod_spec(layout, role, leader)}
