"""The calibrated predictor under load: first tokens wait in the corrected fleet's queue, not the raw model's, and
past the raw model's knee the decode is the raw one's without its batch cap, scaled by the learnt factor."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import yaml

from closed_loop_support import closed_loop_target
from frontier_operator.api import parse_target
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import Prediction, Role, ServingConfig, Workload
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan, PlanRequest
from frontier_operator.tuning.calibration import CalibrationState, Estimate, LatencyMetric
from frontier_operator.tuning.predictor import CalibratedPredictor, learning_reference
from frontier_operator.tuning.structure import (
    UNBOUNDED_CAP,
    latency_role,
    structure_key,
    with_batch_cap,
    with_replicas,
)
from operator_support import EXAMPLES

MODEL = PerformanceModel.default()


def _request(example: str, **workload: float) -> PlanRequest:
    document = yaml.safe_load(EXAMPLES[example].read_text(encoding="utf-8"))
    request = plan_request_from_spec(parse_target(document).spec)
    return replace(request, workload=replace(request.workload, **workload))


def _calibrated(config: ServingConfig, *, ttft: float, tpot: float) -> CalibrationState:
    """Corrections learnt on `config` itself, with no uncertainty left."""
    return CalibrationState(
        estimates=(
            Estimate(latency_role(config, True), LatencyMetric.TTFT, math.log(ttft), 0.0, 0.0, 0.0),
            Estimate(latency_role(config, False), LatencyMetric.TPOT, math.log(tpot), 0.0, 0.0, 0.0),
        ),
        reference=structure_key(config),
    )


def _predict(request: PlanRequest, config: ServingConfig, rate: float, calibration: CalibrationState) -> Prediction:
    pool = request.pools[0]
    workload = replace(request.workload, request_rate_per_s=rate)
    return CalibratedPredictor(MODEL, calibration).predict(
        request.arch, pool.gpu, config, workload, pool.price_per_gpu_hour
    )


def _raw(request: PlanRequest, config: ServingConfig, rate: float) -> Prediction:
    return _predict(request, config, rate, CalibrationState())


def _at(request: PlanRequest, rate: float) -> Workload:
    return replace(request.workload, request_rate_per_s=rate)


def test_a_fleet_faster_than_the_model_queues_its_first_tokens_at_its_own_load() -> None:
    # The e2e test's scenario (Llama-70B at 24-27 requests/s of 150-token answers): TP2 cap 64 ×3, whose decode
    # runs at 0.37× the model's step time. The raw model's capacity is 28 requests/s, the corrected one 76.
    request = plan_request_from_spec(parse_target(closed_loop_target("tests", "http://prometheus:9090")).spec)
    plan = make_plan(request, MODEL)
    assert isinstance(plan, Plan)
    chosen = plan.chosen.config.roles[0]
    worker = replace(chosen.worker, tp=2, max_running_requests=64)
    config = ServingConfig(plan.chosen.config.model, (replace(chosen, worker=worker, replicas=3),))
    raw = _raw(request, config, 26.0)
    assert raw.ttft.p99 > 1.15 and raw.max_request_rate_per_s < 30  # the raw model's knee
    faster = _predict(request, config, 26.0, _calibrated(config, ttft=1.0, tpot=0.37))
    assert faster.max_request_rate_per_s == pytest.approx(raw.max_request_rate_per_s / 0.37)
    # Its first tokens wait as the raw fleet's do at 26 × 0.37 requests/s: 0.43 s p99 where the knee gave 1.20 s.
    assert faster.ttft == _raw(request, config, 26.0 * 0.37).ttft
    assert faster.ttft.p99 < raw.ttft.p99 / 2.5
    # Past the raw knee (its batch cap's) the raw fleet is saturated; the corrected one, carrying 76, holds fewer
    # requests in flight than the raw fleet would without its cap at that rate, whose decode it scales — and
    # learns against. Where even that one is saturated, so is the corrected projection.
    beyond = _predict(request, config, 32.0, _calibrated(config, ttft=1.0, tpot=0.37))
    uncapped = _raw(request, with_batch_cap(config, Role.UNIFIED, UNBOUNDED_CAP), 32.0)
    assert not math.isfinite(_raw(request, config, 32.0).tpot.p50)
    assert beyond.tpot.p50 == pytest.approx(uncapped.tpot.p50 * 0.37)
    assert beyond.tpot.p50 > faster.tpot.p50 and math.isfinite(beyond.ttft.p99)
    one = with_replicas(config, Role.UNIFIED, 1)
    assert not math.isfinite(_predict(request, one, 26.0, _calibrated(one, ttft=1.0, tpot=0.37)).tpot.p50)
    # A fleet 1.1× slower than modelled carries less, and its TTFT factor, learnt at its own load, holds its queue.
    slower = _predict(request, config, 24.0, _calibrated(config, ttft=1.0, tpot=1.1))
    assert slower.max_request_rate_per_s == pytest.approx(_raw(request, config, 24.0).max_request_rate_per_s / 1.1)
    assert slower.ttft == _raw(request, config, 24.0).ttft
    # Learning compares a window with the same queue, so the fleet's own windows are what it predicts.
    pool = request.pools[0]
    calibration = _calibrated(config, ttft=1.0, tpot=0.37)
    reference = learning_reference(MODEL, request.arch, config, pool, _at(request, 26.0), calibration=calibration)
    assert reference is not None and reference.ttft == faster.ttft
    assert reference.tpot == raw.tpot
    past = learning_reference(MODEL, request.arch, config, pool, _at(request, 32.0), calibration=calibration)
    assert past is not None and past.tpot == uncapped.tpot


def test_a_disaggregated_fleets_first_tokens_wait_for_its_prefill_role_which_the_decode_factor_does_not_load() -> None:
    request = _request("glm5-agentic-coding")
    plan = make_plan(request, MODEL)
    assert isinstance(plan, Plan) and plan.chosen.config.disaggregated
    config = with_replicas(plan.chosen.config, Role.DECODE, 2)
    rate = request.workload.request_rate_per_s
    raw = _raw(request, config, rate)
    corrected = _predict(request, config, rate, _calibrated(config, ttft=1.0, tpot=0.5))
    assert corrected.ttft == raw.ttft
    assert corrected.max_request_rate_per_s == pytest.approx(raw.max_request_rate_per_s / 0.5)
