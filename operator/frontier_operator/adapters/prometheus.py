"""Prometheus → `Observation`: SGLang's metrics for one target's pods, by role and variant, over a window.

**Labels.** The engines' PodMonitor must copy four pod labels onto every scraped series under the names
in `PROMETHEUS_LABELS` (`frontier_target`, `frontier_role`, `frontier_variant`, `frontier_revision`);
the Prometheus Operator adds `namespace` itself. `render.monitoring.relabelings()` writes them.

**Names.** SGLang exports `sglang:<name>`; a prometheus_client ≥ 0.23 behind a Prometheus that negotiates
OpenMetrics escapes the colon and Prometheus stores `sglang_<name>` (test-infrastructure.md §3.4). Every
selector matches both spellings: `{__name__=~"sglang[:_]<name>"}`.

**Queries.** Each statistic is one PromQL expression grouped by role and variant (listed in
`docs/closed-loop.md`). To bound the load on Prometheus, statistics are tagged with `label_replace` and
joined with `or` into `MAX_QUERIES` instant queries per observation, all evaluated at the same instant.

**Failures.** Unreachable, timing out, an HTTP error or an answer that is not the documented JSON →
`None` for the whole observation. A statistic without series, or whose value is NaN (no requests in
the window) → `None` for that statistic. Nothing missing is ever reported as 0.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import requests
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from frontier_operator.perf.types import Percentiles, Role
from frontier_operator.render.monitoring import PROMETHEUS_LABELS
from frontier_operator.render.pods import LABEL_REVISION, LABEL_ROLE, LABEL_TARGET, LABEL_VARIANT
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant

log = logging.getLogger(__name__)

# ------------------------------------------------------------------------------------------------ labels


@dataclass(frozen=True)
class LabelScheme:
    """The Prometheus label names the four pod labels arrive under."""

    target: str
    role: str
    variant: str
    revision: str
    namespace: str = "namespace"

    def group_by(self) -> str:
        return f"{self.role}, {self.variant}"


# What the PodMonitor's relabelings (render/monitoring.py) write: the names the queries expect.
RELABELED = LabelScheme(
    PROMETHEUS_LABELS[LABEL_TARGET],
    PROMETHEUS_LABELS[LABEL_ROLE],
    PROMETHEUS_LABELS[LABEL_VARIANT],
    PROMETHEUS_LABELS[LABEL_REVISION],
)
# What a PodMonitor with `podTargetLabels` writes instead (Prometheus Operator sanitises "." and "/" to "_").
POD_TARGET_LABELS = LabelScheme(
    "frontier_dev_target", "frontier_dev_role", "frontier_dev_variant", "frontier_dev_revision"
)
TARGET_LABEL, ROLE_LABEL, VARIANT_LABEL, REVISION_LABEL = (
    RELABELED.target,
    RELABELED.role,
    RELABELED.variant,
    RELABELED.revision,
)
NAMESPACE_LABEL = RELABELED.namespace
# The tag each statistic carries in a joined query's answer.
STAT_LABEL = "frontier_stat"


# ----------------------------------------------------------------------------------------------- queries

PERCENTILES = (50, 90, 95, 99)
# GroupObservation percentile field → the SGLang histogram it is read from.
HISTOGRAMS = {
    "ttft": "time_to_first_token_seconds",
    "tpot": "request_time_per_output_token_seconds",
    "itl": "inter_token_latency_seconds",
    "e2e": "e2e_request_latency_seconds",
}
# One query per histogram (its four percentiles; the e2e one also counts the requests), one for the rest.
MAX_QUERIES = len(HISTOGRAMS) + 1
DEFAULT_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class FleetSelector:
    """Which pods: one target in one namespace, optionally only some revisions (e.g. stable and canary)."""

    namespace: str
    target: str
    revisions: tuple[str, ...] = ()
    labels: LabelScheme = RELABELED


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def series(selector: FleetSelector, metric: str, extra: str = "") -> str:
    """A vector selector for SGLang metric `metric` (name without prefix) on the selected pods, either spelling."""
    names = selector.labels
    matchers = [
        f"__name__=~{_quote('sglang[:_]' + metric)}",
        f"{names.target}={_quote(selector.target)}",
        f"{names.namespace}={_quote(selector.namespace)}",
    ]
    if selector.revisions:
        matchers.append(f"{names.revision}=~{_quote('|'.join(selector.revisions))}")
    if extra:
        matchers.append(extra)
    return "{" + ", ".join(matchers) + "}"


def statistics(selector: FleetSelector, window_s: float) -> dict[str, str]:
    """Every statistic's PromQL, grouped by role and variant. Keys name `GroupObservation` fields."""
    w = f"[{max(1, round(window_s))}s]"
    group_by = selector.labels.group_by()

    def rate_sum(metric: str, extra: str = "") -> str:
        return f"sum by ({group_by}) (rate({series(selector, metric, extra)}{w}))"

    def gauge(metric: str, how: str) -> str:
        return f"{how} by ({group_by}) (avg_over_time({series(selector, metric)}{w}))"

    stats: dict[str, str] = {}
    for field, histogram in HISTOGRAMS.items():
        buckets = f"sum by (le, {group_by}) (rate({series(selector, histogram + '_bucket')}{w}))"
        for p in PERCENTILES:
            stats[f"{field}_p{p}"] = f"histogram_quantile({p / 100}, {buckets})"
    completed = series(selector, "e2e_request_latency_seconds_count")
    stats["samples"] = f"sum by ({group_by}) (increase({completed}{w}))"
    stats["request_rate_per_s"] = rate_sum("num_requests_total")
    stats["input_tokens_per_s"] = rate_sum("prompt_tokens_total")
    stats["output_tokens_per_s"] = rate_sum("generation_tokens_total")
    stats["running_requests"] = gauge("num_running_reqs", "sum")
    stats["queued_requests"] = gauge("num_queue_reqs", "sum")
    stats["kv_usage"] = gauge("token_usage", "avg")
    # Pods that reported at any time in the window (each exports one running-requests gauge): more than the
    # role's replicas means pods of a retired revision or removed replicas still drained requests in it.
    stats["pods"] = gauge("num_running_reqs", "count")
    # Windowed hit rate from the scheduler's counters: hit tokens over hit + computed ("input") tokens;
    # the latest-batch gauge only where the counters are absent.
    hits = rate_sum("prefill_effective_tokens_total", 'mode=~".+_hit"')
    everything = rate_sum("prefill_effective_tokens_total")
    stats["cache_hit_rate"] = f"({hits} / {everything}) or {gauge('cache_hit_rate', 'avg')}"
    # SGLang reports 0 when speculative decoding is off: that is "no speculation", not an accept length.
    stats["spec_accept_length"] = (
        f"avg by ({group_by}) (avg_over_time({series(selector, 'spec_accept_length')}{w}) > 0)"
    )
    return stats


