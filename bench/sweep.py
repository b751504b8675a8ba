"""Sweep benchmark: what a budgeted sweep buys against the model alone and against an exhaustive sweep.

On the twin with measured truths cut from the silicon CSV (the dedicated targets in `bench/targets/`, each on
the table it is named after), three plans of the same target are compared:

* (a) **model-only**: the planner's plan with the performance model alone (what the operator deploys without
  a sweep);
* (b) **budgeted sweep**: `sweep.loop.run_sweep` with `--budget` GPU-minutes (default 30, the issue's bound):
  the chosen configuration, its knee and the alternatives most likely to beat it, measured by the twin
  answering the rendered benchmark Jobs, then re-planned;
* (c) **exhaustive sweep** (Dynamo-style pre-deployment profiling): every configuration the table holds (and
  every layout of the planner's search) at every concurrency level of the ladder up to its batch cap,
  measured the same way, then re-planned.

Each plan's chosen configuration is priced on the truth: its layout (structure and batch cap) re-sized by
simulation to the cheapest fleet that meets every SLO (`sim.oracle.find_oracle`), in $/Mtok. The oracle is the
cheapest such fleet over every configuration (`compute_oracle`). GPU-minutes of a sweep: each deployment's
warm-up (`sweep.types.DEFAULT_WARMUP_S`, an assumption) plus every run's simulated duration × the unit's GPUs.

Goal (issue 8): (b) within 2 % of (c)'s $/Mtok at ≤ 10 % of (c)'s GPU-minutes, and never worse than (a).
Writes `bench/results/sweep.json` and prints one summary line.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontier_operator.api import load_target_file
from frontier_operator.perf.types import ServingConfig
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import Plan
from frontier_operator.sim.closed_loop import Setup, compute_oracle, oracle_candidates, prepare
from frontier_operator.sim.measured import MeasuredTruth
from frontier_operator.sim.oracle import find_oracle
from frontier_operator.sim.sweep import twin_measure
from frontier_operator.sim.table_search import snap_to_table
from frontier_operator.sweep.choose import exhaustive_points, warmup_gpu_minutes
from frontier_operator.sweep.loop import SweepOutcome, replan, run_sweep
from frontier_operator.sweep.results import comparison_rows
from frontier_operator.sweep.types import SweepMeasurement, SweepSettings

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "sweep.json"
TARGETS = (("qwen3-32b-h100-table", "qwen3-32b-h100"), ("deepseek-r1-h200-table", "deepseek-r1-h200"))
# The bound (spec.sweep.budget's default) first, then larger budgets to show where the goal is reached.
BUDGETS = (30.0, 60.0, 120.0, 240.0, 480.0)
GOAL_COST_GAP = 0.02
GOAL_GPU_SHARE = 0.10


@dataclass(frozen=True)
class Priced:
    config: str
    layout_cost_per_mtok: float | None
    resized: str | None


def _price(setup: Setup, config: ServingConfig, seed: int) -> Priced:
    """The layout's cheapest SLO-meeting fleet on the truth (re-sized by simulation)."""
    truth = setup.truth
    if isinstance(truth, MeasuredTruth):
        config = snap_to_table(truth.table, config)
    found = find_oracle(
        truth,
        [config],
        setup.request.workload,
        setup.request.slos,
        setup.prices,
        max_gpus=max(p.max_gpus for p in setup.request.pools),
        seed=seed,
        measure_s=1200.0,
        max_simulations=12,
    )
    resized = describe_config(found.config) if found.config is not None else None
    return Priced(describe_config(config), found.cost_per_mtok, resized)


def _exhaustive(setup: Setup, seed: int, settings: SweepSettings) -> tuple[list[SweepMeasurement], float, int]:
    pool = setup.plan.chosen.pool
    units = [(config, pool) for config in oracle_candidates(setup, limit=64)]
    points = exhaustive_points(units, setup.request, setup.predictor, settings)
    measure = twin_measure(setup.target, setup.truth, setup.request.workload, seed=seed)
    measured: list[SweepMeasurement] = []
    gpu_minutes = 0.0
    by_key: dict[str, list[Any]] = {}
    for point in points:
        by_key.setdefault(point.key, []).append(point)
    for unit_points in by_key.values():
        results = list(measure(unit_points))
        gpu_minutes += warmup_gpu_minutes(unit_points[0], settings) + sum(m.gpu_minutes for m in results)
        measured += results
    return measured, gpu_minutes, len(by_key)


def _row(name: str, plan: Any, priced: Priced | None, gpu_minutes: float, points: int) -> dict[str, Any]:
    chosen = plan.chosen if isinstance(plan, Plan) else None
    return {
        "plan": name,
        "chosen": describe_config(chosen.config) if chosen is not None else None,
        "predicted_cost_per_mtok": round(chosen.prediction.cost_per_mtok, 4) if chosen is not None else None,
        "true_cost_per_mtok": round(priced.layout_cost_per_mtok, 4) if priced and priced.layout_cost_per_mtok else None,
        "resized_on_truth": priced.resized if priced else None,
        "gpu_minutes": round(gpu_minutes, 1),
        "points": points,
    }


