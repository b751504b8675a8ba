"""Sweeps on the twin: benchmark Jobs rendered as the operator renders them, answered from the ground truth.

`twin_measure` is a `sweep.loop.Measure`: for one deployment's points it renders the sweep (`render_sweep`:
the candidate as it would serve, variant `sweep`, and the benchmark Job), takes every benchmark argv out of
the Job, has the twin answer each (`sim.bench.answer_benchmark`, the truth's own noise, the Job's seed) and
parses the answers as the operator parses the Job's log. On a measured table a P/D unit the table lacks is
rounded up to a measured one first (`snap_to_table`), as every fleet on that truth is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.types import Workload
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import Plan
from frontier_operator.render.benchmark import benchmark_argvs, render_sweep
from frontier_operator.render.errors import RenderError
from frontier_operator.render.request import RenderRequest, Variant
from frontier_operator.sim.bench import answer_benchmark
from frontier_operator.sim.closed_loop import InfeasibleTarget, Setup
from frontier_operator.sim.measured import MeasuredTruth
from frontier_operator.sim.table_search import snap_to_table
from frontier_operator.sim.timing import Truth, Unavailable
from frontier_operator.sweep.jobs import benchmark_spec, sweep_id
from frontier_operator.sweep.loop import Measure, SweepOutcome, run_sweep, sweep_predictor
from frontier_operator.sweep.results import comparison_rows, parse_benchmark_result
from frontier_operator.sweep.types import SweepMeasurement, SweepPoint
from frontier_operator.sweep.units import deployment_unit


def twin_measure(target: FrontierTarget, truth: Truth, workload: Workload, *, seed: int = 0) -> Measure:
    """Answer a deployment's benchmark Job from `truth`; points the truth or the renderer cannot run are
    left unmeasured (as a Job that fails would be)."""

    def measure(points: Sequence[SweepPoint]) -> list[SweepMeasurement]:
        if not points:
            return []
        unit = deployment_unit([p.unit for p in points])
        if isinstance(truth, MeasuredTruth):
            unit = snap_to_table(truth.table, unit)
        spec = benchmark_spec(points, workload, sweep=sweep_id("twin", seed, points[0].key), seed=seed)
        try:
            objects = render_sweep(RenderRequest(target, unit, points[0].pool, variant=Variant.SWEEP), spec)
        except RenderError:
            return []
        job = next(o for o in objects if o["kind"] == "Job")
        measured = []
        for point, argv in zip(points, benchmark_argvs(job), strict=True):
            try:
                result = answer_benchmark(argv, truth, unit)
            except Unavailable:
                continue
            measured.append(parse_benchmark_result(result, replace(point, unit=unit)))
        return measured

    return measure


@dataclass(frozen=True)
class SweptSetup:
    """A `Setup` whose plan and predictor were re-made on a sweep's measurements, and the sweep itself."""

    setup: Setup
    outcome: SweepOutcome


def sweep_before_serving(setup: Setup, *, budget_gpu_minutes: float, seed: int = 0) -> SweptSetup:
    """Run a budgeted sweep on the twin before the fleet starts: the plan the loop then runs is the re-plan on
    the measurements, and the predictor the tuning loop calibrates is the sweep-corrected one."""
    outcome = run_sweep(
        setup.request,
        setup.predictor,
        budget_gpu_minutes=budget_gpu_minutes,
        measure=twin_measure(setup.target, setup.truth, setup.request.workload, seed=seed),
    )
    if not isinstance(outcome, SweepOutcome):
        raise InfeasibleTarget(outcome, setup.request)
    plan = outcome.final if isinstance(outcome.final, Plan) else setup.plan
    predictor = sweep_predictor(setup.predictor, outcome.measurements)
    return SweptSetup(replace(setup, plan=plan, predictor=predictor), outcome)


def sweep_summary(outcome: SweepOutcome) -> dict[str, object]:
    """What `frontier simulate --sweep -o json` adds: GPU-minutes, points, why, predicted vs measured."""
    return {
        "sweep_gpu_minutes": round(outcome.gpu_minutes, 2),
        "swept_points": outcome.swept_points,
        "budget_gpu_minutes": outcome.budget_gpu_minutes,
        "initial_choice": describe_config(outcome.initial.chosen.config),
        "final_choice": describe_config(outcome.final.chosen.config) if isinstance(outcome.final, Plan) else None,
        "explanation": list(outcome.explanation),
        "predicted_vs_measured": [row.describe() for row in comparison_rows(outcome.measurements)],
    }
