"""The safety margin, the SLO checks, the bisection and the objective's ranking."""

from __future__ import annotations

import math
from dataclasses import replace
from statistics import NormalDist

import pytest
from hypothesis import given
from hypothesis import strategies as st

from frontier_operator.perf.types import Percentiles, Prediction, Role, RoleDeployment, ServingConfig, WorkerConfig
from frontier_operator.planner.choose import (
    MIN_MARGIN,
    check_slos,
    covering_margin,
    largest_passing,
    objective_key,
    rank,
    safety_margin,
    slo_margin,
    worst_ratio,
)
from frontier_operator.planner.types import Evaluated, Objective, SloBound, SloMetric
from planner_support import FakePredictor, model, pool

TPOT_20MS = SloBound(SloMetric.TPOT, 50, 0.020)
TTFT_2S = SloBound(SloMetric.TTFT, 99, 2.0)


def test_margin_shrinks_as_calibration_confidence_grows() -> None:
    margins = [safety_margin(0.10, confidence) for confidence in (0.0, 0.5, 1.0)]
    assert margins[0] > margins[1] > margins[2] >= MIN_MARGIN
    assert safety_margin(0.10, 1.0) > 0  # confidence tightens the margin, never removes it


def test_margin_grows_with_the_model_error() -> None:
    assert safety_margin(0.20, 0.0) > safety_margin(0.10, 0.0)
    assert safety_margin(0.0, 0.0) == MIN_MARGIN


@pytest.mark.parametrize("sigma", [0.05, 0.15, 0.4, 0.8])
def test_margin_covers_nine_in_ten_log_normal_errors(sigma: float) -> None:
    # The model's error is multiplicative: measured = predicted · exp(ε), ε ~ N(0, σ). A prediction kept under
    # limit / (1 + margin) then meets the limit with probability P(ε ≤ log(1 + margin)) = 90 %.
    margin = safety_margin(sigma, 0.0)
    assert NormalDist(0.0, sigma).cdf(math.log1p(margin)) == pytest.approx(0.90, abs=1e-3)


def test_each_slo_gets_the_margin_of_its_own_metric() -> None:
    # TTFT is predicted far less accurately than TPOT: its SLO keeps a wide margin, TPOT's a narrow one.
    shaky_ttft = replace(prediction(0.010, 1.0), ttft_uncertainty=0.5, tpot_uncertainty=0.1)
    tpot_check, ttft_check = check_slos([TPOT_20MS, TTFT_2S], shaky_ttft)
    assert ttft_check.margin == pytest.approx(safety_margin(0.5, 0.0))
    assert tpot_check.margin == pytest.approx(safety_margin(0.1, 0.0))
    assert ttft_check.required_s == pytest.approx(2.0 / (1 + ttft_check.margin))
    e2e = SloBound(SloMetric.E2E, 99, 30.0)
    assert slo_margin(shaky_ttft, e2e, 0.0) == ttft_check.margin  # end-to-end carries the larger error
    # A predictor that gives only the overall figure: every metric uses it.
    overall = prediction(0.010, 1.0)
    assert {check.margin for check in check_slos([TPOT_20MS, TTFT_2S], overall)} == {safety_margin(0.1, 0.0)}


def test_a_measured_underprediction_quantile_sets_the_margin() -> None:
    # Held out, TTFT came in at most 40 % above its prediction in nine rows of ten: the TTFT margin lifts the
    # prediction by exactly that; TPOT erred on the slow side in nine of ten (negative): the floor margin.
    measured = replace(
        prediction(0.010, 1.0),
        ttft_uncertainty=0.5,
        tpot_uncertainty=0.1,
        ttft_underprediction_q90=math.log(1.4),
        tpot_underprediction_q90=-0.05,
    )
    tpot_check, ttft_check = check_slos([TPOT_20MS, TTFT_2S], measured)
    assert ttft_check.margin == pytest.approx(0.4)
    assert tpot_check.margin == MIN_MARGIN
    assert covering_margin(math.log(1.4), 1.0) < covering_margin(math.log(1.4), 0.0)  # confidence shrinks it
    assert covering_margin(math.log(1.4), 1.0) >= MIN_MARGIN


