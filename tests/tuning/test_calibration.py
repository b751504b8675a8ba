"""Calibration: convergence, growing confidence, drift, transfer to other configurations, observed workload."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from frontier_operator.perf.types import Percentiles, Role, ServingConfig
from frontier_operator.tuning.calibration import (
    ITL_BUCKETS,
    MAX_TAIL_SPEEDUP,
    TTFT_BUCKETS,
    CalibrationSettings,
    CalibrationState,
    LatencyMetric,
    bucket_resolution,
    measure,
    rebase,
    update_calibration,
)
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant
from frontier_operator.tuning.predictor import CalibratedPredictor
from frontier_operator.tuning.structure import with_replicas
from frontier_operator.tuning.workload import (
    FAST_HALF_LIFE_WINDOWS,
    HALF_LIFE_WINDOWS,
    MIN_REQUESTS_TO_REPLACE,
    WorkloadEstimate,
    averaging_lag_s,
    effective_workload,
    fleet_workload,
    rate_ahead,
    steady_rate,
    update_workload,
    variant_workload,
    workload_shift,
)
from tuning_support import (
    NOW,
    WINDOW_S,
    WORKLOAD,
    Truth,
    base_plan,
    group,
    observation,
    ramp_estimate,
    runner_up,
    scenario_request,
)

# The plan's fleet at 8 replicas: enough capacity that 50 % slower decode steps still carry the traffic
# (with fewer, the truth overloads, and overloaded windows teach calibration nothing).
CONFIG = with_replicas(base_plan().chosen.config, Role.UNIFIED, 8)


def _feed(
    truth: Truth, windows: int, calibration: CalibrationState | None = None, config: ServingConfig = CONFIG
) -> list[CalibrationState]:
    """Back-to-back windows of a fleet under the spec's traffic, folded in one by one; every state on the way.

    As in the loop, the model is asked about the workload each window actually served, its first token queued
    as the state so far says the fleet is loaded.
    """
    states = []
    state = calibration or CalibrationState()
    for index in range(windows):
        end = NOW + WINDOW_S * index
        window = observation(truth.group(config, WORKLOAD, Variant.STABLE), end=end)
        served = variant_workload(window, Variant.STABLE, WORKLOAD)
        assert served is not None
        state = update_calibration(state, window, config, truth.reference(config, served, state), end)
        states.append(state)
    return states


def test_the_correction_converges_to_the_hidden_factor_and_confidence_grows() -> None:
    states = _feed(Truth(ttft_factor=0.8, tpot_factor=1.3, noise=0.05), windows=40)
    final = states[-1]
    tpot = final.estimate(Role.UNIFIED, LatencyMetric.TPOT)
    ttft = final.estimate(Role.UNIFIED, LatencyMetric.TTFT)
    assert tpot is not None and ttft is not None
    assert tpot.factor == pytest.approx(1.3, rel=0.05)
    assert ttft.factor == pytest.approx(0.8, rel=0.08)
    confidences = [state.confidence for state in states]
    assert 0 < confidences[0] < confidences[4] < confidences[-1] <= 1
    assert tpot.sigma < 0.4 * math.sqrt(tpot.prior_variance)


def test_more_requests_make_a_window_count_for_more() -> None:
    predicted = percentiles_of(0.02)
    settings = CalibrationSettings()
    few = measure(percentiles_of(0.024), predicted, 100, ITL_BUCKETS, settings)
    many = measure(percentiles_of(0.024), predicted, 10_000, ITL_BUCKETS, settings)
    assert few is not None and many is not None
    assert many.noise_variance < few.noise_variance
    assert few.log_ratio == pytest.approx(math.log(1.2))


def percentiles_of(p50: float) -> Percentiles:
    return Percentiles(p50, p50 * 1.2, p50 * 1.3, p50 * 1.6)


def test_a_window_already_folded_in_is_not_counted_twice() -> None:
    state = _feed(Truth(tpot_factor=1.3), windows=3)[-1]
    assert state.last_window_end is not None
    again = observation(group(tpot_p50=0.2), end=state.last_window_end)
    assert update_calibration(state, again, CONFIG, Truth().predict(CONFIG, WORKLOAD), NOW) == state


def test_overlapping_windows_count_only_their_fresh_part() -> None:
    truth = Truth(tpot_factor=1.3, noise=0.0)
    prediction = truth.predict(CONFIG, WORKLOAD)
    first = observation(group(tpot_p50=0.04), end=NOW)
    start = update_calibration(CalibrationState(), first, CONFIG, prediction, NOW)
    overlapping = update_calibration(start, observation(group(tpot_p50=0.04), end=NOW + 60), CONFIG, prediction, NOW)
    disjoint = update_calibration(start, observation(group(tpot_p50=0.04), end=NOW + 300), CONFIG, prediction, NOW)
    tpot = LatencyMetric.TPOT
    overlapping_sigma = overlapping.of_metric(tpot).sigma  # type: ignore[union-attr]
    disjoint_sigma = disjoint.of_metric(tpot).sigma  # type: ignore[union-attr]
    assert disjoint_sigma < overlapping_sigma


def test_an_overloaded_window_teaches_nothing() -> None:
    # The model puts this fleet well under its capacity; a window ten times slower with requests queued behind
    # the running ones is an overload or an outage, for the SLO rules to handle, not a model error to learn.
    prediction = Truth().predict(CONFIG, WORKLOAD)
    overloaded = observation(group(tpot_p50=prediction.tpot.p50 * 10, ttft_p99=prediction.ttft.p99 * 10, queued=40.0))
    state = update_calibration(CalibrationState(), overloaded, CONFIG, prediction, NOW)
    assert state.estimates == ()


@pytest.mark.parametrize("queued", [0.0, 11.5])
def test_a_slow_window_with_empty_queues_is_a_model_error_to_learn(queued: float) -> None:
    # Nothing waits (at most a tenth of the running requests): no backlog explains a first token six times later
    # than modelled, so it is the engine's own latency (the Qwen3-32B H100 table with nothing queued) and is
    # learnt, body and tail, instead of being dismissed as an overload.
    prediction = Truth().predict(CONFIG, WORKLOAD)
    slow = observation(group(ttft_p99=prediction.ttft.p99 * 6, queued=queued))
    ttft = update_calibration(CalibrationState(), slow, CONFIG, prediction, NOW).of_metric(LatencyMetric.TTFT)
    assert ttft is not None and ttft.factor > 2.0  # one window moves the prior most of the way
    assert ttft.tail_windows > 0


def test_a_fleet_several_times_faster_than_the_model_is_learnt_not_dismissed() -> None:
    # Faster than modelled is no overload: an engine 3.5x faster is a model error, and a canary that ran so
    # must keep its evidence. Only a window ten times faster is a broken measurement.
    prediction = Truth().predict(CONFIG, WORKLOAD)
    fast = update_calibration(
        CalibrationState(), observation(group(tpot_p50=prediction.tpot.p50 / 3.5)), CONFIG, prediction, NOW
    )
    tpot = fast.of_metric(LatencyMetric.TPOT)
    assert tpot is not None and tpot.factor < 1.0 / 1.5
    broken = observation(group(tpot_p50=prediction.tpot.p50 / 12))
    assert update_calibration(CalibrationState(), broken, CONFIG, prediction, NOW).of_metric(LatencyMetric.TPOT) is None


def test_a_window_with_too_few_requests_teaches_nothing() -> None:
    prediction = Truth().predict(CONFIG, WORKLOAD)
    sparse = observation(group(samples=20))
    state = update_calibration(CalibrationState(), sparse, CONFIG, prediction, NOW)
    assert state.estimates == ()
    assert state.confidence == 0.0


def test_coarse_buckets_limit_what_a_quantile_can_tell() -> None:
    # 1.5 s sits in SGLang's 1–2 s TTFT bucket: ±0.29 s of interpolation error, about 19 % (uniform).
    assert bucket_resolution(1.5, TTFT_BUCKETS) == pytest.approx(1.0 / 1.5 / math.sqrt(12))
    assert bucket_resolution(0.0175, ITL_BUCKETS) == pytest.approx(0.005 / 0.0175 / math.sqrt(12))
    assert bucket_resolution(500.0, TTFT_BUCKETS) == 1.0


def test_drift_is_raised_after_the_configured_number_of_windows_and_cleared_by_a_rebase() -> None:
    states = _feed(Truth(tpot_factor=1.5, noise=0.02), windows=4)
    settings = CalibrationSettings()
    assert [bool(state.drift) for state in states] == [False, False, True, True][: len(states)]
    drift = states[settings.drift_windows - 1].drift[0]
    assert drift.metric is LatencyMetric.TPOT and drift.role is Role.UNIFIED
    assert drift.error == pytest.approx(0.5, abs=0.05)
    assert "TPOT" in drift.message
    rebased = rebase(states[-1])
    assert rebased.drift == ()
    # Against the rebased correction the same truth is no drift any more.
    later = _feed(Truth(tpot_factor=1.5, noise=0.02, seed=11), windows=5, calibration=rebased)
    assert all(not state.drift for state in later)


def test_stationary_noise_never_raises_drift() -> None:
    states = _feed(Truth(tpot_factor=1.1, ttft_factor=0.95, noise=0.06, seed=3), windows=200)
    assert not any(state.drift for state in states)


def test_the_calibrated_predictor_corrects_the_observed_config_fully_and_others_by_the_shared_part() -> None:
    config = CONFIG
    truth = Truth(tpot_factor=1.3, noise=0.02)
    calibration = _feed(truth, windows=30, config=config)[-1]
    raw_predictor = truth.model
    predictor = CalibratedPredictor(raw_predictor, calibration)
    request = scenario_request()
    pool = request.pools[0]
    raw = raw_predictor.predict(request.arch, pool.gpu, config, WORKLOAD, pool.price_per_gpu_hour)
    corrected = predictor.predict(request.arch, pool.gpu, config, WORKLOAD, pool.price_per_gpu_hour)
    assert corrected.tpot.p50 / raw.tpot.p50 == pytest.approx(1.3, rel=0.05)
    assert corrected.max_request_rate_per_s < raw.max_request_rate_per_s
    other = runner_up(0)
    own = predictor.correction(config, LatencyMetric.TPOT)
    shared = predictor.correction(other, LatencyMetric.TPOT)
    assert own is not None and shared is not None
    assert math.log(shared.factor) == pytest.approx(math.log(own.factor) / 2)
    assert own.sigma < shared.sigma < math.sqrt(own.prior_variance)
    # No calibration, no change.
    uncalibrated = CalibratedPredictor(raw_predictor, CalibrationState())
    assert uncalibrated.predict(request.arch, pool.gpu, config, WORKLOAD, pool.price_per_gpu_hour) == raw
    # A fleet whose corrected capacity no longer carries the traffic is reported saturated.
    five = base_plan().chosen.config
    saturated = predictor.predict(request.arch, pool.gpu, five, WORKLOAD, pool.price_per_gpu_hour)
    assert math.isinf(saturated.tpot.p50) and saturated.max_request_rate_per_s < WORKLOAD.request_rate_per_s


def _tail_windows(p99_factors: list[float]) -> CalibrationState:
    """Back-to-back windows at the model's p50 and p90 TTFT whose p99 is each factor × the model's."""
    truth = Truth(noise=0.0)
    prediction = truth.model_prediction(CONFIG, WORKLOAD)
    body = truth.group(CONFIG, WORKLOAD, Variant.STABLE)
    state = CalibrationState()
    for index, factor in enumerate(p99_factors):
        ttft = replace(body.ttft, p99=body.ttft.p99 * factor)  # type: ignore[union-attr]
        end = NOW + WINDOW_S * index
        state = update_calibration(state, observation(replace(body, ttft=ttft), end=end), CONFIG, prediction, end)
    return state


def test_a_p99_heavier_than_the_model_is_learnt_as_its_tail_not_as_the_body() -> None:
    # GLM-5's prefill: p99 TTFT 2.0-2.2 s where the body-corrected model said 1.3-1.7 s; the windows kept missing
    # while the model "predicted the fleet under the limit".
    state = _tail_windows([1.5] * 12)
    ttft = state.of_metric(LatencyMetric.TTFT)
    assert ttft is not None
    assert ttft.factor == pytest.approx(1.0, abs=0.02)
    assert 1.38 < ttft.tail_factor < 1.5  # twelve windows, shrunk by one window's prior
    predictor = CalibratedPredictor(Truth().model, state)
    request = scenario_request()
    pool = request.pools[0]
    raw = Truth().model.predict(request.arch, pool.gpu, CONFIG, WORKLOAD, pool.price_per_gpu_hour)
    corrected = predictor.predict(request.arch, pool.gpu, CONFIG, WORKLOAD, pool.price_per_gpu_hour)
    assert corrected.ttft.p99 / raw.ttft.p99 == pytest.approx(ttft.factor * ttft.tail_factor)
    assert corrected.ttft.p50 / raw.ttft.p50 == pytest.approx(ttft.factor)
    assert corrected.ttft.p90 / raw.ttft.p90 == pytest.approx(ttft.factor)
    assert 1.0 < corrected.ttft.p95 / raw.ttft.p95 / ttft.factor < ttft.tail_factor


def test_the_tail_is_where_nineteen_windows_in_twenty_keep_it_and_starts_near_the_model() -> None:
    steady = _tail_windows([1.5] * 12).of_metric(LatencyMetric.TTFT)
    scattered = _tail_windows([1.2, 1.875] * 6).of_metric(LatencyMetric.TTFT)  # the same geometric mean
    young = _tail_windows([1.5]).of_metric(LatencyMetric.TTFT)
    assert steady is not None and scattered is not None and young is not None
    assert scattered.tail_mean == pytest.approx(steady.tail_mean, rel=0.1)
    assert scattered.tail_factor > steady.tail_factor * 1.2
    # A typical window's tail (what confirms a violation; the error budget counts how often windows exceed it).
    assert scattered.typical_tail_factor == pytest.approx(steady.typical_tail_factor, rel=0.1)
    assert steady.typical_tail_factor == pytest.approx(steady.tail_factor, rel=0.01)  # no spread to add
    assert young.tail_factor == pytest.approx(math.sqrt(1.5), rel=0.01)  # half of the first window


def test_a_p99_far_under_the_model_is_its_queueing_knee_and_leaves_the_tail_alone() -> None:
    # Two TP4 replicas decoding 2.5x faster than modelled, at 24-27 requests/s: the model's p99 TTFT swung 0.44-3.3 s
    # with each window's arrivals while the fleet's stayed at 0.37 s. Learnt, those windows made the spread.
    steady = _tail_windows([1.5] * 6).of_metric(LatencyMetric.TTFT)
    knee = _tail_windows([1.5] * 6 + [0.9 / MAX_TAIL_SPEEDUP]).of_metric(LatencyMetric.TTFT)
    lighter = _tail_windows([1.5] * 6 + [1.1 / MAX_TAIL_SPEEDUP]).of_metric(LatencyMetric.TTFT)
    assert steady is not None and knee is not None and lighter is not None
    assert (knee.tail_mean, knee.tail_variance, knee.tail_windows) == (
        steady.tail_mean,
        steady.tail_variance,
        steady.tail_windows,
    )
    # A p99 under the model by less than `MAX_TAIL_SPEEDUP` is the fleet's, and learnt.
    assert lighter.tail_mean < steady.tail_mean and lighter.tail_variance > steady.tail_variance


def test_a_new_reference_configuration_inherits_a_transferred_prior() -> None:
    learnt = _feed(Truth(tpot_factor=1.3, noise=0.02), windows=30)[-1]
    other = runner_up(0)
    prediction = Truth().predict(other, WORKLOAD)
    later = NOW + WINDOW_S * 30
    moved = update_calibration(learnt, observation(group(samples=0), end=later), other, prediction, later)
    tpot = moved.of_metric(LatencyMetric.TPOT)
    before = learnt.of_metric(LatencyMetric.TPOT)
    assert tpot is not None and before is not None
    assert tpot.log_factor == pytest.approx(before.log_factor / 2)
    assert moved.confidence < learnt.confidence


# ------------------------------------------------------------------------------------------- workload

# Traffic that has run for an hour: its windows see requests of every length.
SERVING = WorkloadEstimate(serving_since=NOW - 3600.0)


def test_the_observed_workload_replaces_the_spec_only_with_enough_requests() -> None:
    heavier = observation(group(rate=6.0, samples=600))
    estimate = update_workload(SERVING, heavier)
    assert estimate.request_rate_per_s == pytest.approx(6.0)
    assert estimate.input_tokens == pytest.approx(WORKLOAD.input_tokens.mean)
    assert effective_workload(WORKLOAD, estimate) == WORKLOAD  # 600 requests are not enough
    while estimate.requests < MIN_REQUESTS_TO_REPLACE:
        estimate = update_workload(estimate, heavier)
    effective = effective_workload(WORKLOAD, estimate)
    assert effective.request_rate_per_s == pytest.approx(6.0)
    assert effective.input_tokens.cv == WORKLOAD.input_tokens.cv  # shapes the metrics cannot tell stay
    assert workload_shift(WORKLOAD, effective, 0.25, 0.15) == "request rate 4 → 6"


def test_the_average_follows_traffic_with_its_half_life() -> None:
    estimate = SERVING
    for _ in range(30):
        estimate = update_workload(estimate, observation(group(rate=4.0)))
    for _ in range(6):  # one half-life
        estimate = update_workload(estimate, observation(group(rate=8.0)))
    assert estimate.request_rate_per_s == pytest.approx(6.0, rel=0.01)


def _slow_tail(window: GroupObservation, p99_s: float) -> GroupObservation:
    return replace(window, e2e=Percentiles(p99_s / 10, p99_s / 3, p99_s / 2, p99_s))


def test_windows_of_traffic_younger_than_its_slow_requests_stay_out_of_the_estimate() -> None:
    # Ten-minute requests: the windows of the first ten minutes of traffic miss them and read short outputs.
    def window(start: float, mean_output: float) -> Observation:
        shortened = replace(group(rate=4.0), output_tokens_per_s=4.0 * mean_output)
        return Observation(start, start + WINDOW_S, (_slow_tail(shortened, 600.0),))

    estimate = update_workload(WorkloadEstimate(), window(NOW, 700.0))
    assert estimate.serving_since == NOW and estimate.output_tokens is None and estimate.requests == 0
    estimate = update_workload(estimate, window(NOW + WINDOW_S, 850.0))
    assert estimate.output_tokens is None  # five minutes in: still younger than the 600 s tail
    estimate = update_workload(estimate, window(NOW + 2 * WINDOW_S, 1000.0))
    assert estimate.output_tokens == pytest.approx(1000.0) and estimate.windows == 1
    assert estimate.serving_since == NOW


def test_traffic_that_stops_starts_young_again_but_missing_data_changes_nothing() -> None:
    stopped = update_workload(SERVING, observation(replace(group(), request_rate_per_s=0.0)))
    assert stopped.serving_since is None and stopped.windows == 0
    unknown = update_workload(SERVING, observation(replace(group(), request_rate_per_s=None)))
    assert unknown == SERVING
    # Without an end-to-end histogram the age cannot be judged: the window counts, as before.
    blind = update_workload(WorkloadEstimate(), observation(replace(group(), e2e=None)))
    assert blind.windows == 1 and blind.request_rate_per_s == pytest.approx(4.0)


def test_the_rate_ahead_extrapolates_the_gap_between_the_fast_and_the_slow_average() -> None:
    window = observation(group(rate=4.0))  # 1 200 requests: ±0.12 requests/s, ±0.028 in the averages' gap
    slope = 1.0 / averaging_lag_s(WINDOW_S)  # 1 request/s per 43 min: the gap is 0.67 requests/s
    assert rate_ahead(ramp_estimate(slope), window, 900.0) == pytest.approx(1.0 + slope * 900.0 / 4.0)
    # A gap of 0.1 request/s is within four sigmas of the gap's noise (0.11).
    assert rate_ahead(ramp_estimate(0.15 * slope), window, 900.0) == 1.0
    assert rate_ahead(ramp_estimate(-slope), window, 900.0) == 1.0  # falling
    assert rate_ahead(replace(ramp_estimate(slope), windows=3), window, 900.0) == 1.0  # not yet an average
    assert rate_ahead(replace(ramp_estimate(slope), recent_request_rate_per_s=None), window, 900.0) == 1.0
    assert rate_ahead(WorkloadEstimate(), window, 900.0) == 1.0


def test_after_a_trough_the_windows_lead_over_the_fast_average_reads_the_rise() -> None:
    window = observation(group(rate=4.0))  # ±0.12 requests/s: a lead of 0.6 is five sigmas
    turned = WorkloadEstimate(request_rate_per_s=4.5, recent_request_rate_per_s=3.4, windows=30)
    lag_s = averaging_lag_s(WINDOW_S, FAST_HALF_LIFE_WINDOWS)
    assert rate_ahead(turned, window, 900.0) == pytest.approx(1.0 + 0.6 / lag_s * 900.0 / 4.0)
    assert rate_ahead(replace(turned, recent_request_rate_per_s=3.6), window, 900.0) == 1.0  # 3.5 sigmas


def test_the_fast_average_follows_a_window_three_times_as_fast_as_the_slow_one() -> None:
    settled = replace(SERVING, request_rate_per_s=4.0, recent_request_rate_per_s=4.0, windows=30)
    estimate = update_workload(settled, observation(group(rate=6.0)))
    assert estimate.request_rate_per_s == pytest.approx(4.0 + 2.0 * (1.0 - 0.5 ** (1.0 / HALF_LIFE_WINDOWS)))
    assert estimate.recent_request_rate_per_s == pytest.approx(4.0 + 2.0 * (1.0 - 0.5 ** (1.0 / 2.0)))


def _minute_counts(rates: list[float], seed: int) -> list[int]:
    """Poisson arrivals counted per minute at each minute's rate (requests/s)."""
    rng = random.Random(seed)
    counts = []
    for rate in rates:
        count, t = 0, rng.expovariate(rate)
        while t < 60.0:
            count, t = count + 1, t + rng.expovariate(rate)
        counts.append(count)
    return counts


