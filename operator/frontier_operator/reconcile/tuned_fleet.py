"""From a tuning record to Kubernetes objects and back: the fleet the tuning loop wants, rendered, and what
Kubernetes says of it in the loop's terms. Pure; the controller calls these around `tuning_tick.tick`."""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from frontier_operator.api.annotations import APPROVE, PAUSED, PIN, ROLLBACK
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import CanaryStatus, FrontierTargetStatus
from frontier_operator.api.units import rfc3339
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.types import ServingConfig
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import Plan
from frontier_operator.reconcile.core import CanaryRollout, ObservedWorkload
from frontier_operator.reconcile.tuning_record import TuningRecord
from frontier_operator.reconcile.tuning_tick import FleetState, Overrides, TuningReport
from frontier_operator.render.fleet import render_layout
from frontier_operator.render.layout import FleetLayout, resolve_layout
from frontier_operator.render.request import RenderRequest, Variant, owner_of
from frontier_operator.render.route import RouteTemplate, route_template
from frontier_operator.render.yaml_dump import dump_all
from frontier_operator.tuning.actions import Action
from frontier_operator.tuning.apply import applied_after
from frontier_operator.tuning.state import AppliedState, RoleReadiness

# Manifest diffs in status stay well under the field's limit and the object's size.
MAX_DIFF = 16000


@dataclass(frozen=True)
class RenderedRevision:
    layout: FleetLayout
    objects: tuple[dict[str, Any], ...]
    # The target's HTTPRoute, with http-route splitting (`render.route`).
    route: RouteTemplate | None = None

    @property
    def revision(self) -> str:
        return self.layout.revision


@dataclass(frozen=True)
class RenderedRecord:
    record: TuningRecord
    stable: RenderedRevision
    canary: CanaryRollout | None
    canary_layout: FleetLayout | None = None


def fresh_record(key: str, plan: Plan, image: str) -> TuningRecord:
    chosen = plan.chosen
    return TuningRecord(spec_key=key, applied=AppliedState(chosen.config, chosen.pool.name, "", image))


def _with_image(target: FrontierTarget, image: str) -> FrontierTarget:
    """The target as it was when `image` was its engine image: a new image reaches the fleet by canary."""
    spec = target.spec
    if spec.serving.image == image:
        return target
    serving = spec.serving.model_copy(update={"image": image})
    return target.model_copy(update={"spec": spec.model_copy(update={"serving": serving})})


def _render(target: FrontierTarget, config: ServingConfig, pool: str, image: str, variant: Variant) -> RenderedRevision:
    request = RenderRequest(_with_image(target, image), config, pool, owner_of(target), variant)
    layout = resolve_layout(request)
    owner = request.owner.to_dict() if request.owner else None
    return RenderedRevision(layout, tuple(render_layout(layout, owner)), route_template(layout, owner))


def render_record(target: FrontierTarget, record: TuningRecord) -> RenderedRecord:
    """The stable fleet and the canary the record describes; the record gets their revisions. Raises RenderError."""
    applied = record.applied
    stable = _render(target, applied.config, applied.pool, applied.image, Variant.STABLE)
    applied = replace(applied, revision=stable.revision)
    canary_rollout = None
    layout = None
    if applied.canary is not None:
        canary = applied.canary
        rendered = _render(target, canary.deployed, canary.pool, canary.image or applied.image, Variant.CANARY)
        layout = rendered.layout
        canary = replace(canary, revision=rendered.revision)
        applied = replace(applied, canary=canary)
        status = CanaryStatus(
            revision=canary.revision,
            summary=describe_config(canary.deployed),
            traffic_share_percent=round(100 * canary.share, 1),
            started_at=rfc3339(canary.started_at),
        )
        canary_rollout = CanaryRollout(canary.revision, rendered.objects, status)
    return RenderedRecord(replace(record, applied=applied), stable, canary_rollout, layout)


def tuning_due(record: TuningRecord, spec: FrontierTargetSpec, current: FrontierTargetStatus, now: float) -> bool:
    """A tick is due once a revision has served a whole window and the interval has passed since the last one."""
    if current.applied_revision is None:
        return False
    if record.last_tick_at is None and now - _rolled_out_at(current) < float(spec.tuning.window):
        # The first window must not reach back before the pods served: Prometheus divides a young series'
        # increase by the whole window, so rate() and the request count read low, and the calibration would
        # learn a workload a fraction of the real one (the simulator, likewise, decides first after one window).
        return False
    # A tick that lands a little early (the re-check timer's jitter) still counts.
    return record.last_tick_at is None or now - record.last_tick_at >= 0.9 * float(spec.tuning.interval)


def _rolled_out_at(current: FrontierTargetStatus) -> float:
    """When the serving revision rolled out, from its history entry (0 when the entry has been cut)."""
    times = [entry.time for entry in current.history if entry.revision == current.applied_revision]
    if not times:
        return 0.0
    return datetime.fromisoformat(times[-1].replace("Z", "+00:00")).timestamp()


def _role_readiness(layout: FleetLayout, observed: Sequence[ObservedWorkload]) -> tuple[RoleReadiness, ...]:
    by_name = {w.name: w for w in observed if w.revision == layout.revision}
    readiness = []
    for role in layout.roles:
        workload = by_name.get(role.workload_name)
        ready = min(workload.ready, role.replicas) if workload is not None else 0
        readiness.append(RoleReadiness(role.role, role.replicas, ready))
    return tuple(readiness)


def fleet_state(
    rendered: RenderedRecord, observed: Sequence[ObservedWorkload], *, canary_crash_looping: bool
) -> FleetState:
    stable = _role_readiness(rendered.stable.layout, observed)
    canary_ready = False
    if rendered.canary_layout is not None:
        canary_ready = all(r.ready >= r.desired for r in _role_readiness(rendered.canary_layout, observed))
    return FleetState(stable, canary_ready, canary_crash_looping)


def overrides_from(annotations: Mapping[str, str]) -> Overrides:
    return Overrides(
        paused=PAUSED in annotations,
        approve=annotations.get(APPROVE) or None,
        rollback=annotations.get(ROLLBACK) or None,
        pin=annotations.get(PIN) or None,
    )


def _yaml(objects: Sequence[dict[str, Any]]) -> list[str]:
    return dump_all(objects).splitlines(keepends=True)


def manifest_diff(target: FrontierTarget, rendered: RenderedRecord, action: Action, now: float) -> str:
    """Unified diff of every object the action would change (stable and canary), as `kubectl diff` shows it."""
    record = rendered.record
    after = render_record(target, replace(record, applied=applied_after(record.applied, action, now)))
    before_objects = [*rendered.stable.objects, *(rendered.canary.objects if rendered.canary else ())]
    after_objects = [*after.stable.objects, *(after.canary.objects if after.canary else ())]
    diff = "".join(difflib.unified_diff(_yaml(before_objects), _yaml(after_objects), "running", "proposed", n=2))
    return diff if len(diff) <= MAX_DIFF else diff[:MAX_DIFF] + "\n… (diff cut; `frontier render` shows it whole)\n"


def with_manifest_diff(
    report: TuningReport, target: FrontierTarget, rendered: RenderedRecord, now: float
) -> TuningReport:
    if report.recommended is None or report.recommendation is None:
        return report
    diff = manifest_diff(target, rendered, report.recommended, now)
    recommendation = report.recommendation.model_copy(update={"manifest_diff": diff})
    return replace(report, recommendation=recommendation)
