"""The twin's pods served as SGLang `/metrics` endpoints over HTTP, for a real Prometheus to scrape.

Text format 0.0.4 only: Prometheus 2.x asks for OpenMetrics, and prometheus_client ≥ 0.23 then rewrites
`sglang:` names to `sglang_` (test-infrastructure.md §3.4); writing the text ourselves keeps SGLang's colon
names exactly. Metric names, types, labels and buckets are SGLang 0.5.23's (`sim.metrics`). Each pod's series
carry SGLang's own labels: `model_name` and `engine_type` (unified/prefill/decode) on every metric,
`is_streaming` where SGLang adds it, `tp_rank`/`pp_rank`/`moe_ep_rank` on scheduler metrics.

Endpoints (one HTTP server for the whole fleet, 127.0.0.1 and a free port by default):

* `GET /pods/<pod>/metrics`: one pod, exactly what SGLang serves; scrape it per pod.
* `GET /sd`: Prometheus HTTP service discovery (`http_sd_configs`): one target per live pod with its
  `__metrics_path__` and the labels the rendered PodMonitor gives in Kubernetes (`namespace`, `pod`,
  `frontier_target`, `frontier_role`, `frontier_revision`, `frontier_variant`, and the same under their
  `podTargetLabels` spelling `frontier_dev_*`), so pods appear and disappear with rolling updates and
  canaries as they would in a cluster.
* `GET /metrics`: every live pod in one page, each series with those labels added (for a single static
  target with `honor_labels: true`).

`LiveTwin` advances the simulation with wall time (optionally faster) in a background thread, so the
exporter shows a live fleet; tests can instead advance the `FleetSimulation` by hand and scrape.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote

from frontier_operator.perf.types import Role
from frontier_operator.render.monitoring import PROMETHEUS_LABELS
from frontier_operator.render.pods import LABEL_REVISION, LABEL_ROLE, LABEL_TARGET, LABEL_VARIANT
from frontier_operator.sim.changes import ConfigChange
from frontier_operator.sim.fleet import FleetSimulation, Pod
from frontier_operator.sim.metrics import (
    CACHE_HIT_RATE,
    CACHED_TOKENS,
    E2E,
    GEN_THROUGHPUT,
    GENERATION_TOKENS,
    ITL,
    KV_TRANSFER_LATENCY,
    MAX_TOTAL_NUM_TOKENS,
    NUM_QUEUE,
    NUM_REQUESTS,
    NUM_RUNNING,
    NUM_USED_TOKENS,
    PREFILL_EFFECTIVE_TOKENS,
    PROMPT_TOKENS,
    REQUEST_TPOT,
    SPEC_ACCEPT_LENGTH,
    TOKEN_USAGE,
    TTFT,
    Histogram,
    MetricSpec,
    Side,
)
from frontier_operator.sim.observe import observe
from frontier_operator.tuning.observation import Observation

CONTENT_TYPE_TEXT_0_0_4 = "text/plain; version=0.0.4; charset=utf-8"


def _sanitised(label: str) -> str:
    # Prometheus' Kubernetes discovery and `podTargetLabels` turn every non-alphanumeric character into "_".
    return "".join(c if c.isalnum() else "_" for c in label)


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return repr(float(value))


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def pod_labels(fleet: FleetSimulation, pod: Pod) -> dict[str, str]:
    """The Kubernetes target labels of `pod`: `namespace`, `pod`, and its target/role/revision/variant pod
    labels under both names a cluster may give them — the rendered PodMonitor's relabelings
    (`render.monitoring.PROMETHEUS_LABELS`: `frontier_role`, …) and the `podTargetLabels` spelling
    (`frontier_dev_role`, …) — so PromQL written for either works against the twin."""
    values = {
        LABEL_TARGET: fleet.target,
        LABEL_ROLE: pod.role.value,
        LABEL_REVISION: pod.revision.label,
        LABEL_VARIANT: pod.variant.value,
    }
    labels = {"namespace": fleet.namespace, "pod": pod.name}
    for pod_label, value in values.items():
        labels[PROMETHEUS_LABELS[pod_label]] = value
        labels[_sanitised(pod_label)] = value
    return labels


class _Page:
    """Accumulates families; a family's HELP/TYPE lines are written once, before its first sample."""

    def __init__(self) -> None:
        self._families: dict[str, list[str]] = {}
        self._specs: dict[str, MetricSpec] = {}

    def add(self, spec: MetricSpec, lines: list[str]) -> None:
        self._specs.setdefault(spec.name, spec)
        self._families.setdefault(spec.name, []).extend(lines)

    def text(self) -> str:
        out: list[str] = []
        for name, lines in self._families.items():
            spec = self._specs[name]
            out.append(f"# HELP {name} {spec.help}")
            out.append(f"# TYPE {name} {spec.type.value}")
            out.extend(lines)
        return "\n".join(out) + "\n"


