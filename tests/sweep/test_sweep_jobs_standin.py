"""The sweep adapters against the API stand-in, with benchmark Jobs answered by the twin.

Apply a sweep's objects, see the Job running, let the stand-in's Job runner answer the benchmark from the
measured truth, read the results from the pod log, store them in a ConfigMap, and delete every sweep object
by label — the sequence the controller runs, without the controller.
"""

from __future__ import annotations

import json
import time
from typing import Any

import kubernetes

from frontier_operator.adapters.kube import read_config_map_key
from frontier_operator.adapters.sweep_jobs import (
    JobState,
    apply_sweep_objects,
    delete_sweep_objects,
    read_job_result,
    store_sweep_results,
)
from frontier_operator.render.benchmark import LABEL_SWEEP
from frontier_operator.sim.bench import answer_benchmark
from frontier_operator.sweep.choose import plan_sweep
from frontier_operator.sweep.jobs import render_deployment, sweep_deployments
from frontier_operator.sweep.loop import search_candidates
from frontier_operator.sweep.results import match_results
from frontier_operator.sweep.store import CONFIGMAP_KEY, decode_points, encode_points
from k8s_standin import StandIn
from k8s_standin.jobs import BenchmarkJobRunner
from sweep_support import table_setup

LISTED = (
    ("batch/v1", "jobs"),
    ("apps/v1", "deployments"),
    ("v1", "services"),
)


def _sweep_objects(api: kubernetes.client.ApiClient, namespace: str, target: str) -> list[dict[str, Any]]:
    found = []
    for api_version, plural in LISTED:
        prefix = f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"
        response = api.call_api(
            "GET",
            f"{api.configuration.host}{prefix}/namespaces/{namespace}/{plural}"
            f"?labelSelector=frontier.dev/target={target},{LABEL_SWEEP}",
            header_params={"Accept": "application/json"},
        )
        response.read()
        found += json.loads(response.data)["items"]
    return found


def test_a_sweep_runs_end_to_end_against_the_stand_in(
    standin: StandIn, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    setup = table_setup()
    target = setup.target.model_copy(update={"metadata": {**setup.target.metadata, "namespace": namespace}})
    name = str(target.metadata["name"])
    sweep = plan_sweep(
        setup.plan, search_candidates(setup.request, setup.predictor), setup.request, setup.predictor, 60.0
    )
    deployments = sweep_deployments(sweep, setup.request.workload, target_name=name, started_at=time.time())
    assert deployments
    units = {}
    for deployment in deployments:
        objects = render_deployment(target, deployment)
        apply_sweep_objects(kube_api, objects)
        job = next(o for o in objects if o["kind"] == "Job")
        units[job["metadata"]["name"]] = deployment
        assert read_job_result(kube_api, namespace, job["metadata"]["name"]).state is JobState.RUNNING

    def answer(argv: list[str], job: dict[str, Any]) -> dict[str, Any]:
        return answer_benchmark(argv, setup.truth, units[job["metadata"]["name"]].unit)

    runner = BenchmarkJobRunner(standin, answer)
    assert sorted(runner.run_pending()) == sorted(units)
    measured = []
    for job_name, deployment in units.items():
        result = read_job_result(kube_api, namespace, job_name)
        assert result.state is JobState.SUCCEEDED, result.message
        assert len(result.results) == len(deployment.points)
        measured += match_results(result.results, deployment.points)
    assert len(measured) == len(sweep.points)

    document = encode_points(measured)
    store_sweep_results(
        kube_api, namespace, f"{name}-sweep", document, labels={"frontier.dev/target": name}, owner=None
    )
    stored = read_config_map_key(kube_api, namespace, f"{name}-sweep", CONFIGMAP_KEY)
    assert stored is not None and decode_points(stored) == decode_points(document)

    assert _sweep_objects(kube_api, namespace, name)
    delete_sweep_objects(kube_api, namespace, name)
    assert _sweep_objects(kube_api, namespace, name) == []
    # The measured points outlive the sweep's objects.
    assert read_config_map_key(kube_api, namespace, f"{name}-sweep", CONFIGMAP_KEY) is not None


def test_a_failing_benchmark_fails_its_job(
    standin: StandIn, kube_api: kubernetes.client.ApiClient, namespace: str
) -> None:
    setup = table_setup()
    target = setup.target.model_copy(update={"metadata": {**setup.target.metadata, "namespace": namespace}})
    sweep = plan_sweep(
        setup.plan, search_candidates(setup.request, setup.predictor), setup.request, setup.predictor, 60.0
    )
    deployment = sweep_deployments(sweep, setup.request.workload, target_name="t", started_at=1.0)[0]
    objects = render_deployment(target, deployment)
    apply_sweep_objects(kube_api, objects)

    def broken(argv: list[str], job: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("server not ready after 3600 s")

    BenchmarkJobRunner(standin, broken).run_pending()
    job_name = next(o for o in objects if o["kind"] == "Job")["metadata"]["name"]
    result = read_job_result(kube_api, namespace, job_name)
    assert result.state is JobState.FAILED
    assert result.results == ()
