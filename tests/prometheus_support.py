"""A minimal SGLang-named exporter and a real Prometheus process for the adapter's tests.

The exporter serves, per fake pod, SGLang 0.5.23's metric names in text format 0.0.4 (colons kept, or
with `sglang_` for a pod that stands for an escaping prometheus_client). Its counters grow linearly with
wall time from steady traffic, so any `rate()` over any window is exactly the configured rate and every
histogram bucket's rate is the rate times the latency distribution's CDF at its bound: the expected
`histogram_quantile` follows in closed form (`expected_quantile`).

The same server also plays three broken "Prometheus" endpoints for the failure tests.
"""

from __future__ import annotations

import math
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import requests

from frontier_operator.sim.exporter import ScrapeServer

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060,
    0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8,
)  # fmt: skip
E2E_BUCKETS = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)


@dataclass(frozen=True)
class LogNormal:
    median_s: float
    sigma: float

    def cdf(self, x: float) -> float:
        if x <= 0:
            return 0.0
        return 0.5 * (1.0 + math.erf(math.log(x / self.median_s) / (self.sigma * math.sqrt(2.0))))

    @property
    def mean(self) -> float:
        return self.median_s * math.exp(self.sigma**2 / 2.0)


@dataclass(frozen=True)
class FakePod:
    """One scraped pod: its target labels (what the PodMonitor's relabelings would write) and its traffic."""

    name: str
    labels: dict[str, str]
    request_rate: float
    ttft: LogNormal
    tpot: LogNormal
    itl: LogNormal
    e2e: LogNormal
    input_tokens: float = 2000.0
    output_tokens: float = 300.0
    running: float = 10.0
    queued: float | None = 1.0
    kv_usage: float = 0.4
    # Windowed hit rate from prefill_effective_tokens_total; None serves only the cache_hit_rate gauge.
    cache_hit: float | None = 0.5
    cache_hit_gauge: float = 0.0
    spec_accept_length: float = 0.0
    colon: bool = True


def _series(name: str, labels: dict[str, str], value: float) -> str:
    text = ",".join(f'{key}="{val}"' for key, val in sorted(labels.items()))
    return f"{name}{{{text}}} {value:.10g}"


def render_pod(pod: FakePod, elapsed_s: float) -> str:
    """The pod's /metrics text after `elapsed_s` seconds of steady traffic."""
    prefix = "sglang:" if pod.colon else "sglang_"
    base = {"model_name": "fake-model", "engine_type": pod.labels.get("frontier_role", "unified"), "tp_rank": "0"}
    requests_done = pod.request_rate * elapsed_s
    lines: list[str] = []

    def histogram(name: str, dist: LogNormal, buckets: Sequence[float], per_request: float = 1.0) -> None:
        full = prefix + name
        count = requests_done * per_request
        lines.append(f"# TYPE {full} histogram")
        for bound in buckets:
            lines.append(_series(f"{full}_bucket", {**base, "le": f"{bound:g}"}, count * dist.cdf(bound)))
        lines.append(_series(f"{full}_bucket", {**base, "le": "+Inf"}, count))
        lines.append(_series(f"{full}_sum", base, count * dist.mean))
        lines.append(_series(f"{full}_count", base, count))

    def counter(name: str, value: float, extra: dict[str, str] | None = None) -> None:
        lines.append(f"# TYPE {prefix}{name} counter")
        lines.append(_series(prefix + name, {**base, **(extra or {})}, value))

    def gauge(name: str, value: float) -> None:
        lines.append(f"# TYPE {prefix}{name} gauge")
        lines.append(_series(prefix + name, base, value))

    histogram("time_to_first_token_seconds", pod.ttft, TTFT_BUCKETS)
    histogram("request_time_per_output_token_seconds", pod.tpot, ITL_BUCKETS)
    # One ITL observation per output token after the first.
    histogram("inter_token_latency_seconds", pod.itl, ITL_BUCKETS, per_request=pod.output_tokens - 1)
    histogram("e2e_request_latency_seconds", pod.e2e, E2E_BUCKETS)
    counter("num_requests_total", requests_done)
    counter("prompt_tokens_total", requests_done * pod.input_tokens)
    counter("generation_tokens_total", requests_done * pod.output_tokens)
    if pod.cache_hit is not None:
        prompt = requests_done * pod.input_tokens
        for mode, share in (("input", 1 - pod.cache_hit), ("device_hit", pod.cache_hit), ("host_hit", 0.0)):
            lines.append(_series(f"{prefix}prefill_effective_tokens_total", {**base, "mode": mode}, prompt * share))
    gauge("cache_hit_rate", pod.cache_hit_gauge)
    gauge("num_running_reqs", pod.running)
    if pod.queued is not None:
        gauge("num_queue_reqs", pod.queued)
    gauge("token_usage", pod.kv_usage)
    gauge("spec_accept_length", pod.spec_accept_length)
    return "\n".join(lines) + "\n"


