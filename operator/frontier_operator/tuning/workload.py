"""The traffic the fleet actually receives, from observations, and when it replaces the spec's estimate.

A window gives the request rate, mean input and output lengths (token rates ÷ request rate) and the
prefix-cache hit rate. An exponentially weighted average over windows smooths them; once it rests on
enough requests, the observed workload replaces the spec's guess for planning. Shapes the metrics cannot
tell (length spread and maximum, burstiness, kind) stay as the spec says.

SGLang counts a request, its prompt and its output tokens when the request finishes. While the traffic is
younger than its slowest requests, the long ones have not finished yet: the windows of a fleet that just
started see the short requests only (Kimi-K2.5's first windows read a mean output of 730 tokens of 1 000
and re-planned on it). Such windows stay out of the estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontier_operator.perf.types import LengthDistribution, Role, Workload
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant

# Windows after which an old window's weight has halved: about half an hour at the default 5 min window.
HALF_LIFE_WINDOWS = 6.0
# The faster average the trend is read from (ten minutes): the two trail a linear ramp by different lags, so
# their gap is the ramp's slope times the difference of the lags, with a quarter of one window's noise.
FAST_HALF_LIFE_WINDOWS = 2.0
# Requests the average must rest on before it replaces the spec's workload.
MIN_REQUESTS_TO_REPLACE = 1000
# Standard deviations of the noise by which a window's rate must depart from the average to count as off it,
# and the fast average from the slow one (or the window from the fast one) to count as rising: the loop tests
# an overlapping window every minute, 360 in six hours, and a false rise adds capacity.
DEPARTURE_SIGMAS = 4.0


def serving_group(observation: Observation, variant: Variant) -> GroupObservation | None:
    """The pods that see every request once and stream its tokens: unified, else decode."""
    return observation.group(Role.UNIFIED, variant) or observation.group(Role.DECODE, variant)


# A saturated role's queue holds at least this share of a window's completions: its requests wait minutes.
SATURATED_QUEUE_WINDOWS = 0.25


def queued_share(group: GroupObservation | None) -> float | None:
    """Requests waiting in the group's queues per request running (None: not reported)."""
    if group is None or group.queued_requests is None or group.running_requests is None:
        return None
    return group.queued_requests / max(group.running_requests, 1.0)


def queue_exceeds_running(group: GroupObservation | None) -> bool:
    """More requests wait in the group's queues than run on it."""
    share = queued_share(group)
    return share is not None and share > 1.0


# A window whose queues hold at most this share of the requests running is free of queueing: no overload explains
# its latency, however far it is from the model's.
QUEUE_FREE_SHARE = 0.1


def queue_free(group: GroupObservation | None) -> bool:
    """The group's queues were (nearly) empty over the window: its latency is its engine's, not a backlog's."""
    share = queued_share(group)
    return share is not None and share <= QUEUE_FREE_SHARE


def queue_visible(group: GroupObservation | None) -> bool:
    """The group's queues held more than a trace of its running requests over the window (unknown: not visible)."""
    share = queued_share(group)
    return share is not None and share > QUEUE_FREE_SHARE


def role_saturated(group: GroupObservation | None, window_s: float) -> bool:
    """The role serves at its limit and its queue grows: more requests wait than run, and they wait minutes.

    Then its completion rate is its capacity, not the offered load (SGLang counts a request when it finishes).
    A busy but stable queue can also hold more requests than run — a P/D prefill worker runs one chunk at a
    time — but they wait seconds; a growing one holds a sizeable share of a window's completions (Kimi-K2.5's
    attention-DP prefill: 46 000 queued at 9 requests/s, an hour and a half of them).
    """
    if group is None or not queue_exceeds_running(group) or group.queued_requests is None:
        return False
    served = group.request_rate_per_s
    if served is None or served <= 0:
        return True  # a queue and nothing completed: stuck at the limit
    return group.queued_requests >= SATURATED_QUEUE_WINDOWS * served * window_s


def demand(served: Workload, planned_rate_per_s: float, saturated: bool) -> Workload:
    """The traffic offered to a fleet that served `served`: while some role is saturated, at least the planned rate.

    A saturated fleet's observed rate is what it can serve; planning, sizing or judging on it plans for less
    traffic than arrives (Kimi-K2.5: a 40 requests/s target read as 8.7 requests/s while 46 000 requests
    waited for prefill). The queue only says the offered rate is higher, not by how much; the rate the plan in
    force was made for is the best floor the loop has until the queues clear.
    """
    if not saturated or served.request_rate_per_s >= planned_rate_per_s:
        return served
    return replace(served, request_rate_per_s=planned_rate_per_s)


