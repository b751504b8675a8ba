"""The Prometheus adapter against a real Prometheus scraping SGLang-named series every second."""

from __future__ import annotations

import asyncio
import time

import pytest
import requests

from frontier_operator.adapters.prometheus import (
    MAX_QUERIES,
    FleetSelector,
    joined_queries,
    observe,
    observe_async,
    query_fleet,
)
from frontier_operator.perf.types import Percentiles, Role
from frontier_operator.render.monitoring import PROMETHEUS_LABELS, relabelings
from frontier_operator.tuning.observation import Observation, Variant
from prometheus_support import (
    BROKEN_PROMETHEUS,
    CANARY,
    DECODE,
    E2E,
    E2E_BUCKETS,
    ITL,
    ITL_BUCKETS,
    NAMESPACE,
    PREFILL,
    STABLE_A,
    STABLE_B,
    TARGET,
    TPOT,
    TTFT_BUCKETS,
    Exporter,
    PrometheusProcess,
    expected_quantile,
    free_port,
    wait_for,
)

WINDOW_S = 6.0
PERCENTILES = (50, 90, 95, 99)


@pytest.fixture(scope="module")
def settled(prometheus: PrometheusProcess) -> PrometheusProcess:
    """Prometheus once every pod has been scraped for longer than the window, so rate() sees whole windows."""

    def every_target_covers_the_window() -> bool:
        query = f"min(count_over_time(up[{WINDOW_S + 2:.0f}s]))"
        answer = requests.get(f"{prometheus.url}/api/v1/query", params={"query": query}, timeout=2).json()
        result = answer["data"]["result"]
        return bool(result) and float(result[0]["value"][1]) >= WINDOW_S + 1

    wait_for(every_target_covers_the_window, 60, "every target scraped for longer than the window")
    return prometheus


@pytest.fixture(scope="module")
def demo(settled: PrometheusProcess) -> Observation:
    observation = observe(settled.url, FleetSelector(NAMESPACE, TARGET), WINDOW_S)
    assert observation is not None
    return observation


def _close(actual: float | None, expected: float, tolerance: float = 0.02) -> bool:
    return actual is not None and abs(actual - expected) <= tolerance * abs(expected) + 1e-9


def _assert_percentiles(actual: Percentiles | None, mixture: list, buckets: tuple[float, ...]) -> None:  # type: ignore[type-arg]
    assert actual is not None
    for p in PERCENTILES:
        expected = expected_quantile(p / 100, mixture, buckets)
        assert _close(actual.at(p), expected), (p, actual.at(p), expected)


def _group(observation: Observation, role: Role, variant: Variant = Variant.STABLE):  # type: ignore[no-untyped-def]
    group = observation.group(role, variant)
    assert group is not None, [(g.role, g.variant) for g in observation.groups]
    return group


def test_percentiles_are_histogram_quantiles_of_the_pods_buckets_summed(demo: Observation) -> None:
    stable = _group(demo, Role.UNIFIED)
    rates = (STABLE_A.request_rate, STABLE_B.request_rate)
    _assert_percentiles(stable.ttft, [(rates[0], STABLE_A.ttft), (rates[1], STABLE_B.ttft)], TTFT_BUCKETS)
    _assert_percentiles(stable.tpot, [(sum(rates), TPOT)], ITL_BUCKETS)
    _assert_percentiles(stable.itl, [(sum(rates), ITL)], ITL_BUCKETS)
    _assert_percentiles(stable.e2e, [(sum(rates), E2E)], E2E_BUCKETS)
    # The two pods' TTFT differ: the mixture's median lies between theirs.
    assert stable.ttft is not None and STABLE_A.ttft.median_s < stable.ttft.p50 < STABLE_B.ttft.median_s


def test_rates_gauges_and_samples_of_the_stable_pods(demo: Observation) -> None:
    stable = _group(demo, Role.UNIFIED)
    rate = STABLE_A.request_rate + STABLE_B.request_rate
    assert _close(stable.request_rate_per_s, rate)
    assert _close(stable.input_tokens_per_s, rate * STABLE_A.input_tokens)
    assert _close(stable.output_tokens_per_s, rate * STABLE_A.output_tokens)
    assert _close(stable.mean_input_tokens, STABLE_A.input_tokens)
    assert _close(stable.running_requests, STABLE_A.running + STABLE_B.running)
    assert STABLE_A.queued is not None and STABLE_B.queued is not None
    assert _close(stable.queued_requests, STABLE_A.queued + STABLE_B.queued)
    assert _close(stable.kv_usage, (STABLE_A.kv_usage + STABLE_B.kv_usage) / 2)
    assert _close(stable.cache_hit_rate, 0.6)
    assert _close(stable.spec_accept_length, (STABLE_A.spec_accept_length + STABLE_B.spec_accept_length) / 2)
    assert _close(stable.samples, rate * WINDOW_S, tolerance=0.1)
    assert stable.pods == 2  # both stable pods reported in the window


