"""A window of the twin summarised as the tuning layer's `Observation`, per (role, variant).

The twin knows every request, so percentiles here are exact sample percentiles (numpy's linear rule), not
the bucket interpolation a PromQL `histogram_quantile` gives over the exporter's histograms; rates are per
second of window. Missing data is `None`, never 0: a group with no completed request has no latency
percentiles; a group whose pods were not up during the window is absent. A group that was up and served
nothing reports a request rate of 0.0 — that is what the counters say, not missing data.

Conventions shared with the Prometheus adapter: `running_requests` and `queued_requests` are the group's
total (summed over its pods) averaged over the window's samples, `kv_usage` the mean over pods of
`sglang:token_usage`. For P/D, the decode role carries the client-visible TTFT, TPOT, ITL and E2E; the
prefill role's TTFT and E2E are the prefill servers' own (request arrival to prefill done), as SGLang's
prefill tokenizer records them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from frontier_operator.perf.types import Percentiles
from frontier_operator.sim.records import GroupLedger, itl_value
from frontier_operator.tuning.observation import GroupObservation, Observation

if TYPE_CHECKING:  # the fleet calls into this module; only its type is needed here
    from frontier_operator.sim.fleet import FleetSimulation

PERCENTILES = (50, 90, 95, 99)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """numpy's default ('linear') percentile of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    position = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def percentiles(values: Sequence[float]) -> Percentiles | None:
    if not values:
        return None
    ordered = sorted(values)
    return Percentiles(*(percentile(ordered, q) for q in PERCENTILES))


def weighted_percentiles(bins: dict[int, float]) -> Percentiles | None:
    total = sum(bins.values())
    if total <= 0:
        return None
    ordered = sorted(bins.items())
    out = []
    for q in PERCENTILES:
        threshold = total * q / 100.0
        running = 0.0
        chosen = ordered[-1][0]
        for index, weight in ordered:
            running += weight
            if running >= threshold:
                chosen = index
                break
        out.append(itl_value(chosen))
    return Percentiles(*out)


def _group_observation(
    key: tuple[object, object], ledger: GroupLedger, start: float, end: float
) -> GroupObservation | None:
    role, variant = key
    gauges = ledger.gauges_in(start, end)
    completions = ledger.completions.window(start, end)
    if not gauges and not completions:
        return None
    duration = end - start
    ttfts = ledger.ttft.window(start, end)
    tpots = [c.tpot_s for c in completions if c.tpot_s is not None]
    new, cached = ledger.binned_sums(ledger.prefill, start, end)
    steps, accepted = ledger.binned_sums(ledger.accept, start, end)
    kv = [g.kv_usage for g in gauges if g.kv_usage is not None]
    return GroupObservation(
        role=role,  # type: ignore[arg-type]
        variant=variant,  # type: ignore[arg-type]
        ttft=percentiles(ttfts),
        tpot=percentiles(tpots),
        itl=weighted_percentiles(ledger.itl_window(start, end)),
        e2e=percentiles([c.e2e_s for c in completions]),
        request_rate_per_s=len(completions) / duration,
        input_tokens_per_s=sum(c.prompt_tokens for c in completions) / duration,
        output_tokens_per_s=sum(c.generated_tokens for c in completions) / duration,
        running_requests=sum(g.running for g in gauges) / len(gauges) if gauges else None,
        queued_requests=sum(g.queued for g in gauges) / len(gauges) if gauges else None,
        kv_usage=sum(kv) / len(kv) if kv else None,
        cache_hit_rate=cached / (new + cached) if new + cached > 0 else None,
        spec_accept_length=accepted / steps if steps > 0 else None,
        samples=len(completions),
        pods=sum(g.pods for g in gauges) / len(gauges) if gauges else None,
    )


def observe_window(fleet: FleetSimulation, start: float, end: float) -> Observation:
    """Everything the fleet recorded in (start, end]."""
    if end <= start:
        raise ValueError(f"empty window ({start}, {end}]")
    groups = []
    for key in sorted(fleet.ledger.groups, key=lambda k: (k[0].value, k[1].value)):
        group = _group_observation(key, fleet.ledger.groups[key], start, end)
        if group is not None:
            groups.append(group)
    return Observation(window_start=start, window_end=end, groups=tuple(groups))


def observe(fleet: FleetSimulation, window_s: float) -> Observation:
    """The last `window_s` seconds up to the fleet's simulated now."""
    return observe_window(fleet, max(0.0, fleet.now - window_s), fleet.now)
