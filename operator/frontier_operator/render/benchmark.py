"""A sweep's objects: the candidate rendered as it would serve (variant `sweep`, never routed to users), a
Service of its own for the benchmark, and a batch/v1 Job running SGLang's benchmark client against it.

**The Job.** One pod, no GPU, no service-account token. Each concurrency level is one init container
running `python3 -m sglang.benchmark.serving --backend sglang --dataset-name random-ids …` (init containers
run one after the other, so levels never overlap), appending its result line to a JSONL file on an emptyDir;
the pod's only container then prints that file. The operator reads the results from the pod's log — the
least privilege that works: the benchmark pod needs no API access at all, and the operator needs `get` on
`pods/log` (plus `list` pods to find the Job's pod) in the target's namespace, rather than giving a pod
running the serving image the right to write ConfigMaps.

**Lengths.** `random-ids` draws each length uniformly on [⌊N·r⌋, N] (`--random-input-len` N,
`--random-range-ratio` r; sglang-0.5.23.md §9). `random_lengths` sets N and r so that the draw has the
target's mean and coefficient of variation: a uniform on [a, b] has mean (a+b)/2 and standard deviation
(b−a)/√12, so b = μ(1+√3·cv), a = μ(1−√3·cv), r = a/b. A cv above 1/√3 (what a uniform on [0, 2μ] has) is
clipped there; a b above the target's hard maximum is cut to the maximum and r re-set to keep the mean.
The client takes one ratio for both lengths: r follows the input (its spread sets prefill work) and the output's
N is set so that the output's mean is the target's with that r (`output_length`).
The default r = 0 (uniform on [1, N]) would halve the mean length, and r = 1 would measure fixed lengths only.

**Requests.** `--request-rate inf` with `--max-concurrency c`: a closed loop holding c requests in flight,
`--num-prompts` of them in all (see `sweep.types.SweepSettings.prompts`), after `--warmup-requests`
that are not counted. `--ready-check-timeout-sec` covers the engine's start-up budget, so the Job can be
created together with the deployment and waits for it.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from typing import Any

from frontier_operator.render.engine_args import HTTP_PORT
from frontier_operator.render.fleet import KIND_ORDER
from frontier_operator.render.layout import FleetLayout, resolve_layout
from frontier_operator.render.pods import (
    CACHE_VOLUME,
    COMPONENT_ROUTER,
    LABEL_LEADER,
    LABEL_REVISION,
    LABEL_ROLE,
    LABEL_TARGET,
    STARTUP_BUDGET_SECONDS,
    TRUE,
    container_security,
    engine_env,
    revision_labels,
    volumes,
)
from frontier_operator.render.request import RenderRequest, Variant
from frontier_operator.render.router import router_objects
from frontier_operator.render.workloads import engine_workload, metadata

BENCHMARK_MODULE = "sglang.benchmark.serving"
BENCHMARK_COMMAND = ("python3", "-m", BENCHMARK_MODULE)
COMPONENT_BENCHMARK = "benchmark"
RESULTS_VOLUME = "results"
RESULTS_DIR = "/results"
RESULTS_FILE = f"{RESULTS_DIR}/sweep.jsonl"
REPORT_CONTAINER = "report"
# Label on every sweep object: what `delete_sweep_objects` selects (with the target's label).
LABEL_SWEEP = "frontier.dev/sweep"
# Tokenizer and HTTP client only: no GPU, a few cores for the client's event loop and the tokenizer.
BENCHMARK_CPU = "2"
BENCHMARK_MEMORY = "8Gi"
# A finished Job is kept this long if the operator never comes back to read and delete it.
TTL_AFTER_FINISHED_SECONDS = 6 * 3600
# Wall-clock allowance over the estimated run time before Kubernetes stops the Job.
RUN_TIME_ALLOWANCE = 3.0
# A few requests before counting: the first requests pay JIT compilation and cache allocation.
MAX_WARMUP_REQUESTS = 8


@dataclass(frozen=True)
class BenchmarkLevel:
    concurrency: int
    num_prompts: int
    # Estimated run time, seconds (bounds the Job's activeDeadlineSeconds).
    expected_s: float = 600.0


@dataclass(frozen=True)
class BenchmarkSpec:
    """What the Job measures: levels run in order, lengths drawn around the target's."""

    sweep_id: str
    levels: tuple[BenchmarkLevel, ...]
    input_mean: float
    output_mean: float
    input_cv: float = 0.0
    output_cv: float = 0.0
    input_max: int | None = None
    output_max: int | None = None
    seed: int = 42


