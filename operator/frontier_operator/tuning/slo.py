"""Where each SLO metric is read in an observation, and how a window stands against the SLO."""

from __future__ import annotations

from collections.abc import Sequence

from frontier_operator.perf.types import Percentiles, Role
from frontier_operator.planner.types import SloBound, SloMetric
from frontier_operator.tuning.actions import SloStanding
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant


def _percentiles(group: GroupObservation, metric: SloMetric) -> Percentiles | None:
    return {
        SloMetric.TTFT: group.ttft,
        SloMetric.TPOT: group.tpot,
        SloMetric.ITL: group.itl,
        SloMetric.E2E: group.e2e,
    }[metric]


def latency_group(observation: Observation, variant: Variant, metric: SloMetric) -> GroupObservation | None:
    """The group whose pods report `metric` as the client sees it.

    Unified pods report everything. In P/D the decode pods stream the tokens, so they hold TPOT, ITL and
    E2E, and their TTFT includes the prefill and the KV transfer; the prefill pods' TTFT is the fallback.
    """
    roles = [Role.UNIFIED, Role.DECODE]
    if metric is SloMetric.TTFT:
        roles.append(Role.PREFILL)
    for role in roles:
        group = observation.group(role, variant)
        if group is not None and _percentiles(group, metric) is not None:
            return group
    return None


def observed_latency(observation: Observation, bound: SloBound, variant: Variant) -> float | None:
    group = latency_group(observation, variant, bound.metric)
    if group is None:
        return None
    percentiles = _percentiles(group, bound.metric)
    return percentiles.at(bound.percentile) if percentiles is not None else None


def standings(slos: Sequence[SloBound], observation: Observation, variant: Variant) -> tuple[SloStanding, ...]:
    return tuple(SloStanding(bound, observed_latency(observation, bound, variant)) for bound in slos)


def describe_standings(items: Sequence[SloStanding]) -> str:
    return ", ".join(item.describe() for item in items)