def _rising_flags(rates: list[float], seed: int) -> list[bool]:
    """Whether the loop's estimate reads the traffic as rising, minute by minute: a 5-min window every minute."""
    counts = _minute_counts(rates, seed)
    estimate = SERVING
    flags = []
    for minute in range(5, len(counts) + 1):
        window = observation(group(rate=sum(counts[minute - 5 : minute]) / WINDOW_S))
        estimate = update_workload(estimate, window, fresh_fraction=0.2)
        flags.append(rate_ahead(estimate, window, 900.0) > 1.0)
    return flags


def test_six_steady_hours_never_read_as_rising_a_slow_ramp_and_a_turn_upwards_do() -> None:
    # Half an hour flat at 4 requests/s, then +1 request/s per hour for two hours (a ±50 % day of 6 requests/s
    # rises at 3 per hour at its steepest). On these seeds the averages' gap reads the rise 17-32 min after it
    # began; one window's lead over the slow average (the rule before) took 23-54 min.
    ramp = [4.0] * 30 + [4.0 + (m + 1) / 60.0 for m in range(120)]
    # Two hours down from 10 to 4 requests/s at 3 per hour, then up again: the slow average still reads
    # falling traffic for most of an hour; the window's lead over the fast one reads the turn in 20-37 min.
    turn = [10.0 - 3.0 * (m + 1) / 60.0 for m in range(120)] + [4.0 + 3.0 * (m + 1) / 60.0 for m in range(60)]
    for seed in range(1, 6):
        assert not any(_rising_flags([4.0] * 360, seed)), seed  # 356 overlapping windows, none rising
        flags = _rising_flags(ramp, seed)
        first = flags.index(True)
        assert 0 < first + 5 - 30 <= 35, seed  # minutes after the ramp began
        assert all(flags[first + 10 :]), seed  # and it stays read as rising
        flags = _rising_flags(turn, seed)
        first = flags.index(True)
        assert 0 < first + 5 - 120 <= 40, seed  # minutes after the turn, none on the way down


