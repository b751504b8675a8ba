"""Measured capacity and the structural remedy: a saturated role teaches the calibration its real capacity, and a
violation that no in-place step within the GPU budget can clear is answered by a canary judged on the SLO."""

from __future__ import annotations

import math
from dataclasses import replace

from frontier_operator.perf.types import Role, ServingConfig
from frontier_operator.tuning.actions import (
    CanaryMotive,
    Decision,
    Hold,
    NoAction,
    PromoteCanary,
    RollbackCanary,
    RollbackCause,
    ScaleReplicas,
    StartCanary,
)
from frontier_operator.tuning.calibration import CalibrationState, CapacityEstimate, update_calibration
from frontier_operator.tuning.canary import canary_fleet
from frontier_operator.tuning.decisions import decide
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant
from frontier_operator.tuning.predictor import CalibratedPredictor
from frontier_operator.tuning.state import CanaryState
from frontier_operator.tuning.structure import layout_key, same_structure
from frontier_operator.tuning.workload import demand
from planner_support import FakePredictor
from tuning_support import (
    NOW,
    POLICY,
    WORKLOAD,
    Truth,
    applied,
    base_plan,
    context,
    group,
    observation,
    runner_up,
    scenario_request,
    the_pool,
)

PLAN = base_plan().chosen.config  # fp8 TP2 cap 32 ×5: 10 of the pool's 32 GPUs
TP2 = layout_key(PLAN.roles[0].worker)
TP4_FLEET = runner_up(0)  # TP4 ×3, another parallel layout
TP4 = layout_key(TP4_FLEET.roles[0].worker)
# The plan's fleet as the model sizes it (requests/s it sustains).
MODELLED = base_plan().chosen.prediction.max_request_rate_per_s


def _saturated(rate: float, **fields: object) -> GroupObservation:
    """The plan's fleet serving `rate` with 2 000 requests queued behind 100 running: at its limit."""
    return replace(group(ttft_p99=60.0, tpot_p50=0.035, rate=rate, running=100.0, queued=2000.0), **fields)  # type: ignore[arg-type]


def _learn(state: CalibrationState, seen: GroupObservation, config: ServingConfig = PLAN) -> CalibrationState:
    raw = Truth().model_prediction(config, WORKLOAD)
    return update_calibration(
        state, observation(seen), config, raw, NOW, role_capacities={Role.UNIFIED: raw.max_request_rate_per_s}
    )


def _with_capacity(*factors: tuple[str, float]) -> CalibrationState:
    return CalibrationState(
        capacities=tuple(
            CapacityEstimate(Role.UNIFIED, key, math.log(f), 1e-4, 0.0625, math.log(f)) for key, f in factors
        )
    )


# ------------------------------------------------------------------------------------------- learning


def test_a_saturated_role_teaches_its_capacity() -> None:
    state = _learn(CalibrationState(), _saturated(rate=1.0))
    estimate = state.capacity(Role.UNIFIED, TP2)
    assert estimate is not None
    # It served 1 request/s where the model sustains 4.4: about 4.4 times the modelled service time.
    assert 0.9 * MODELLED < estimate.factor < 1.1 * MODELLED
    (drift,) = state.capacity_drift
    assert drift.role is Role.UNIFIED and "capacity" in drift.message


def test_the_calibrated_model_then_knows_the_fleet_is_saturated() -> None:
    state = _learn(CalibrationState(), _saturated(rate=1.0))
    pool = the_pool()
    predicted = CalibratedPredictor(FakePredictor(), state).predict(
        scenario_request().arch, pool.gpu, PLAN, WORKLOAD, pool.price_per_gpu_hour
    )
    assert 0.9 < predicted.max_request_rate_per_s < 1.1
    assert math.isinf(predicted.ttft.p99)  # 4 requests/s offered to a fleet that serves 1


def test_a_role_serving_below_its_capacity_without_a_queue_teaches_nothing() -> None:
    state = _learn(CalibrationState(), group(rate=1.0, queued=0.0))
    assert state.capacities == ()


def test_a_busy_but_stable_queue_teaches_nothing() -> None:
    # More queued than running, but 8 requests at 4 requests/s wait two seconds, not minutes.
    state = _learn(CalibrationState(), group(rate=4.0, running=5.0, queued=8.0))
    assert state.capacities == ()


def test_the_queue_of_pods_being_retired_teaches_nothing() -> None:
    # Seven pods for five replicas: a retired revision's pods still drain what they queued.
    state = _learn(CalibrationState(), _saturated(rate=1.0, pods=7.0))
    assert state.capacities == ()


