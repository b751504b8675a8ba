"""The operator's closed loop end to end: a digital twin that follows the stand-in's Deployments, scraped by
a real Prometheus the operator queries.

The API stand-in runs no controllers and no pods. `Kubelet` plays both for one target: it polls the
target's Deployments and makes the twin (`sim.exporter.LiveTwin`) follow them — a new stable revision that
differs only in `--max-running-requests` is the twin's `SetBatchCap` (a rolling restart), any other new
stable revision a `ReplaceConfig`, unless it runs exactly what the canary runs (then `PromoteCanary`); a
replica count changed in place is `SetReplicas`; a canary revision is `StartCanary` with its traffic
share, and its Deployments vanishing without a promotion is `RollbackCanary`. It marks a Deployment ready
once the twin's pods of that revision and role are ready, as the Deployment controller would. The engine
image picks the twin's truth (`Kubelet.truths`: a slower image is a worse canary), and an image listed in
`crashing_images` never starts: its pods are written to the stand-in in CrashLoopBackOff instead.

What the twin runs comes from the operator's own tuning record (`frontier.dev/tuning`, the configuration
behind each revision) — the Deployment's flags are checked against it, so a record that disagrees with the
manifests it rendered fails the test — and the replica counts from the Deployments themselves.

The twin's exporter serves Prometheus HTTP service discovery; Prometheus (Debian's binary, 1 s scrapes)
finds the twin's pods there with the labels the rendered PodMonitor gives them in a cluster.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from frontier_operator.api import parse_target
from frontier_operator.controller import plan_for_spec
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import Role, ServingConfig, Workload
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.planner.types import Plan
from frontier_operator.reconcile.tuned_fleet import fresh_record, render_record
from frontier_operator.reconcile.tuning_record import ANNOTATION as RECORD_ANNOTATION
from frontier_operator.reconcile.tuning_record import TuningRecord, decode_record, spec_key
from frontier_operator.sim import changes
from frontier_operator.sim.exporter import LiveTwin, TwinExporter, prometheus_scrape_config
from frontier_operator.sim.fleet import FleetSimulation, PodState, Revision
from frontier_operator.sim.perturbed import Cliff, Perturbation, PerturbedModelTruth
from frontier_operator.sim.timing import Truth
from frontier_operator.tuning.observation import Variant
from k8s_standin.fixtures import get_object, mark_deployment_ready, object_path, request_json
from operator_support import EXAMPLES, FT
from prometheus_support import PrometheusProcess, free_port, prometheus_binary, start_prometheus

LABEL_TARGET = "frontier.dev/target"
LABEL_REVISION = "frontier.dev/revision"
LABEL_ROLE = "frontier.dev/role"
LABEL_VARIANT = "frontier.dev/variant"
CAP_FLAG = "--max-running-requests"
TP_FLAG = "--tp-size"
# New pods of the twin serve this long after the Deployment asks for them (SGLang loads for minutes; the
# tests have seconds).
STARTUP_S = 2.0
POLL_S = 0.25


# ------------------------------------------------------------------------------------------------ targets


def closed_loop_target(
    namespace: str,
    prometheus_url: str,
    *,
    name: str = "closed-loop",
    mode: str = "auto",
    rate: str = "24/s",
    tpot_p50: str = "30ms",
    canary_duration: str = "10s",
    image: str | None = None,
) -> dict[str, Any]:
    """The Llama-3.1-70B chat example, made to close its loop in seconds.

    24 requests/s of 150-token answers put well over `MIN_SAMPLES` (100) completions in each 10 s window,
    and over 100 in a canary's half of it; a 2 s interval, 4 s cooldown and 10 s canary comparison let the
    decision rules act within a test. The pool (24 H100) leaves room for a canary beside the fleet.
    Exploration is off: a neighbour canary started at random would blur what each test checks.
    """
    document: dict[str, Any] = yaml.safe_load(EXAMPLES["llama-70b-chat"].read_text(encoding="utf-8"))
    document["metadata"] = {"name": name, "namespace": namespace}
    spec = document["spec"]
    spec["workload"]["requestRate"] = rate
    spec["workload"]["outputTokens"] = {"mean": 150, "p90": 300, "max": 2000}
    spec["slo"]["tpot"] = {"p50": tpot_p50}
    spec["hardware"]["pools"][0]["maxGpus"] = 24
    spec["tuning"] = {
        "mode": mode,
        "interval": "2s",
        "window": "10s",
        "cooldown": "4s",
        "maxChangesPerHour": 60,
        "exploration": False,
        "canary": {"trafficShare": "50%", "minDuration": canary_duration},
        "prometheusUrl": prometheus_url,
    }
    if image is not None:
        spec.setdefault("serving", {})["image"] = image
    return document


def planned_workload(document: Mapping[str, Any]) -> Workload:
    """The workload the operator plans for: the twin's clients send exactly that."""
    return plan_request_from_spec(parse_target(document).spec).workload


