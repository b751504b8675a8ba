"""How far each technique moves the frontier for this traffic, against the baseline.

The baseline is BF16 weights (or the model's reference format when no BF16 weights exist), a BF16 KV
cache, aggregated serving, no speculation and narrow expert parallelism. Batch size and the TP/EP
layout only *move along* a frontier; quantization, speculative decoding, P/D disaggregation and wide
EP can *push it out*. For each technique the planner compares, at the SLO, the baseline with the
baseline plus that one technique:

* the cheapest fleet meeting every SLO for the workload's rate ($/Mtok), and
* the capability frontier: the most tokens/s per GPU at the per-user speed the TPOT/ITL SLO demands.

A technique *pushes out* the frontier when either improves by more than `MEANINGFUL_GAIN`; it *moves
along* when its points only extend the frontier elsewhere (faster per user, or cheaper at lower
speed); it gives *no gain* when every point it adds is dominated by the baseline.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from frontier_operator.planner.enumerate import baseline_weight_format
from frontier_operator.planner.frontier import best_at_speed, frontier
from frontier_operator.planner.types import (
    PER_TOKEN_METRICS,
    Disaggregation,
    Evaluated,
    FrontierPoint,
    PlanRequest,
    ShiftEffect,
    SpeculativeMode,
    Technique,
    TechniqueCurve,
    TechniqueShift,
)

MEANINGFUL_GAIN = 0.01

TECHNIQUE_ORDER = (
    Technique.QUANTIZATION,
    Technique.SPECULATIVE_DECODING,
    Technique.DISAGGREGATION,
    Technique.WIDE_EP,
)

_NO_TECHNIQUES: frozenset[Technique] = frozenset()


def slo_speed(request: PlanRequest) -> float:
    """Per-user decode speed (tokens/s) the tightest TPOT/ITL bound implies; 0 without such a bound."""
    limits = [bound.limit_s for bound in request.slos if bound.metric in PER_TOKEN_METRICS]
    return 1.0 / min(limits) if limits else 0.0


def _within(techniques: frozenset[Technique], allowed: frozenset[Technique]) -> bool:
    return techniques <= allowed


def technique_curves(points: Sequence[FrontierPoint]) -> tuple[TechniqueCurve, ...]:
    """The baseline frontier, the baseline plus each technique, and everything the spec allows."""
    curves = [TechniqueCurve("baseline", _NO_TECHNIQUES, frontier([p for p in points if not p.techniques]))]
    for technique in TECHNIQUE_ORDER:
        with_one = frozenset({technique})
        chosen = [p for p in points if p.techniques and _within(p.techniques, with_one)]
        if chosen:
            baseline_and_one = [p for p in points if _within(p.techniques, with_one)]
            curves.append(TechniqueCurve(f"+{technique.value}", with_one, frontier(baseline_and_one)))
    every = frozenset(TECHNIQUE_ORDER)
    curves.append(TechniqueCurve("all allowed", every, frontier([p for p in points if p.allowed])))
    return tuple(curves)


def _cheapest(candidates: Sequence[Evaluated], allowed: frozenset[Technique]) -> Evaluated | None:
    # Baseline references count here even when their format is not allowed: they define the baseline.
    meeting = [c for c in candidates if c.meets_slo and c.within_budget and c.sustains_rate and c.techniques <= allowed]
    return min(meeting, key=lambda c: c.prediction.cost_per_mtok, default=None)


def _unavailable(request: PlanRequest, technique: Technique) -> tuple[ShiftEffect, str]:
    """Why a technique produced no point: switched off by the spec, or impossible here."""
    search, arch = request.search, request.arch
    if technique is Technique.DISAGGREGATION and search.disaggregation is Disaggregation.NEVER:
        return ShiftEffect.NOT_ALLOWED, "switched off in the search (disaggregation: never)"
    if technique is Technique.SPECULATIVE_DECODING:
        if search.speculative is SpeculativeMode.OFF:
            return ShiftEffect.NOT_ALLOWED, "switched off in the search (speculative: off)"
        if arch.mtp_layers == 0 and search.eagle3_draft_model is None:
            return ShiftEffect.NOT_APPLICABLE, f"{arch.name} has no MTP layers and no EAGLE-3 draft is configured"
    if technique is Technique.WIDE_EP and not arch.is_moe:
        return ShiftEffect.NOT_APPLICABLE, f"{arch.name} is dense: no experts to spread"
    if technique is Technique.QUANTIZATION and len(search.quantizations) + len(search.kv_cache_formats) <= 2:
        return ShiftEffect.NOT_ALLOWED, "only the baseline formats are allowed"
    baseline = baseline_weight_format(arch, (*search.quantizations, *search.fallback_quantizations))
    if baseline is not None and baseline not in search.quantizations:
        return (
            ShiftEffect.NOT_APPLICABLE,
            f"the baseline's {baseline.name} weights are not allowed, so {technique.value} is only tried together "
            "with quantization",
        )
    return ShiftEffect.NOT_APPLICABLE, "no legal configuration uses it alone on these GPUs"


def _gain(better: float | None, worse: float | None) -> float | None:
    if better is None or worse is None or worse <= 0:
        return None
    return better / worse - 1


def technique_shifts(
    request: PlanRequest,
    candidates: Sequence[Evaluated],
    points: Sequence[FrontierPoint],
    tried: Collection[frozenset[Technique]] = (),
) -> tuple[TechniqueShift, ...]:
    speed = slo_speed(request)
    baseline_points = [p for p in points if not p.techniques]
    baseline_best = best_at_speed(baseline_points, speed)
    baseline_fleet = _cheapest(candidates, _NO_TECHNIQUES)
    baseline_front = frontier(baseline_points)
    baseline_cost = baseline_fleet.prediction.cost_per_mtok if baseline_fleet else None
    baseline_tps = baseline_best.tokens_per_s_per_gpu if baseline_best else None
    shifts = []
    for technique in TECHNIQUE_ORDER:
        with_one = frozenset({technique})
        own_points = [p for p in points if technique in p.techniques and _within(p.techniques, with_one)]
        if not own_points and any(technique in s and s <= with_one for s in tried):
            note = f"with {technique.value} alone every configuration misses a bound even unloaded"
            shifts.append(TechniqueShift(technique, ShiftEffect.NO_GAIN, None, None, None, None, note))
            continue
        if not own_points:
            effect, note = _unavailable(request, technique)
            shifts.append(TechniqueShift(technique, effect, None, None, None, None, note))
            continue
        best = best_at_speed([*baseline_points, *own_points], speed)
        fleet = _cheapest(candidates, with_one)
        cost = fleet.prediction.cost_per_mtok if fleet else None
        tps = best.tokens_per_s_per_gpu if best else None
        cost_gain = _gain(baseline_cost, cost)  # > 0: cheaper than the baseline
        tps_gain = _gain(tps, baseline_tps)
        rescues = baseline_fleet is None and fleet is not None
        if rescues or any(gain is not None and gain > MEANINGFUL_GAIN for gain in (cost_gain, tps_gain)):
            effect = ShiftEffect.PUSHES_OUT
        elif any(p in frontier([*baseline_front, *own_points]) for p in own_points):
            effect = ShiftEffect.MOVES_ALONG
        else:
            effect = ShiftEffect.NO_GAIN
        note = _note(technique, baseline_cost, cost, tps_gain, speed)
        shifts.append(TechniqueShift(technique, effect, baseline_cost, cost, baseline_tps, tps, note))
    return tuple(shifts)


def _note(
    technique: Technique, baseline_cost: float | None, cost: float | None, tps_gain: float | None, speed: float
) -> str:
    """What adding the technique did, in the words of the status: cost at the SLO, then the frontier."""
    parts = []
    if baseline_cost is not None and cost is not None:
        change = (cost / baseline_cost - 1) * 100
        word = "cheaper" if change < 0 else "dearer"
        parts.append(
            f"{abs(change):.0f} % {word} than the baseline at the SLO (${cost:.3f} vs ${baseline_cost:.3f}/Mtok)"
        )
    elif cost is not None:
        parts.append(f"meets the SLO where the baseline cannot (${cost:.3f}/Mtok)")
    elif baseline_cost is not None:
        parts.append(
            f"the baseline meets the SLO (${baseline_cost:.3f}/Mtok); with {technique.value} alone nothing does"
        )
    else:
        parts.append(f"neither the baseline nor the baseline with {technique.value} meets the SLO on its own")
    if tps_gain is not None and abs(tps_gain) >= MEANINGFUL_GAIN:
        at = f" at {speed:.0f} tok/s per user" if speed > 0 else ""
        parts.append(f"{tps_gain * 100:+.0f} % tokens/s per GPU{at}")
    return "; ".join(parts)
