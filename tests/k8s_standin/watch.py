"""resourceVersion-aware watch streams, bookmarks, server-side timeouts and forced disconnects.

Semantics follow https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes:

* `resourceVersion` unset or `"0"`: synthetic ADDED events for every matching object, then changes;
* `resourceVersion=N`: only changes after N, replayed from the store's history (plain kmock
  replays every object as ADDED whatever N says, so Kopf saw everything twice);
* N older than the kept history: one `ERROR` event with a 410 `Expired` Status, then the end —
  Kopf and the kubernetes client re-list on it;
* `sendInitialEvents=true` (Kopf's optional streaming list): the ADDED events, then a BOOKMARK
  annotated `k8s.io/initial-events-end: "true"`;
* `allowWatchBookmarks=true`: a BOOKMARK every `bookmark_interval` seconds while idle;
* `timeoutSeconds`: the server ends the stream cleanly after that long;
* label/field selectors are applied to the old and the new state of each change, so an object that
  stops matching arrives as DELETED and one that starts matching as ADDED, like the watch cache.

`WatchRegistry.disconnect()` ends matching streams on demand — cleanly (like a server timeout) or by
closing the TCP connection — so tests can prove that clients resume from their last version.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import errors
from .discovery import ResourceType
from .selectors import FieldSelector, LabelSelector
from .store import ExpiredError, Store, WatchEvent


@dataclass
class ActiveWatch:
    """One open watch stream, as the registry sees it."""

    id: int
    resource_type: ResourceType
    namespace: str | None
    params: Mapping[str, str]
    loop: asyncio.AbstractEventLoop
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stopped: bool = False
    abort: bool = False
    events_sent: int = 0


class WatchRegistry:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._active: dict[int, ActiveWatch] = {}
        self.opened = 0  # how many watch streams were ever opened

    def open(self, resource_type: ResourceType, namespace: str | None, params: Mapping[str, str]) -> ActiveWatch:
        with self._lock:
            watch = ActiveWatch(next(self._ids), resource_type, namespace, dict(params), asyncio.get_running_loop())
            self._active[watch.id] = watch
            self.opened += 1
            return watch

    def close(self, watch: ActiveWatch) -> None:
        with self._lock:
            self._active.pop(watch.id, None)

    def active(self, predicate: Callable[[ActiveWatch], bool] | None = None) -> list[ActiveWatch]:
        with self._lock:
            return [watch for watch in self._active.values() if predicate is None or predicate(watch)]

    def disconnect(self, predicate: Callable[[ActiveWatch], bool] | None = None, *, abort: bool = False) -> int:
        """End matching streams (from any thread); returns how many. `abort` drops the TCP connection."""
        watches = self.active(predicate)
        for watch in watches:
            watch.abort = abort

            def stop(watch: ActiveWatch = watch) -> None:
                watch.stopped = True
                watch.wake.set()

            watch.loop.call_soon_threadsafe(stop)
        return len(watches)


@dataclass(frozen=True)
class WatchFilter:
    namespace: str | None
    name: str | None
    labels: LabelSelector
    fields: FieldSelector

    def matches(self, obj: Mapping[str, Any] | None) -> bool:
        if obj is None:
            return False
        metadata = obj.get("metadata", {})
        return (
            (self.namespace is None or metadata.get("namespace", "") == self.namespace)
            and (self.name is None or metadata.get("name") == self.name)
            and self.labels.matches(metadata.get("labels"))
            and self.fields.matches(obj)
        )


def translate(event: WatchEvent, wanted: WatchFilter) -> tuple[str, Mapping[str, Any]] | None:
    """What a watcher with this filter sees of one change, if anything."""
    now_matches, before_matched = wanted.matches(event.object), wanted.matches(event.previous)
    if event.type == "DELETED":
        return ("DELETED", event.object) if before_matched else None
    if now_matches and before_matched:
        return ("MODIFIED", event.object)
    if now_matches:
        return ("ADDED", event.object)
    if before_matched:
        previous = dict(event.previous or {})
        previous["metadata"] = {**previous.get("metadata", {}), "resourceVersion": str(event.resource_version)}
        return ("DELETED", previous)
    return None


def _bookmark(resource_type: ResourceType, version: int, *, initial_end: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"resourceVersion": str(version)}
    if initial_end:
        metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {
        "type": "BOOKMARK",
        "object": {"kind": resource_type.kind, "apiVersion": resource_type.api_version, "metadata": metadata},
    }


async def stream_events(
    store: Store,
    watch: ActiveWatch,
    wanted: WatchFilter,
    *,
    bookmark_interval: float,
    is_connected: Callable[[], bool],
) -> AsyncIterator[dict[str, Any]]:
    """The events of one watch request, until it is stopped, times out or its client goes away."""
    resource_type, params = watch.resource_type, watch.params
    loop = asyncio.get_running_loop()
    bookmarks = params.get("allowWatchBookmarks") in ("true", "1")
    timeout = float(params["timeoutSeconds"]) if params.get("timeoutSeconds") else None
    deadline = loop.time() + timeout if timeout else None
    requested = params.get("resourceVersion") or ""

    def listener() -> None:
        loop.call_soon_threadsafe(watch.wake.set)

    store.add_listener(resource_type.group_resource, listener)
    try:
        if requested in ("", "0") or params.get("sendInitialEvents") == "true":
            objects, last = store.snapshot(resource_type)
            ordered: list[Mapping[str, Any]] = sorted(
                objects, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"])
            )
            for obj in ordered:
                if wanted.matches(obj):
                    yield {"type": "ADDED", "object": store.present(resource_type, obj)}
            if params.get("sendInitialEvents") == "true" and bookmarks:
                yield _bookmark(resource_type, last, initial_end=True)
        else:
            last = int(requested)
        next_bookmark = loop.time() + bookmark_interval
        while not watch.stopped:
            watch.wake.clear()
            try:
                events, current = store.events_and_version(resource_type.group_resource, last)
            except ExpiredError as gone:
                yield {"type": "ERROR", "object": errors.expired(gone.requested, gone.oldest).status_body()}
                return
            for event in events:
                seen = translate(event, wanted)
                if seen is not None:
                    yield {"type": seen[0], "object": store.present(resource_type, seen[1])}
            # Every change of this resource up to `current` has been seen: bookmarks may say so.
            last = max(last, current)
            now = loop.time()
            if deadline is not None and now >= deadline:
                return
            if bookmarks and now >= next_bookmark:
                yield _bookmark(resource_type, last)
                next_bookmark = now + bookmark_interval
            if not is_connected():
                return
            wait = min(1.0, bookmark_interval if bookmarks else 1.0)
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.wake.wait(), timeout=wait)
    finally:
        store.remove_listener(resource_type.group_resource, listener)
