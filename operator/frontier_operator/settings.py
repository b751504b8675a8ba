"""Operator settings from the environment, each with its default (see docs/operations.md)."""

from __future__ import annotations

import os
from dataclasses import dataclass


def _float(name: str, default: float) -> float:
    value = os.environ.get(name)
    try:
        return float(value) if value else default
    except ValueError:
        return default


@dataclass(frozen=True)
class OperatorSettings:
    # How often each target's workloads are re-checked (readiness, pruning) between spec changes.
    recheck_seconds: float = 15.0
    # Port of the operator's own /metrics; 0 disables it.
    metrics_port: int = 8080
    # First retry delay after a retriable API error (409, 429, 5xx); Kopf backs off from there.
    retry_seconds: float = 5.0
    # How long one of the operator's own API requests may take before it counts as failed (and is retried).
    api_timeout_seconds: float = 30.0

    @classmethod
    def from_env(cls) -> OperatorSettings:
        return cls(
            recheck_seconds=_float("FRONTIER_RECHECK_SECONDS", cls.recheck_seconds),
            metrics_port=int(_float("FRONTIER_METRICS_PORT", cls.metrics_port)),
            retry_seconds=_float("FRONTIER_RETRY_SECONDS", cls.retry_seconds),
            api_timeout_seconds=_float("FRONTIER_API_TIMEOUT_SECONDS", cls.api_timeout_seconds),
        )
