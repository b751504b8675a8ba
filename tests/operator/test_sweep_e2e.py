"""Benchmark sweeps end to end: the real operator on the API stand-in, benchmark Jobs answered by the twin.

The stand-in runs no pods: `BenchmarkJobRunner` plays the Job controller, the kubelet and SGLang's benchmark
client for every sweep Job, answering each run from the twin (`sim.bench.answer_benchmark`) for the configuration
the operator's sweep record says the Job measures (`sweep_e2e_support.twin_runner`); every argv also goes through
SGLang's own benchmark parser.
"""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest

from frontier_operator.cli import main
from frontier_operator.sweep.store import CONFIGMAP_KEY, decode_points
from k8s_standin import StandIn
from k8s_standin.fixtures import get_object, mark_deployment_ready, wait_for, wait_for_object
from operator_support import FT, OPERATOR, create, events_for, has_condition
from sweep_e2e_support import (
    BUDGET,
    run_until,
    serving_deployments,
    sweep_objects,
    sweep_status,
    swept_document,
    twin_runner,
)

# ------------------------------------------------------------------------------------------------ tests


def test_a_requested_sweep_measures_stores_explains_and_leaves_nothing_behind(  # noqa: PLR0917 - fixtures
    crd: None,
    kube_api: kubernetes.client.ApiClient,
    namespace: str,
    run_operator: Any,
    standin: StandIn,
    capsys: pytest.CaptureFixture[str],
) -> None:
    document = swept_document(namespace)
    runner, seen = twin_runner(standin, kube_api, namespace, document)
    with run_operator(OPERATOR, namespaces=[namespace], timeout=180):
        create(kube_api, document)
        (serving,) = wait_for(lambda: serving_deployments(kube_api, namespace, "swept"), timeout=30)
        mark_deployment_ready(kube_api, namespace, serving["metadata"]["name"])
        wait_for_object(kube_api, *FT, namespace, "swept", has_condition("Ready", "True"), timeout=30)
        assert sweep_objects(kube_api, namespace, "swept") == [], "nothing is swept unless asked"

        assert main(["sweep", "start", "swept", "-n", namespace]) == 0
        jobs = wait_for(
            lambda: [o for o in sweep_objects(kube_api, namespace, "swept") if o["kind"] == "Job"],
            timeout=30,
            what="the first benchmark Job",
        )
        # The sweep runs beside the serving fleet, which neither prunes it nor is pruned by it.
        assert wait_for_object(kube_api, *FT, namespace, "swept", lambda o: sweep_status_of(o) == "Running")
        assert serving_deployments(kube_api, namespace, "swept")
        assert jobs[0]["metadata"]["ownerReferences"][0]["kind"] == "FrontierTarget"

        done = run_until(
            runner,
            lambda: (s := sweep_status(kube_api, namespace, "swept")).get("phase") in {"Done", "Failed"} and s,
        )
        assert done["phase"] == "Done", done.get("explanation")
        wait_for(lambda: sweep_objects(kube_api, namespace, "swept") == [], timeout=20, what="sweep objects deleted")
        assert serving["metadata"]["name"] in {
            d["metadata"]["name"] for d in serving_deployments(kube_api, namespace, "swept")
        }
        events = {e["reason"] for e in events_for(kube_api, namespace, "swept")}
    assert seen, "benchmark runs were answered"
    assert {"SweepStarted", "SweepDone"} <= events

    # Results: stored in the ConfigMap, measured points in status, within the budget.
    config_map = get_object(kube_api, "v1", "configmaps", namespace, "swept-sweep")
    assert config_map is not None and config_map["metadata"]["ownerReferences"][0]["name"] == "swept"
    stored = decode_points(config_map["data"][CONFIGMAP_KEY])
    assert len(stored) == len(seen) == len(done["points"]) >= 1
    assert done["resultsConfigMap"] == "swept-sweep"
    for point in done["points"]:
        assert point["reason"] in {"chosen", "knee", "runner-up", "least-calibrated"}
        assert point["measuredTpotMs"] > 0 and point["predictedTpotMs"] > 0
    assert 0 < done["gpuMinutesUsed"] <= BUDGET
    assert done["lastRunAt"] and done["explanation"]

    # `frontier explain` shows predicted against measured for every swept point.
    capsys.readouterr()
    assert main(["explain", "swept", "-n", namespace]) == 0
    explained = capsys.readouterr().out
    assert "predicted / measured" in explained and "sweep        Done" in explained
    for point in done["points"]:
        assert f"at {point['concurrency']} in flight" in explained


