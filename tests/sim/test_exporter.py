"""The exporter speaks SGLang 0.5.23's metric names, types, labels and buckets in text format 0.0.4."""

from __future__ import annotations

import csv
import json
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from frontier_operator.perf.types import Role
from frontier_operator.sim.changes import StartCanary
from frontier_operator.sim.exporter import (
    CONTENT_TYPE_TEXT_0_0_4,
    LiveTwin,
    ScrapeServer,
    TwinExporter,
    prometheus_scrape_config,
    render_fleet,
    render_pod,
)
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.metrics import E2E_BUCKETS, ITL_BUCKETS, TTFT_BUCKETS
from frontier_operator.sim.observe import observe
from sim.twin_fakes import FakeTruth, LinearTiming, disaggregated, unified, workload

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared/docs/reference/sglang-0.5.23-metrics.tsv"
TOKENIZER_BASE = {"model_name", "engine_type"}
SCHEDULER_BASE = {"model_name", "engine_type", "tp_rank", "pp_rank", "moe_ep_rank"}
# sglang-0.5.23.md §7.3 default buckets, copied from the reference (the exporter must match them).
REFERENCE_TTFT = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400]
REFERENCE_ITL = [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040]
REFERENCE_ITL += [0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8]


@pytest.fixture(scope="module")
def fleet() -> FleetSimulation:
    truth = FakeTruth(default=LinearTiming(kv_tokens=200_000, accept=2.0, transfer_fixed_s=0.05))
    fleet = FleetSimulation(truth, unified(2, speculative=True), workload(6, hit=0.4), seed=1, startup_s=30)
    fleet.apply(StartCanary(disaggregated(1, 1), 0.3))
    fleet.advance(600)
    return fleet


def _reference() -> dict[str, tuple[str, set[str], str]]:
    if not REFERENCE.exists():
        pytest.skip(f"{REFERENCE} is not available")
    with REFERENCE.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    out = {}
    for row in rows:
        extra = row["extra_labels_beyond_base"].strip("[]{}").replace("'", "")
        labels = {label.strip() for label in extra.split(",") if label.strip()}
        out[row["metric"]] = (row["prom_type"].lower(), labels, row["collector_class"])
    return out


def test_every_family_has_sglangs_name_type_and_labels(fleet: FleetSimulation) -> None:
    reference = _reference()
    families = list(text_string_to_metric_families(render_pod(fleet, fleet.live_pods()[0])))
    assert families
    for family in families:
        # The parser drops a counter's `_total` from the family name; SGLang's registered name keeps it.
        name = f"{family.name}_total" if family.type == "counter" else family.name
        assert name in reference, name
        kind, extra, collector = reference[name]
        assert family.type == kind, name
        base = SCHEDULER_BASE if collector == "SchedulerMetricsCollector" else TOKENIZER_BASE
        for sample in family.samples:
            labels = set(sample.labels) - {"le"}
            assert labels == base | extra, (name, labels)


def test_the_core_series_are_all_there(fleet: FleetSimulation) -> None:
    names = {f.name for f in text_string_to_metric_families(render_fleet(fleet))}
    for expected in (
        "sglang:time_to_first_token_seconds",
        "sglang:inter_token_latency_seconds",
        "sglang:request_time_per_output_token_seconds",
        "sglang:e2e_request_latency_seconds",
        "sglang:prompt_tokens",
        "sglang:generation_tokens",
        "sglang:num_requests",
        "sglang:num_running_reqs",
        "sglang:num_queue_reqs",
        "sglang:token_usage",
        "sglang:cache_hit_rate",
        "sglang:spec_accept_length",
        "sglang:kv_transfer_latency_ms",
    ):
        assert expected in names
    assert "sglang:time_per_output_token_seconds" not in names  # not in 0.5.23