def _base(fleet: FleetSimulation, pod: Pod, spec: MetricSpec, extra: Mapping[str, str]) -> dict[str, str]:
    labels = {"model_name": fleet.model_name, "engine_type": pod.role.value}
    if spec.side is Side.SCHEDULER:
        labels.update({"tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"})
    labels.update(extra)
    return labels


def _value(spec: MetricSpec, labels: Mapping[str, str], value: float) -> list[str]:
    return [f"{spec.name}{_labels(labels)} {_number(value)}"]


def _histogram(spec: MetricSpec, labels: Mapping[str, str], histogram: Histogram) -> list[str]:
    lines = []
    bounds = [*histogram.bounds, math.inf]
    for bound, count in zip(bounds, histogram.cumulative(), strict=True):
        lines.append(f"{spec.name}_bucket{_labels({**labels, 'le': _number(bound)})} {_number(count)}")
    lines.append(f"{spec.name}_count{_labels(labels)} {_number(histogram.count)}")
    lines.append(f"{spec.name}_sum{_labels(labels)} {_number(histogram.total)}")
    return lines


def _pod_families(page: _Page, fleet: FleetSimulation, pod: Pod, extra: Mapping[str, str]) -> None:
    series = pod.series
    engine = pod.engine

    def labels(spec: MetricSpec, **more: str) -> dict[str, str]:
        return _base(fleet, pod, spec, {**extra, **more})

    streaming = {"is_streaming": "true"}
    page.add(TTFT, _histogram(TTFT, labels(TTFT, **streaming), series.ttft))
    page.add(ITL, _histogram(ITL, labels(ITL), series.itl))
    page.add(REQUEST_TPOT, _histogram(REQUEST_TPOT, labels(REQUEST_TPOT, **streaming), series.request_tpot))
    page.add(E2E, _histogram(E2E, labels(E2E, **streaming), series.e2e))
    page.add(PROMPT_TOKENS, _value(PROMPT_TOKENS, labels(PROMPT_TOKENS, **streaming), series.prompt_tokens))
    page.add(
        GENERATION_TOKENS, _value(GENERATION_TOKENS, labels(GENERATION_TOKENS, **streaming), series.generation_tokens)
    )
    page.add(NUM_REQUESTS, _value(NUM_REQUESTS, labels(NUM_REQUESTS, **streaming), series.requests))
    for source in ("device", "total"):
        page.add(CACHED_TOKENS, _value(CACHED_TOKENS, labels(CACHED_TOKENS, cache_source=source), series.cached_tokens))
    for mode, tokens in (("input", series.computed_prompt_tokens), ("device_hit", series.cached_tokens)):
        page.add(
            PREFILL_EFFECTIVE_TOKENS,
            _value(PREFILL_EFFECTIVE_TOKENS, labels(PREFILL_EFFECTIVE_TOKENS, mode=mode), tokens),
        )
    page.add(NUM_RUNNING, _value(NUM_RUNNING, labels(NUM_RUNNING), engine.running))
    page.add(NUM_QUEUE, _value(NUM_QUEUE, labels(NUM_QUEUE), engine.queued))
    capacity = engine.timing.kv_capacity_tokens
    if capacity:
        # A measured table does not know the KV pool: then these series are absent rather than made up.
        used = engine.kv_used_tokens()
        page.add(TOKEN_USAGE, _value(TOKEN_USAGE, labels(TOKEN_USAGE), min(1.0, used / capacity)))
        page.add(NUM_USED_TOKENS, _value(NUM_USED_TOKENS, labels(NUM_USED_TOKENS), round(used)))
        page.add(MAX_TOTAL_NUM_TOKENS, _value(MAX_TOTAL_NUM_TOKENS, labels(MAX_TOTAL_NUM_TOKENS), capacity))
    hit = engine.last_cache_hit_rate
    page.add(CACHE_HIT_RATE, _value(CACHE_HIT_RATE, labels(CACHE_HIT_RATE), hit if hit is not None else 0.0))
    page.add(GEN_THROUGHPUT, _value(GEN_THROUGHPUT, labels(GEN_THROUGHPUT), pod.gen_throughput))
    if engine.timing.speculative:
        accept = engine.last_accept if engine.last_accept is not None else engine.timing.accept_length
        page.add(SPEC_ACCEPT_LENGTH, _value(SPEC_ACCEPT_LENGTH, labels(SPEC_ACCEPT_LENGTH), accept))
    if pod.revision.disaggregated and pod.role is Role.PREFILL:
        page.add(
            KV_TRANSFER_LATENCY, _histogram(KV_TRANSFER_LATENCY, labels(KV_TRANSFER_LATENCY), series.kv_transfer_ms)
        )


