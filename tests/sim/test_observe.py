"""Windows of the twin as `Observation`s: exact percentiles, and None — never 0 — for missing data."""

from __future__ import annotations

import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_operator.perf.types import Role
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.observe import observe, observe_window, percentile, weighted_percentiles
from frontier_operator.sim.records import itl_bin
from frontier_operator.tuning.observation import Variant
from sim.twin_fakes import FakeTruth, disaggregated, unified, workload


@given(st.lists(st.floats(min_value=0, max_value=1e4, allow_nan=False), min_size=2, max_size=60))
def test_percentiles_are_numpys_linear_rule(values: list[float]) -> None:
    # statistics' "inclusive" quantiles are numpy's default ("linear") percentiles.
    ordered = sorted(values)
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    for q in (50, 90, 95, 99):
        assert percentile(ordered, q) == pytest.approx(cuts[q - 1], rel=1e-9, abs=1e-9)
    assert percentile([3.0], 99) == 3.0


def test_weighted_percentiles_follow_the_weights() -> None:
    bins = {itl_bin(0.010): 98.0, itl_bin(0.200): 2.0}
    result = weighted_percentiles(bins)
    assert result is not None
    assert result.p50 == pytest.approx(0.010, rel=0.01)
    assert result.p99 == pytest.approx(0.200, rel=0.01)
    assert weighted_percentiles({}) is None


def test_an_idle_fleet_reports_zero_traffic_but_no_latencies() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(0.0), seed=1)
    fleet.advance(120)
    group = observe(fleet, 60).group(Role.UNIFIED)
    assert group is not None
    assert group.request_rate_per_s == 0.0 and group.samples == 0
    assert group.ttft is None and group.tpot is None and group.itl is None and group.e2e is None
    assert group.cache_hit_rate is None and group.spec_accept_length is None
    assert group.running_requests == 0.0
    assert group.kv_usage is None  # the fake truth does not bound the KV cache


def test_groups_without_pods_are_absent() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(1), workload(2), seed=2)
    fleet.advance(100)
    observation = observe(fleet, 50)
    assert observation.group(Role.UNIFIED, Variant.CANARY) is None
    assert observation.group(Role.DECODE) is None
    with pytest.raises(ValueError):
        observe_window(fleet, 50, 50)


def test_pd_roles_report_their_own_view() -> None:
    fleet = FleetSimulation(FakeTruth(), disaggregated(1, 2), workload(3), seed=3)
    fleet.advance(300)
    observation = observe(fleet, 200)
    prefill, decode = observation.group(Role.PREFILL), observation.group(Role.DECODE)
    assert prefill is not None and decode is not None
    assert prefill.ttft is not None and prefill.tpot is None and prefill.itl is None
    assert decode.ttft is not None and decode.tpot is not None and decode.itl is not None
    assert decode.ttft.p50 > prefill.ttft.p50  # the client's first token comes after the hand-over
    assert prefill.cache_hit_rate is not None and decode.cache_hit_rate is None
    assert decode.request_rate_per_s == pytest.approx(3, rel=0.2)
    assert decode.mean_output_tokens == pytest.approx(200)
    assert prefill.mean_input_tokens == pytest.approx(1000)


def test_window_rates_count_what_finished_in_the_window() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(5), seed=4)
    fleet.advance(1000)
    group = observe_window(fleet, 400, 1000).group(Role.UNIFIED)
    assert group is not None
    assert fleet.observe_window(400, 1000) == observe_window(fleet, 400, 1000)
    assert fleet.observe(600) == observe_window(fleet, 400, 1000)
    finished = fleet.ledger.group((Role.UNIFIED, Variant.STABLE)).completions.window(400, 1000)
    assert group.samples == len(finished)
    assert group.request_rate_per_s == pytest.approx(len(finished) / 600)
    assert group.output_tokens_per_s == pytest.approx(sum(c.generated_tokens for c in finished) / 600)