def _cache_hit(observation: Observation, variant: Variant) -> float | None:
    # In P/D the prefix cache lives on the prefill workers.
    for role in (Role.UNIFIED, Role.PREFILL, Role.DECODE):
        group = observation.group(role, variant)
        if group is not None and group.cache_hit_rate is not None:
            return group.cache_hit_rate
    return None


def _lengths(observed_mean: float | None, spec: LengthDistribution) -> LengthDistribution:
    if observed_mean is None or not observed_mean > 0:
        return spec
    longest = max(spec.max or 0, math.ceil(observed_mean))
    return LengthDistribution(mean=observed_mean, cv=spec.cv, max=longest)


def _workload(
    rate: float | None,
    input_mean: float | None,
    output_mean: float | None,
    cache_hit: float | None,
    spec: Workload,
) -> Workload | None:
    if rate is None or not rate > 0:
        return None
    return replace(
        spec,
        request_rate_per_s=rate,
        input_tokens=_lengths(input_mean, spec.input_tokens),
        output_tokens=_lengths(output_mean, spec.output_tokens),
        prefix_cache_hit_rate=spec.prefix_cache_hit_rate if cache_hit is None else min(max(cache_hit, 0.0), 1.0),
    )


def variant_workload(observation: Observation, variant: Variant, spec: Workload) -> Workload | None:
    """What one variant's pods served in the window; None without a request rate."""
    group = serving_group(observation, variant)
    if group is None:
        return None
    return _workload(
        group.request_rate_per_s,
        group.mean_input_tokens,
        group.mean_output_tokens,
        _cache_hit(observation, variant),
        spec,
    )


@dataclass(frozen=True)
class _Totals:
    rate: float
    input_tokens: float
    output_tokens: float
    has_input: bool
    has_output: bool


def _fleet_totals(observation: Observation) -> _Totals | None:
    rate = input_tokens = output_tokens = 0.0
    has_input = has_output = seen = False
    for variant in Variant:
        group = serving_group(observation, variant)
        if group is None or group.request_rate_per_s is None:
            continue
        seen = True
        rate += group.request_rate_per_s
        if group.input_tokens_per_s is not None:
            input_tokens += group.input_tokens_per_s
            has_input = True
        if group.output_tokens_per_s is not None:
            output_tokens += group.output_tokens_per_s
            has_output = True
    return _Totals(rate, input_tokens, output_tokens, has_input, has_output) if seen else None


def fleet_workload(observation: Observation, spec: Workload) -> Workload | None:
    """What the whole fleet (every variant) served in the window; None without a request rate."""
    totals = _fleet_totals(observation)
    if totals is None or not totals.rate > 0:
        return None
    return _workload(
        totals.rate,
        totals.input_tokens / totals.rate if totals.has_input else None,
        totals.output_tokens / totals.rate if totals.has_output else None,
        _cache_hit(observation, Variant.STABLE),
        spec,
    )


@dataclass(frozen=True)
class WorkloadEstimate:
    """Exponentially weighted averages of the fleet's traffic; None until a window has reported it."""

    request_rate_per_s: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    cache_hit_rate: float | None = None
    # Requests the averages rest on (sum over windows), and how many windows' worth of traffic: an overlapping
    # window counts its fresh part only (the loop looks at a 5-minute window every minute).
    requests: int = 0
    windows: float = 0.0
    # Start of the first window of the current stretch of traffic (None: none seen, or it stopped).
    serving_since: float | None = None
    # The request rate averaged with the shorter half-life (`FAST_HALF_LIFE_WINDOWS`): the trend's other end.
    recent_request_rate_per_s: float | None = None


def _weight(windows: float, half_life_windows: float) -> float:
    """The weight an average with this half-life gives `windows` of new data."""
    return 1.0 - math.pow(0.5, windows / half_life_windows)


def _blend(previous: float | None, value: float | None, weight: float) -> float | None:
    if value is None or not math.isfinite(value):
        return previous
    return value if previous is None else previous + weight * (value - previous)