def random_lengths(mean: float, cv: float, maximum: int | None = None) -> tuple[int, float]:
    """(`--random-*-len`, `--random-range-ratio`) whose uniform draw has this mean and coefficient of variation
    (see the module docstring)."""
    spread = min(max(cv, 0.0) * math.sqrt(3.0), 1.0)
    length = max(1, round(mean * (1.0 + spread)))
    ratio = (1.0 - spread) / (1.0 + spread)
    if maximum is not None and maximum > 0 and length > maximum:
        length = maximum
        ratio = min(max(2.0 * mean / length - 1.0, 0.0), 1.0)
    return length, round(ratio, 3)


def range_ratio(spec: BenchmarkSpec) -> float:
    """One ratio serves both lengths (the client takes one): the input's, whose spread sets prefill work."""
    return random_lengths(spec.input_mean, spec.input_cv, spec.input_max)[1]


def output_length(spec: BenchmarkSpec, ratio: float) -> int:
    """`--random-output-len` whose draw on [N·r, N] has the target's mean output with the input's ratio r
    (the output's spread then follows the input's; its mean, which sets decode work, is the target's)."""
    length = max(1, round(2.0 * spec.output_mean / (1.0 + ratio)))
    return min(length, spec.output_max) if spec.output_max else length


def sweep_service_name(layout: FleetLayout) -> str:
    return layout.name("sweep")


def benchmark_job_name(layout: FleetLayout, spec: BenchmarkSpec) -> str:
    return layout.name("bench", spec.sweep_id)


def _entry_selector(layout: FleetLayout) -> dict[str, str]:
    """The sweep revision's entry pods: its router, else its engine leader(s)."""
    base = {LABEL_TARGET: layout.target_label, LABEL_REVISION: layout.revision}
    if layout.has_router:
        return {**base, LABEL_ROLE: COMPONENT_ROUTER}
    return {**base, LABEL_ROLE: layout.roles[0].role.value, LABEL_LEADER: TRUE}


def sweep_labels(layout: FleetLayout, component: str, role: str, sweep_id: str) -> dict[str, str]:
    labels = {**revision_labels(layout, component, role), LABEL_SWEEP: sweep_id}
    labels["app.kubernetes.io/name"] = "sglang-benchmark"
    return labels


def sweep_service(layout: FleetLayout, sweep_id: str, owner: dict[str, Any] | None) -> dict[str, Any]:
    labels = sweep_labels(layout, COMPONENT_BENCHMARK, COMPONENT_BENCHMARK, sweep_id)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(layout, sweep_service_name(layout), labels, owner),
        "spec": {
            "type": "ClusterIP",
            "selector": _entry_selector(layout),
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"}],
        },
    }


def _served(layout: FleetLayout) -> tuple[str, str]:
    engine = layout.roles[0].engine
    return engine.served_model_name, engine.model_path


def benchmark_argv(layout: FleetLayout, spec: BenchmarkSpec, level: BenchmarkLevel) -> list[str]:
    """The flags of one benchmark run (after `python3 -m sglang.benchmark.serving`), full names only."""
    served, checkpoint = _served(layout)
    input_len, ratio = random_lengths(spec.input_mean, spec.input_cv, spec.input_max)
    output_len = output_length(spec, ratio)
    return [
        "--backend",
        "sglang",
        "--base-url",
        f"http://{sweep_service_name(layout)}.{layout.namespace}.svc:{HTTP_PORT}",
        "--dataset-name",
        "random-ids",
        "--num-prompts",
        str(level.num_prompts),
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--random-range-ratio",
        f"{ratio:g}",
        "--request-rate",
        "inf",
        "--max-concurrency",
        str(level.concurrency),
        "--model",
        served,
        "--tokenizer",
        checkpoint,
        "--ready-check-timeout-sec",
        str(STARTUP_BUDGET_SECONDS),
        "--warmup-requests",
        str(min(level.concurrency, MAX_WARMUP_REQUESTS)),
        "--seed",
        str(spec.seed),
        "--output-file",
        RESULTS_FILE,
        "--tag",
        f"{spec.sweep_id}-c{level.concurrency}",
    ]


def _bench_container(layout: FleetLayout, spec: BenchmarkSpec, level: BenchmarkLevel) -> dict[str, Any]:
    resources = {"cpu": BENCHMARK_CPU, "memory": BENCHMARK_MEMORY}
    return {
        "name": f"bench-c{level.concurrency}",
        "image": layout.image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(BENCHMARK_COMMAND),
        "args": benchmark_argv(layout, spec, level),
        # HF_HOME in the cache volume and the HF token: the client loads the served checkpoint's tokenizer.
        "env": [e for e in engine_env(layout) if e["name"] in ("HF_HOME", "HF_TOKEN")],
        "resources": {"requests": resources, "limits": {"memory": BENCHMARK_MEMORY}},
        "volumeMounts": [
            {"name": RESULTS_VOLUME, "mountPath": RESULTS_DIR},
            {"name": CACHE_VOLUME, "mountPath": layout.serving.cache.mount_path},
        ],
        "securityContext": container_security(rdma=False),
    }