def test_the_steady_rate_is_the_average_until_the_window_departs_from_it_beyond_its_noise() -> None:
    settled = WorkloadEstimate(request_rate_per_s=3.9, windows=30)
    window = observation(group(rate=4.0))  # 1 200 requests: Poisson noise ±0.12 requests/s
    assert steady_rate(settled, window) == pytest.approx(3.9)  # a noisy window: judged at the average
    assert steady_rate(replace(settled, request_rate_per_s=3.7), window) == pytest.approx(3.7)  # within 4 sigma
    assert steady_rate(replace(settled, request_rate_per_s=3.0), window) is None  # rising: the window's rate
    assert steady_rate(replace(settled, request_rate_per_s=5.0), window) is None  # falling: the window's rate
    assert steady_rate(replace(settled, windows=3), window) is None  # not yet an average
    assert steady_rate(WorkloadEstimate(), window) is None


def test_an_average_of_overlapping_windows_settles_after_a_half_life_of_traffic_not_of_looks() -> None:
    # The loop looks at a 5-minute window every minute: six looks are 10 minutes of traffic, not six windows.
    estimate, ticks = WorkloadEstimate(serving_since=NOW - 3600.0), 0
    while estimate.windows < HALF_LIFE_WINDOWS:
        end = NOW + 60.0 * ticks
        estimate = update_workload(estimate, observation(group(), end=end), fresh_fraction=60.0 / WINDOW_S)
        ticks += 1
    assert ticks * 60.0 == pytest.approx(HALF_LIFE_WINDOWS * WINDOW_S, abs=60.0)


def test_the_fleet_workload_adds_stable_and_canary() -> None:
    both = observation(group(rate=3.6), group(variant=Variant.CANARY, rate=0.4))
    fleet = fleet_workload(both, WORKLOAD)
    assert fleet is not None and fleet.request_rate_per_s == pytest.approx(4.0)
    silent = observation(replace(group(), request_rate_per_s=None))
    assert fleet_workload(silent, WORKLOAD) is None
