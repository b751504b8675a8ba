"""What one metrics window says about a fleet, as the Prometheus adapter and the digital twin report it.

Every metric is optional: `None` means "no data" (no samples, series absent, Prometheus down for
that query) and is never replaced by 0, because a decision taken on a made-up zero is worse than
no decision at all.
"""

from __future__ import annotations

from dataclasses import dataclass

from frontier_operator.perf.types import Percentiles, Role
from frontier_operator.render.request import Variant

__all__ = ["GroupObservation", "Observation", "Variant"]


@dataclass(frozen=True)
class GroupObservation:
    """Metrics of the pods of one role and variant over one window."""

    role: Role
    variant: Variant
    ttft: Percentiles | None = None
    tpot: Percentiles | None = None
    itl: Percentiles | None = None
    e2e: Percentiles | None = None
    request_rate_per_s: float | None = None
    input_tokens_per_s: float | None = None
    output_tokens_per_s: float | None = None
    running_requests: float | None = None
    queued_requests: float | None = None
    kv_usage: float | None = None
    cache_hit_rate: float | None = None
    spec_accept_length: float | None = None
    # Requests completed in the window: how much the percentiles can be trusted.
    samples: int = 0
    # Pods serving or draining, averaged over the window (None: not reported). More than the role's replicas:
    # pods of a retired revision, or removed replicas, still drain the requests they hold.
    pods: float | None = None

    @property
    def mean_input_tokens(self) -> float | None:
        if self.input_tokens_per_s is None or not self.request_rate_per_s:
            return None
        return self.input_tokens_per_s / self.request_rate_per_s

    @property
    def mean_output_tokens(self) -> float | None:
        if self.output_tokens_per_s is None or not self.request_rate_per_s:
            return None
        return self.output_tokens_per_s / self.request_rate_per_s


@dataclass(frozen=True)
class Observation:
    """One window over the whole fleet; `groups` holds one entry per (role, variant) that had data."""

    window_start: float
    window_end: float
    groups: tuple[GroupObservation, ...]

    def group(self, role: Role, variant: Variant = Variant.STABLE) -> GroupObservation | None:
        return next((g for g in self.groups if g.role is role and g.variant is variant), None)
