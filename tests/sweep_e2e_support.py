"""Shared by the sweep end-to-end tests (tests/operator/test_sweep_e2e.py and the RBAC life cycle): a target
that sweeps, a benchmark Job runner answering from the twin, and the queries that find sweep objects.

Which configuration a Job measures comes from the operator's own sweep record (`frontier.dev/sweep-record`, the
running Job and its points), as the closed-loop tests take the fleet from the tuning record; a record that names
another Job than the one being run fails the test. Every argv is also parsed by SGLang's own benchmark parser
(`tests/sglang_bench_parser.py`) when SGLang's wheel is installed.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from functools import cache
from typing import Any

import kubernetes

from frontier_operator.api import parse_target
from frontier_operator.reconcile.sweep_step import RECORD_ANNOTATION, decode_sweep_record
from frontier_operator.render.benchmark import BENCHMARK_MODULE
from frontier_operator.sim.bench import answer_benchmark
from frontier_operator.sim.closed_loop import prepare
from frontier_operator.sim.timing import Truth
from frontier_operator.sweep.units import deployment_unit
from k8s_standin import StandIn
from k8s_standin.fixtures import get_object, wait_for
from k8s_standin.jobs import BenchmarkJobRunner
from operator_support import FT, labelled, target_document

BUDGET = 60.0
# Every kind a sweep creates (render/benchmark.py) — what must be gone afterwards.
SWEEP_KINDS = (
    ("batch/v1", "jobs", "Job"),
    ("apps/v1", "deployments", "Deployment"),
    ("v1", "services", "Service"),
    ("v1", "serviceaccounts", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "roles", "Role"),
    ("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding"),
)


def _sglang_parser() -> Any:
    try:
        return importlib.import_module("sglang_bench_parser")
    except ImportError:  # SGLang's wheel is not installed (make test installs it): the twin's reading only
        return None


def swept_document(namespace: str, name: str = "swept", **sweep: Any) -> dict[str, Any]:
    def mutate(document: dict[str, Any]) -> None:
        document["metadata"]["name"] = name
        document["spec"]["sweep"] = {"budget": f"{BUDGET:g} GPU-min", **sweep}

    return target_document("llama-70b-chat", namespace, mutate)


@cache
def _truth(document_json: str) -> Truth:
    return prepare(parse_target(json.loads(document_json)), truth_spec="model").truth


def sweep_objects(api: kubernetes.client.ApiClient, namespace: str, target: str) -> list[dict[str, Any]]:
    found = []
    for api_version, plural, kind in SWEEP_KINDS:
        items = labelled(api, namespace, api_version, plural, f"frontier.dev/target={target},frontier.dev/sweep")
        # A list's items carry no kind of their own.
        found += [{**item, "kind": kind} for item in items]
    return found


def twin_runner(
    standin: StandIn, api: kubernetes.client.ApiClient, namespace: str, document: dict[str, Any]
) -> tuple[BenchmarkJobRunner, list[list[str]]]:
    """A Job runner answering from the twin what the operator's record says the Job measures; the argv seen."""
    truth = _truth(json.dumps(document, sort_keys=True))
    parser = _sglang_parser()
    seen: list[list[str]] = []

    def answer(argv: list[str], job: dict[str, Any]) -> dict[str, Any]:
        name = job["metadata"]["labels"]["frontier.dev/target"]
        target = get_object(api, *FT, namespace, name) or {}
        record = decode_sweep_record((target["metadata"].get("annotations") or {}).get(RECORD_ANNOTATION))
        assert record is not None and record.running is not None and record.running.job is not None
        running = record.running.job
        assert running.job_name == job["metadata"]["name"], "the record names another Job than the one running"
        if parser is not None:
            parsed = parser.parse_benchmark_argv(argv)
            assert parsed.dataset_name == "random-ids" and parsed.max_concurrency in {
                p.concurrency for p in running.points
            }
        seen.append(argv)
        return answer_benchmark([BENCHMARK_MODULE, *argv], truth, deployment_unit([p.unit for p in running.points]))

    return BenchmarkJobRunner(standin, answer), seen


def sweep_status(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    target = get_object(api, *FT, namespace, name) or {}
    found: dict[str, Any] = target.get("status", {}).get("sweep") or {}
    return found


def run_until(
    runner: BenchmarkJobRunner, done: Callable[[], Any], *, timeout: float = 90.0, what: str = "the sweep"
) -> Any:
    """Answer sweep Jobs as they appear until `done()` holds."""

    def probe() -> Any:
        runner.run_pending()
        return done()

    return wait_for(probe, timeout=timeout, interval=0.2, what=what)


def serving_deployments(api: kubernetes.client.ApiClient, namespace: str, name: str) -> list[dict[str, Any]]:
    items = labelled(api, namespace, "apps/v1", "deployments", f"frontier.dev/target={name},!frontier.dev/sweep")
    return [d for d in items if d["metadata"]["labels"].get("frontier.dev/role") != "router"]
