"""Choosing: the safety margin, the SLO checks, the objective's ranking and the knee bisection.

The margin protects each SLO against the model's own error: a prediction must stay under
`limit / (1 + margin)`. The error is multiplicative — log(measured / predicted) is what the calibration
measures — so the margin is the ratio that covers it one-sided in nine cases of ten, *for that SLO's
metric* (TTFT or TPOT) on this GPU family: `exp(q90) − 1`, where q90 is the 90th percentile of
log(measured / predicted) on the rows of models the fit never saw (`frontier calibrate` measures it
leave-one-model-out on the rows that describe their deployment). Over-prediction needs no cover, so a
model that errs on the slow side keeps a small margin. Without a measured quantile the margin assumes an
unbiased normal error of the metric's sigma, `exp(1.28·σ) − 1`. Either shrinks as this cluster's
observations confirm the model (`calibration_confidence`, maintained by the tuning layer), in log space.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from frontier_operator.perf.types import Prediction
from frontier_operator.planner.types import Evaluated, Objective, SloBound, SloCheck, SloMetric

# One-sided 90 % quantile of a normal error: a fresh, uncalibrated model keeps predictions 1.28 sigma
# under the limit.
MARGIN_Z = 1.28
# A fully confident calibration keeps a quarter of that margin: observations tighten, never remove it.
MARGIN_SHRINK_AT_FULL_CONFIDENCE = 0.75
# Even an exact model leaves room for run-to-run jitter of real serving (a few % between windows).
MIN_MARGIN = 0.02


def _confidence_scale(calibration_confidence: float) -> float:
    confidence = min(1.0, max(0.0, calibration_confidence))
    return 1.0 - MARGIN_SHRINK_AT_FULL_CONFIDENCE * confidence


def safety_margin(uncertainty: float, calibration_confidence: float) -> float:
    """`exp(z·σ·scale) − 1`: the one-sided 90 % ratio of a log-normal model error of one-sigma `uncertainty`."""
    scale = _confidence_scale(calibration_confidence)
    return max(MIN_MARGIN, math.expm1(MARGIN_Z * max(0.0, uncertainty) * scale))


def covering_margin(underprediction_q90: float, calibration_confidence: float) -> float:
    """`exp(q90·scale) − 1`: the ratio that lifts a prediction over nine in ten measured values."""
    scale = _confidence_scale(calibration_confidence)
    return max(MIN_MARGIN, math.expm1(max(0.0, underprediction_q90) * scale))


def metric_uncertainty(prediction: Prediction, metric: SloMetric) -> float:
    """The model's one-sigma relative error for one metric: TTFT's for TTFT, TPOT's for the per-token
    metrics, the larger for end-to-end latency (it adds both); the overall figure when a predictor gives
    no per-metric one."""
    ttft = prediction.ttft_uncertainty if prediction.ttft_uncertainty is not None else prediction.uncertainty
    tpot = prediction.tpot_uncertainty if prediction.tpot_uncertainty is not None else prediction.uncertainty
    if metric is SloMetric.TTFT:
        return ttft
    if metric is SloMetric.E2E:
        return max(ttft, tpot)
    return tpot


def metric_underprediction(prediction: Prediction, metric: SloMetric) -> float | None:
    """The held-out 90th-percentile under-prediction of the metric (end-to-end: the larger), if measured."""
    ttft, tpot = prediction.ttft_underprediction_q90, prediction.tpot_underprediction_q90
    if metric is SloMetric.TTFT:
        return ttft
    if metric is SloMetric.E2E:
        return None if ttft is None or tpot is None else max(ttft, tpot)
    return tpot


def slo_margin(prediction: Prediction, bound: SloBound, calibration_confidence: float) -> float:
    measured = metric_underprediction(prediction, bound.metric)
    if measured is not None:
        return covering_margin(measured, calibration_confidence)
    return safety_margin(metric_uncertainty(prediction, bound.metric), calibration_confidence)


def check_slos(
    slos: Sequence[SloBound],
    prediction: Prediction,
    margin: float | None = None,
    *,
    calibration_confidence: float = 0.0,
) -> tuple[SloCheck, ...]:
    """Each bound against its prediction: with one fixed `margin`, or (None) each metric's own margin."""
    checks = []
    for bound in slos:
        applied = slo_margin(prediction, bound, calibration_confidence) if margin is None else margin
        checks.append(SloCheck(bound, bound.predicted(prediction), bound.limit_s / (1 + applied), applied))
    return tuple(checks)


def worst_ratio(checks: Sequence[SloCheck]) -> float:
    """How far the worst SLO is from its margin-shrunk limit: ≤ 1 means every SLO is met."""
    return max((check.ratio for check in checks), default=0.0)


def largest_passing(count: int, passes: Callable[[int], bool]) -> int:
    """Largest index in [0, count) for which `passes` holds, assuming it holds for a prefix; -1 if none.

    Bisection: about log2(count) calls instead of count, which is what keeps the knee search fast.
    """
    low, high = -1, count  # passes(low) is known true (or low = -1), passes(high) known false (or high = count)
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            low = middle
        else:
            high = middle
    return low


def objective_key(objective: Objective, candidate: Evaluated) -> tuple[float, ...]:
    """Sort key, smaller is better: the objective, then the secondary concerns in a fixed order.

    Replica counts are integers, so many fleets tie on cost or GPUs; the tie goes to the smaller
    quality loss, then to fewer GPUs or lower cost, then to the larger latency headroom.
    """
    prediction = candidate.prediction
    cost = round(prediction.cost_per_mtok, 9)
    gpus = float(candidate.config.total_gpus)
    quality = round(candidate.quality_loss_pct, 6)
    latency = worst_ratio(candidate.checks)
    if objective is Objective.MINIMIZE_GPUS:
        return (gpus, quality, cost, latency)
    if objective is Objective.MAXIMIZE_THROUGHPUT:
        # The fleet is sized to the request rate, so "throughput" means what each GPU can sustain at the SLO.
        capacity_per_gpu = prediction.max_request_rate_per_s / max(gpus, 1.0)
        return (-capacity_per_gpu, quality, cost, gpus)
    if objective is Objective.MINIMIZE_LATENCY:
        return (latency, quality, cost, gpus)
    return (cost, quality, gpus, latency)


def rank(objective: Objective, candidates: Sequence[Evaluated]) -> list[Evaluated]:
    """Feasible candidates, best first."""
    return sorted((c for c in candidates if c.feasible), key=lambda c: objective_key(objective, c))