def expected_quantile(q: float, mixture: Sequence[tuple[float, LogNormal]], buckets: Sequence[float]) -> float:
    """What Prometheus' histogram_quantile answers for pods of these (rate, distribution) pairs summed by le."""
    total = sum(rate for rate, _ in mixture)

    def cumulative(bound: float) -> float:
        return sum(rate * dist.cdf(bound) for rate, dist in mixture) / total

    lower_bound, lower_fraction = 0.0, 0.0
    for bound in buckets:
        fraction = cumulative(bound)
        if fraction >= q:
            return lower_bound + (bound - lower_bound) * (q - lower_fraction) / (fraction - lower_fraction)
        lower_bound, lower_fraction = bound, fraction
    return buckets[-1]


# ------------------------------------------------------------------------------------- the scraped fleet

TARGET = "ft-demo"
NAMESPACE = "serving"


def _labels(role: str, variant: str, revision: str, target: str = TARGET, namespace: str = NAMESPACE) -> dict[str, str]:
    return {
        "frontier_target": target,
        "frontier_role": role,
        "frontier_variant": variant,
        "frontier_revision": revision,
        "namespace": namespace,
    }


TTFT_FAST = LogNormal(0.5, 0.6)
TTFT_SLOW = LogNormal(0.9, 0.5)
TPOT = LogNormal(0.018, 0.3)
ITL = LogNormal(0.015, 0.5)
E2E = LogNormal(6.0, 0.5)

STABLE_A = FakePod(
    "stable-a", _labels("unified", "stable", "r1"), 4.0, TTFT_FAST, TPOT, ITL, E2E,
    running=20.0, queued=1.5, kv_usage=0.42, cache_hit=0.6, spec_accept_length=2.7,
)  # fmt: skip
STABLE_B = FakePod(
    "stable-b", _labels("unified", "stable", "r1"), 2.0, TTFT_SLOW, TPOT, ITL, E2E,
    running=10.0, queued=0.5, kv_usage=0.38, cache_hit=0.6, spec_accept_length=2.9,
)  # fmt: skip
# An escaping prometheus_client (sglang_ names), no queue gauge, speculation off, only the hit-rate gauge.
CANARY = FakePod(
    "canary", _labels("unified", "canary", "r2"), 1.0, TTFT_FAST, LogNormal(0.012, 0.3), ITL, E2E,
    running=5.0, queued=None, kv_usage=0.2, cache_hit=None, cache_hit_gauge=0.3, spec_accept_length=0.0,
    colon=False,
)  # fmt: skip
# Pods that must never leak into ft-demo's observation.
OTHER_TARGET = FakePod(
    "other-target", _labels("unified", "stable", "x1", target="other"), 50.0, TTFT_SLOW, TPOT, ITL, E2E
)
OTHER_NAMESPACE = FakePod(
    "other-namespace", _labels("unified", "stable", "r1", namespace="elsewhere"), 50.0, TTFT_SLOW, TPOT, ITL, E2E
)
ROUTER = FakePod("router", _labels("router", "stable", "r1"), 50.0, TTFT_SLOW, TPOT, ITL, E2E)
# A disaggregated target.
PREFILL = FakePod(
    "pd-prefill", _labels("prefill", "stable", "p1", target="pd-demo"), 3.0, TTFT_FAST, TPOT, ITL, E2E, cache_hit=0.8
)
DECODE = FakePod(
    "pd-decode", _labels("decode", "stable", "p1", target="pd-demo"), 3.0, TTFT_SLOW, TPOT, ITL, E2E, cache_hit=None
)

