"""The Kubernetes side of sweeps: apply a sweep's objects, follow its Jobs, read their results, clean up.

Same conventions as `adapters.kube` (server-side apply with the `frontier-operator` field manager, the
client's own configuration for every request, `KubeError` with the HTTP status). Results come from the Job's
pod log (`render.benchmark`: the pod prints the benchmark's JSON lines after the runs), so the benchmark pod
needs no API access at all. RBAC the operator needs for this module, beyond `manifests/rbac.yaml` today:

* `batch/jobs`: patch (apply), get (state), deletecollection (clean-up);
* `pods`: list (find a Job's pod; already granted) and `pods/log`: get;
* `configmaps`: patch (store measured points; `get` is already granted).

Clean-up deletes by label — `frontier.dev/target=<target>` and `frontier.dev/sweep` (any value, or one sweep's
id) — kind by kind, so an interrupted sweep (operator restart, deleted target, failed Job) leaves nothing
behind once `delete_sweep_objects` runs; every object also carries the target's ownerReference, so deleting
the target removes them through garbage collection.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from frontier_operator.adapters.kube import (
    CONFIG_MAPS,
    FIELD_MANAGER,
    OWNED_KINDS,
    PODS,
    REQUEST_TIMEOUT_SECONDS,
    TARGET_LABEL,
    KubeError,
    Resource,
    _call,
    apply,
)
from frontier_operator.reconcile.sweep_step import JobReport, JobState
from frontier_operator.render.benchmark import LABEL_SWEEP, REPORT_CONTAINER
from frontier_operator.sweep.results import parse_benchmark_log
from frontier_operator.sweep.store import CONFIGMAP_KEY

JOBS = Resource("batch", "v1", "jobs")
# Set by the Job controller on its pods (Kubernetes ≥ 1.27; `job-name` before).
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
# Kinds a sweep creates, deleted in this order (the Job first: it stops the benchmark).
SWEEP_KINDS = ("Job", "Deployment", "LeaderWorkerSet", "Service", "RoleBinding", "Role", "ServiceAccount")


def _path(resource: Resource, namespace: str, name: str) -> str:
    return f"{resource.collection_path(namespace)}/{name}"


def apply_sweep_objects(api: ApiClient, objects: Iterable[dict[str, Any]]) -> None:
    """Apply a sweep's objects (`sweep.jobs.render_deployment`) in their order; Jobs by server-side apply too."""
    for obj in objects:
        if obj["kind"] != "Job":
            apply(api, obj)
            continue
        metadata = obj["metadata"]
        _call(
            api,
            "PATCH",
            _path(JOBS, metadata["namespace"], metadata["name"]),
            body=obj,
            content_type="application/apply-patch+yaml",
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
        )


def job_state(job: dict[str, Any] | None) -> JobState:
    """A Job's state from its status: its Complete/Failed condition, else its succeeded/failed counts."""
    if job is None:
        return JobState.MISSING
    status = job.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") != "True":
            continue
        if condition.get("type") == "Complete":
            return JobState.SUCCEEDED
        if condition.get("type") == "Failed":
            return JobState.FAILED
    if int(status.get("succeeded", 0) or 0) > 0:
        return JobState.SUCCEEDED
    if int(status.get("failed", 0) or 0) > 0:
        return JobState.FAILED
    return JobState.RUNNING


def read_job(api: ApiClient, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        job: dict[str, Any] = _call(api, "GET", _path(JOBS, namespace, name))
    except KubeError as error:
        if error.status == 404:
            return None
        raise
    return job


def _get_text(api: ApiClient, path: str, query: list[tuple[str, str]]) -> str:
    """A GET whose answer is plain text (a pod's log), through the client's configuration."""
    _, url, headers, _, _ = api.param_serialize(
        method="GET",
        resource_path=path,
        query_params=query,
        header_params={"Accept": "text/plain"},
        auth_settings=["BearerToken"],
    )
    try:
        response = api.call_api("GET", url, header_params=headers, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        response.read()  # type: ignore[no-untyped-call]
    except ApiException as exc:
        raise KubeError(exc.status or 0, f"GET {path}: {exc.status} {exc.reason}") from None
    except Exception as exc:  # urllib3 and socket errors
        raise KubeError(0, f"GET {path}: {exc.__class__.__name__}: {exc}") from None
    if not 200 <= response.status < 300:
        raise KubeError(response.status, f"GET {path}: {response.status}")
    data = response.data or b""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data)


def job_pods(api: ApiClient, namespace: str, job_name: str) -> list[dict[str, Any]]:
    for label in JOB_NAME_LABELS:
        listed = _call(api, "GET", PODS.collection_path(namespace), query=[("labelSelector", f"{label}={job_name}")])
        items: list[dict[str, Any]] = listed.get("items", [])
        if items:
            return items
    return []


def read_job_result(api: ApiClient, namespace: str, job_name: str) -> JobReport:
    """The Job's state and, once it succeeded, the benchmark results printed in its pod's log."""
    state = job_state(read_job(api, namespace, job_name))
    if state is not JobState.SUCCEEDED:
        return JobReport(state)
    pods = [p for p in job_pods(api, namespace, job_name) if (p.get("status") or {}).get("phase") == "Succeeded"]
    if not pods:
        return JobReport(state, message="the Job succeeded but its pod is gone (its log with it)")
    name = pods[-1]["metadata"]["name"]
    log = _get_text(api, f"{_path(PODS, namespace, name)}/log", [("container", REPORT_CONTAINER)])
    results = tuple(parse_benchmark_log(log))
    return JobReport(state, results, "" if results else "the Job's log holds no benchmark result")


def delete_sweep_objects(
    api: ApiClient, namespace: str, target: str, sweep_id: str | None = None, *, keep: str | None = None
) -> None:
    """Delete every sweep object of the target (or of one sweep; or all but those of the sweep `keep`, the one
    still running), kind by kind, by label."""
    selector = f"{TARGET_LABEL}={target},{LABEL_SWEEP}" + (f"={sweep_id}" if sweep_id else "")
    if keep:
        selector += f",{LABEL_SWEEP} notin ({keep})"
    for kind in SWEEP_KINDS:
        resource = JOBS if kind == "Job" else OWNED_KINDS[kind]
        try:
            _call(
                api,
                "DELETE",
                resource.collection_path(namespace),
                query=[("labelSelector", selector), ("propagationPolicy", "Background")],
            )
        except KubeError as error:
            if error.status == 404 and resource.optional_crd:
                continue
            raise


def store_sweep_results(
    api: ApiClient, namespace: str, name: str, document: str, *, labels: dict[str, str], owner: dict[str, Any] | None
) -> None:
    """Write the measured points (`sweep.store.encode_points`) into the ConfigMap `name`, key `sweep.json`."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "data": {CONFIGMAP_KEY: document},
    }
    if owner is not None:
        body["metadata"]["ownerReferences"] = [owner]
    _call(
        api,
        "PATCH",
        _path(CONFIG_MAPS, namespace, name),
        body=body,
        content_type="application/apply-patch+yaml",
        query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
    )