def _tagged(stat: str, expression: str) -> str:
    return f'label_replace({expression}, "{STAT_LABEL}", "{stat}", "", "")'


def joined_queries(selector: FleetSelector, window_s: float) -> list[str]:
    """The statistics packed into `MAX_QUERIES` instant queries (tagged, joined with `or`)."""
    stats = statistics(selector, window_s)
    batches: list[list[str]] = [[f"{field}_p{p}" for p in PERCENTILES] for field in HISTOGRAMS]
    batches[list(HISTOGRAMS).index("e2e")].append("samples")
    in_batches = {name for batch in batches for name in batch}
    batches.append([name for name in stats if name not in in_batches])
    return [" or ".join(_tagged(name, stats[name]) for name in batch) for batch in batches]


# ------------------------------------------------------------------------------------------------ parsing


class UnreadableAnswerError(ValueError):
    """Prometheus answered something that is not an instant vector."""


def _number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError) as error:
        raise UnreadableAnswerError(f"sample value {text!r} is not a number") from error
    return value if math.isfinite(value) and value >= 0 else None


def parse_vector(result: Any, names: LabelScheme = RELABELED) -> dict[tuple[Role, Variant], dict[str, float | None]]:
    """`custom_query`'s result → {(role, variant): {statistic: value}}; series of other roles are ignored."""
    if not isinstance(result, list):
        raise UnreadableAnswerError(f"expected a list of samples, got {type(result).__name__}")
    values: dict[tuple[Role, Variant], dict[str, float | None]] = {}
    roles = {role.value: role for role in Role}
    variants = {variant.value: variant for variant in Variant}
    for sample in result:
        if not isinstance(sample, dict):
            raise UnreadableAnswerError("a sample is not an object")
        labels, pair = sample.get("metric"), sample.get("value")
        if not isinstance(labels, dict) or not isinstance(pair, list) or len(pair) != 2:
            raise UnreadableAnswerError("a sample lacks its labels or its [time, value] pair")
        role, variant, stat = labels.get(names.role), labels.get(names.variant), labels.get(STAT_LABEL)
        if role not in roles or variant not in variants or not isinstance(stat, str):
            continue
        values.setdefault((roles[role], variants[variant]), {})[stat] = _number(pair[1])
    return values


def _percentiles(stats: Mapping[str, float | None], field: str) -> Percentiles | None:
    points = [stats.get(f"{field}_p{p}") for p in PERCENTILES]
    if any(point is None for point in points):
        return None
    return Percentiles(*(point for point in points if point is not None))


