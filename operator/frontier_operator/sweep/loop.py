"""A whole sweep as a pure function of a way to measure: plan → points → measurements → re-plan → …

`run_sweep` is what the twin (`frontier simulate --sweep`, `bench/sweep.py`) runs in one go and what the
operator runs one round at a time (Jobs in between): plan the sweep with the budget left, measure each unit's
points (one deployment, levels in order), fold the measurements into a `SweepPredictor`, re-plan. When the new
plan chooses a configuration not measured yet and budget is left, another round measures it; the sweep stops
when the choice is measured, nothing is worth measuring, the budget is spent, or `max_rounds` is reached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from frontier_operator.planner.plan import MAX_PREDICTIONS, make_plan
from frontier_operator.planner.search import PredictionCache, run_search
from frontier_operator.planner.types import Evaluated, Infeasible, Plan, PlanRequest, Predictor
from frontier_operator.sweep.choose import operating_level, plan_sweep, warmup_gpu_minutes
from frontier_operator.sweep.predictor import SweepPredictor
from frontier_operator.sweep.types import SweepMeasurement, SweepPlan, SweepPoint, SweepSettings
from frontier_operator.sweep.units import unit_key

# Measures the points of one deployment (same unit key), in order; returns what it measured.
Measure = Callable[[Sequence[SweepPoint]], Sequence[SweepMeasurement]]
DEFAULT_MAX_ROUNDS = 3


@dataclass(frozen=True)
class SweepRound:
    sweep: SweepPlan
    measurements: tuple[SweepMeasurement, ...]
    gpu_minutes: float
    plan_after: Plan | Infeasible


@dataclass(frozen=True)
class SweepOutcome:
    initial: Plan
    final: Plan | Infeasible
    rounds: tuple[SweepRound, ...]
    measurements: tuple[SweepMeasurement, ...]
    gpu_minutes: float
    budget_gpu_minutes: float

    @property
    def swept_points(self) -> int:
        return sum(len(r.measurements) for r in self.rounds)

    @property
    def explanation(self) -> tuple[str, ...]:
        lines: list[str] = []
        for index, r in enumerate(self.rounds, start=1):
            lines.append(f"round {index}: {r.sweep.explanation[0]}; spent {r.gpu_minutes:.1f} GPU-min")
            lines += [f"  {line}" for line in r.sweep.explanation[1:]]
        return tuple(lines)


def search_candidates(request: PlanRequest, predictor: Predictor) -> tuple[Evaluated, ...]:
    """Every sized fleet of the planner's search with `predictor` (what the sweep chooses alternatives from)."""
    return tuple(run_search(request, PredictionCache(predictor), MAX_PREDICTIONS).candidates)


def sweep_predictor(base: Predictor, measurements: Sequence[SweepMeasurement]) -> Predictor:
    return SweepPredictor(base, tuple(measurements)) if measurements else base


def replan(request: PlanRequest, base: Predictor, measurements: Sequence[SweepMeasurement]) -> Plan | Infeasible:
    return make_plan(request, sweep_predictor(base, measurements))


def choice_measured(plan: Plan, measurements: Sequence[SweepMeasurement], settings: SweepSettings) -> bool:
    """The plan's choice was measured at its operating level."""
    key, level = unit_key(plan.chosen.config), operating_level(plan.chosen, settings)
    return any(m.key == key and m.concurrency == level for m in measurements)


def _by_unit(points: Sequence[SweepPoint]) -> list[list[SweepPoint]]:
    groups: dict[str, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(point.key, []).append(point)
    return list(groups.values())


def run_sweep(
    request: PlanRequest,
    base: Predictor,
    *,
    budget_gpu_minutes: float,
    measure: Measure,
    measured: Sequence[SweepMeasurement] = (),
    settings: SweepSettings | None = None,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
) -> SweepOutcome | Infeasible:
    """Sweep within the budget and re-plan on the measurements (Infeasible when the target never plans)."""
    settings = settings or SweepSettings()
    known = list(measured)
    first = replan(request, base, known)
    if not isinstance(first, Plan):
        return first
    plan: Plan | Infeasible = first
    rounds: list[SweepRound] = []
    spent = 0.0
    for _ in range(max_rounds):
        if not isinstance(plan, Plan):
            break
        predictor = sweep_predictor(base, known)
        candidates = search_candidates(request, predictor)
        sweep = plan_sweep(
            plan, candidates, request, base, budget_gpu_minutes - spent, measured=known, settings=settings
        )
        if not sweep.points:
            break
        new: list[SweepMeasurement] = []
        used = 0.0
        for unit_points in _by_unit(sweep.points):
            estimate = warmup_gpu_minutes(unit_points[0], settings) + sum(p.run_gpu_minutes for p in unit_points)
            if spent + used + estimate > budget_gpu_minutes:
                # Runs took longer than estimated: what is left no longer covers this unit.
                continue
            results = list(measure(unit_points))
            used += warmup_gpu_minutes(unit_points[0], settings) + sum(m.gpu_minutes for m in results)
            new += results
        spent += used
        known += new
        plan = replan(request, base, known)
        rounds.append(SweepRound(sweep, tuple(new), used, plan))
        if not isinstance(plan, Plan) or choice_measured(plan, known, settings):
            break
    return SweepOutcome(
        initial=first,
        final=plan,
        rounds=tuple(rounds),
        measurements=tuple(known),
        gpu_minutes=spent,
        budget_gpu_minutes=budget_gpu_minutes,
    )