def update_workload(
    estimate: WorkloadEstimate,
    observation: Observation,
    half_life_windows: float = HALF_LIFE_WINDOWS,
    *,
    fresh_fraction: float = 1.0,
) -> WorkloadEstimate:
    """Blend one window in; `fresh_fraction` is the part of it the previous window did not already cover.

    A window without completions ends the stretch of traffic; one from traffic still warming up
    (`warming_up`) only marks when the stretch began.
    """
    totals = _fleet_totals(observation)
    if totals is None or fresh_fraction <= 0:
        return estimate
    if not totals.rate > 0:
        return replace(estimate, serving_since=None)
    since = observation.window_start if estimate.serving_since is None else estimate.serving_since
    if warming_up(observation, since):
        return replace(estimate, serving_since=since)
    weight = _weight(fresh_fraction, half_life_windows)
    recent_weight = _weight(fresh_fraction, FAST_HALF_LIFE_WINDOWS)
    served = sum(g.samples for v in Variant if (g := serving_group(observation, v)) is not None)
    requests = round(served * fresh_fraction)
    return WorkloadEstimate(
        request_rate_per_s=_blend(estimate.request_rate_per_s, totals.rate, weight),
        input_tokens=_blend(
            estimate.input_tokens, totals.input_tokens / totals.rate if totals.has_input else None, weight
        ),
        output_tokens=_blend(
            estimate.output_tokens, totals.output_tokens / totals.rate if totals.has_output else None, weight
        ),
        cache_hit_rate=_blend(estimate.cache_hit_rate, _cache_hit(observation, Variant.STABLE), weight),
        requests=estimate.requests + requests,
        windows=estimate.windows + fresh_fraction,
        serving_since=since,
        recent_request_rate_per_s=_blend(estimate.recent_request_rate_per_s, totals.rate, recent_weight),
    )


def warming_up(observation: Observation, serving_since: float) -> bool:
    """The traffic had run, when the window began, for less than the window's p99 end-to-end latency.

    A request finishing in the window arrived at most its latency before; while the traffic is younger than
    the slow requests' latency, they are missing from the window and its means lean to the short ones.
    """
    slowest = [g.e2e.p99 for v in Variant if (g := serving_group(observation, v)) is not None and g.e2e is not None]
    return bool(slowest) and observation.window_start - serving_since < max(slowest)


def rate_ahead(
    estimate: WorkloadEstimate,
    observation: Observation,
    horizon_s: float,
    arrival_cv: float = 1.0,
    half_life_windows: float = HALF_LIFE_WINDOWS,
) -> float:
    """The factor (≥ 1) by which the fleet's request rate grows over `horizon_s` if it keeps rising as it has.

    Exponentially weighted averages of a rate that rises linearly trail it by half-life ÷ ln 2: 43 min for
    the six-window average, 14 min for the two-window one at the default 5-min window. Two readings of the
    slope, the larger significant one counts (`DEPARTURE_SIGMAS` of its noise):

    * the averages' gap over the difference of their lags — a quarter of one window's counting noise
      (`_averages_gap_noise`), so a long ramp stands out 2.7 times sooner than by a single window's lead
      over the slow average (the rule before): on GLM-5's bursty diurnal traffic that lead reached 3.7 of
      its 4 sigmas at 8.5 requests/s while the rate climbed into the p99 TTFT limit;
    * the window's lead over the fast average, over its lag, against the window's own noise: after a
      trough the slow average still carries the day's heavier hours and the gap reads falling for half an
      hour of rising traffic (Qwen3-32B: 11.2 and 12.0 requests/s averaged at a window of 12.3, its p50
      TPOT at 11.9 ms of 12 and climbing).

    1 while neither is significant, as for falling or unknown traffic.
    """
    totals = _fleet_totals(observation)
    slow, fast = estimate.request_rate_per_s, estimate.recent_request_rate_per_s
    window_s = observation.window_end - observation.window_start
    if (
        totals is None
        or not totals.rate > 0
        or slow is None
        or fast is None
        or estimate.windows < half_life_windows
        or horizon_s <= 0
        or window_s <= 0
    ):
        return 1.0
    noise = _window_noise(totals.rate, window_s, arrival_cv)
    fast_lag_s = averaging_lag_s(window_s, FAST_HALF_LIFE_WINDOWS)
    readings = (
        (
            fast - slow,
            noise * _averages_gap_noise(half_life_windows),
            averaging_lag_s(window_s, half_life_windows) - fast_lag_s,
        ),
        (totals.rate - fast, noise, fast_lag_s),
    )
    slope = max((rise / lag_s for rise, sigma, lag_s in readings if rise > DEPARTURE_SIGMAS * sigma), default=0.0)
    return 1.0 + slope * horizon_s / totals.rate


def _window_noise(rate: float, window_s: float, arrival_cv: float) -> float:
    """Standard deviation of one window's request rate: cv/√requests of it (cv the arrivals' burstiness, ≥ 1)."""
    return max(arrival_cv, 1.0) * rate / math.sqrt(rate * window_s)