def _group(role: Role, variant: Variant, stats: Mapping[str, float | None]) -> GroupObservation:
    samples = stats.get("samples")
    return GroupObservation(
        role=role,
        variant=variant,
        ttft=_percentiles(stats, "ttft"),
        tpot=_percentiles(stats, "tpot"),
        itl=_percentiles(stats, "itl"),
        e2e=_percentiles(stats, "e2e"),
        request_rate_per_s=stats.get("request_rate_per_s"),
        input_tokens_per_s=stats.get("input_tokens_per_s"),
        output_tokens_per_s=stats.get("output_tokens_per_s"),
        running_requests=stats.get("running_requests"),
        queued_requests=stats.get("queued_requests"),
        kv_usage=stats.get("kv_usage"),
        cache_hit_rate=stats.get("cache_hit_rate"),
        spec_accept_length=stats.get("spec_accept_length"),
        samples=round(samples) if samples is not None else 0,
        pods=stats.get("pods"),
    )


def build_observation(
    answers: Sequence[Any], window_start: float, window_end: float, names: LabelScheme = RELABELED
) -> Observation:
    merged: dict[tuple[Role, Variant], dict[str, float | None]] = {}
    for answer in answers:
        for key, stats in parse_vector(answer, names).items():
            merged.setdefault(key, {}).update(stats)
    groups = tuple(_group(role, variant, merged[(role, variant)]) for role, variant in sorted(merged))
    return Observation(window_start=window_start, window_end=window_end, groups=groups)


# ------------------------------------------------------------------------------------------------- I/O


@dataclass(frozen=True)
class ObservationResult:
    """The observation, or None with the reason (for the `MetricsAvailable` condition)."""

    observation: Observation | None
    error: str | None = None


Query = Callable[[str, float], Any]


def _client(url: str, timeout_s: float, headers: Mapping[str, str] | None) -> Query:
    # No retries: the next tick is the retry, and a dead Prometheus must not stall the loop.
    # The client takes whole seconds; Prometheus itself gets the exact evaluation timeout below.
    connection = PrometheusConnect(
        url=url, headers=dict(headers or {}), retry=Retry(total=0), timeout=max(1, math.ceil(timeout_s))
    )

    def query(promql: str, at: float) -> Any:
        params = {"time": f"{at:.3f}", "timeout": f"{timeout_s:g}s"}
        return connection.custom_query(query=promql, params=params)

    return query


def query_fleet(
    url: str,
    selector: FleetSelector,
    window_s: float,
    *,
    at: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
) -> ObservationResult:
    """Blocking: run the joined queries at one instant (`at`, default now) and build the observation."""
    end = time.time() if at is None else at
    try:
        query = _client(url, timeout_s, headers)
        answers = [query(promql, end) for promql in joined_queries(selector, window_s)]
        return ObservationResult(build_observation(answers, end - window_s, end, selector.labels))
    except requests.exceptions.JSONDecodeError:
        # Something answered, but not Prometheus (a proxy's login page, an HTML error page).
        reason = f"Prometheus at {url} answered something unreadable: not JSON"
    except requests.RequestException as error:
        # Without retries urllib3 wraps a read timeout into a ConnectionError: tell the two apart by the text.
        if isinstance(error, requests.Timeout) or "timed out" in str(error):
            reason = f"Prometheus at {url} did not answer within {timeout_s:g} s"
        else:
            reason = f"Prometheus at {url} is unreachable: {type(error).__name__}"
    except PrometheusApiClientException as error:
        reason = f"Prometheus at {url} answered an error: {str(error)[:200]}"
    except (ValueError, KeyError, TypeError) as error:
        reason = f"Prometheus at {url} answered something unreadable: {str(error)[:200]}"
    log.warning("no observation for %s/%s: %s", selector.namespace, selector.target, reason)
    return ObservationResult(None, reason)


def observe(
    url: str,
    selector: FleetSelector,
    window_s: float,
    *,
    at: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
) -> Observation | None:
    """Blocking: the observation of the selected pods over the last `window_s` seconds, or None."""
    return query_fleet(url, selector, window_s, at=at, timeout_s=timeout_s, headers=headers).observation


async def query_fleet_async(
    url: str,
    selector: FleetSelector,
    window_s: float,
    *,
    at: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
) -> ObservationResult:
    """`query_fleet` on a worker thread, so the operator's event loop never blocks on Prometheus."""
    return await asyncio.to_thread(query_fleet, url, selector, window_s, at=at, timeout_s=timeout_s, headers=headers)


async def observe_async(
    url: str,
    selector: FleetSelector,
    window_s: float,
    *,
    at: float | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    headers: Mapping[str, str] | None = None,
) -> Observation | None:
    result = await query_fleet_async(url, selector, window_s, at=at, timeout_s=timeout_s, headers=headers)
    return result.observation