def prediction(tpot_s: float, ttft_s: float, cost: float = 1.0, capacity: float = 10.0) -> Prediction:
    memory = FakePredictor().memory_fit(model("Llama-3.1-70B-Instruct"), pool().gpu, worker(), 1300)
    return Prediction(
        ttft=Percentiles(ttft_s / 2, ttft_s / 1.5, ttft_s / 1.2, ttft_s),
        tpot=Percentiles(tpot_s, tpot_s, tpot_s, tpot_s),
        itl=Percentiles(tpot_s, tpot_s, tpot_s, tpot_s),
        e2e=Percentiles(1, 1, 1, 1),
        mean_batch=8,
        max_request_rate_per_s=capacity,
        output_tokens_per_s_per_gpu=100,
        output_tokens_per_s_per_user=1 / tpot_s,
        cost_per_mtok=cost,
        memory=memory,
        uncertainty=0.1,
    )


def worker(tp: int = 4) -> WorkerConfig:
    return WorkerConfig("H200", 8, "fp8", "bf16", tp, 64, 8192)


def test_checks_apply_the_margin() -> None:
    margin = 0.10
    just_under = check_slos([TPOT_20MS], prediction(0.0181, 1.0), margin)[0]
    just_over = check_slos([TPOT_20MS], prediction(0.0183, 1.0), margin)[0]
    assert just_under.met and not just_over.met  # the limit less 10 % is 18.18 ms
    assert just_over.headroom_pct > 0  # under the raw limit, yet rejected: that is the margin at work
    assert worst_ratio([just_under]) <= 1 < worst_ratio([just_over])


def test_every_percentile_is_checked() -> None:
    checks = check_slos([TPOT_20MS, TTFT_2S], prediction(0.010, 2.5), 0.05)
    assert [check.met for check in checks] == [True, False]


@given(st.integers(min_value=0, max_value=40), st.integers(min_value=-1, max_value=40))
def test_largest_passing_finds_the_knee_with_few_probes(count: int, knee: int) -> None:
    knee = min(knee, count - 1)
    probes: list[int] = []

    def passes(index: int) -> bool:
        probes.append(index)
        return index <= knee

    assert largest_passing(count, passes) == knee
    assert len(probes) <= max(1, count.bit_length() + 1)


def evaluated(cost: float, gpus: int, quality: float = 0.0, feasible: bool = True, tpot_s: float = 0.010) -> Evaluated:
    target = pool()
    config = ServingConfig("m", (RoleDeployment(Role.UNIFIED, worker(), gpus // 4),))
    result = prediction(tpot_s, 1.0, cost=cost)
    return Evaluated(
        config=config,
        pool=target,
        prediction=result,
        techniques=frozenset(),
        checks=check_slos([TPOT_20MS], result, 0.1),
        margin=0.1,
        knee=None,
        allowed=True,
        within_budget=feasible,
        sustains_rate=True,
        quality_loss_pct=quality,
    )


def test_minimize_cost_prefers_cheaper_then_lower_quality_loss() -> None:
    cheap = evaluated(1.0, 8, quality=0.5)
    cheap_exact = evaluated(1.0, 8, quality=0.0)
    dear = evaluated(2.0, 4)
    assert rank(Objective.MINIMIZE_COST, [dear, cheap, cheap_exact]) == [cheap_exact, cheap, dear]


def test_minimize_gpus_prefers_fewer_gpus() -> None:
    few, many = evaluated(2.0, 4), evaluated(1.0, 8)
    assert rank(Objective.MINIMIZE_GPUS, [many, few])[0] is few


def test_minimize_latency_prefers_headroom() -> None:
    fast, slow = evaluated(2.0, 8, tpot_s=0.005), evaluated(1.0, 8, tpot_s=0.015)
    assert rank(Objective.MINIMIZE_LATENCY, [slow, fast])[0] is fast


def test_maximize_throughput_prefers_capacity_per_gpu() -> None:
    small = evaluated(2.0, 4)
    big = replace(evaluated(1.0, 8), prediction=replace(prediction(0.010, 1.0), max_request_rate_per_s=10.0))
    # 10 req/s on 4 GPUs beats 10 req/s on 8.
    assert rank(Objective.MAXIMIZE_THROUGHPUT, [big, small])[0] is small


def test_rank_drops_what_is_not_feasible() -> None:
    over_budget = evaluated(0.5, 8, feasible=False)
    too_slow = evaluated(0.5, 8, tpot_s=0.030)
    fine = evaluated(1.0, 8)
    assert rank(Objective.MINIMIZE_COST, [over_budget, too_slow, fine]) == [fine]
    assert objective_key(Objective.MINIMIZE_COST, fine)[0] == 1.0
