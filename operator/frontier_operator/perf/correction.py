"""A prediction corrected by measured factors: what the calibrated (tuning) and measured (sweep) predictors share.

Latencies scale by their factors; capacity shrinks by the per-token factor at the load that sets it; when the
offered rate reaches the corrected capacity the queue grows without bound (infinite latency); and the cost per
token grows as the corrected capacity serves less of the offered rate than the raw one. A caller may give the
first token's raw percentiles at the corrected fleet's utilisation (`queued_ttft`), whose queue is not the raw
fleet's: a fleet 2.7× faster than modelled does not wait for the batch slots the raw model runs out of; and the
raw prediction whose decode the factor scales (`decoding`) where the raw one at the offered rate has none.
"""

from __future__ import annotations

import math
from dataclasses import replace

from frontier_operator.perf.types import Percentiles, Prediction

_PERCENTILES = (50, 90, 95, 99)
# Share of the p99's own (tail) factor that reaches each percentile, in log space: none up to p90, where the
# body factor is measured, all at p99, and p95 by its normal score between them ((1.645 − 1.282) / (2.326 − 1.282)).
_TAIL_SHARE = {50: 0.0, 90: 0.0, 95: 0.348, 99: 1.0}


def _scaled(percentiles: Percentiles, factor: float, tail: float = 1.0) -> Percentiles:
    return Percentiles(*(percentiles.at(p) * factor * tail ** _TAIL_SHARE[p] for p in _PERCENTILES))


def _e2e(e2e: Percentiles, ttft: Percentiles, first_token: Percentiles, tpot_factor: float) -> Percentiles:
    # End-to-end = first token + the decode that follows; each part moves with its own correction (the first
    # token's corrected percentiles take the raw one's place).
    def one(p: int) -> float:
        total, first = e2e.at(p), ttft.at(p)
        if not math.isfinite(total):
            return total
        return first_token.at(p) + tpot_factor * max(0.0, total - first)

    return Percentiles(*(one(p) for p in _PERCENTILES))


def corrected_prediction(
    raw: Prediction,
    rate: float,
    ttft_factor: float,
    tpot_factor: float,
    capacity_factor: float | None = None,
    *,
    ttft_tail: float = 1.0,
    tpot_tail: float = 1.0,
    queued_ttft: Percentiles | None = None,
    decoding: Prediction | None = None,
) -> Prediction:
    """`raw` with TTFT × `ttft_factor`, TPOT/ITL × `tpot_factor`, capacity ÷ `capacity_factor` (default: the
    TPOT factor), at the offered `rate`; the tail factors multiply p99 further (p95 in part, `_TAIL_SHARE`).
    `queued_ttft`, when given, is the raw TTFT the factor scales instead of `raw.ttft`; `decoding`, the raw
    prediction whose TPOT, ITL and decode time it scales instead of `raw`'s."""
    capacity_factor = tpot_factor if capacity_factor is None else capacity_factor
    capacity = raw.max_request_rate_per_s / capacity_factor
    if rate >= capacity:
        ttft = tpot = itl = e2e = Percentiles(math.inf, math.inf, math.inf, math.inf)
    else:
        first = raw.ttft if queued_ttft is None else queued_ttft
        decode = raw if decoding is None else decoding
        ttft = _scaled(first, ttft_factor, ttft_tail)
        tpot = _scaled(decode.tpot, tpot_factor, tpot_tail)
        itl = _scaled(decode.itl, tpot_factor, tpot_tail)
        e2e = _e2e(decode.e2e, decode.ttft, _scaled(first, ttft_factor), tpot_factor)
    served_raw, served = min(rate, raw.max_request_rate_per_s), min(rate, capacity)
    scale = 1.0 if served_raw == served else (served_raw / served if served > 0 else math.inf)
    return replace(
        raw,
        ttft=ttft,
        tpot=tpot,
        itl=itl,
        e2e=e2e,
        max_request_rate_per_s=capacity,
        output_tokens_per_s_per_gpu=raw.output_tokens_per_s_per_gpu / scale,
        output_tokens_per_s_per_user=1.0 / tpot.p50 if tpot.p50 > 0 and math.isfinite(tpot.p50) else 0.0,
        cost_per_mtok=raw.cost_per_mtok * scale,
    )
