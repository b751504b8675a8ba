"""What the raw model predicts for a benchmark run: a unit driven by a closed-loop client at a concurrency.

The performance model answers for an offered request rate; a benchmark client instead keeps a fixed number of
requests in flight. The two meet through Little's law: the rate at which the unit carries `c` requests in
flight on average is the rate the client will see completing. That rate is found by bisection on the model's
own `mean_batch`, and the prediction there is the point's prediction. Lengths are the target's mean lengths
(the benchmark draws them around those means, see `render.benchmark`); the benchmark's random token ids share
no prefix, so the prefix-cache hit rate is 0.
"""

from __future__ import annotations

import math
from dataclasses import replace

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import Prediction, ServingConfig, Workload
from frontier_operator.planner.types import GpuPool, Predictor
from frontier_operator.sweep.types import PointPrediction
from frontier_operator.sweep.units import decode_workers_per_unit, unit_load, with_decode_cap

# Relative tolerance on the unit's mean load, and the bisection's step limit.
_LOAD_TOLERANCE = 0.02
_MAX_STEPS = 40
# A rate this close to the unit's capacity is its edge: the open-loop queue there is the model's blow-up,
# not anything a closed-loop client (which never queues more than its concurrency) can see.
_CAPACITY_EDGE = 0.98
# The benchmark's traffic kind (random token ids: speculative drafts are accepted as rarely as on random text).
BENCHMARK_KIND = "random"


def benchmark_workload(workload: Workload) -> Workload:
    """The target's lengths as the benchmark sends them: random ids, no shared prefix, closed loop."""
    return replace(workload, prefix_cache_hit_rate=0.0, kind=BENCHMARK_KIND, arrival_cv=1.0)


def _finite(prediction: Prediction) -> bool:
    return math.isfinite(prediction.ttft.p99) and math.isfinite(prediction.tpot.p90)


def predict_at_concurrency(
    predictor: Predictor,
    arch: ModelArch,
    *,
    pool: GpuPool,
    unit: ServingConfig,
    workload: Workload,
    concurrency: int,
) -> PointPrediction | None:
    """The model's prediction for `unit` holding `concurrency` requests in flight; None when the model cannot
    put a number on it or says the unit never holds that many (its capacity is reached first)."""
    shape = benchmark_workload(workload)
    # A closed loop never holds more than `concurrency` requests, so the cap never binds; the model's open-loop
    # queueing would charge a unit run at its cap with queues the benchmark never sees: predict with room.
    unit = with_decode_cap(unit, math.ceil(2 * concurrency / decode_workers_per_unit(unit)))

    def at(rate: float) -> Prediction:
        return predictor.predict(arch, pool.gpu, unit, replace(shape, request_rate_per_s=rate), pool.price_per_gpu_hour)

    try:
        capacity = at(1e-6).max_request_rate_per_s
        if not capacity > 0 or not math.isfinite(capacity):
            return None
        low, high = 0.0, capacity
        found: tuple[float, Prediction] | None = None
        for _ in range(_MAX_STEPS):
            rate = (low + high) / 2
            prediction = at(rate)
            if not _finite(prediction):
                high = rate
                continue
            load = unit_load(unit, prediction)
            found = (rate, prediction)
            if abs(load - concurrency) <= _LOAD_TOLERANCE * concurrency:
                break
            if load < concurrency:
                low = rate
            else:
                high = rate
    except UnpredictableConfig:
        return None
    if found is None:
        return None
    rate, prediction = found
    load = unit_load(unit, prediction)
    if abs(load - concurrency) > 0.25 * concurrency or (load < concurrency and rate >= _CAPACITY_EDGE * capacity):
        return None
    return PointPrediction(
        ttft_p50_s=prediction.ttft.p50,
        ttft_p90_s=prediction.ttft.p90,
        ttft_p99_s=prediction.ttft.p99,
        tpot_p50_s=prediction.tpot.p50,
        tpot_p90_s=prediction.tpot.p90,
        request_rate_per_s=rate,
        output_tokens_per_s=rate * workload.output_tokens.mean,
    )
