"""`make_plan`: the whole planner as one pure function of the request and the performance model."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from frontier_operator.perf.types import Role
from frontier_operator.planner.choose import rank
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.explain import difference, explain_plan, ms
from frontier_operator.planner.frontier import frontier
from frontier_operator.planner.infeasible import context_beyond_model, diagnose
from frontier_operator.planner.search import PredictionCache, SearchOutcome, run_search
from frontier_operator.planner.techniques import technique_curves, technique_shifts
from frontier_operator.planner.types import (
    Evaluated,
    Infeasible,
    Plan,
    PlanRequest,
    Predictor,
    Rejection,
    RejectionReason,
    RejectionSummary,
    RunnerUp,
    SearchStats,
)

MAX_RUNNER_UPS = 3
# A safety valve, far above what any example needs: past it the search stops and says so.
MAX_PREDICTIONS = 4000


def make_plan(request: PlanRequest, predictor: Predictor | PredictionCache) -> Plan | Infeasible:
    """Search every legal configuration, choose by the objective under every SLO, and explain the choice.

    Pass a `PredictionCache` to share predictions between plans of the same model (re-plans on every
    tuning tick ask mostly the same questions).
    """
    cache = predictor if isinstance(predictor, PredictionCache) else PredictionCache(predictor)
    beyond = context_beyond_model(request)
    if beyond is not None:
        return beyond
    calls_before = cache.calls
    outcome = run_search(request, cache, MAX_PREDICTIONS)
    rejections = [*outcome.rejections, *_unmet(outcome.candidates)]
    summaries = summarize(rejections)
    points = outcome.points
    front = frontier([p for p in points if p.allowed])
    curves = technique_curves(points)
    shifts = technique_shifts(request, outcome.candidates, points, outcome.tried)
    ranked = rank(request.objective, outcome.candidates)
    if not ranked:
        return diagnose(
            request=request,
            outcome=outcome,
            cache=cache,
            front=front,
            curves=curves,
            shifts=shifts,
            summaries=summaries,
            stats=_stats(outcome, cache, calls_before),
        )
    chosen = ranked[0]
    runner_ups = tuple(_runner_up(chosen, other) for other in _distinct(ranked)[1 : 1 + MAX_RUNNER_UPS])
    explanation = explain_plan(
        request=request,
        chosen=chosen,
        runner_ups=runner_ups,
        candidates=outcome.candidates,
        shifts=shifts,
        rejections=rejections,
        summaries=summaries,
    )
    return Plan(
        chosen=chosen,
        runner_ups=runner_ups,
        frontier=front,
        curves=curves,
        technique_shifts=shifts,
        rejections=summaries,
        explanation=explanation,
        stats=_stats(outcome, cache, calls_before),
    )


def _distinct(ranked: Sequence[Evaluated]) -> list[Evaluated]:
    """Ranked fleets, keeping the first of each kind (pool, serving mode, weights, speculation, GPUs).

    Variants that differ only in KV format or expert layout at the same size tell the reader nothing new.
    """
    seen: set[tuple[object, ...]] = set()
    distinct = []
    for candidate in ranked:
        worker = (candidate.config.role(Role.DECODE) or candidate.config.roles[0]).worker
        kind = (
            candidate.pool.name,
            candidate.config.disaggregated,
            worker.weight_format,
            worker.speculative,
            candidate.config.total_gpus,
        )
        if kind not in seen:
            seen.add(kind)
            distinct.append(candidate)
    return distinct


def _runner_up(chosen: Evaluated, other: Evaluated) -> RunnerUp:
    cost_delta = (other.prediction.cost_per_mtok / chosen.prediction.cost_per_mtok - 1) * 100
    gpu_delta = other.config.total_gpus - chosen.config.total_gpus
    return RunnerUp(other, cost_delta, gpu_delta, difference(chosen, other))


def _unmet(candidates: Sequence[Evaluated]) -> list[Rejection]:
    """Sized fleets that lost on the SLO or the budget, as rejections for the summary."""
    rejections = []
    for candidate in candidates:
        if not candidate.allowed or candidate.feasible:
            continue
        name = describe_config(candidate.config)
        missed = [check for check in candidate.checks if not check.met]
        if missed:
            worst = max(missed, key=lambda check: check.ratio)
            detail = (
                f"{worst.bound.label} {ms(worst.predicted_s)} exceeds {ms(worst.required_s)} "
                f"(the {ms(worst.bound.limit_s)} limit less the {worst.margin * 100:.0f} % margin)"
            )
            rejections.append(Rejection(name, RejectionReason.SLO_UNREACHABLE, detail))
        elif not candidate.within_budget:
            detail = (
                f"needs {candidate.config.total_gpus} GPUs; pool {candidate.pool.name} allows {candidate.pool.max_gpus}"
            )
            rejections.append(Rejection(name, RejectionReason.OVER_BUDGET, detail))
        else:
            detail = f"sustains only {candidate.prediction.max_request_rate_per_s:.3g} requests/s"
            rejections.append(Rejection(name, RejectionReason.OVER_BUDGET, detail))
    return rejections


def summarize(rejections: Sequence[Rejection]) -> tuple[RejectionSummary, ...]:
    counts = Counter(r.reason for r in rejections)
    examples: dict[RejectionReason, Rejection] = {}
    for rejection in rejections:
        examples.setdefault(rejection.reason, rejection)
    return tuple(RejectionSummary(reason, count, examples[reason]) for reason, count in counts.most_common())


def _stats(outcome: SearchOutcome, cache: PredictionCache, calls_before: int) -> SearchStats:
    return SearchStats(
        shapes_considered=outcome.shapes,
        candidates_evaluated=len(outcome.candidates),
        predictions=cache.calls - calls_before,
        rejected=len(outcome.rejections),
        pruned=outcome.pruned,
        unexplored=outcome.unexplored,
    )