def render_pod(fleet: FleetSimulation, pod: Pod) -> str:
    """One pod's `/metrics` page, as SGLang writes it (text format 0.0.4)."""
    page = _Page()
    _pod_families(page, fleet, pod, {})
    return page.text()


def render_fleet(fleet: FleetSimulation) -> str:
    """Every live pod in one page, each series labelled with its pod's Kubernetes target labels."""
    page = _Page()
    for pod in fleet.live_pods():
        _pod_families(page, fleet, pod, pod_labels(fleet, pod))
    return page.text()


def scrape_targets(fleet: FleetSimulation, address: str) -> list[dict[str, Any]]:
    """Prometheus HTTP service-discovery answer: one target group per live pod."""
    return [
        {
            "targets": [address],
            # One instance per pod, as pod IPs make them in a cluster.
            "labels": {"__metrics_path__": f"/pods/{pod.name}/metrics", "instance": pod.name, **pod_labels(fleet, pod)},
        }
        for pod in fleet.live_pods()
    ]


def prometheus_scrape_config(
    exporter_url: str, *, job: str = "sglang-twin", interval: str = "1s", timeout: str = "900ms"
) -> dict[str, Any]:
    """A `scrape_configs` entry that discovers the twin's pods through `/sd` (refreshed every second)."""
    return {
        "job_name": job,
        "scrape_interval": interval,
        "scrape_timeout": timeout,
        "http_sd_configs": [{"url": f"{exporter_url.rstrip('/')}/sd", "refresh_interval": "1s"}],
    }


class ScrapeServer(ThreadingHTTPServer):
    """A threaded HTTP server for scrapers: a client that hangs up before the answer is written is not an error.

    Prometheus closes the connection when a scrape outlasts its `scrape_timeout`; the handler's write then
    fails with a broken pipe, and `socketserver` would print that traceback to stderr from the request's
    thread, whatever runs at the time (under a loaded test run, into another test's captured output).
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class TwinExporter:
    """Serves a `FleetSimulation`'s pods over HTTP (see the module docstring). Use as a context manager or
    call `start()` / `stop()`; `lock` must be the lock whoever advances the fleet holds while doing so."""

    def __init__(
        self,
        fleet: FleetSimulation,
        *,
        lock: AbstractContextManager[Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.fleet = fleet
        self._lock: AbstractContextManager[Any] = lock if lock is not None else nullcontext()
        self._host = host
        self._port = port
        self._server: ScrapeServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the exporter is not running")
        return int(self._server.server_address[1])

    @property
    def address(self) -> str:
        return f"{self._host}:{self.port}"

    @property
    def url(self) -> str:
        return f"http://{self.address}"

    def start(self) -> int:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                status, content_type, body = exporter.respond(self.path)
                payload = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ScrapeServer((self._host, self._port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="twin-exporter", daemon=True)
        self._thread.start()
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> TwinExporter:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def respond(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) for a GET of `path`."""
        path = unquote(path.split("?", 1)[0]).rstrip("/") or "/"
        with self._lock:
            if path == "/metrics":
                return 200, CONTENT_TYPE_TEXT_0_0_4, render_fleet(self.fleet)
            if path == "/sd":
                return 200, "application/json", json.dumps(scrape_targets(self.fleet, self.address))
            if path in ("/health", "/ready", "/"):
                return 200, "text/plain; charset=utf-8", "ok\n"
            parts = path.split("/")
            if len(parts) == 4 and parts[1] == "pods" and parts[3] == "metrics":
                pod = next((p for p in self.fleet.live_pods() if p.name == parts[2]), None)
                if pod is not None:
                    return 200, CONTENT_TYPE_TEXT_0_0_4, render_pod(self.fleet, pod)
        return 404, "text/plain; charset=utf-8", "not found\n"


class LiveTwin:
    """Advances a `FleetSimulation` in step with wall time (`speed` simulated seconds per wall second) in a
    background thread; `apply` and `observe` take the same lock, and so does a `TwinExporter` given `lock`."""

    def __init__(self, fleet: FleetSimulation, *, speed: float = 1.0, tick_s: float = 0.1) -> None:
        self.fleet = fleet
        self.speed = speed
        self.tick_s = tick_s
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        origin_wall = time.monotonic()
        origin_sim = self.fleet.now

        def loop() -> None:
            while not self._stop.wait(self.tick_s):
                target = origin_sim + (time.monotonic() - origin_wall) * self.speed
                with self.lock:
                    self.fleet.run_until(target)

        self._thread = threading.Thread(target=loop, name="live-twin", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> LiveTwin:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def apply(self, change: ConfigChange) -> None:
        with self.lock:
            self.fleet.apply(change)

    def observe(self, window_s: float) -> Observation:
        with self.lock:
            return observe(self.fleet, window_s)

    def exporter(self, *, host: str = "127.0.0.1", port: int = 0) -> TwinExporter:
        return TwinExporter(self.fleet, lock=self.lock, host=host, port=port)
