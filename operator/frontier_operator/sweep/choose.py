"""`plan_sweep`: the few (configuration, concurrency) points whose measurement would most change the decision.

The plan's choice is only as good as the model's numbers. A measurement is worth its GPU-minutes where it can
change what is deployed:

* **the chosen configuration** at its operating load, always first: it is what will serve, and a measurement
  there replaces the model's guess by the truth;
* **its knee**, the chosen unit at its batch cap: whether the largest batch the plan allows still meets the
  per-token SLO (the cap was set by the model's TPOT curve);
* **alternatives that may be better**, one per measured unit (runner-ups and every other structure the search
  sized), ranked by the chance that the truth puts them ahead: with log-normal model errors of σ₁ and σ₂
  (the predictions' `uncertainty`, or `MEASURED_SIGMA` once measured) and a predicted cost gap Δ = ln(c₂/c₁),
  the chance the alternative is really cheaper is Φ(−Δ / √(σ₁² + σ₂²)); times the chance it really meets the
  SLO, Φ(ln(limit / predicted) / σ₂) for its worst bound. Runner-ups within the margin rank high by
  construction; configurations the model knows least (largest σ, nothing measured) rank high because of σ.

Each alternative is measured at its own operating load. Points are added greedily — value per GPU-minute —
while the budget lasts; a unit's deploy and warm-up is charged once for all its points. Alternatives below
`min_flip_probability` are left out as not close. What was already measured (same unit, same level) is not
measured again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from frontier_operator.perf.types import ServingConfig
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import Evaluated, GpuPool, Plan, PlanRequest, Predictor
from frontier_operator.sweep.predict import predict_at_concurrency
from frontier_operator.sweep.types import SweepMeasurement, SweepPlan, SweepPoint, SweepReason, SweepSettings
from frontier_operator.sweep.units import (
    decode_workers_per_unit,
    measured_unit,
    nearest_level,
    unit_cap,
    unit_key,
    unit_load,
    with_decode_cap,
)


def normal_cdf(z: float) -> float:
    return 0.5 * math.erfc(-z / math.sqrt(2.0))


def worst_slo_ratio(candidate: Evaluated) -> float:
    """Predicted / limit of the candidate's worst SLO bound (the raw limit, no safety margin)."""
    return max((check.predicted_s / check.bound.limit_s for check in candidate.checks), default=0.0)


def chance_feasible(candidate: Evaluated, sigma: float) -> float:
    ratio = worst_slo_ratio(candidate)
    if ratio <= 0:
        return 1.0
    if not math.isfinite(ratio):
        return 0.0
    return normal_cdf(-math.log(ratio) / max(sigma, 1e-6))


def chance_cheaper(alternative: Evaluated, chosen: Evaluated, sigma_alt: float, sigma_chosen: float) -> float:
    gap = math.log(alternative.prediction.cost_per_mtok / chosen.prediction.cost_per_mtok)
    spread = math.sqrt(sigma_alt**2 + sigma_chosen**2)
    return normal_cdf(-gap / max(spread, 1e-6))


@dataclass(frozen=True)
class _Option:
    candidate: Evaluated
    reason: SweepReason
    value: float
    why: str


def _sigma(candidate: Evaluated, measured_keys: set[str], settings: SweepSettings) -> float:
    if unit_key(candidate.config) in measured_keys:
        return settings.measured_sigma
    return max(candidate.prediction.uncertainty, settings.measured_sigma)


def best_per_unit(candidates: Sequence[Evaluated]) -> dict[str, Evaluated]:
    """The cheapest sized fleet of each measured unit among candidates the spec allows and the pools hold."""
    best: dict[str, Evaluated] = {}
    for candidate in candidates:
        if not (candidate.allowed and candidate.within_budget and candidate.sustains_rate):
            continue
        key = unit_key(candidate.config)
        held = best.get(key)
        if held is None or candidate.prediction.cost_per_mtok < held.prediction.cost_per_mtok:
            best[key] = candidate
    return best


def _options(
    plan: Plan, candidates: Sequence[Evaluated], measured_keys: set[str], settings: SweepSettings
) -> tuple[list[_Option], list[tuple[str, str]]]:
    chosen = plan.chosen
    chosen_key = unit_key(chosen.config)
    runner_up_keys = {unit_key(r.candidate.config) for r in plan.runner_ups}
    sigma_chosen = _sigma(chosen, measured_keys, settings)
    options: list[_Option] = []
    skipped: list[tuple[str, str]] = []
    pool = {chosen_key: chosen, **{k: v for k, v in best_per_unit(candidates).items() if k != chosen_key}}
    for r in plan.runner_ups:
        pool.setdefault(unit_key(r.candidate.config), r.candidate)
    for key, candidate in pool.items():
        if key == chosen_key:
            continue
        sigma = _sigma(candidate, measured_keys, settings)
        cheaper = chance_cheaper(candidate, chosen, sigma, sigma_chosen)
        feasible = chance_feasible(candidate, sigma)
        value = cheaper * feasible
        name = describe_config(candidate.config)
        gap = (candidate.prediction.cost_per_mtok / chosen.prediction.cost_per_mtok - 1) * 100
        why = (
            f"predicted {gap:+.0f} % $/Mtok against the choice with {sigma:.0%} model error: "
            f"{cheaper:.0%} chance it is really cheaper, {feasible:.0%} that it meets the SLO"
        )
        if value < settings.min_flip_probability:
            skipped.append((name, f"not close: {why}"))
            continue
        reason = SweepReason.RUNNER_UP if key in runner_up_keys else SweepReason.UNCERTAIN
        options.append(_Option(candidate, reason, value, why))
    options.sort(key=lambda o: -o.value)
    return options, skipped


