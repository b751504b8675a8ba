"""An infeasible target: the nearest point, and what would make it feasible.

The answer names concrete changes, each checked by re-planning with that one change: a looser bound
("needs p50 TPOT ≥ 27 ms"), more GPUs ("≥ 16 GPUs"), a format or a technique the spec left out
("or allow fp8"), or a larger quality budget. Re-plans share the prediction cache, so they cost
little beyond the configurations the relaxation adds.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from frontier_operator.catalog.quantization import execution_mode, kv_cache_supported
from frontier_operator.catalog.types import QuantFormat
from frontier_operator.planner.choose import rank, worst_ratio
from frontier_operator.planner.explain import (
    dollars,
    fleet_sentence,
    ms,
    rejection_sentence,
    shift_sentence,
    slo_sentence,
)
from frontier_operator.planner.floor import per_token_floor_s
from frontier_operator.planner.formats import has_weights_for
from frontier_operator.planner.search import PredictionCache, SearchOutcome, run_search
from frontier_operator.planner.types import (
    PER_TOKEN_METRICS,
    Disaggregation,
    Evaluated,
    FrontierPoint,
    Infeasible,
    InfeasibleReason,
    PlanRequest,
    RejectionReason,
    RejectionSummary,
    SearchSpace,
    SearchStats,
    SpeculativeMode,
    Suggestion,
    SuggestionKind,
    TechniqueCurve,
    TechniqueShift,
)

# How many times the GPU budget the "more GPUs" re-plan may use.
BUDGET_RELAXATION = 4
# Predictions each re-plan may spend after its screen: a relaxation that helps is found among the first
# jobs (they are ordered by bound), and an infeasible answer must stay as quick as a plan.
RELAXATION_PREDICTION_BUDGET = 80
DIAGNOSIS_PREDICTION_BUDGET = 200


def context_beyond_model(request: PlanRequest) -> Infeasible | None:
    """Requests longer than the model's context window cannot be served by any configuration."""
    workload, arch = request.workload, request.arch
    longest = (workload.input_tokens.max or round(workload.input_tokens.mean)) + (
        workload.output_tokens.max or round(workload.output_tokens.mean)
    )
    if longest <= arch.max_context:
        return None
    summary = f"requests of up to {longest:,} tokens exceed the {arch.max_context:,}-token context of {arch.name}"
    suggestion = Suggestion(
        SuggestionKind.SHORTEN_REQUESTS, f"cap input + output at {arch.max_context:,} tokens (workload max lengths)"
    )
    return Infeasible(
        reason=InfeasibleReason.CONTEXT_BEYOND_MODEL,
        summary=summary,
        nearest=None,
        suggestions=(suggestion,),
        frontier=(),
        curves=(),
        technique_shifts=(),
        rejections=(),
        explanation=(summary, suggestion.text),
        stats=SearchStats(0, 0, 0, 0),
    )


def _round_up(seconds: float) -> float:
    """Two significant digits, rounded up so that the suggested bound is really enough."""
    if seconds <= 0 or not math.isfinite(seconds):
        return seconds
    scale = 10.0 ** (math.floor(math.log10(seconds)) - 1)
    return float(math.ceil(seconds / scale - 1e-9) * scale)


def _nearest(candidates: Sequence[Evaluated]) -> Evaluated | None:
    return min(
        candidates,
        key=lambda c: (not c.within_budget, not c.sustains_rate, worst_ratio(c.checks), c.config.total_gpus),
        default=None,
    )


@dataclass(frozen=True)
class _Relaxation:
    kind: SuggestionKind
    text: str
    request: PlanRequest
    # Relaxations of the same bounds share a key: once one value works, higher ones are not tried.
    key: str = ""


def _could_help(request: PlanRequest, fmt: QuantFormat) -> bool:
    """A weight format worth a re-plan: servable here, and smaller than every allowed one or native where none is."""
    search, arch = request.search, request.arch
    if not has_weights_for(arch, fmt) or (fmt.moe_only and not arch.is_moe):
        return False
    smaller = all(fmt.weight_bytes_per_param < allowed.weight_bytes_per_param for allowed in search.quantizations)
    native_gain = any(
        execution_mode(fmt, pool.gpu) == "native"
        and all(execution_mode(allowed, pool.gpu) != "native" for allowed in search.quantizations)
        for pool in request.pools
    )
    runs = any(execution_mode(fmt, pool.gpu) != "unsupported" for pool in request.pools)
    return runs and (smaller or native_gain)


def _with_limits(request: PlanRequest, limits: dict[int, float]) -> PlanRequest:
    slos = tuple(replace(bound, limit_s=limits.get(index, bound.limit_s)) for index, bound in enumerate(request.slos))
    return replace(request, slos=slos)


def _needs(request: PlanRequest, limits: dict[int, float]) -> str:
    return " and ".join(f"{request.slos[index].label} ≥ {ms(value)}" for index, value in sorted(limits.items()))