def sweep_status_of(obj: dict[str, Any]) -> str | None:
    phase: str | None = (obj.get("status", {}).get("sweep") or {}).get("phase")
    return phase


def test_an_interrupted_sweep_leaves_no_orphan(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: StandIn
) -> None:
    document = swept_document(namespace)
    runner, _ = twin_runner(standin, kube_api, namespace, document)
    custom = kubernetes.client.CustomObjectsApi(kube_api)
    with run_operator(OPERATOR, namespaces=[namespace], timeout=180):
        create(kube_api, document)
        wait_for(lambda: serving_deployments(kube_api, namespace, "swept"), timeout=30)
        assert main(["sweep", "start", "swept", "-n", namespace]) == 0
        (first_job,) = wait_for(
            lambda: [o for o in sweep_objects(kube_api, namespace, "swept") if o["kind"] == "Job"], timeout=30
        )
    # The operator stopped mid-sweep. Meanwhile an object of a sweep the record no longer knows (an operator
    # that crashed between applying and recording) lies around.
    stray = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "swept-stray",
            "namespace": namespace,
            "labels": {"frontier.dev/target": "swept", "frontier.dev/sweep": "dead00"},
        },
        "spec": {"ports": [{"port": 30000}]},
    }
    kubernetes.client.CoreV1Api(kube_api).create_namespaced_service(namespace, stray)

    with run_operator(OPERATOR, namespaces=[namespace], timeout=180):
        # On resume the stray goes; the running sweep goes on from its record.
        wait_for(lambda: get_object(kube_api, "v1", "services", namespace, "swept-stray") is None, timeout=30)
        assert get_object(kube_api, "batch/v1", "jobs", namespace, first_job["metadata"]["name"]) is not None
        done = run_until(
            runner,
            lambda: (s := sweep_status(kube_api, namespace, "swept")).get("phase") in {"Done", "Failed"} and s,
        )
        assert done["phase"] == "Done", done.get("explanation")
        wait_for(lambda: sweep_objects(kube_api, namespace, "swept") == [], timeout=20, what="sweep objects deleted")

        # A second sweep, stopped mid-way by a spec change (and the operator gone while it happens).
        assert main(["sweep", "start", "swept", "-n", namespace]) == 0
        wait_for(lambda: [o for o in sweep_objects(kube_api, namespace, "swept") if o["kind"] == "Job"], timeout=30)
    custom.patch_namespaced_custom_object(
        "frontier.dev", "v1alpha1", namespace, "frontiertargets", "swept", {"spec": {"slo": {"ttft": {"p99": "2s"}}}}
    )
    with run_operator(OPERATOR, namespaces=[namespace], timeout=180):
        interrupted = wait_for_object(
            kube_api,
            *FT,
            namespace,
            "swept",
            lambda o: any("interrupted" in line for line in (o["status"].get("sweep") or {}).get("explanation", [])),
            timeout=30,
        )
        wait_for(lambda: sweep_objects(kube_api, namespace, "swept") == [], timeout=20, what="sweep objects deleted")
        assert "SweepInterrupted" in {e["reason"] for e in events_for(kube_api, namespace, "swept")}
    assert interrupted["status"]["sweep"]["gpuMinutesUsed"] <= BUDGET


def test_on_create_in_auto_mode_the_first_deployment_waits_for_the_sweep(
    crd: None, kube_api: kubernetes.client.ApiClient, namespace: str, run_operator: Any, standin: StandIn
) -> None:
    document = swept_document(namespace, onCreate=True)
    document["spec"].setdefault("tuning", {})["mode"] = "auto"
    runner, _ = twin_runner(standin, kube_api, namespace, document)
    with run_operator(OPERATOR, namespaces=[namespace], timeout=180):
        create(kube_api, document)
        wait_for(lambda: [o for o in sweep_objects(kube_api, namespace, "swept") if o["kind"] == "Job"], timeout=30)
        waiting = wait_for_object(
            kube_api, *FT, namespace, "swept", has_condition("Progressing", "True", "Sweeping"), timeout=30
        )
        assert "waits for the sweep" in next(
            c["message"] for c in waiting["status"]["conditions"] if c["type"] == "Progressing"
        )
        assert serving_deployments(kube_api, namespace, "swept") == [], "no fleet before the sweep ends"
        run_until(runner, lambda: sweep_status(kube_api, namespace, "swept").get("phase") == "Done")
        wait_for(lambda: serving_deployments(kube_api, namespace, "swept"), timeout=30, what="the first fleet")
        wait_for(lambda: sweep_objects(kube_api, namespace, "swept") == [], timeout=20, what="sweep objects deleted")
