"""The oracle finds the cheapest fleet the truth lets meet the SLO, by simulation."""

from __future__ import annotations

from typing import TypedDict

import pytest

from frontier_operator.perf.types import Role
from frontier_operator.planner.types import SloBound, SloMetric
from frontier_operator.sim.changes import with_replicas
from frontier_operator.sim.oracle import (
    check_config,
    cost_per_mtok,
    find_oracle,
    replica_capacity,
)
from sim.twin_fakes import FakeTruth, LinearTiming, capacity_rate, disaggregated, unified, workload

SLOS = (SloBound(SloMetric.TPOT, 50, 0.020), SloBound(SloMetric.TTFT, 99, 1.0))


class _Durations(TypedDict):
    warmup_s: float
    measure_s: float
    window_s: float


FAST: _Durations = {"warmup_s": 120.0, "measure_s": 600.0, "window_s": 300.0}


def test_cost_per_mtok_is_the_planners_definition() -> None:
    load = workload(10)  # 10 requests/s × 200 tokens = 2000 tokens/s
    assert cost_per_mtok(unified(3), load, 2.0) == pytest.approx(3 * 2.0 / 3600 / 2000 * 1e6)
    assert cost_per_mtok(unified(3), load, {"H100": 4.0}) == pytest.approx(2 * cost_per_mtok(unified(3), load, 2.0))


def test_capacity_bound_matches_the_transparent_truth() -> None:
    entry, decode = replica_capacity(FakeTruth(), unified(1), workload(1))
    assert entry == decode == pytest.approx(capacity_rate(LinearTiming(), 1000, 200), rel=0.01)


def test_the_oracle_is_the_smallest_fleet_that_passes() -> None:
    truth = FakeTruth(default=LinearTiming(noise=0.03))
    load = workload(20, cv=0.3)
    result = find_oracle(truth, [unified(1)], load, SLOS, 2.0, max_gpus=16, **FAST)
    assert result.config is not None and not result.exhausted
    replicas = result.config.roles[0].replicas
    assert replicas >= 2
    assert check_config(truth, result.config, load, SLOS, **FAST)[0]
    smaller = with_replicas(result.config, Role.UNIFIED, replicas - 1)
    assert not check_config(truth, smaller, load, SLOS, **FAST)[0]
    assert result.cost_per_mtok == pytest.approx(cost_per_mtok(result.config, load, 2.0))


def test_cheaper_layouts_win_and_hopeless_ones_are_skipped() -> None:
    truth = FakeTruth(refuse_gpu="B200")
    load = workload(8)
    strict = (SloBound(SloMetric.TPOT, 50, 0.005),)  # below one request's decode step (10 ms)
    hopeless = find_oracle(truth, [unified(1)], load, strict, 2.0, **FAST)
    assert hopeless.config is None
    assert "above the per-token SLO" in hopeless.checks[0].reason
    candidates = [unified(1, gpu="B200"), disaggregated(1, 1), unified(1)]
    result = find_oracle(truth, candidates, load, SLOS, 2.0, max_gpus=8, **FAST)
    assert any("B200" in check.reason for check in result.checks)
    assert result.config is not None
    simulated = [c for c in result.checks if "B200" not in c.reason]
    # Fleets are tried cheapest first and the search stops at the first that passes.
    assert [c.cost_per_mtok for c in simulated] == sorted(c.cost_per_mtok for c in simulated)
    assert simulated[-1].met and not any(c.met for c in simulated[:-1])


def test_a_budget_that_is_too_small_finds_nothing() -> None:
    result = find_oracle(FakeTruth(), [unified(1)], workload(40), SLOS, 2.0, max_gpus=2, **FAST)
    assert result.config is None and not result.exhausted
