"""Shared by the sweep tests: targets, plans and sweep plans built with the real planner and model."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from frontier_operator.api import FrontierTarget, load_target_file
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan, PlanRequest
from frontier_operator.sim.closed_loop import Setup, prepare
from frontier_operator.sweep.choose import plan_sweep
from frontier_operator.sweep.loop import search_candidates
from frontier_operator.sweep.types import SweepPlan
from schema_tools import ROOT

EXAMPLES = ROOT / "examples"
TARGETS = ROOT / "bench" / "targets"


@dataclass(frozen=True)
class Planned:
    name: str
    target: FrontierTarget
    request: PlanRequest
    plan: Plan


@cache
def model() -> PerformanceModel:
    return PerformanceModel.default()


@cache
def planned_examples() -> tuple[Planned, ...]:
    """Every feasible example, planned with the performance model."""
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        target = load_target_file(path)
        request = plan_request_from_spec(target.spec)
        plan = make_plan(request, model())
        if isinstance(plan, Plan):
            found.append(Planned(path.stem, target, request, plan))
    return tuple(found)


@cache
def sweep_of(name: str, budget: float) -> SweepPlan:
    case = next(p for p in planned_examples() if p.name == name)
    return plan_sweep(case.plan, search_candidates(case.request, model()), case.request, model(), budget)


@cache
def table_setup(name: str = "qwen3-32b-h100-table", truth: str = "qwen3-32b-h100") -> Setup:
    return prepare(load_target_file(TARGETS / f"{name}.yaml"), truth_spec=truth)