def test_buckets_are_sglangs_defaults(fleet: FleetSimulation) -> None:
    assert list(TTFT_BUCKETS) == REFERENCE_TTFT
    assert list(ITL_BUCKETS) == REFERENCE_ITL
    assert list(E2E_BUCKETS) == [*REFERENCE_TTFT, 600, 1200, 1800, 2400]
    text = render_pod(fleet, fleet.live_pods()[0])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    bounds = [
        s.labels["le"] for s in families["sglang:time_to_first_token_seconds"].samples if s.name.endswith("_bucket")
    ]
    assert [float(b) for b in bounds[:-1]] == REFERENCE_TTFT and bounds[-1] == "+Inf"


def test_colon_names_survive_in_the_text(fleet: FleetSimulation) -> None:
    text = render_fleet(fleet)
    assert "sglang:time_to_first_token_seconds_bucket{" in text
    assert "sglang_time_to_first_token" not in text
    assert "# TYPE sglang:prompt_tokens_total counter" in text


def test_counters_agree_with_the_simulation(fleet: FleetSimulation) -> None:
    families = {f.name: f for f in text_string_to_metric_families(render_fleet(fleet))}
    samples = families["sglang:num_requests"].samples
    finished = sum(s.value for s in samples if s.labels["frontier_dev_role"] in ("unified", "decode"))
    assert finished == sum(p.series.requests for p in fleet.live_pods() if p.role is not Role.PREFILL)
    groups = {(s.labels["frontier_role"], s.labels["frontier_variant"]) for s in samples}
    assert groups == {("unified", "stable"), ("prefill", "canary"), ("decode", "canary")}
    # The rendered PodMonitor's relabelled names, and the podTargetLabels spelling, agree.
    assert all(s.labels["frontier_dev_role"] == s.labels["frontier_role"] for s in samples)
    assert {s.labels["frontier_target"] for s in samples} == {fleet.target}
    assert len({s.labels["pod"] for s in samples}) == len(fleet.live_pods())


def test_http_endpoints_and_service_discovery(fleet: FleetSimulation) -> None:
    with TwinExporter(fleet) as exporter:
        targets = json.loads(urllib.request.urlopen(f"{exporter.url}/sd").read())
        assert {t["labels"]["pod"] for t in targets} == {p.name for p in fleet.live_pods()}
        for target in targets:
            assert target["targets"] == [exporter.address]
            with urllib.request.urlopen(f"{exporter.url}{target['labels']['__metrics_path__']}") as response:
                assert response.headers["Content-Type"] == CONTENT_TYPE_TEXT_0_0_4
                body = response.read().decode()
            assert list(text_string_to_metric_families(body))
            assert target["labels"]["frontier_dev_role"] in body  # engine_type carries the role
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{exporter.url}/pods/nobody/metrics")
        assert missing.value.code == 404
    config = prometheus_scrape_config("http://127.0.0.1:1234")
    assert config["http_sd_configs"][0]["url"] == "http://127.0.0.1:1234/sd"


def test_a_scraper_that_hangs_up_is_not_reported_but_a_handler_bug_is(capsys: pytest.CaptureFixture[str]) -> None:
    # Prometheus closes the connection when a scrape outlasts its timeout: the handler's write then fails with a
    # broken pipe in the request's thread, and socketserver would print its traceback into whatever runs then.
    server = ScrapeServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        for error in (BrokenPipeError(32, "Broken pipe"), ConnectionResetError(104, "reset"), ValueError("bug")):
            try:
                raise error
            except Exception:
                server.handle_error(None, ("127.0.0.1", 1))
    finally:
        server.server_close()
    err = capsys.readouterr().err
    assert "ValueError: bug" in err
    assert "Broken pipe" not in err and "ConnectionResetError" not in err


def test_live_twin_advances_with_wall_time() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(1), workload(20), seed=2)
    with LiveTwin(fleet, speed=200.0, tick_s=0.02) as live:
        with live.exporter() as exporter:
            import time  # noqa: PLC0415

            deadline = time.monotonic() + 10
            while fleet.now < 20 and time.monotonic() < deadline:
                time.sleep(0.05)
            body = urllib.request.urlopen(f"{exporter.url}/metrics").read().decode()
        assert fleet.now >= 20
        assert "sglang:num_requests_total" in body
        group = live.observe(20).group(Role.UNIFIED)
        assert group is not None and group.samples > 0
    assert observe(fleet, 10).window_end == fleet.now