def _averages_gap_noise(half_life_windows: float) -> float:
    """Standard deviation of the gap between the fast and the slow average, in units of one window's: for
    weights a and b per window and independent windows, √(a/(2−a) + b/(2−b) − 2ab/(1 − (1−a)(1−b))) — 0.24 for
    half-lives of 2 and 6 windows (0.22 measured with a 5-min window every minute, bursty or Poisson)."""
    a = _weight(1.0, FAST_HALF_LIFE_WINDOWS)
    b = _weight(1.0, half_life_windows)
    return math.sqrt(a / (2.0 - a) + b / (2.0 - b) - 2.0 * a * b / (1.0 - (1.0 - a) * (1.0 - b)))


def steady_rate(
    estimate: WorkloadEstimate,
    observation: Observation,
    arrival_cv: float = 1.0,
    half_life_windows: float = HALF_LIFE_WINDOWS,
) -> float | None:
    """The fleet's smoothed request rate while the window's lies within its counting noise of it; None while
    the traffic moves (the window significantly above or below the average) or the average rests on too few
    windows — then the window's own rate is the one to judge by.

    A window's count of a Poisson stream scatters by 1/√requests (±6 % at 300 requests), and near the
    knee the model's latency follows the rate steeply: DeepSeek-R1 on one H200 replica was predicted at
    39.6 ms p50 TPOT at a window's 1.12 requests/s and 41.5 ms at the next one's 1.15, for traffic offered
    at 1 request/s — and Qwen3-32B lost a replica on a window of 19.4 requests/s that the model put under
    its band, for traffic of 20 requests/s that it did not.
    """
    departure = _departure(estimate, observation, arrival_cv, half_life_windows)
    return estimate.request_rate_per_s if departure == 0.0 else None


def _departure(
    estimate: WorkloadEstimate, observation: Observation, arrival_cv: float, half_life_windows: float
) -> float | None:
    """The window's request rate minus the smoothed one when it is more than `DEPARTURE_SIGMAS` of the window's
    counting noise (cv/√requests, cv the arrivals' burstiness, 1 for Poisson); 0 within that noise, or when the
    window has no rate to compare; None while the average does not yet rest on a half-life of windows."""
    level = estimate.request_rate_per_s
    if level is None or estimate.windows < half_life_windows:
        return None
    totals = _fleet_totals(observation)
    window_s = observation.window_end - observation.window_start
    if totals is None or not totals.rate > 0 or window_s <= 0:
        return 0.0
    departure = totals.rate - level
    if abs(departure) <= DEPARTURE_SIGMAS * _window_noise(totals.rate, window_s, arrival_cv):
        return 0.0
    return departure


def averaging_lag_s(window_s: float, half_life_windows: float = HALF_LIFE_WINDOWS) -> float:
    """How far the smoothed rate trails a rate that rises linearly: half-life ÷ ln 2."""
    return half_life_windows * window_s / math.log(2.0)


def effective_workload(
    spec: Workload, estimate: WorkloadEstimate, min_requests: int = MIN_REQUESTS_TO_REPLACE
) -> Workload:
    """The spec's workload until enough requests were observed, then the observed one (spec shapes kept)."""
    if estimate.requests < min_requests:
        return spec
    observed = _workload(
        estimate.request_rate_per_s, estimate.input_tokens, estimate.output_tokens, estimate.cache_hit_rate, spec
    )
    return observed if observed is not None else spec


def _relative_change(old: float, new: float) -> float:
    return abs(new - old) / old if old > 0 else (math.inf if new > 0 else 0.0)


def workload_shift(planned: Workload, current: Workload, relative: float, cache_hit: float) -> str | None:
    """Why `current` is no longer the traffic `planned` was made for, or None while it still is."""
    changes = []
    for label, old, new in (
        ("request rate", planned.request_rate_per_s, current.request_rate_per_s),
        ("mean input", planned.input_tokens.mean, current.input_tokens.mean),
        ("mean output", planned.output_tokens.mean, current.output_tokens.mean),
    ):
        if _relative_change(old, new) > relative:
            changes.append(f"{label} {old:.4g} → {new:.4g}")
    if abs(current.prefix_cache_hit_rate - planned.prefix_cache_hit_rate) > cache_hit:
        changes.append(
            f"prefix-cache hit rate {planned.prefix_cache_hit_rate:.0%} → {current.prefix_cache_hit_rate:.0%}"
        )
    return ", ".join(changes) if changes else None
