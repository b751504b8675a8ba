"""The adapter reads the digital twin's exporter through a real Prometheus, and agrees with the twin itself.

The twin (`sim.exporter.LiveTwin`) runs in step with wall time and is discovered through its HTTP service
discovery with the labels a PodMonitor's `podTargetLabels` gives (`frontier_dev_*`), so the adapter reads it
with the `POD_TARGET_LABELS` scheme. The twin's own in-process observation of the same window is the
reference; Prometheus' bucket interpolation and scrape timing allow some slack.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from frontier_operator.adapters.prometheus import POD_TARGET_LABELS, FleetSelector, observe
from frontier_operator.perf.types import Role
from frontier_operator.sim.exporter import LiveTwin, TwinExporter, prometheus_scrape_config
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.tuning.observation import GroupObservation, Variant
from prometheus_support import PrometheusProcess, prometheus_binary, start_prometheus, wait_for
from sim.twin_fakes import FakeTruth, unified, workload

WINDOW_S = 15.0


@pytest.fixture(scope="module")
def twin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveTwin, TwinExporter, PrometheusProcess]]:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("the prometheus binary is not installed (make test installs Debian's package)")
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(20), seed=5, startup_s=0.0)
    with LiveTwin(fleet, speed=1.0) as live, live.exporter() as exporter:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "scrape_configs": [prometheus_scrape_config(exporter.url)],
        }
        # JSON is YAML: no YAML writer needed for prometheus.yml.
        server = start_prometheus(binary, json.dumps(config), Path(tmp_path_factory.mktemp("twin-prometheus")))
        try:
            yield live, exporter, server
        finally:
            server.stop()


def _covered(server: PrometheusProcess) -> bool:
    query = f"min(count_over_time(up[{WINDOW_S + 2:.0f}s]))"
    result = requests.get(f"{server.url}/api/v1/query", params={"query": query}, timeout=2).json()["data"]["result"]
    return bool(result) and float(result[0]["value"][1]) >= WINDOW_S + 1


def _stable(group: GroupObservation | None) -> GroupObservation:
    assert group is not None
    return group


def test_the_adapter_reads_the_twin_like_the_twin_reads_itself(
    twin: tuple[LiveTwin, TwinExporter, PrometheusProcess],
) -> None:
    live, _, server = twin
    wait_for(lambda: _covered(server), 90, "the twin's pods scraped for longer than the window")
    fleet = live.fleet
    selector = FleetSelector(fleet.namespace, fleet.target, labels=POD_TARGET_LABELS)
    scraped = observe(server.url, selector, WINDOW_S, at=time.time())
    reference = live.observe(WINDOW_S)
    assert scraped is not None
    ours = _stable(scraped.group(Role.UNIFIED, Variant.STABLE))
    theirs = _stable(reference.group(Role.UNIFIED, Variant.STABLE))
    assert ours.request_rate_per_s == pytest.approx(theirs.request_rate_per_s, rel=0.25)
    assert ours.output_tokens_per_s == pytest.approx(theirs.output_tokens_per_s, rel=0.25)
    assert ours.samples == pytest.approx(theirs.samples, rel=0.25)
    for mine, its in ((ours.ttft, theirs.ttft), (ours.tpot, theirs.tpot)):
        assert mine is not None and its is not None
        # Quantiles interpolated in SGLang's buckets against the twin's exact ones.
        assert 0.6 < mine.p50 / its.p50 < 1.6
    assert ours.running_requests is not None and ours.running_requests > 0