def make_point(
    unit: ServingConfig,
    pool: GpuPool,
    *,
    request: PlanRequest,
    predictor: Predictor,
    concurrency: int,
    reason: SweepReason,
    detail: str,
    settings: SweepSettings,
) -> SweepPoint | None:
    """The point `unit` at `concurrency`, with the model's prediction and its run time; None when the model
    cannot put a number on it."""
    workload = request.workload
    predicted = predict_at_concurrency(
        predictor, request.arch, pool=pool, unit=unit, workload=workload, concurrency=concurrency
    )
    if predicted is None or predicted.request_rate_per_s <= 0:
        return None
    prompts = settings.prompts(concurrency)
    run_s = prompts / predicted.request_rate_per_s + predicted.ttft_p50_s
    return SweepPoint(
        unit=unit,
        pool=pool.name,
        concurrency=concurrency,
        reason=reason,
        detail=detail,
        predicted=predicted,
        num_prompts=prompts,
        run_s=run_s,
        run_gpu_minutes=run_s * unit.total_gpus / 60.0,
        key=unit_key(unit),
        input_tokens=workload.input_tokens.mean,
        output_tokens=workload.output_tokens.mean,
        input_cv=workload.input_tokens.cv,
        output_cv=workload.output_tokens.cv,
    )


def operating_level(candidate: Evaluated, settings: SweepSettings) -> int:
    return nearest_level(unit_load(candidate.config, candidate.prediction), settings.levels, unit_cap(candidate.config))


def warmup_gpu_minutes(point: SweepPoint, settings: SweepSettings) -> float:
    return settings.warmup_s * point.unit.total_gpus / 60.0


def _unit_points(
    candidate: Evaluated,
    *,
    reason: SweepReason,
    why: str,
    request: PlanRequest,
    predictor: Predictor,
    measured: set[tuple[str, int]],
    settings: SweepSettings,
    with_knee: bool,
) -> list[SweepPoint]:
    key = unit_key(candidate.config)
    unit = measured_unit(candidate.config)
    level = _measurable_level(candidate, unit, request, predictor, settings)
    load = unit_load(candidate.config, candidate.prediction)
    detail = f"{why}; operating load ≈ {load:.3g} in flight per unit → level {level}"
    if level != operating_level(candidate, settings):
        detail += (
            " (the benchmark's prompts share no prefix, so without the target's cache hits the unit saturates "
            "below its operating level: measured at the highest level it holds)"
        )
    wanted = [(level, unit, reason, detail)]
    if with_knee and candidate.knee is not None:
        wanted = _knee_points(candidate, unit, level, settings) + wanted
    points = []
    for concurrency, point_unit, point_reason, detail in wanted:
        if (key, concurrency) in measured:
            continue
        point = make_point(
            point_unit,
            candidate.pool,
            request=request,
            predictor=predictor,
            concurrency=concurrency,
            reason=point_reason,
            detail=detail,
            settings=settings,
        )
        if point is not None:
            points.append(point)
    return points


def _measurable_level(
    candidate: Evaluated, unit: ServingConfig, request: PlanRequest, predictor: Predictor, settings: SweepSettings
) -> int:
    """The operating level, or the highest level below it that the benchmark can hold in flight."""
    level = operating_level(candidate, settings)
    for lower in sorted((lv for lv in settings.levels if lv <= level), reverse=True):
        found = predict_at_concurrency(
            predictor, request.arch, pool=candidate.pool, unit=unit, workload=request.workload, concurrency=lower
        )
        if found is not None:
            return lower
    return level


def _knee_points(
    candidate: Evaluated, unit: ServingConfig, level: int, settings: SweepSettings
) -> list[tuple[int, ServingConfig, SweepReason, str]]:
    """The knee bracketed: the level of the next cap the model tried (and refused) and the level above it.

    The cap was set where the model's TPOT curve, shrunk by the safety margin, crossed the per-token SLO; two
    measured levels there give the truth's slope across the knee, which is what moves the cap (and with it
    how many replicas the rate needs). Placed first when a per-token SLO set the knee: it sized the fleet.
    """
    knee = candidate.knee
    if knee is None:
        return []
    workers = decode_workers_per_unit(candidate.config)
    ladder = sorted(settings.levels)
    first = nearest_level((knee.next_cap or knee.cap) * workers, settings.levels, max(ladder, default=1))
    above = [lv for lv in ladder if lv > first][:1]
    levels = [lv for lv in (first, *above) if lv > level]
    points = []
    for knee_level in levels:
        cap = math.ceil(knee_level / workers)
        detail = (
            f"the batch-cap knee: the model stopped the cap at {knee.cap} per worker"
            + (f" before {knee.next_cap}" if knee.next_cap else "")
            + f"; measured at {knee_level} in flight (cap raised to {cap} for the run)"
        )
        points.append((knee_level, with_decode_cap(unit, cap), SweepReason.KNEE, detail))
    return points if knee.binding is not None else []