def _budgeted(setup: Setup, budget: float, seed: int, settings: SweepSettings) -> SweepOutcome:
    outcome = run_sweep(
        setup.request,
        setup.predictor,
        budget_gpu_minutes=budget,
        measure=twin_measure(setup.target, setup.truth, setup.request.workload, seed=seed),
        settings=settings,
    )
    assert isinstance(outcome, SweepOutcome)
    return outcome


def _verdict(model: float | None, budgeted: float | None, full: float | None, share: float | None) -> dict[str, Any]:
    gap = budgeted / full - 1 if budgeted and full else None
    not_worse = bool(budgeted and model and budgeted <= model * (1 + 1e-9))
    met = gap is not None and share is not None and gap <= GOAL_COST_GAP and share <= GOAL_GPU_SHARE and not_worse
    return {
        "cost_gap_vs_exhaustive": round(gap, 4) if gap is not None else None,
        "gpu_minutes_share_of_exhaustive": round(share, 4) if share is not None else None,
        "not_worse_than_model": not_worse,
        "goal_met": met,
    }


def run_target(name: str, truth: str, *, budgets: tuple[float, ...], seed: int) -> dict[str, Any]:
    started = time.monotonic()
    setup = prepare(load_target_file(ROOT / "bench" / "targets" / f"{name}.yaml"), truth_spec=truth, seed=seed)
    settings = SweepSettings()
    model_plan = setup.plan
    exhaustive, exhaustive_minutes, exhaustive_units = _exhaustive(setup, seed, settings)
    exhaustive_plan = replan(setup.request, setup.predictor, exhaustive)
    oracle = compute_oracle(setup, seed=seed)
    model_price = _price(setup, model_plan.chosen.config, seed)
    full_price = _price(setup, exhaustive_plan.chosen.config, seed) if isinstance(exhaustive_plan, Plan) else None
    rows = [
        _row("model-only", model_plan, model_price, 0.0, 0),
        _row("exhaustive-sweep", exhaustive_plan, full_price, exhaustive_minutes, len(exhaustive)),
    ]
    budgeted_runs = []
    for budget in budgets:
        outcome = _budgeted(setup, budget, seed, settings)
        priced = _price(setup, outcome.final.chosen.config, seed) if isinstance(outcome.final, Plan) else None
        row = _row(
            f"budgeted-sweep {budget:g} GPU-min", outcome.final, priced, outcome.gpu_minutes, outcome.swept_points
        )
        share = outcome.gpu_minutes / exhaustive_minutes if exhaustive_minutes else None
        row.update(
            _verdict(
                model_price.layout_cost_per_mtok,
                priced.layout_cost_per_mtok if priced else None,
                full_price.layout_cost_per_mtok if full_price else None,
                share,
            )
        )
        row["explanation"] = list(outcome.explanation)
        row["predicted_vs_measured"] = [r.describe() for r in comparison_rows(outcome.measurements)]
        budgeted_runs.append(row)
    met = [r for r in budgeted_runs if r["goal_met"]]
    return {
        "target": name,
        "truth": truth,
        "oracle": {
            "config": describe_config(oracle.config) if oracle.config is not None else None,
            "cost_per_mtok": round(oracle.cost_per_mtok, 4) if oracle.cost_per_mtok else None,
        },
        "plans": rows,
        "budgeted": budgeted_runs,
        "exhaustive_units": exhaustive_units,
        "goal_met_at_default_budget": bool(budgeted_runs and budgeted_runs[0]["goal_met"]),
        "smallest_budget_meeting_goal": budgets[budgeted_runs.index(met[0])] if met else None,
        "seconds": round(time.monotonic() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budgets",
        default=",".join(f"{b:g}" for b in BUDGETS),
        help="GPU-minute budgets of the budgeted sweep, the first is the default spec.sweep.budget",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    budgets = tuple(float(b) for b in args.budgets.split(","))
    results = [run_target(name, truth, budgets=budgets, seed=args.seed) for name, truth in TARGETS]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"budgets_gpu_minutes": budgets, "targets": results}, indent=2) + "\n")
    parts = []
    for r in results:
        first = r["budgeted"][0]
        gap, share = first["cost_gap_vs_exhaustive"], first["gpu_minutes_share_of_exhaustive"]
        smallest = r["smallest_budget_meeting_goal"]
        parts.append(
            f"{r['target']}: at {budgets[0]:g} GPU-min gap {gap:+.1%} for {share:.1%} of exhaustive GPU-min, goal "
            + (f"met from {smallest:g} GPU-min" if smallest is not None else "not met at any budget tried")
            if gap is not None and share is not None
            else f"{r['target']}: no comparison"
        )
    met = sum(r["goal_met_at_default_budget"] for r in results)
    print(f"sweep: goal met at {budgets[0]:g} GPU-min on {met}/{len(results)} targets — " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