def model_truth(document: Mapping[str, Any], *, decode_factor: float = 1.0, noise_cv: float = 0.03) -> Truth:
    """The operator's own performance model as the twin's truth, its decode `decode_factor` × slower (a model
    that is wrong on purpose when ≠ 1), with run-to-run jitter `noise_cv`."""
    arch = plan_request_from_spec(parse_target(document).spec).arch
    cliffs = (Cliff(decode_factor, "decode differs from the model"),) if decode_factor != 1.0 else ()
    perturbation = replace(Perturbation.none(7), noise_cv=noise_cv, cliffs=cliffs)
    return PerturbedModelTruth(PerformanceModel.default(), arch, perturbation)


# --------------------------------------------------------------------------------------------- reading


def target_object(api: kubernetes.client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    found = get_object(api, *FT, namespace, name)
    assert found is not None, f"FrontierTarget {namespace}/{name} is gone"
    return found


def tuning_record(target: Mapping[str, Any]) -> TuningRecord | None:
    annotations = target.get("metadata", {}).get("annotations") or {}
    if RECORD_ANNOTATION in annotations:
        return decode_record(annotations[RECORD_ANNOTATION])
    # Until its first tick the operator stores no record: it is what the plan gives, rebuilt as the controller does.
    parsed = parse_target(target)
    plan = plan_for_spec(parsed.spec)
    if not isinstance(plan, Plan):
        return None
    return render_record(parsed, fresh_record(spec_key(parsed.spec), plan, parsed.spec.serving.image)).record


def list_json(
    api: kubernetes.client.ApiClient, api_version: str, plural: str, namespace: str, selector: str
) -> list[dict[str, Any]]:
    status, body = request_json(
        api, "GET", object_path(api_version, plural, namespace), query=[("labelSelector", selector)]
    )
    assert status == 200, body
    items: list[dict[str, Any]] = body["items"]
    return items


def engine_container(deployment: Mapping[str, Any]) -> dict[str, Any]:
    containers: list[dict[str, Any]] = deployment["spec"]["template"]["spec"]["containers"]
    return next(c for c in containers if CAP_FLAG in (c.get("args") or []))


def flag(args: Sequence[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def _without_cap(args: Sequence[str]) -> tuple[str, ...]:
    out = list(args)
    if CAP_FLAG in out:
        at = out.index(CAP_FLAG)
        del out[at : at + 2]
    return tuple(out)


@dataclass(frozen=True)
class RoleWorkload:
    """One engine Deployment as the kubelet reads it."""

    name: str
    role: Role
    replicas: int
    image: str
    args: tuple[str, ...]
    generation: int
    ready: int
    observed_generation: int


@dataclass(frozen=True)
class RevisionView:
    revision: str
    variant: str
    roles: Mapping[Role, RoleWorkload]

    def signature(self, *, cap: bool = True) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
        """What the pods run, role by role (image and flags), without the replica counts."""
        return tuple(
            (role.value, w.image, w.args if cap else _without_cap(w.args))
            for role, w in sorted(self.roles.items(), key=lambda item: item[0].value)
        )

    @property
    def image(self) -> str:
        return next(iter(self.roles.values())).image


def engine_revisions(api: kubernetes.client.ApiClient, namespace: str, target: str) -> dict[str, RevisionView]:
    by_revision: dict[str, dict[Role, RoleWorkload]] = {}
    variants: dict[str, str] = {}
    for item in list_json(api, "apps/v1", "deployments", namespace, f"{LABEL_TARGET}={target}"):
        labels = item["metadata"]["labels"]
        if labels.get(LABEL_ROLE) == "router":
            continue
        container = engine_container(item)
        status = item.get("status") or {}
        workload = RoleWorkload(
            name=item["metadata"]["name"],
            role=Role(labels[LABEL_ROLE]),
            replicas=int(item["spec"].get("replicas", 1)),
            image=str(container["image"]),
            args=tuple(container.get("args") or ()),
            generation=int(item["metadata"].get("generation", 0)),
            ready=int(status.get("readyReplicas", 0)),
            observed_generation=int(status.get("observedGeneration", 0)),
        )
        by_revision.setdefault(labels[LABEL_REVISION], {})[workload.role] = workload
        variants[labels[LABEL_REVISION]] = labels.get(LABEL_VARIANT, "stable")
    return {rev: RevisionView(rev, variants[rev], roles) for rev, roles in by_revision.items()}


def _check_flags(view: RevisionView, config: ServingConfig) -> None:
    """The Deployment runs what the record says the revision is (batch cap and TP per role)."""
    for role, workload in view.roles.items():
        deployment = config.role(role)
        assert deployment is not None, f"revision {view.revision} runs {role.value}, the record has no such role"
        cap = flag(workload.args, CAP_FLAG)
        assert cap == str(deployment.worker.max_running_requests), (view.revision, cap, deployment.worker)
        tp = flag(workload.args, TP_FLAG)
        assert tp is None or int(tp) == deployment.worker.tp, (view.revision, tp, deployment.worker)


# ------------------------------------------------------------------------------------------------ kubelet


@dataclass
class Bound:
    """A Kubernetes revision and the twin revision that plays it (None: its pods crash-loop)."""

    view: RevisionView
    twin: Revision | None


@dataclass
class Kubelet:
    api: kubernetes.client.ApiClient
    namespace: str
    target: str
    live: LiveTwin
    default_truth: Truth
    truths: Mapping[str, Truth] = field(default_factory=dict)
    crashing_images: frozenset[str] = frozenset()
    stable: Bound | None = None
    canary: Bound | None = None
    # Stable revisions replaced, until their Deployments are deleted (then their pods go at once).
    replaced: list[Bound] = field(default_factory=list)
    # (wall time, what the twin was told) — the test's evidence of what reached the "pods".
    log: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    # ------------------------------------------------------------------ running

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll()
            except Exception:  # reported by the test (`errors`), never lost in a thread
                self.errors.append(traceback.format_exc())

    def _note(self, text: str) -> None:
        self.log.append((time.time(), text))

    def _apply(self, change: changes.ConfigChange, truth: Truth | None = None) -> None:
        with self.live.lock:
            fleet = self.live.fleet
            if truth is not None:
                # A revision's step times are fixed when its pods start: the new image's truth is used for
                # them alone.
                fleet.truth = truth
            try:
                fleet.apply(change)
            finally:
                fleet.truth = self.default_truth
        self._note(type(change).__name__ + " " + _describe(change))

    def _newest(self, variant: Variant) -> Revision:
        with self.live.lock:
            live = [r for r in self.live.fleet.revisions if r.variant is variant and not r.retired]
        assert live, f"the twin has no {variant.value} revision"
        return max(live, key=lambda r: r.number)

    # ------------------------------------------------------------------ one pass

    def poll(self) -> None:
        revisions = engine_revisions(self.api, self.namespace, self.target)
        record = tuning_record(target_object(self.api, self.namespace, self.target))
        if record is None:
            return
        self._follow_stable(revisions, record)
        self._follow_canary(revisions, record)
        self._delete_pruned(revisions)
        self._mark_ready(revisions)
        self._mark_routers_ready()

    def _follow_stable(self, revisions: Mapping[str, RevisionView], record: TuningRecord) -> None:
        assert self.stable is not None
        wanted = record.applied.revision
        view = revisions.get(wanted)
        if view is None or view.variant != "stable":
            return
        if wanted != self.stable.view.revision:
            _check_flags(view, record.applied.config)
            config = _with_replicas(record.applied.config, view)
            if self.canary is not None and view.signature() == self.canary.view.signature():
                self._apply(changes.PromoteCanary(config))
                self.canary = None
            elif view.signature(cap=False) == self.stable.view.signature(cap=False):
                for role, workload in view.roles.items():
                    if workload.args != self.stable.view.roles[role].args:
                        cap = flag(workload.args, CAP_FLAG)
                        assert cap is not None
                        self._apply(changes.SetBatchCap(role, int(cap)))
            else:
                self._apply(changes.ReplaceConfig(config), self.truths.get(view.image))
            if self.stable.view.revision != view.revision:
                self.replaced.append(self.stable)
            self.stable = Bound(view, self._newest(Variant.STABLE))
            return
        self._follow_replicas(self.stable, view, Variant.STABLE)

    def _delete_pruned(self, revisions: Mapping[str, RevisionView]) -> None:
        """A replaced revision whose Deployments the operator deleted loses its pods now — and it must not have
        been deleted before the revision replacing it was ready (capacity would dip)."""
        assert self.stable is not None
        for bound in [b for b in self.replaced if b.view.revision not in revisions]:
            self.replaced.remove(bound)
            current = revisions.get(self.stable.view.revision)
            short = [w.name for w in (current.roles.values() if current else ()) if w.ready < w.replicas]
            if current is None or short:
                self.errors.append(
                    f"revision {bound.view.revision} was deleted while {short or 'its successor'} was not ready"
                )
            if bound.twin is not None and not bound.twin.retired:
                with self.live.lock:
                    # The Deployment controller deletes the pods of a deleted Deployment; the twin has no public
                    # call for that (it drains a replaced revision only as its successor's pods get ready).
                    self.live.fleet._retire(bound.twin)
                self._note(f"pods of revision {bound.view.revision} deleted")

    def _follow_replicas(self, bound: Bound, view: RevisionView, variant: Variant) -> None:
        for role, workload in view.roles.items():
            if workload.replicas != bound.view.roles[role].replicas and bound.twin is not None:
                self._apply(changes.SetReplicas(role, workload.replicas, variant))
        bound.view = view

    def _follow_canary(self, revisions: Mapping[str, RevisionView], record: TuningRecord) -> None:
        canaries = {rev: view for rev, view in revisions.items() if view.variant == "canary"}
        if self.canary is not None and self.canary.view.revision not in canaries:
            promoted = revisions.get(self.canary.view.revision)
            if promoted is not None and promoted.variant == "stable":
                # A promoted canary keeps its revision and its Deployments, relabelled stable. The operator applies
                # them before it writes the record that names them stable: the twin is told once the record is
                # (`_follow_stable`), and never told a rollback in between.
                return
            if self.canary.twin is not None:
                self._apply(changes.RollbackCanary())
            else:
                self._delete_crashing_pods(self.canary.view)
                self._note(f"crash-looping canary {self.canary.view.revision} removed")
            self.canary = None
        wanted = record.applied.canary
        if wanted is None or wanted.revision not in canaries:
            return
        view = canaries[wanted.revision]
        if self.canary is not None and self.canary.view.revision == view.revision:
            self._follow_replicas(self.canary, view, Variant.CANARY)
            return
        _check_flags(view, wanted.deployed)
        if view.image in self.crashing_images:
            self._create_crashing_pods(view)
            self.canary = Bound(view, None)
            self._note(f"canary {view.revision} crash-loops ({view.image})")
            return
        deployed = _with_replicas(wanted.deployed, view)
        self._apply(changes.StartCanary(deployed, wanted.share), self.truths.get(view.image))
        self.canary = Bound(view, self._newest(Variant.CANARY))

    # ------------------------------------------------------------------ readiness

    def _mark_ready(self, revisions: Mapping[str, RevisionView]) -> None:
        for bound in (self.stable, self.canary):
            if bound is None or bound.twin is None:
                continue
            view = revisions.get(bound.view.revision)
            if view is None:
                continue
            with self.live.lock:
                ready = {role: len(bound.twin.pods_of(role, PodState.READY)) for role in view.roles}
            for role, workload in view.roles.items():
                up_to_date = workload.ready == workload.replicas and workload.observed_generation >= workload.generation
                if ready[role] >= workload.replicas and not up_to_date:
                    mark_deployment_ready(self.api, self.namespace, workload.name)

    def _mark_routers_ready(self) -> None:
        selector = f"{LABEL_TARGET}={self.target},{LABEL_ROLE}=router"
        for item in list_json(self.api, "apps/v1", "deployments", self.namespace, selector):
            status = item.get("status") or {}
            replicas = int(item["spec"].get("replicas", 1))
            if status.get("readyReplicas") != replicas or status.get("observedGeneration", 0) < item["metadata"].get(
                "generation", 0
            ):
                mark_deployment_ready(self.api, self.namespace, item["metadata"]["name"])

    # ------------------------------------------------------------------ crash-looping pods

    def _create_crashing_pods(self, view: RevisionView) -> None:
        for role, workload in view.roles.items():
            for index in range(workload.replicas):
                name = f"{workload.name}-crash-{index}"
                labels = {
                    LABEL_TARGET: self.target,
                    LABEL_REVISION: view.revision,
                    LABEL_ROLE: role.value,
                    LABEL_VARIANT: view.variant,
                }
                pod = {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": name, "namespace": self.namespace, "labels": labels},
                    "spec": {"containers": [{"name": "sglang", "image": workload.image}]},
                }
                code, body = request_json(self.api, "POST", object_path("v1", "pods", self.namespace), pod)
                assert code in (200, 201), body
                # What the kubelet reports after the engine exited at start four times.
                status = {
                    "phase": "Running",
                    "containerStatuses": [
                        {
                            "name": "sglang",
                            "image": workload.image,
                            "ready": False,
                            "restartCount": 4,
                            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
                            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
                        }
                    ],
                }
                path = object_path("v1", "pods", self.namespace, name, "status")
                code, body = request_json(
                    self.api, "PATCH", path, {"status": status}, content_type="application/merge-patch+json"
                )
                assert code == 200, body

    def _delete_crashing_pods(self, view: RevisionView) -> None:
        selector = f"{LABEL_TARGET}={self.target},{LABEL_REVISION}={view.revision}"
        for pod in list_json(self.api, "v1", "pods", self.namespace, selector):
            request_json(self.api, "DELETE", object_path("v1", "pods", self.namespace, pod["metadata"]["name"]))


def _with_replicas(config: ServingConfig, view: RevisionView) -> ServingConfig:
    for role, workload in view.roles.items():
        config = changes.with_replicas(config, role, workload.replicas)
    return config


def _describe(change: changes.ConfigChange) -> str:
    if isinstance(change, changes.SetBatchCap):
        return f"{change.role.value} cap {change.max_running_requests}"
    if isinstance(change, changes.SetReplicas):
        return f"{change.role.value} {change.variant.value} replicas {change.replicas}"
    if isinstance(change, changes.StartCanary):
        return f"share {change.weight:.0%}"
    return ""


# ---------------------------------------------------------------------------------------- the whole rig


@dataclass
class ClosedLoop:
    """The twin, its exporter, Prometheus and the kubelet of one target (see `closed_loop`)."""

    kubelet: Kubelet
    exporter: TwinExporter
    prometheus: PrometheusProcess

    @property
    def twin(self) -> FleetSimulation:
        return self.kubelet.live.fleet

    def twin_log(self) -> list[str]:
        return [text for _, text in self.kubelet.log]

    def told(self, change: str) -> bool:
        """Whether the twin was told a change of this kind (`SetReplicas`, `PromoteCanary`, …)."""
        return any(text.split(" ", 1)[0] == change for text in self.twin_log())

    def check(self) -> None:
        """The kubelet met nothing it could not follow."""
        assert not self.kubelet.errors, self.kubelet.errors[0]


@dataclass
class PrometheusForTwin:
    """Prometheus started before the twin exists: it discovers the twin's pods at a port chosen now."""

    exporter_port: int
    prometheus: PrometheusProcess

    @property
    def url(self) -> str:
        return self.prometheus.url


@contextmanager
def prometheus_for_twin(workdir: Path) -> Iterator[PrometheusForTwin]:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("the prometheus binary is not installed (make test installs Debian's package)")
    port = free_port()
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [prometheus_scrape_config(f"http://127.0.0.1:{port}")],
    }
    server = start_prometheus(binary, json.dumps(config), workdir)
    try:
        yield PrometheusForTwin(port, server)
    finally:
        server.stop()


def figure(text: str) -> None:
    """A measured figure for docs/reliability.md (`pytest -s … | grep FIGURE`). Written to the real stdout: the
    in-process Kopf runner swaps `sys.stdout` while it runs."""
    print(f"FIGURE {text}", file=sys.__stdout__, flush=True)


def wait_until(probe: Callable[[], Any], *, timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last = probe()
    while not last:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}")
        time.sleep(interval)
        last = probe()
    return last


@contextmanager
def closed_loop(
    api: kubernetes.client.ApiClient,
    document: Mapping[str, Any],
    prometheus: PrometheusForTwin,
    *,
    truth: Truth,
    truths: Mapping[str, Truth] | None = None,
    crashing_images: frozenset[str] = frozenset(),
    seed: int = 1,
) -> Iterator[ClosedLoop]:
    """Once the operator has rendered the target's first revision: start the twin as that revision (its pods
    ready), serve it to `prometheus`, and follow the Deployments from then on."""
    namespace, name = document["metadata"]["namespace"], document["metadata"]["name"]

    def first_revision() -> tuple[TuningRecord, RevisionView] | None:
        record = tuning_record(target_object(api, namespace, name))
        if record is None:
            return None
        view = engine_revisions(api, namespace, name).get(record.applied.revision)
        return (record, view) if view is not None else None

    try:
        record, view = wait_until(first_revision, timeout=60, what="the first revision and its tuning record")
    except AssertionError as error:
        seen = target_object(api, namespace, name)
        raise AssertionError(f"{error}; the target: {json.dumps(seen)[:3000]}") from None
    _check_flags(view, record.applied.config)
    config = _with_replicas(record.applied.config, view)
    fleet = FleetSimulation(
        truth,
        config,
        planned_workload(document),
        seed=seed,
        startup_s=STARTUP_S,
        target=name,
        namespace=namespace,
    )
    live = LiveTwin(fleet)
    kubelet = Kubelet(api, namespace, name, live, truth, dict(truths or {}), crashing_images)
    with live, TwinExporter(fleet, lock=live.lock, port=prometheus.exporter_port) as exporter:
        kubelet.stable = Bound(view, kubelet._newest(Variant.STABLE))
        kubelet.start()
        try:
            yield ClosedLoop(kubelet, exporter, prometheus.prometheus)
        finally:
            kubelet.stop()


# ---------------------------------------------------------------------------------- a slow "Prometheus"


@contextmanager
def slow_prometheus(delay_s: float) -> Iterator[str]:
    """An HTTP server that answers every query only after `delay_s` (a Prometheus under a heavy query)."""
    stop = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            stop.wait(delay_s)
            payload = b'{"status":"success","data":{"resultType":"vector","result":[]}}'
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except OSError:
                pass  # the client gave up first

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