def plan_sweep(
    plan: Plan,
    candidates: Sequence[Evaluated],
    request: PlanRequest,
    predictor: Predictor,
    budget_gpu_minutes: float,
    *,
    measured: Sequence[SweepMeasurement] = (),
    settings: SweepSettings | None = None,
) -> SweepPlan:
    """Choose the points to measure within `budget_gpu_minutes` (see the module docstring).

    `plan` and `candidates` come from the planner (`make_plan`, `run_search`) with the best predictor known
    (measurements already folded in); `predictor` is the raw model, whose predictions the measurements are
    compared with."""
    settings = settings or SweepSettings()
    done = {(m.key, m.concurrency) for m in measured}
    measured_keys = {m.key for m in measured}
    chosen = plan.chosen
    remaining = budget_gpu_minutes
    points: list[SweepPoint] = []
    explanation: list[str] = []
    skipped: list[tuple[str, str]] = []

    deployed: set[str] = set()

    def cost_of(unit_points: list[SweepPoint]) -> float:
        warmup = 0.0 if unit_points[0].key in deployed else warmup_gpu_minutes(unit_points[0], settings)
        return warmup + sum(p.run_gpu_minutes for p in unit_points)

    def take(unit_points: list[SweepPoint], name: str) -> bool:
        nonlocal remaining
        # In priority order, each point that still fits (a cheaper later point may fit where one did not).
        kept: list[SweepPoint] = []
        for point in unit_points:
            if cost_of([*kept, point]) <= remaining:
                kept.append(point)
        unit_points = kept
        if not unit_points:
            skipped.append((name, f"over the budget: {remaining:.1f} GPU-min left"))
            return False
        cost = cost_of(unit_points)
        points.extend(unit_points)
        deployed.add(unit_points[0].key)
        remaining -= cost
        levels = ", ".join(str(p.concurrency) for p in unit_points)
        explanation.append(
            f"{name} at concurrency {levels} ({cost:.1f} GPU-min, warm-up included): "
            + "; ".join(p.detail for p in unit_points)
        )
        return True

    chosen_name = describe_config(chosen.config)
    chosen_points = _unit_points(
        chosen,
        reason=SweepReason.CHOSEN,
        why="the configuration the plan deploys",
        request=request,
        predictor=predictor,
        measured=done,
        settings=settings,
        with_knee=True,
    )
    if not chosen_points and unit_key(chosen.config) in measured_keys:
        explanation.append(f"{chosen_name}: already measured at its operating load and knee")
    take(chosen_points, chosen_name)
    options, not_close = _options(plan, candidates, measured_keys, settings)
    skipped.extend(not_close)
    for option in options:
        name = describe_config(option.candidate.config)
        unit_points = _unit_points(
            option.candidate,
            reason=option.reason,
            why=option.why,
            request=request,
            predictor=predictor,
            measured=done,
            settings=settings,
            with_knee=False,
        )
        if not unit_points:
            continue
        take(unit_points, name)
    spent = budget_gpu_minutes - remaining
    head = (
        f"{len(points)} point(s) on {len({p.key for p in points})} configuration(s), {spent:.1f} of "
        f"{budget_gpu_minutes:.1f} GPU-min"
    )
    if not points:
        head = "nothing to measure: " + (
            "the decision is not close and the choice is already measured"
            if not skipped or all(s[1].startswith("not close") for s in skipped)
            else "the budget does not cover one more configuration"
        )
    return SweepPlan(
        points=tuple(points),
        gpu_minutes=spent,
        budget_gpu_minutes=budget_gpu_minutes,
        explanation=(head, *explanation),
        skipped=tuple(skipped),
    )


def exhaustive_points(
    units: Sequence[tuple[ServingConfig, GpuPool]],
    request: PlanRequest,
    predictor: Predictor,
    settings: SweepSettings | None = None,
) -> list[SweepPoint]:
    """Every unit at every concurrency level up to its batch cap (a Dynamo-style pre-deployment profile);
    levels the model cannot put a number on are left out (nothing to compare a measurement with)."""
    settings = settings or SweepSettings()
    points: list[SweepPoint] = []
    seen: set[str] = set()
    for config, pool in units:
        unit = measured_unit(config)
        key = unit_key(unit)
        if key in seen:
            continue
        seen.add(key)
        for level in settings.levels:
            if level > unit_cap(unit):
                break
            point = make_point(
                unit,
                pool,
                request=request,
                predictor=predictor,
                concurrency=level,
                reason=SweepReason.UNCERTAIN,
                detail="exhaustive sweep",
                settings=settings,
            )
            if point is not None:
                points.append(point)
    return points
