"""Fault injection: the next N matching requests answer an error, or hang past a client timeout."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes.client import ApiException, CoreV1Api

from k8s_standin import RequestMatch, StandIn


def test_next_n_matching_requests_fail_then_recover(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    broken = standin.faults.add(lambda info: info.verb == "create" and info.namespace == namespace, status=500, times=2)
    for _ in range(2):
        with pytest.raises(ApiException) as failed:
            core.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}})
        assert failed.value.status == 500
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}})  # the rule is spent
    assert broken.fired == 2 and broken.exhausted and broken.hits[0].resource == "configmaps"
    # Faults never reach the store: the failed creates left nothing behind.
    assert standin.requests.count(verb="create", namespace=namespace, status=201) == 1

    conflict = standin.faults.add(RequestMatch(verb="patch", resource="configmaps", name="b"), status=409)
    with pytest.raises(ApiException) as refused:
        core.patch_namespaced_config_map("b", namespace, {"data": {"k": "v"}})
    assert refused.value.status == 409 and conflict.fired == 1


def test_throttling_with_retry_after_is_retried_by_the_kubernetes_client(
    kube_api: Any, namespace: str, standin: StandIn
) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    standin.faults.add(RequestMatch(verb="get", resource="configmaps", name="a"), status=429, times=2, retry_after=0)
    assert core.read_namespaced_config_map("a", namespace).metadata.name == "a"  # urllib3 honours Retry-After
    statuses = [r.status for r in standin.requests.find(verb="get", resource="configmaps", name="a")]
    assert statuses == [429, 429, 200]

    standin.faults.add(RequestMatch(verb="get", resource="configmaps", name="a"), status=429, times=None)
    with pytest.raises(ApiException) as throttled:  # no Retry-After: the error surfaces
        core.read_namespaced_config_map("a", namespace)
    assert throttled.value.status == 429


def test_a_hang_outlasts_the_client_timeout(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    hang = standin.faults.add(RequestMatch(verb="list", resource="configmaps", namespace=namespace), hang=2.0)
    started = time.monotonic()
    assert core.list_namespaced_config_map(namespace, _request_timeout=0.3).items == []
    assert time.monotonic() - started < 2.0  # the client gave up on the hanging request and retried
    assert hang.fired == 1
    assert standin.requests.count(verb="list", resource="configmaps", namespace=namespace) >= 1