def _slo_relaxations(request: PlanRequest, outcome: SearchOutcome, nearest: Evaluated | None) -> list[_Relaxation]:
    """Looser bounds to re-plan with, each bound alone first, then all together.

    A bound no prediction reached is tried at the lowest value seen (unloaded fleets included), then at
    the nearest fleet's value; a bound reachable alone but missed together is tried at the nearest's.
    """
    tries: dict[int, list[float]] = {}
    for index, best in outcome.best_seen.items():
        if best > request.slos[index].limit_s:
            tries.setdefault(index, []).append(_round_up(best))
    if nearest is not None:
        for index, check in enumerate(nearest.checks):
            value = _round_up(check.predicted_s * (1 + check.margin))
            if not check.met and math.isfinite(value) and value not in tries.get(index, []):
                tries.setdefault(index, []).append(value)
    proposals = [{index: value} for index, values in sorted(tries.items()) for value in sorted(values)]
    if len(tries) > 1:
        proposals.append({index: max(values) for index, values in tries.items()})
    return [
        _Relaxation(
            SuggestionKind.RELAX_SLO,
            f"needs {_needs(request, limits)}",
            _with_limits(request, limits),
            key=",".join(str(index) for index in sorted(limits)),
        )
        for limits in proposals
    ]


def _reach_notes(request: PlanRequest, outcome: SearchOutcome) -> list[Suggestion]:
    """Bounds below anything the search reached: a necessary condition even when no relaxation suffices."""
    return [
        Suggestion(
            SuggestionKind.RELAX_SLO,
            f"{request.slos[index].label} cannot go below {ms(_round_up(best))} with these GPUs and formats "
            "(margin included)",
        )
        for index, best in sorted(outcome.best_seen.items())
        if best > request.slos[index].limit_s
    ]


def _relaxations(request: PlanRequest, summaries: Sequence[RejectionSummary]) -> list[_Relaxation]:
    """Single changes worth re-planning with, most useful first: GPUs, techniques, formats, quality budget."""
    search = request.search
    bigger = tuple(replace(pool, max_gpus=pool.max_gpus * BUDGET_RELAXATION) for pool in request.pools)
    changes = [_Relaxation(SuggestionKind.MORE_GPUS, "more GPUs", replace(request, pools=bigger))]
    technique_changes: list[tuple[bool, str, SearchSpace]] = [
        (
            search.disaggregation is Disaggregation.NEVER,
            "allow P/D disaggregation",
            replace(search, disaggregation=Disaggregation.ALWAYS),
        ),
        (
            search.speculative is SpeculativeMode.OFF,
            "allow speculative decoding",
            replace(search, speculative=SpeculativeMode.AUTO),
        ),
        (not search.attention_dp and request.arch.is_moe, "allow attention DP", replace(search, attention_dp=True)),
        (not search.multi_node, "allow multi-node replicas", replace(search, multi_node=True)),
        (
            search.max_tp is not None or search.max_ep is not None,
            "lift the TP/EP limits",
            replace(search, max_tp=None, max_ep=None),
        ),
    ]
    for applies, text, space in technique_changes:
        if applies:
            changes.append(_Relaxation(SuggestionKind.ALLOW_TECHNIQUE, text, replace(request, search=space)))
    allowed = {fmt.name for fmt in search.quantizations}
    for fmt in search.fallback_quantizations:
        if fmt.name not in allowed and _could_help(request, fmt):
            space = replace(search, quantizations=(fmt,))
            changes.append(
                _Relaxation(SuggestionKind.ALLOW_FORMAT, f"allow {fmt.name} weights", replace(request, search=space))
            )
    smallest_kv = min(kv.bytes_per_element for kv in search.kv_cache_formats)
    for kv in search.fallback_kv_cache_formats:
        if kv.bytes_per_element < smallest_kv and any(kv_cache_supported(kv, pool.gpu) for pool in request.pools):
            space = replace(search, kv_cache_formats=(kv,))
            changes.append(
                _Relaxation(SuggestionKind.ALLOW_FORMAT, f"allow a {kv.name} KV cache", replace(request, search=space))
            )
    if any(s.reason is RejectionReason.QUALITY_BUDGET_EXCEEDED for s in summaries):
        budget = max(search.max_quality_loss_pct * 2, search.max_quality_loss_pct + 1.0)
        space = replace(search, max_quality_loss_pct=budget)
        changes.append(
            _Relaxation(
                SuggestionKind.RAISE_QUALITY_BUDGET,
                f"a {budget:g} % quality-loss budget",
                replace(request, search=space),
            )
        )
    return changes


