"""One exporter and one real Prometheus per session, scraping it every second (see prometheus_support)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from prometheus_support import (
    PODS,
    Exporter,
    PrometheusProcess,
    prometheus_binary,
    running,
    scrape_config,
    start_prometheus,
)


@pytest.fixture(scope="session")
def exporter() -> Iterator[Exporter]:
    yield from running(PODS)


@pytest.fixture(scope="session")
def prometheus(exporter: Exporter, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusProcess]:
    binary = prometheus_binary()
    if binary is None:
        pytest.skip("the prometheus binary is not installed (make test installs Debian's package)")
    jobs = [(pod.name, f"127.0.0.1:{exporter.port}", f"/pods/{pod.name}/metrics", pod.labels) for pod in exporter.pods]
    workdir: Path = tmp_path_factory.mktemp("prometheus")
    server = start_prometheus(binary, scrape_config(jobs), workdir)
    try:
        yield server
    finally:
        server.stop()
