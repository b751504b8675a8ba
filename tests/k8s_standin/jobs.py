"""A benchmark Job runner for the stand-in: what the Job controller, the kubelet and the benchmark would do.

The stand-in runs no container. `BenchmarkJobRunner.run_pending()` finds every sweep Job (label
`frontier.dev/sweep`) that has not finished, answers each benchmark run of its init containers with `answer`
(in the e2e tests: the twin, `sim.bench.answer_benchmark` against the sweep deployment's configuration),
creates the Job's pod as the Job controller would (labels `batch.kubernetes.io/job-name`, ownerReference),
marks it Succeeded, stores the report container's log (the JSON lines the benchmark wrote) for `pods/log`,
and sets the Job's status to Complete. An `answer` that raises marks the Job Failed instead.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .server import StandIn

BENCHMARK_MODULE = "sglang.benchmark.serving"
SWEEP_LABEL = "frontier.dev/sweep"
# Answers one benchmark run: (argv after the module, the Job) → the result object the client writes.
Answer = Callable[[list[str], dict[str, Any]], dict[str, Any]]


def _finished(job: dict[str, Any]) -> bool:
    status = job.get("status") or {}
    return bool(status.get("succeeded") or status.get("failed"))


class BenchmarkJobRunner:
    def __init__(self, standin: StandIn, answer: Answer) -> None:
        self.standin = standin
        self.answer = answer
        self.jobs = standin.resource_type("batch/v1", "jobs")
        self.pods = standin.resource_type("v1", "pods")

    def pending(self) -> list[dict[str, Any]]:
        return [
            job
            for job in self.standin.store.objects("batch", "jobs")
            if SWEEP_LABEL in (job["metadata"].get("labels") or {}) and not _finished(job)
        ]

    def run_pending(self) -> list[str]:
        """Run every pending sweep Job to completion; the names of the Jobs run."""
        ran = []
        for job in self.pending():
            self._run(job)
            ran.append(job["metadata"]["name"])
        return ran

    def _run(self, job: dict[str, Any]) -> None:
        metadata = job["metadata"]
        namespace, name = metadata["namespace"], metadata["name"]
        containers = job["spec"]["template"]["spec"].get("initContainers", [])
        lines, failed = [], ""
        for container in containers:
            argv = [*container.get("command", []), *container.get("args", [])]
            if BENCHMARK_MODULE not in argv:
                continue
            try:
                result = self.answer(argv[argv.index(BENCHMARK_MODULE) + 1 :], job)
            except Exception as error:
                failed = f"{container['name']}: {error}"
                break
            lines.append(json.dumps(result))
        pod_name = f"{name}-run"[:63]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "namespace": namespace,
                "labels": {
                    **(job["spec"]["template"]["metadata"].get("labels") or {}),
                    "batch.kubernetes.io/job-name": name,
                    "job-name": name,
                },
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": metadata["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": job["spec"]["template"]["spec"],
        }
        created = self.standin.store.create(self.pods, namespace, pod)
        phase = "Failed" if failed else "Succeeded"
        self.standin.store.replace(
            self.pods, namespace, pod_name, {**created, "status": {"phase": phase}}, subresource="status"
        )
        self.standin.router.pod_logs[(namespace, pod_name)] = "" if failed else "\n".join(lines) + "\n"
        condition = {"type": "Failed" if failed else "Complete", "status": "True", "message": failed}
        status = {"failed": 1, "conditions": [condition]} if failed else {"succeeded": 1, "conditions": [condition]}
        current = self.standin.store.get(self.jobs, namespace, name)
        self.standin.store.replace(self.jobs, namespace, name, {**current, "status": status}, subresource="status")
