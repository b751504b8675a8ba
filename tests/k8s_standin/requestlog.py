"""The request log: every API request with its verb, target and answered status.

Tests count API requests per target with it, e.g. how many PATCHes one reconcile cost:

    standin.requests.count(verb="patch", resource="frontiertargets", subresource="status", status=200)
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RequestInfo:
    """A request as the stand-in routed it (the API verb, not only the HTTP method)."""

    method: str
    path: str
    query: str
    verb: str  # get, list, watch, create, update, patch, delete, deletecollection, or "discovery"/"other"
    group: str | None
    version: str | None
    resource: str | None  # plural
    subresource: str | None
    namespace: str | None
    name: str | None
    content_type: str
    user_agent: str


@dataclass(frozen=True)
class RequestMatch:
    """A predicate over `RequestInfo`; unset fields match anything, `path` is a regex (search)."""

    verb: str | None = None
    resource: str | None = None
    subresource: str | None = None
    namespace: str | None = None
    name: str | None = None
    group: str | None = None
    method: str | None = None
    path: str | None = None

    def __call__(self, request: RequestInfo) -> bool:
        wanted: dict[str, Any] = {
            "verb": self.verb,
            "resource": self.resource,
            "subresource": self.subresource,
            "namespace": self.namespace,
            "name": self.name,
            "group": self.group,
            "method": self.method.upper() if self.method else None,
        }
        if any(value is not None and getattr(request, key) != value for key, value in wanted.items()):
            return False
        return self.path is None or re.search(self.path, request.path) is not None


@dataclass(frozen=True)
class RequestRecord:
    info: RequestInfo
    status: int
    started: float  # time.monotonic()
    seconds: float

    def __getattr__(self, name: str) -> Any:
        # Let a record be filtered like its RequestInfo: record.verb, record.resource, …
        return getattr(self.info, name)


class RequestLog:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def record(self, info: RequestInfo, status: int, started: float) -> None:
        with self._lock:
            self._records.append(RequestRecord(info, status, started, time.monotonic() - started))

    def all(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._records)

    def find(
        self, match: Callable[[RequestInfo], bool] | None = None, *, status: int | None = None, **fields: Any
    ) -> list[RequestRecord]:
        """Records matching a predicate and/or RequestMatch fields (verb=…, resource=…) and status."""
        predicate = match or RequestMatch(**fields)
        if match is not None and fields:
            extra = RequestMatch(**fields)
            predicate = lambda info: match(info) and extra(info)  # noqa: E731
        return [r for r in self.all() if predicate(r.info) and (status is None or r.status == status)]

    def count(
        self, match: Callable[[RequestInfo], bool] | None = None, *, status: int | None = None, **fields: Any
    ) -> int:
        return len(self.find(match, status=status, **fields))

    def clear(self) -> None:
        with self._lock:
            self._records.clear()
