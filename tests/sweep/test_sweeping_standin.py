"""The sweep shell (`sweeping.step`) against the API stand-in, without the operator: what it reads and writes
when the API server refuses a sweep's objects, and the clean-up of strays on an operator start."""

from __future__ import annotations

import time
from typing import Any

import kubernetes

from frontier_operator.api.annotations import SWEEP_START
from frontier_operator.api.status import FrontierTargetStatus
from frontier_operator.reconcile.sweep_step import MAX_ROUNDS, RECORD_ANNOTATION, decode_sweep_record
from frontier_operator.sweeping import step
from k8s_standin import RequestMatch, StandIn
from k8s_standin.fixtures import get_object
from sweep_support import planned_examples

NAME = "llama"


def _step(api: kubernetes.client.ApiClient, namespace: str, annotations: dict[str, str], **kw: Any) -> Any:
    case = next(p for p in planned_examples() if p.name == "llama-70b-chat")
    target = case.target.model_copy(update={"metadata": {"name": NAME, "namespace": namespace, "uid": "u-1"}})
    return step(
        api,
        namespace=namespace,
        name=NAME,
        target=target,
        request=case.request,
        plan=case.plan,
        document="",
        annotations=annotations,
        current=FrontierTargetStatus(),
        force_apply=kw.get("force_apply", False),
        now=kw.get("now", time.time()),
    )


def test_objects_the_api_server_refuses_fail_that_deployment_and_say_why(
    standin: StandIn, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    refusal = standin.faults.add(
        RequestMatch(verb="patch", resource="jobs", namespace=namespace), status=403, times=None
    )
    result = _step(kube_api, namespace, {SWEEP_START: "now"})
    # Tried again in the next round (a refusal may be passing), never more than the rounds a sweep has.
    assert 1 <= refusal.fired <= MAX_ROUNDS
    reasons = [e.reason for e in result.events]
    assert "SweepStarted" in reasons and "SweepJobFailed" in reasons
    failed = next(e for e in result.events if e.reason == "SweepJobFailed")
    assert "refused" in failed.message and "403" in failed.message
    record = decode_sweep_record(result.annotations[RECORD_ANNOTATION])
    assert record is not None and record.running is None and record.phase.value == "Failed"
    # What was applied before the refusal (the engines, the Service) is gone again.
    listed = kubernetes.client.AppsV1Api(kube_api).list_namespaced_deployment(
        namespace, label_selector=f"frontier.dev/target={NAME},frontier.dev/sweep"
    )
    assert listed.items == []


def test_an_operator_start_deletes_objects_of_sweeps_the_record_does_not_name(
    kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    started = _step(kube_api, namespace, {SWEEP_START: "now"}, now=1000.0)
    record = decode_sweep_record(started.annotations[RECORD_ANNOTATION])
    assert record is not None and record.running is not None and record.running.job is not None
    job_name = record.running.job.job_name
    core = kubernetes.client.CoreV1Api(kube_api)
    core.create_namespaced_service(
        namespace,
        {
            "metadata": {
                "name": "stray",
                "labels": {"frontier.dev/target": NAME, "frontier.dev/sweep": "dead00"},
            },
            "spec": {"ports": [{"port": 30000}]},
        },
    )
    annotations = {SWEEP_START: "now", RECORD_ANNOTATION: started.annotations[RECORD_ANNOTATION]}
    # A re-check leaves strays alone (no API call beyond reading the Job) …
    _step(kube_api, namespace, annotations, now=1001.0)
    assert get_object(kube_api, "v1", "services", namespace, "stray") is not None
    # … a resume (operator start) deletes them and keeps the running sweep's objects.
    _step(kube_api, namespace, annotations, force_apply=True, now=1002.0)
    assert get_object(kube_api, "v1", "services", namespace, "stray") is None
    assert get_object(kube_api, "batch/v1", "jobs", namespace, job_name) is not None
