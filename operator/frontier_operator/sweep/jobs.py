"""From a sweep plan to Kubernetes objects: one deployment per measured unit, one benchmark Job each.

Points of one unit share a deployment (its warm-up is paid once) and run in order in one Job; the deployment is
the unit with the largest batch cap among its points (`units.deployment_unit`). The sweep id names the Jobs and
labels every object (`render.benchmark.LABEL_SWEEP`), so one label selector finds all of a sweep's objects for
clean-up — also after an interrupted sweep.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.types import ServingConfig, Workload
from frontier_operator.render.benchmark import BenchmarkLevel, BenchmarkSpec, render_sweep
from frontier_operator.render.request import OwnerRef, RenderRequest, Variant
from frontier_operator.sweep.types import SweepPlan, SweepPoint
from frontier_operator.sweep.units import deployment_unit


@dataclass(frozen=True)
class SweepDeployment:
    unit: ServingConfig
    pool: str
    points: tuple[SweepPoint, ...]
    spec: BenchmarkSpec


def sweep_id(target_name: str, started_at: float, key: str = "") -> str:
    """A short id, unique per target, sweep start and unit (lower-case hex: fits names and label values)."""
    return hashlib.sha256(f"{target_name}|{started_at:.0f}|{key}".encode()).hexdigest()[:6]


def benchmark_spec(points: Sequence[SweepPoint], workload: Workload, *, sweep: str, seed: int = 42) -> BenchmarkSpec:
    return BenchmarkSpec(
        sweep_id=sweep,
        levels=tuple(BenchmarkLevel(p.concurrency, p.num_prompts, p.run_s) for p in points),
        input_mean=workload.input_tokens.mean,
        output_mean=workload.output_tokens.mean,
        input_cv=workload.input_tokens.cv,
        output_cv=workload.output_tokens.cv,
        input_max=workload.input_tokens.max,
        output_max=workload.output_tokens.max,
        seed=seed,
    )


def group_points(points: Sequence[SweepPoint]) -> list[tuple[SweepPoint, ...]]:
    """Points by measured unit, in the plan's order."""
    groups: dict[str, list[SweepPoint]] = {}
    for point in points:
        groups.setdefault(point.key, []).append(point)
    return [tuple(group) for group in groups.values()]


def sweep_deployments(
    plan: SweepPlan, workload: Workload, *, target_name: str, started_at: float, seed: int = 42
) -> list[SweepDeployment]:
    deployments = []
    for points in group_points(plan.points):
        unit = deployment_unit([p.unit for p in points])
        ident = sweep_id(target_name, started_at, points[0].key)
        spec = benchmark_spec(points, workload, sweep=ident, seed=seed)
        deployments.append(SweepDeployment(unit, points[0].pool, points, spec))
    return deployments


def render_deployment(
    target: FrontierTarget, deployment: SweepDeployment, owner: OwnerRef | None = None
) -> list[dict[str, Any]]:
    """Every object of one sweep deployment: the unit as it would serve (variant sweep), its Service, its Job."""
    request = RenderRequest(target, deployment.unit, deployment.pool, owner, Variant.SWEEP)
    return render_sweep(request, deployment.spec)
