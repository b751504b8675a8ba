"""The operator serves its own Prometheus metrics: reconciles, plan time, targets per condition."""

from __future__ import annotations

import socket
import urllib.request
from typing import Any

import kubernetes
from prometheus_client.parser import text_string_to_metric_families

from k8s_standin.fixtures import wait_for, wait_for_object
from operator_support import FT, create, has_condition, target_document


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def series(name: str, **labels: str) -> str:
    return name + "{" + ",".join(f"{key}={value}" for key, value in sorted(labels.items())) + "}"


def scrape(port: int) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[series(sample.name, **sample.labels)] = sample.value
    return samples


def test_metrics_count_reconciles_plans_and_targets_by_condition(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, kopf_process: Any
) -> None:
    port = free_port()
    kopf_process(
        "run",
        "-n",
        namespace,
        "--standalone",
        "-m",
        "frontier_operator.main",
        env={"FRONTIER_METRICS_PORT": str(port), "FRONTIER_RECHECK_SECONDS": "1"},
    )
    create(kube_api, target_document("llama-70b-chat", namespace))
    wait_for_object(kube_api, *FT, namespace, "llama-70b-chat", has_condition("PlanFeasible", "True"), timeout=60)

    mine = {"frontier_target": "llama-70b-chat", "target_namespace": namespace}
    planned = series("frontier_target_condition", condition="PlanFeasible", status="True", **mine)
    samples = wait_for(lambda: (s := scrape(port)).get(planned) and s, timeout=20, what="the condition gauge")
    assert samples[series("frontier_reconciles_total", result="ok", trigger="create")] >= 1
    assert samples[series("frontier_plan_duration_seconds_count")] >= 1
    assert samples[series("frontier_decisions_total", decision="apply")] >= 1
    assert samples[series("frontier_target_condition", condition="Ready", status="False", **mine)] == 1
    assert samples[series("frontier_slo_bound_seconds", metric="tpot", percentile="50", **mine)] == 0.03
    assert samples[series("frontier_gpus", **mine)] >= 1
    assert 0 < samples[series("frontier_cost_per_mtok_dollars", **mine)] < 100
