"""Sweep planning: within the budget, the chosen configuration first, reasons for everything, no repeats.

Figures of the model move as it is recalibrated, so these tests check properties, not numbers.
"""

from __future__ import annotations

import math

import pytest

from frontier_operator.sim.sweep import twin_measure
from frontier_operator.sweep.choose import (
    chance_cheaper,
    normal_cdf,
    operating_level,
    plan_sweep,
    warmup_gpu_minutes,
)
from frontier_operator.sweep.loop import search_candidates
from frontier_operator.sweep.predict import predict_at_concurrency
from frontier_operator.sweep.types import SweepPlan, SweepReason, SweepSettings
from frontier_operator.sweep.units import measured_unit, nearest_level, unit_counts, unit_key
from sweep_support import model, planned_examples, sweep_of, table_setup

NAMES = [case.name for case in planned_examples()]
BUDGETS = (0.0, 30.0, 120.0, 1000.0)


def _estimated(sweep: SweepPlan) -> float:
    settings = SweepSettings()
    first = {}
    for point in sweep.points:
        first.setdefault(point.key, point)
    return sum(warmup_gpu_minutes(p, settings) for p in first.values()) + sum(p.run_gpu_minutes for p in sweep.points)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("budget", BUDGETS)
def test_the_sweep_stays_within_its_budget(name: str, budget: float) -> None:
    sweep = sweep_of(name, budget)
    assert _estimated(sweep) == pytest.approx(sweep.gpu_minutes, rel=1e-9, abs=1e-9)
    assert sweep.gpu_minutes <= budget + 1e-9
    assert sweep.explanation
    pairs = [(p.key, p.concurrency) for p in sweep.points]
    assert len(pairs) == len(set(pairs))
    for point in sweep.points:
        assert point.detail
        assert point.num_prompts >= max(200, point.concurrency)
        assert point.run_gpu_minutes > 0


@pytest.mark.parametrize("name", NAMES)
def test_the_chosen_configuration_is_measured_first(name: str) -> None:
    case = next(p for p in planned_examples() if p.name == name)
    sweep = sweep_of(name, 1000.0)
    assert sweep.points, sweep.explanation
    assert sweep.points[0].key == unit_key(case.plan.chosen.config)
    assert sweep.points[0].reason in (SweepReason.CHOSEN, SweepReason.KNEE)
    chosen = [p for p in sweep.points if p.key == sweep.points[0].key]
    operating = operating_level(case.plan.chosen, SweepSettings())
    if operating not in {p.concurrency for p in chosen}:
        # Measured lower only where the benchmark (no prefix-cache hits) saturates the unit first, and said so.
        fallback = [p for p in chosen if p.reason is SweepReason.CHOSEN]
        assert fallback and fallback[0].concurrency < operating
        assert "saturates below its operating level" in fallback[0].detail
        assert (
            predict_at_concurrency(
                model(),
                case.request.arch,
                pool=case.plan.chosen.pool,
                unit=fallback[0].unit,
                workload=case.request.workload,
                concurrency=operating,
            )
            is None
        )


def test_a_closed_loop_level_past_the_units_capacity_has_no_prediction() -> None:
    case = next(p for p in planned_examples() if p.name == "llama-70b-chat")
    unit = measured_unit(case.plan.chosen.config)
    pool = case.plan.chosen.pool
    held = predict_at_concurrency(
        model(), case.request.arch, pool=pool, unit=unit, workload=case.request.workload, concurrency=8
    )
    assert held is not None and math.isfinite(held.ttft_p50_s)
    assert (
        predict_at_concurrency(
            model(), case.request.arch, pool=pool, unit=unit, workload=case.request.workload, concurrency=100_000
        )
        is None
    )


@pytest.mark.parametrize("name", NAMES)
def test_a_larger_budget_measures_at_least_as_much(name: str) -> None:
    counts = [len(sweep_of(name, budget).points) for budget in BUDGETS]
    assert counts == sorted(counts)
    assert counts[0] == 0
    assert "nothing to measure" in sweep_of(name, 0.0).explanation[0]


def test_points_already_measured_are_not_measured_again() -> None:
    setup = table_setup()
    sweep = plan_sweep(
        setup.plan, search_candidates(setup.request, setup.predictor), setup.request, setup.predictor, 60.0
    )
    measure = twin_measure(setup.target, setup.truth, setup.request.workload)
    done = list(measure([p for p in sweep.points if p.key == sweep.points[0].key]))
    assert done
    again = plan_sweep(
        setup.plan,
        search_candidates(setup.request, setup.predictor),
        setup.request,
        setup.predictor,
        60.0,
        measured=done,
    )
    assert not {(m.key, m.concurrency) for m in done} & {(p.key, p.concurrency) for p in again.points}


def test_flip_probability_is_a_coin_toss_at_equal_cost_and_falls_with_the_gap() -> None:
    case = planned_examples()[0]
    chosen = case.plan.chosen
    assert chance_cheaper(chosen, chosen, 0.3, 0.3) == pytest.approx(0.5)
    others = [
        c
        for c in search_candidates(case.request, model())
        if c.prediction.cost_per_mtok > chosen.prediction.cost_per_mtok
    ]
    for other in others[:5]:
        assert chance_cheaper(other, chosen, 0.3, 0.3) < 0.5
        assert chance_cheaper(other, chosen, 0.03, 0.03) <= chance_cheaper(other, chosen, 0.3, 0.3)
    assert normal_cdf(0.0) == pytest.approx(0.5)


def test_units_and_levels() -> None:
    for case in planned_examples():
        config = case.plan.chosen.config
        unit = measured_unit(config)
        assert unit_key(unit) == unit_key(config)
        assert all(r.replicas >= 1 for r in unit.roles)
        assert unit.total_gpus <= config.total_gpus
        assert len(unit_counts(config)) == len(config.roles)
    assert nearest_level(30, (1, 2, 4, 8, 16, 32, 64), 64) == 32
    assert nearest_level(100, (1, 2, 4, 8, 16, 32, 64, 128), 64) == 64
    assert nearest_level(0.2, (1, 2, 4), 4) == 1