def _relaxed_suggestions(
    request: PlanRequest, cache: PredictionCache, relaxations: Sequence[_Relaxation]
) -> list[Suggestion]:
    """Re-plan with each relaxation while the diagnosis budget lasts; keep those that become feasible."""
    suggestions: list[Suggestion] = []
    solved: set[str] = set()
    spent_before = cache.calls
    for relaxation in relaxations:
        if relaxation.key and relaxation.key in solved:
            continue
        remaining = DIAGNOSIS_PREDICTION_BUDGET - (cache.calls - spent_before)
        if remaining <= 0:
            break
        outcome = run_search(relaxation.request, cache, min(RELAXATION_PREDICTION_BUDGET, remaining))
        ranked = rank(request.objective, outcome.candidates)
        if not ranked:
            continue
        best = ranked[0]
        if relaxation.kind is SuggestionKind.MORE_GPUS:
            original = next(pool for pool in request.pools if pool.name == best.pool.name)
            allows = f"it allows {original.max_gpus}; {_brief(best)}"
            text = f"or ≥ {best.config.total_gpus} GPUs in pool {original.name} ({allows})"
        elif relaxation.kind is SuggestionKind.RELAX_SLO:
            solved.add(relaxation.key)
            text = f"{relaxation.text} ({_brief(best)})"
        else:
            text = f"or {relaxation.text} ({_brief(best)})"
        suggestions.append(Suggestion(relaxation.kind, text))
    return suggestions


def _brief(candidate: Evaluated) -> str:
    return f"{candidate.config.total_gpus} GPUs, {dollars(candidate.prediction.cost_per_mtok)}"


def _floor_suggestion(request: PlanRequest, outcome: SearchOutcome) -> list[Suggestion]:
    """When the physics rules out every layout, the bound each per-token SLO would need."""
    floors = []
    formats = {fmt.name: fmt for fmt in (*request.search.quantizations, *request.search.fallback_quantizations)}
    for rejection in outcome.rejections:
        if rejection.reason is not RejectionReason.BELOW_PHYSICAL_FLOOR or rejection.worker is None:
            continue
        pool = next((p for p in request.pools if p.gpu.name == rejection.worker.gpu), None)
        fmt = formats.get(rejection.worker.weight_format)
        if pool is not None and fmt is not None:
            floors.append(per_token_floor_s(request.arch, pool.gpu, fmt, rejection.worker))
    bounds = [bound for bound in request.slos if bound.metric in PER_TOKEN_METRICS]
    if not floors or not bounds:
        return []
    needed = _round_up(min(floors))
    return [
        Suggestion(
            SuggestionKind.RELAX_SLO,
            f"needs {bound.label} ≥ {ms(needed)}: below that no layout can stream the weights fast enough",
        )
        for bound in bounds
        if bound.limit_s < needed
    ]


def diagnose(
    *,
    request: PlanRequest,
    outcome: SearchOutcome,
    cache: PredictionCache,
    front: tuple[FrontierPoint, ...],
    curves: tuple[TechniqueCurve, ...],
    shifts: tuple[TechniqueShift, ...],
    summaries: tuple[RejectionSummary, ...],
    stats: SearchStats,
) -> Infeasible:
    allowed = [c for c in outcome.candidates if c.allowed]
    nearest = _nearest(allowed)
    budget = ", ".join(f"{pool.max_gpus} {pool.gpu.name}" for pool in request.pools)
    bounds = ", ".join(f"{b.label} ≤ {ms(b.limit_s)}" for b in request.slos)
    suggestions: list[Suggestion] = []
    if nearest is None:
        floor = _floor_suggestion(request, outcome)
        reason = InfeasibleReason.BELOW_PHYSICAL_FLOOR if floor else InfeasibleReason.NO_LEGAL_CONFIGURATION
        summary = (
            f"no configuration can reach {bounds} on {budget}: below the physical floor"
            if floor
            else f"no legal SGLang configuration of {request.arch.name} fits {budget}"
        )
        suggestions += floor
    else:
        over_budget = any(c.meets_slo and c.sustains_rate and not c.within_budget for c in allowed)
        reason = InfeasibleReason.OVER_BUDGET if over_budget else InfeasibleReason.SLO_UNREACHABLE
        summary = f"no configuration meets {bounds} within {budget} GPUs"
    relaxations = [*_slo_relaxations(request, outcome, nearest), *_relaxations(request, summaries)]
    suggestions += _relaxed_suggestions(request, cache, relaxations)
    if not any(s.kind is SuggestionKind.RELAX_SLO for s in suggestions):
        suggestions += _reach_notes(request, outcome)
    explanation: list[str] = [summary]
    if nearest is not None:
        explanation.append(f"nearest: {fleet_sentence(nearest)}")
        explanation += [slo_sentence(check) for check in nearest.checks]
    if suggestions:
        explanation.append("to make it feasible: " + "; ".join(s.text for s in suggestions))
    explanation += [shift_sentence(shift) for shift in shifts]
    sentence = rejection_sentence(summaries)
    if sentence:
        explanation.append(sentence)
    return Infeasible(
        reason=reason,
        summary=summary,
        nearest=nearest,
        suggestions=tuple(_unique(suggestions, lambda s: s.text)),
        frontier=front,
        curves=curves,
        technique_shifts=shifts,
        rejections=summaries,
        explanation=tuple(explanation),
        stats=stats,
    )


def _unique(items: Sequence[Suggestion], key: Callable[[Suggestion], str]) -> list[Suggestion]:
    seen: set[str] = set()
    unique = []
    for item in items:
        if key(item) not in seen:
            seen.add(key(item))
            unique.append(item)
    return unique
