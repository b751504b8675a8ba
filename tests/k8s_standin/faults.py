"""Fault injection: the next N requests matching a predicate answer 409/429/500, or hang.

    from k8s_standin import RequestMatch
    rule = standin.faults.add(RequestMatch(verb="patch", resource="configmaps"), status=409, times=1)
    ...
    assert rule.fired == 1

Rules are thread-safe (tests run in another thread than the server) and fire in the order armed.
A `hang` delays the answer past a client's timeout; with a status too, the delayed answer is that
error, otherwise the request is then served normally.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from .errors import ApiError
from .requestlog import RequestInfo

_REASONS = {
    409: ("Conflict", "Operation cannot be fulfilled: injected conflict (the object has been modified)"),
    429: ("TooManyRequests", "injected throttling: too many requests, please try again later"),
    500: ("InternalError", "Internal error occurred: injected server error"),
    503: ("ServiceUnavailable", "injected: the server is currently unable to handle the request"),
}


@dataclass
class FaultRule:
    matches: Callable[[RequestInfo], bool]
    status: int | None  # None with `hang`: answer normally after the delay
    times: int | None  # None: forever
    hang: float | None = None
    retry_after: int | None = None
    fired: int = 0
    hits: list[RequestInfo] = field(default_factory=list)

    @property
    def exhausted(self) -> bool:
        return self.times is not None and self.fired >= self.times

    def error(self) -> ApiError | None:
        if self.status is None:
            return None
        reason, message = _REASONS.get(self.status, ("InternalError", f"injected status {self.status}"))
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
        details = {"retryAfterSeconds": self.retry_after} if self.retry_after is not None else {}
        return ApiError(self.status, reason, message, details, headers)


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []

    def add(
        self,
        matches: Callable[[RequestInfo], bool],
        *,
        status: int | None = None,
        times: int | None = 1,
        hang: float | None = None,
        retry_after: int | None = None,
    ) -> FaultRule:
        """Arm a rule for the next `times` matching requests (first armed, first served)."""
        if status is None and hang is None:
            raise ValueError("a fault needs a status, a hang, or both")
        rule = FaultRule(matches, status, times, hang, retry_after)
        with self._lock:
            self._rules.append(rule)
        return rule

    def take(self, request: RequestInfo) -> FaultRule | None:
        """The rule this request triggers, counted as fired; None for a normal answer."""
        with self._lock:
            for rule in self._rules:
                if not rule.exhausted and rule.matches(request):
                    rule.fired += 1
                    rule.hits.append(request)
                    return rule
        return None

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