def test_underscore_names_are_read_and_missing_series_are_none(demo: Observation) -> None:
    canary = _group(demo, Role.UNIFIED, Variant.CANARY)
    assert _close(canary.request_rate_per_s, CANARY.request_rate)
    _assert_percentiles(canary.tpot, [(1.0, CANARY.tpot)], ITL_BUCKETS)
    assert canary.queued_requests is None  # the pod exports no queue gauge: unknown, not 0
    assert canary.spec_accept_length is None  # SGLang's 0 means speculation is off
    assert _close(canary.cache_hit_rate, CANARY.cache_hit_gauge)  # the gauge, for want of the counters


def test_only_the_targets_engine_pods_are_observed(demo: Observation) -> None:
    assert {(g.role, g.variant) for g in demo.groups} == {
        (Role.UNIFIED, Variant.STABLE),
        (Role.UNIFIED, Variant.CANARY),
    }
    assert demo.window_end - demo.window_start == pytest.approx(WINDOW_S)


def test_revisions_narrow_the_selection(settled: PrometheusProcess) -> None:
    observation = observe(settled.url, FleetSelector(NAMESPACE, TARGET, revisions=("r1",)), WINDOW_S)
    assert observation is not None
    assert [(g.role, g.variant) for g in observation.groups] == [(Role.UNIFIED, Variant.STABLE)]


def test_a_disaggregated_target_reports_each_role(settled: PrometheusProcess) -> None:
    observation = observe(settled.url, FleetSelector(NAMESPACE, "pd-demo"), WINDOW_S)
    assert observation is not None
    prefill, decode = _group(observation, Role.PREFILL), _group(observation, Role.DECODE)
    assert _close(prefill.cache_hit_rate, PREFILL.cache_hit or 0.0)
    assert decode.cache_hit_rate == DECODE.cache_hit_gauge
    _assert_percentiles(decode.ttft, [(DECODE.request_rate, DECODE.ttft)], TTFT_BUCKETS)


def test_a_target_without_series_has_no_groups_rather_than_zeros(settled: PrometheusProcess) -> None:
    observation = observe(settled.url, FleetSelector(NAMESPACE, "nobody"), WINDOW_S)
    assert observation is not None
    assert observation.groups == ()


def test_the_evaluation_instant_is_the_window_end(settled: PrometheusProcess) -> None:
    at = time.time() - 1.0
    observation = observe(settled.url, FleetSelector(NAMESPACE, TARGET), WINDOW_S, at=at)
    assert observation is not None
    assert observation.window_end == at
    assert observation.window_start == at - WINDOW_S


def test_the_async_wrapper_answers_like_the_blocking_call(settled: PrometheusProcess) -> None:
    at = time.time() - 1.0
    selector = FleetSelector(NAMESPACE, TARGET)
    assert asyncio.run(observe_async(settled.url, selector, WINDOW_S, at=at)) == observe(
        settled.url, selector, WINDOW_S, at=at
    )


# ------------------------------------------------------------------------------------ failures (no Prometheus)


def test_an_unreachable_prometheus_gives_none_quickly() -> None:
    started = time.monotonic()
    result = query_fleet(f"http://127.0.0.1:{free_port()}", FleetSelector(NAMESPACE, TARGET), WINDOW_S, timeout_s=2)
    assert result.observation is None
    assert result.error is not None and "unreachable" in result.error
    assert time.monotonic() - started < 3.0  # no retries with backoff


@pytest.mark.parametrize("path", sorted(BROKEN_PROMETHEUS))
def test_an_erroring_or_garbled_prometheus_gives_none(exporter: Exporter, path: str) -> None:
    url = exporter.url + path.removesuffix("/api/v1/query")
    result = query_fleet(url, FleetSelector(NAMESPACE, TARGET), WINDOW_S, timeout_s=2)
    assert result.observation is None
    assert result.error


# ------------------------------------------------------------------------------------------- pure contracts


def test_one_observation_costs_a_bounded_number_of_queries() -> None:
    queries = joined_queries(FleetSelector(NAMESPACE, TARGET, ("r1", "r2")), 300)
    assert len(queries) == MAX_QUERIES == 5
    assert all('__name__=~"sglang[:_]' in query for query in queries)
    assert all('frontier_revision=~"r1|r2"' in query for query in queries)


def test_the_pod_monitor_relabelings_write_the_labels_the_queries_select_on() -> None:
    written = relabelings()
    assert {r["targetLabel"] for r in written} == set(PROMETHEUS_LABELS.values())
    assert {
        "sourceLabels": ["__meta_kubernetes_pod_label_frontier_dev_target"],
        "targetLabel": "frontier_target",
        "action": "replace",
    } in written
