"""A real Prometheus discovers the twin's pods through `/sd` and stores SGLang's colon names.

Skipped when the `prometheus` binary is missing (`make prometheus` installs Debian's package).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from frontier_operator.sim.exporter import LiveTwin, prometheus_scrape_config
from frontier_operator.sim.fleet import FleetSimulation
from sim.twin_fakes import FakeTruth, unified, workload

PROMETHEUS = shutil.which("prometheus")
pytestmark = pytest.mark.skipif(PROMETHEUS is None, reason="the prometheus binary is not installed")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _query(port: int, promql: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?query={urllib.parse.quote(promql)}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return list(json.loads(response.read())["data"]["result"])


def test_prometheus_scrapes_every_pod_with_colon_names(tmp_path: Path) -> None:
    assert PROMETHEUS is not None
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(10), seed=1, target="ft-demo")
    port = _free_port()
    with LiveTwin(fleet, speed=1.0) as live, live.exporter() as exporter:
        config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [prometheus_scrape_config(exporter.url)]}
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        server = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={tmp_path / 'prometheus.yml'}",
                f"--storage.tsdb.path={tmp_path / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=error",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            result: list[dict[str, Any]] = []
            deadline = time.monotonic() + 40
            promql = 'sum by (pod, frontier_role) (rate(sglang:num_requests_total{frontier_target="ft-demo"}[5s]))'
            while time.monotonic() < deadline and len(result) < 2:
                time.sleep(1)
                try:
                    result = _query(port, promql)
                except OSError:
                    continue
            assert {r["metric"]["pod"] for r in result} == {p.name for p in fleet.live_pods()}
            assert all(r["metric"]["frontier_role"] == "unified" for r in result)
            assert sum(float(r["value"][1]) for r in result) > 0
            assert not _query(port, "sglang_num_requests_total")  # no renaming to underscores
        finally:
            server.terminate()
            server.wait(timeout=10)