PODS = (STABLE_A, STABLE_B, CANARY, OTHER_TARGET, OTHER_NAMESPACE, ROUTER, PREFILL, DECODE)


# ------------------------------------------------------------------------------------------------ server

BROKEN_PROMETHEUS = {
    # Not JSON at all (a proxy's login page).
    "/html-prometheus/api/v1/query": (200, "text/html", "<html><body>Sign in</body></html>"),
    # JSON of the wrong shape.
    "/shapeless-prometheus/api/v1/query": (
        200,
        "application/json",
        '{"status":"success","data":{"resultType":"vector","result":{"not":"a list"}}}',
    ),
    # A sample whose value is not a number.
    "/wordy-prometheus/api/v1/query": (
        200,
        "application/json",
        '{"status":"success","data":{"resultType":"vector","result":[{"metric":{"frontier_role":"unified",'
        '"frontier_variant":"stable","frontier_stat":"kv_usage"},"value":[1,"lots"]}]}}',
    ),
    # A server error.
    "/failing-prometheus/api/v1/query": (503, "text/plain", "overloaded"),
}


@dataclass
class Exporter:
    pods: Sequence[FakePod]
    started_at: float = field(default_factory=time.time)
    port: int = 0
    _server: ScrapeServer | None = None

    def start(self) -> Exporter:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                broken = BROKEN_PROMETHEUS.get(path)
                if broken is not None:
                    self._answer(*broken)
                    return
                for pod in exporter.pods:
                    if path == f"/pods/{pod.name}/metrics":
                        text = render_pod(pod, time.time() - exporter.started_at)
                        self._answer(200, "text/plain; version=0.0.4; charset=utf-8", text)
                        return
                self._answer(404, "text/plain", "no such pod")

            def _answer(self, status: int, content_type: str, body: str) -> None:
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = ScrapeServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def prometheus_binary() -> str | None:
    return shutil.which("prometheus")


def scrape_config(jobs: Sequence[tuple[str, str, str, dict[str, str]]]) -> str:
    """prometheus.yml with a 1 s scrape: one job per (name, host:port, metrics path, target labels)."""
    lines = ["global:", "  scrape_interval: 1s", "  evaluation_interval: 1s", "scrape_configs:"]
    for name, address, path, labels in jobs:
        label_text = ", ".join(f'{key}: "{value}"' for key, value in sorted(labels.items()))
        lines += [
            f"  - job_name: {name}",
            "    scrape_interval: 1s",
            "    scrape_timeout: 900ms",
            f"    metrics_path: {path}",
            f"    static_configs: [{{targets: ['{address}'], labels: {{{label_text}}}}}]",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class PrometheusProcess:
    """Debian's prometheus as a plain process on a free loopback port, with a throw-away TSDB."""

    url: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


def start_prometheus(binary: str, config_text: str, workdir: Path, ready_within_s: float = 30.0) -> PrometheusProcess:
    config = workdir / "prometheus.yml"
    config.write_text(config_text)
    port = free_port()
    log_path = workdir / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusProcess(f"http://127.0.0.1:{port}", process, log_path)
    try:
        wait_for(lambda: _ready(server), ready_within_s, f"Prometheus ready ({log_path})")
    except BaseException:
        server.stop()
        raise
    return server


def _ready(server: PrometheusProcess) -> bool:
    if server.process.poll() is not None:
        raise RuntimeError(f"prometheus exited: {server.log_path.read_text()[-2000:]}")
    try:
        return requests.get(f"{server.url}/-/ready", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def wait_for(condition: Callable[[], bool], within_s: float, what: str, poll_s: float = 0.25) -> None:
    """Poll `condition` until it holds, failing with `what` after `within_s` seconds."""
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {within_s:.0f} s for {what}")
        time.sleep(poll_s)


def running(pods: Sequence[FakePod]) -> Iterator[Exporter]:
    exporter = Exporter(pods).start()
    try:
        yield exporter
    finally:
        exporter.stop()