def benchmark_job(layout: FleetLayout, spec: BenchmarkSpec, owner: dict[str, Any] | None) -> dict[str, Any]:
    labels = sweep_labels(layout, COMPONENT_BENCHMARK, COMPONENT_BENCHMARK, spec.sweep_id)
    cache = next(v for v in volumes(layout) if v["name"] == CACHE_VOLUME)
    expected = sum(level.expected_s for level in spec.levels)
    report = {
        "name": REPORT_CONTAINER,
        "image": layout.image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["cat", RESULTS_FILE],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "64Mi"}},
        "volumeMounts": [{"name": RESULTS_VOLUME, "mountPath": RESULTS_DIR, "readOnly": True}],
        "securityContext": container_security(rdma=False),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata(layout, benchmark_job_name(layout, spec), labels, owner),
        "spec": {
            # A failed benchmark is reported with its log, not retried on the GPUs' time.
            "backoffLimit": 0,
            "activeDeadlineSeconds": math.ceil(STARTUP_BUDGET_SECONDS + RUN_TIME_ALLOWANCE * expected),
            "ttlSecondsAfterFinished": TTL_AFTER_FINISHED_SECONDS,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "enableServiceLinks": False,
                    "automountServiceAccountToken": False,
                    "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
                    "initContainers": [_bench_container(layout, spec, level) for level in spec.levels],
                    "containers": [report],
                    "volumes": [{"name": RESULTS_VOLUME, "emptyDir": {"sizeLimit": "64Mi"}}, cache],
                },
            },
        },
    }


def benchmark_command_line(layout: FleetLayout, spec: BenchmarkSpec, level: BenchmarkLevel) -> str:
    """The run as one shell line (for `frontier explain` and the docs)."""
    return shlex.join([*BENCHMARK_COMMAND, *benchmark_argv(layout, spec, level)])


def _labelled(obj: dict[str, Any], sweep_id: str) -> dict[str, Any]:
    obj["metadata"]["labels"] = {**obj["metadata"].get("labels", {}), LABEL_SWEEP: sweep_id}
    return obj


def render_sweep(request: RenderRequest, spec: BenchmarkSpec) -> list[dict[str, Any]]:
    """Every object of one sweep deployment and its benchmark Job, all labelled `frontier.dev/sweep`.

    The engines (and router, for P/D or several replicas) are those `render_fleet` gives for the same
    configuration — same argv, image, resources, probes — under variant `sweep` and a revision of their own.
    Left out: the target's Service (users' traffic), disruption budgets (a benchmark need not hold off node
    drains) and PodMonitors (the sweep's numbers come from the client, and the tuning loop must not see them).
    """
    if request.variant is not Variant.SWEEP:
        request = RenderRequest(request.target, request.config, request.pool_name, request.owner, Variant.SWEEP)
    layout = resolve_layout(request)
    owner = request.owner.to_dict() if request.owner is not None else None
    objects: list[dict[str, Any]] = [engine_workload(layout, role, owner) for role in layout.roles]
    if layout.has_router:
        objects += router_objects(layout, owner)
    objects = [_labelled(obj, spec.sweep_id) for obj in objects]
    objects.append(sweep_service(layout, spec.sweep_id, owner))
    objects.append(benchmark_job(layout, spec, owner))
    order = (*KIND_ORDER, "Job")
    return sorted(objects, key=lambda obj: order.index(obj["kind"]))


def benchmark_argvs(job: dict[str, Any]) -> list[list[str]]:
    """Every benchmark run of a rendered Job, as full argv (`python3 -m sglang.benchmark.serving …`)."""
    containers = job["spec"]["template"]["spec"].get("initContainers", [])
    return [[*c["command"], *c["args"]] for c in containers if c["command"][-1:] == [BENCHMARK_MODULE]]


__all__ = [
    "BENCHMARK_COMMAND",
    "LABEL_SWEEP",
    "RESULTS_FILE",
    "BenchmarkLevel",
    "BenchmarkSpec",
    "benchmark_argv",
    "benchmark_argvs",
    "benchmark_command_line",
    "benchmark_job",
    "random_lengths",
    "range_ratio",
    "render_sweep",
    "sweep_service",
]