def test_a_role_serving_more_than_its_corrected_capacity_lowers_the_factor() -> None:
    state = _learn(_with_capacity((TP2, 4.0)), group(rate=3.0, queued=0.0))
    estimate = state.capacity(Role.UNIFIED, TP2)
    assert estimate is not None
    assert estimate.factor < MODELLED / 3.0 * 1.1  # at most about what serving 3 requests/s allows


def test_a_saturated_fleet_is_sized_for_no_less_than_the_planned_rate() -> None:
    served = replace(WORKLOAD, request_rate_per_s=1.0)
    assert demand(served, 4.0, saturated=True).request_rate_per_s == 4.0
    assert demand(served, 4.0, saturated=False).request_rate_per_s == 1.0
    assert demand(replace(WORKLOAD, request_rate_per_s=5.0), 4.0, saturated=True).request_rate_per_s == 5.0


# -------------------------------------------------------------------------------------------- remedy


def test_a_violation_no_replica_count_within_the_budget_clears_starts_a_remedy_canary() -> None:
    # The TP2 layout serves a quarter of what the model says: 16 replicas (the whole 32-GPU pool) would carry
    # 3.5 of the 4 requests/s planned.
    model = context(calibration=_with_capacity((TP2, 4.0)))
    decision = decide(observation(_saturated(rate=1.1)), applied(), model, POLICY, NOW)
    action = decision.action
    assert isinstance(action, StartCanary), decision
    assert action.motive is CanaryMotive.REMEDY
    assert not same_structure(action.config, PLAN)
    # The canary takes the target Service's share: its one entry pod of two.
    assert action.share == 0.5
    assert "no in-place step within the 32-GPU budget" in decision.reason
    # Behind a weighted route, what the stable fleet cannot carry: more than the default tenth, at most half.
    weighted = decide(
        observation(_saturated(rate=1.1)),
        applied(),
        replace(model, weighted_route=True),
        POLICY,
        NOW,
    ).action
    assert isinstance(weighted, StartCanary) and weighted.motive is CanaryMotive.REMEDY
    assert 0.1 < weighted.share <= 0.5


def test_a_violation_replicas_can_clear_within_the_budget_is_answered_in_place() -> None:
    model = context(calibration=_with_capacity((TP2, 1.5)))
    decision = decide(observation(_saturated(rate=2.9)), applied(), model, POLICY, NOW)
    assert isinstance(decision.action, ScaleReplicas), decision


def _remedy_in_flight(model_calibration: CalibrationState, canary_group: GroupObservation) -> Decision:
    canary = CanaryState(
        revision="rev-canary",
        config=TP4_FLEET,
        deployed=canary_fleet(TP4_FLEET, 0.5),
        pool="h200",
        share=0.5,
        motive=CanaryMotive.REMEDY,
        started_at=NOW - 3000.0,
        ready_at=NOW - 2000.0,
    )
    seen = Observation(
        window_start=NOW - 300.0,
        window_end=NOW,
        groups=(_saturated(rate=1.1), canary_group),
    )
    return decide(seen, applied(canary=canary), context(calibration=model_calibration), POLICY, NOW)


def test_a_remedy_canary_that_keeps_the_slo_the_stable_fleet_breaks_is_promoted_whatever_it_costs() -> None:
    decision = _remedy_in_flight(_with_capacity((TP2, 4.0)), group(variant=Variant.CANARY, rate=2.0))
    assert isinstance(decision.action, PromoteCanary), decision


def test_a_remedy_canary_that_does_no_better_is_rolled_back() -> None:
    # Its own layout is measured even slower: its full fleet would carry less than the stable one.
    calibration = _with_capacity((TP2, 4.0), (TP4, 8.0))
    decision = _remedy_in_flight(calibration, group(variant=Variant.CANARY, rate=2.0))
    action = decision.action
    assert isinstance(action, RollbackCanary), decision
    assert action.cause is RollbackCause.SLO_BREACH
    assert "does no better" in decision.reason


def test_a_remedy_canary_that_breaks_the_slo_itself_is_rolled_back() -> None:
    broken = group(variant=Variant.CANARY, rate=2.0, ttft_p99=30.0)
    decision = _remedy_in_flight(_with_capacity((TP2, 4.0)), broken)
    action = decision.action
    assert isinstance(action, RollbackCanary), decision


def test_a_violation_in_a_window_pods_being_retired_served_in_waits_for_the_fleet_in_force() -> None:
    # Seven pods for five replicas: a promoted canary's predecessors still serve out their queue.
    seen = observation(_saturated(rate=1.1, pods=7.0))
    decision = decide(seen, applied(), context(calibration=_with_capacity((TP2, 4.0))), POLICY, NOW)
    assert isinstance(decision.action, NoAction) and decision.action.hold is Hold.COOLDOWN, decision
    assert "being retired" in decision.reason
