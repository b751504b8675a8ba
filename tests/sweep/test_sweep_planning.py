"""What a finished sweep changes for the operator: plans made with the measured points (the controller's plan
cache keyed on them), and the status while the first deployment waits for a sweep (`reconcile.core.Deferred`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from frontier_operator.api.status import ConditionStatus, ConditionType, FrontierTargetStatus
from frontier_operator.controller import _planned
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan
from frontier_operator.reconcile.core import Deferred, ReconcileInput, reconcile
from frontier_operator.sweep.choose import make_point, operating_level
from frontier_operator.sweep.predictor import SweepPredictor
from frontier_operator.sweep.results import parse_benchmark_result
from frontier_operator.sweep.store import encode_points
from frontier_operator.sweep.types import SweepMeasurement, SweepReason, SweepSettings
from frontier_operator.sweep.units import measured_unit
from frontier_operator.sweeping import measured_points, planning_predictor
from sweep_support import model, planned_examples

CASE = "llama-70b-chat"


def _result(point: Any, tpot_factor: float) -> dict[str, Any]:
    """A benchmark result line for `point` whose TPOT is `tpot_factor` × the model's (TTFT as predicted)."""
    p = point.predicted
    line: dict[str, Any] = {
        "max_concurrency": point.concurrency,
        "completed": point.num_prompts,
        "duration": point.run_s,
        "request_throughput": p.request_rate_per_s,
        "output_throughput": p.output_tokens_per_s,
        "random_input_len": int(point.input_tokens),
        "random_output_len": int(point.output_tokens),
        "random_range_ratio": 1.0,
    }
    for metric, p50, p90 in (
        ("ttft", p.ttft_p50_s, p.ttft_p90_s),
        ("tpot", p.tpot_p50_s * tpot_factor, p.tpot_p90_s * tpot_factor),
        ("itl", p.tpot_p50_s * tpot_factor, p.tpot_p90_s * tpot_factor),
    ):
        line |= {
            f"mean_{metric}_ms": p50 * 1e3,
            f"median_{metric}_ms": p50 * 1e3,
            f"p90_{metric}_ms": p90 * 1e3,
            f"p99_{metric}_ms": p90 * 1.2e3,
        }
    return line


def _measured(tpot_factor: float) -> tuple[Any, list[SweepMeasurement]]:
    case = next(p for p in planned_examples() if p.name == CASE)
    chosen = case.plan.chosen
    point = make_point(
        measured_unit(chosen.config),
        chosen.pool,
        request=case.request,
        predictor=model(),
        concurrency=operating_level(chosen, SweepSettings()),
        reason=SweepReason.CHOSEN,
        detail="test",
        settings=SweepSettings(),
    )
    assert point is not None
    return case, [parse_benchmark_result(_result(point, tpot_factor), point)]


def test_without_measured_points_the_operator_plans_with_the_model() -> None:
    assert measured_points("") == ()
    assert measured_points("not a sweep document") == ()
    assert planning_predictor("") == PerformanceModel.default()


def test_measured_points_change_the_plan_the_controller_makes_and_key_its_cache() -> None:
    case, measurements = _measured(tpot_factor=1.6)
    document = encode_points(measurements)
    assert isinstance(planning_predictor(document), SweepPredictor)
    stored = measured_points(document)
    expected = make_plan(case.request, SweepPredictor(model(), stored))
    with_points = _planned(case.target.spec, None, document)
    without = _planned(case.target.spec, None)
    assert isinstance(with_points.result, Plan) and isinstance(without.result, Plan) and isinstance(expected, Plan)
    assert with_points.result == expected
    assert without.result == case.plan
    # A TPOT measured 60 % above the model's moves the decision: another choice, or the same one predicted slower.
    before, after = without.result.chosen, with_points.result.chosen
    assert (before.config, before.prediction.tpot.p50) != (after.config, after.prediction.tpot.p50)
    assert with_points.predictor is planning_predictor(document)


def test_while_the_first_deployment_waits_for_its_sweep_nothing_is_applied_and_status_says_why() -> None:
    case = next(p for p in planned_examples() if p.name == CASE)
    inputs = ReconcileInput(
        spec=case.target.spec,
        outcome=Deferred(case.plan, "Sweeping", "the first deployment waits for the sweep before it"),
        observed=(),
        current=FrontierTargetStatus(),
        generation=1,
        now="2026-11-30T08:00:00Z",
        force_apply=True,
    )
    result = reconcile(inputs)
    assert result.apply == () and result.prune == ()
    by_type = {c.type: c for c in result.status.conditions}
    assert by_type[ConditionType.PROGRESSING].status is ConditionStatus.TRUE
    assert by_type[ConditionType.PROGRESSING].reason == "Sweeping"
    assert by_type[ConditionType.PLAN_FEASIBLE].status is ConditionStatus.TRUE
    assert by_type[ConditionType.READY].status is ConditionStatus.FALSE
    assert result.status.frontier, "the predicted frontier is shown while waiting"
    assert result.status.plan is None and result.status.applied_revision is None
    # Level-triggered: the same step again changes nothing.
    again = reconcile(replace(inputs, current=result.status))
    assert again.status == result.status and again.events == ()
