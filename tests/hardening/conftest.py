"""Fixtures of the hardening tests: the operator's CRD registered once, a fast re-check, no metrics port."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from operator_support import CRD


@pytest.fixture(autouse=True)
def fast_operator(monkeypatch: pytest.MonkeyPatch) -> None:
    # Re-check every second and serve no metrics port (several operators run in one process).
    monkeypatch.setenv("FRONTIER_RECHECK_SECONDS", "1")
    monkeypatch.setenv("FRONTIER_METRICS_PORT", "0")
    monkeypatch.setenv("FRONTIER_RETRY_SECONDS", "1")


@pytest.fixture(scope="module")
def crd(kube_cluster: Any, kube_api: kubernetes.client.ApiClient) -> Iterator[None]:
    extensions = kubernetes.client.ApiextensionsV1Api(kube_api)
    try:
        extensions.create_custom_resource_definition(CRD)
    except kubernetes.client.ApiException as error:
        if error.status != 409:
            raise
    yield
