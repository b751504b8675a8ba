"""resourceVersion-aware watches with the kubernetes client's `watch.Watch` and raw streams."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import watch
from kubernetes.client import CoreV1Api

from k8s_standin import StandIn
from k8s_standin.fixtures import wait_for


def stream_lines(standin: StandIn, path: str, *, timeout: float = 5.0) -> Iterator[dict[str, Any]]:
    """A raw watch stream, line by line (the kubernetes client hides bookmarks and 410s)."""
    response = urllib3.PoolManager().request("GET", f"{standin.url}{path}", preload_content=False, timeout=timeout)
    buffer = b""
    for chunk in response.stream(1024):
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield json.loads(line)
    response.release_conn()


def test_watch_from_a_resource_version_sends_only_later_changes(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "before"}})
    listed = core.list_namespaced_config_map(namespace)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "after"}})
    core.patch_namespaced_config_map("after", namespace, {"data": {"k": "v"}})
    core.delete_namespaced_config_map("after", namespace)
    events = [
        (event["type"], event["object"].metadata.name)
        for event in watch.Watch().stream(
            core.list_namespaced_config_map,
            namespace,
            resource_version=listed.metadata.resource_version,
            timeout_seconds=1,
        )
    ]
    assert events == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_watch_without_a_version_starts_with_synthetic_added_events(kube_api: Any, namespace: str) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "b"}})
    events = [
        (e["type"], e["object"].metadata.name)
        for e in watch.Watch().stream(core.list_namespaced_config_map, namespace, timeout_seconds=1)
    ]
    assert events == [("ADDED", "a"), ("ADDED", "b")]


def test_selector_transitions_become_added_and_deleted(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "a", "labels": {"team": "x"}}})
    version = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.patch_namespaced_config_map("a", namespace, {"metadata": {"labels": {"team": "y"}}})
    core.patch_namespaced_config_map("a", namespace, {"metadata": {"labels": {"team": "x"}}})
    query = f"watch=true&labelSelector=team%3Dx&resourceVersion={version}&timeoutSeconds=1"
    path = f"/api/v1/namespaces/{namespace}/configmaps?{query}"
    assert [e["type"] for e in stream_lines(standin, path)] == ["DELETED", "ADDED"]


def test_bookmarks_initial_events_end_and_server_timeout(namespace: str, standin: StandIn, kube_api: Any) -> None:
    CoreV1Api(kube_api).create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    base = f"/api/v1/namespaces/{namespace}/configmaps?watch=true&allowWatchBookmarks=true&timeoutSeconds=1"
    initial = list(stream_lines(standin, f"{base}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"))
    assert [e["type"] for e in initial[:2]] == ["ADDED", "BOOKMARK"]
    assert initial[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


def test_too_old_resource_version_is_410_gone(kube_api: Any, namespace: str, standin: StandIn) -> None:
    core = CoreV1Api(kube_api)
    version = core.list_namespaced_config_map(namespace).metadata.resource_version
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    standin.compact()
    events = list(
        stream_lines(standin, f"/api/v1/namespaces/{namespace}/configmaps?watch=true&resourceVersion={version}")
    )
    assert len(events) == 1 and events[0]["type"] == "ERROR"
    assert events[0]["object"]["code"] == 410 and events[0]["object"]["reason"] == "Expired"


def test_forced_disconnect_ends_streams_and_a_client_resumes_without_gaps(
    kube_api: Any, namespace: str, standin: StandIn
) -> None:
    core = CoreV1Api(kube_api)
    seen: list[tuple[str, str]] = []
    stop = threading.Event()

    def watcher() -> None:
        version = core.list_namespaced_config_map(namespace).metadata.resource_version
        while not stop.is_set():  # what a controller's reflector does: resume from the last version
            try:
                for event in watch.Watch().stream(
                    core.list_namespaced_config_map, namespace, resource_version=version, timeout_seconds=5
                ):
                    version = event["object"].metadata.resource_version
                    seen.append((event["type"], event["object"].metadata.name))
            except urllib3.exceptions.HTTPError:
                continue  # the dropped connection: reconnect from the last version seen

    thread = threading.Thread(target=watcher, daemon=True)
    thread.start()
    wait_for(lambda: standin.watches.active(lambda w: w.namespace == namespace), what="the watch to open")
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "one"}})
    wait_for(lambda: ("ADDED", "one") in seen, what="the first event")

    assert standin.disconnect_watches("configmaps", abort=True) >= 1
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "two"}})  # while disconnected
    wait_for(lambda: ("ADDED", "two") in seen, what="the event sent while disconnected")
    assert standin.disconnect_watches("configmaps") >= 1  # a clean end of stream this time
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "three"}})
    wait_for(lambda: ("ADDED", "three") in seen, what="the event after the second disconnect")
    stop.set()
    assert seen == [("ADDED", "one"), ("ADDED", "two"), ("ADDED", "three")]  # no gaps, no replays
    resumed = standin.requests.find(verb="watch", resource="configmaps", namespace=namespace)
    assert len(resumed) >= 3 and all("resourceVersion=" in r.query for r in resumed)
