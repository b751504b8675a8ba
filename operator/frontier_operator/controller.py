"""The imperative shell around one reconcile step: read, plan, render, decide (pure), write.

Kopf handlers call `Controller.reconcile(body, …)`; everything that decides lives in pure layers
(planner, render, reconcile), everything that talks to the API server in `adapters.kube`. Plans are
memoised on the exact spec (and model config) they were made for: the planner is a pure function,
so an unchanged spec — a timer tick, an operator restart, a reconcile storm of identical targets —
never plans twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from kubernetes.client import ApiClient
from pydantic import TypeAdapter

from frontier_operator import metrics, sweeping
from frontier_operator.adapters import kube, prometheus
from frontier_operator.adapters.prometheus import FleetSelector
from frontier_operator.api import SpecInvalid, parse_target
from frontier_operator.api.errors import FieldError
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import FrontierTargetStatus
from frontier_operator.api.units import rfc3339
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.planner.from_spec import SpecResolutionError, plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Infeasible, Plan, PlanRequest, Predictor
from frontier_operator.reconcile.core import (
    Deferred,
    InvalidSpec,
    ObservedWorkload,
    Outcome,
    Planned,
    ReconcileInput,
    RenderFailed,
    reconcile,
    refused_by_api,
)
from frontier_operator.reconcile.events import EventNote
from frontier_operator.reconcile.merge_patch import merge_patch
from frontier_operator.reconcile.plan_status import config_status
from frontier_operator.reconcile.route_status import route_acceptance, route_refusal
from frontier_operator.reconcile.tuned_fleet import (
    RenderedRecord,
    fleet_state,
    fresh_record,
    overrides_from,
    render_record,
    tuning_due,
    with_manifest_diff,
)
from frontier_operator.reconcile.tuning_record import ANNOTATION as RECORD_ANNOTATION
from frontier_operator.reconcile.tuning_record import (
    PlanBasis,
    TuningRecord,
    decode_record,
    encode_record,
    spec_key,
)
from frontier_operator.reconcile.tuning_tick import TickInput, TuningReport, tick
from frontier_operator.render.errors import RenderError
from frontier_operator.render.names import service_name
from frontier_operator.tuning.policy import policy_from_spec
from frontier_operator.tuning.replan import corrected_plan
from frontier_operator.tuning.state import ModelContext
from frontier_operator.validation import catalog_errors

PLAN_CACHE_SIZE = 512


@dataclass(frozen=True)
class Step:
    """What one reconcile wants Kopf to do: patch the status (None: unchanged) and the target's annotations
    (the tuning record, when it changed), and post Events."""

    status_patch: dict[str, Any] | None
    events: tuple[EventNote, ...]
    status: FrontierTargetStatus
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class _Tuned:
    outcome: Planned | RenderFailed
    report: TuningReport | None
    record: TuningRecord | None


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def _planning(spec_json: str, model_config_json: str, measured: str = "") -> tuple[PlanRequest, Plan | Infeasible]:
    """Plan for one exact spec (and the target's measured sweep points, `measured`: their stored document);
    raises SpecResolutionError or HfConfigError for names it cannot resolve."""
    spec = FrontierTargetSpec.model_validate_json(spec_json)
    model_config = json.loads(model_config_json)
    started = time.perf_counter()
    request = plan_request_from_spec(spec, model_config=model_config)
    result = make_plan(request, sweeping.planning_predictor(measured))
    metrics.PLAN_SECONDS.observe(time.perf_counter() - started)
    return request, result


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def _corrected(spec_json: str, model_config_json: str, basis_json: str, measured: str = "") -> Plan | Infeasible:
    """The plan in force after a re-plan, re-derived from what the tuning record stores (memoised like plans)."""
    request, _ = _planning(spec_json, model_config_json, measured)
    basis = _BASIS.validate_json(basis_json)
    return corrected_plan(request, sweeping.planning_predictor(measured), basis.calibration, basis.workload)


_BASIS = TypeAdapter(PlanBasis)


@dataclass(frozen=True)
class _Planning:
    spec_json: str
    model_config_json: str
    request: PlanRequest
    result: Plan | Infeasible
    # The target's measured sweep points (their stored document, "" when none): plans are made with them.
    measured: str = ""

    @property
    def predictor(self) -> Predictor:
        return sweeping.planning_predictor(self.measured)

    def corrected(self, basis: PlanBasis | None) -> Plan | Infeasible:
        if basis is None:
            return self.result
        return _corrected(self.spec_json, self.model_config_json, _BASIS.dump_json(basis).decode(), self.measured)


def _planned(spec: FrontierTargetSpec, model_config: Mapping[str, Any] | None, measured: str = "") -> _Planning:
    spec_json = spec.model_dump_json(by_alias=True)
    config_json = json.dumps(model_config, sort_keys=True)
    request, result = _planning(spec_json, config_json, measured)
    return _Planning(spec_json, config_json, request, result, measured)


def plan_for_spec(spec: FrontierTargetSpec) -> Plan | Infeasible:
    """The (memoised) plan the operator makes for a spec without a config.json ConfigMap or sweep points."""
    return _planned(spec, None).result


class Controller:
    def __init__(self, api: ApiClient, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.api = api
        self.clock = clock
        # (namespace, name) → the label sets of its per-target series, to remove them when they change.
        self._series: dict[tuple[str, str], list[tuple[Any, tuple[str, ...]]]] = {}

    def _export(
        self, key: tuple[str, str], spec: FrontierTargetSpec | None, status: FrontierTargetStatus | None
    ) -> None:
        """Per-target gauges: conditions, SLO bounds, cost, GPUs, canary start (for alerts and dashboards)."""
        for gauge, labels in self._series.pop(key, []):
            gauge.remove(*labels)
        if status is None:
            return
        series: list[tuple[Any, tuple[str, ...], float]] = [
            (metrics.TARGET_CONDITION, (*key, c.type.value, c.status.value), 1.0) for c in status.conditions
        ]
        if spec is not None:
            series += [
                (metrics.SLO_BOUND, (*key, metric, str(percentile)), float(bound))
                for metric, percentile, bound in spec.slo.objectives()
            ]
        if status.plan is not None:
            series.append((metrics.COST_PER_MTOK, key, status.plan.cost_per_mtok))
            series.append((metrics.GPUS, key, float(status.plan.config.total_gpus)))
        points = [
            (
                str(index),
                "true" if p.meets_slo else "false",
                "false",
                p.cost_per_mtok,
                p.output_tokens_per_second_per_user,
            )
            for index, p in enumerate(status.frontier)
        ]
        tpot_p50_ms = status.plan.predicted_tpot_ms.p50 if status.plan is not None else None
        if status.plan is not None and tpot_p50_ms:
            points.append(("chosen", "true", "true", status.plan.cost_per_mtok, 1000 / tpot_p50_ms))
        for point, meets, is_chosen, cost, speed in points:
            series.append((metrics.FRONTIER_POINT, (*key, point, "cost_per_mtok", meets, is_chosen), cost))
            series.append((metrics.FRONTIER_POINT, (*key, point, "tokens_per_s_per_user", meets, is_chosen), speed))
        if status.history:
            series.append((metrics.LAST_CHANGE, key, _timestamp(status.history[-1].time)))
        if status.canary is not None:
            series.append((metrics.CANARY_STARTED, key, _timestamp(status.canary.started_at)))
        for gauge, labels, value in series:
            gauge.labels(*labels).set(value)
        self._series[key] = [(gauge, labels) for gauge, labels, _ in series]

    def forget(self, namespace: str, name: str) -> None:
        """The target is gone: drop its series."""
        self._export((namespace, name), None, None)

    # ---------------------------------------------------------------------------------- outcome

    def _model_config(self, target: FrontierTarget, namespace: str) -> Mapping[str, Any] | None:
        source = target.spec.model.config
        if source is None or source.config_map_ref is None:
            return None
        ref = source.config_map_ref
        path = "spec.model.config.configMapRef"
        text = kube.read_config_map_key(self.api, namespace, ref.name, ref.key)
        if text is None:
            raise SpecInvalid([FieldError(path, f"ConfigMap {ref.name} has no key {ref.key}", "create it first")])
        try:
            loaded = json.loads(text)
        except ValueError:
            raise SpecInvalid(
                [FieldError(path, f"{ref.name}/{ref.key} is not JSON", "store the config.json")]
            ) from None
        if not isinstance(loaded, dict):
            raise SpecInvalid([FieldError(path, f"{ref.name}/{ref.key} is not a JSON object", "store config.json")])
        return loaded

    def _resolve(
        self, body: Mapping[str, Any], namespace: str, measured: str = ""
    ) -> tuple[FrontierTarget | None, _Planning | InvalidSpec]:
        try:
            target = parse_target(body)
            problems = catalog_errors(target.spec) if target.spec.model.config is None else []
            if problems:
                raise SpecInvalid(problems)
            model_config = self._model_config(target, namespace)
            return target, _planned(target.spec, model_config, measured)
        except SpecInvalid as invalid:
            return None, InvalidSpec(invalid.errors)
        except SpecResolutionError as unresolved:
            return None, InvalidSpec((FieldError(unresolved.path, str(unresolved), "fix the name"),))
        except HfConfigError as bad_config:
            path = f"spec.model.config ({bad_config.field})"
            return None, InvalidSpec((FieldError(path, bad_config.message, bad_config.hint or "fix config.json"),))

    def outcome(self, body: Mapping[str, Any], namespace: str) -> tuple[FrontierTarget | None, Outcome]:
        """What the operator makes of a body before any tuning: a refusal, an infeasibility, or the plan's fleet."""
        target, planning = self._resolve(body, namespace)
        if isinstance(planning, InvalidSpec) or target is None:
            return None, planning if isinstance(planning, InvalidSpec) else InvalidSpec(())
        if isinstance(planning.result, Infeasible):
            return target, planning.result
        tuned = self._tuned(
            target=target,
            planning=planning,
            plan=planning.result,
            annotations={},
            current=FrontierTargetStatus(),
            observed=(),
            now=self.clock(),
            route_refused=None,
        )
        return target, tuned.outcome

    # -------------------------------------------------------------------------------- reconcile

    def reconcile(self, body: Mapping[str, Any], *, force_apply: bool) -> Step:
        metadata = body.get("metadata", {})
        namespace, name = metadata.get("namespace", "default"), metadata.get("name", "")
        annotations: Mapping[str, str] = metadata.get("annotations") or {}
        raw_status = body.get("status") or {}
        current = _tolerant_status(raw_status)
        now = self.clock()
        # ---- sweeps (frontier_operator.sweeping): plans use the measured points; a sweep step; the hold
        measured = sweeping.stored_document(self.api, namespace, name, annotations)
        target, planning = self._resolve(body, namespace, measured)
        plan = planning.result if not isinstance(planning, InvalidSpec) else None
        sweep = sweeping.step(
            self.api,
            namespace=namespace,
            name=name,
            target=target,
            request=planning.request if isinstance(plan, Plan) and not isinstance(planning, InvalidSpec) else None,
            plan=plan if isinstance(plan, Plan) else None,
            document=measured,
            annotations=annotations,
            current=current,
            force_apply=force_apply,
            now=now.timestamp(),
        )
        # ---- end of sweeps
        observed = tuple(kube.list_workloads(self.api, namespace, name))
        weighted = target is not None and target.spec.serving.traffic.weighted
        acceptance = route_acceptance(kube.read_route(self.api, namespace, service_name(name))) if weighted else None
        outcome: Outcome
        report: TuningReport | None = None
        record_text: str | None = None
        if isinstance(planning, InvalidSpec):
            outcome = planning
        elif isinstance(planning.result, Infeasible) or target is None:
            outcome = planning.result if isinstance(planning.result, Infeasible) else InvalidSpec(())
        elif sweep.hold_message is not None:  # sweeps: the first deployment waits for the sweep before it
            outcome = Deferred(planning.result, sweeping.HOLD_REASON, sweep.hold_message)
        else:
            tuned = self._tuned(
                target=target,
                planning=planning,
                plan=planning.result,
                annotations=annotations,
                current=current,
                observed=observed,
                now=now,
                route_refused=route_refusal(acceptance),
            )
            outcome, report = tuned.outcome, tuned.report
            # Until its first tick a record is what the plan gives, rebuilt at no cost: writing it would add a
            # request per new target (a reconcile storm of fresh targets pays it 500 times).
            if tuned.record is not None and (tuned.record.last_tick_at is not None or RECORD_ANNOTATION in annotations):
                record_text = encode_record(tuned.record)
        inputs = ReconcileInput(
            spec=target.spec if target is not None else None,
            outcome=outcome,
            observed=observed,
            current=current,
            generation=int(metadata.get("generation", 0)),
            now=rfc3339(now),
            force_apply=force_apply,
            tuning=report,
            route_acceptance=acceptance,
        )
        result = reconcile(inputs)
        result = replace(
            result, status=sweeping.with_sweep(result.status, sweep), events=(*result.events, *sweep.events)
        )
        refused = []
        missing_kinds = []
        for obj in result.apply:
            try:
                kube.apply(self.api, obj)
            except kube.MissingKindError as missing:
                missing_kinds.append(EventNote("Warning", "MissingCRD", str(missing)))
            except kube.KubeError as error:
                if error.retriable:
                    raise
                refused.append(f"{obj['kind']} {obj['metadata']['name']}: {error}")
        if refused:
            result = refused_by_api(inputs, result, "; ".join(refused)[:2000])
        # Said once per change (and per operator start), not again on every re-check that re-applies.
        events = [*result.events, *(missing_kinds if force_apply else [])]
        if result.apply:
            metrics.DECISIONS.labels("apply").inc()
        if result.prune:
            kube.prune_revisions(self.api, namespace, name, result.prune)
            metrics.DECISIONS.labels("prune").inc()
        if result.withdraw_route:
            kube.delete_route(self.api, namespace, name)
        new_status = result.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        old_status = {key: value for key, value in raw_status.items() if key != "kopf"}
        patch = merge_patch(old_status, new_status)
        self._export((namespace, name), target.spec if target is not None else None, result.status)
        record_patch = (
            {RECORD_ANNOTATION: record_text}
            if record_text is not None and record_text != annotations.get(RECORD_ANNOTATION)
            else {}
        ) | sweep.annotations
        return Step(status_patch=patch or None, events=_unique(events), status=result.status, annotations=record_patch)

    # -------------------------------------------------------------------------------- tuning

    def _tuned(
        self,
        *,
        target: FrontierTarget,
        planning: _Planning,
        plan: Plan,
        annotations: Mapping[str, str],
        current: FrontierTargetStatus,
        observed: tuple[ObservedWorkload, ...],
        now: datetime,
        route_refused: str | None,
    ) -> _Tuned:
        """The fleet to render — the plan's, or what the tuning loop made of it — after a tick if one is due."""
        spec = target.spec
        key = spec_key(spec)
        record = decode_record(annotations.get(RECORD_ANNOTATION))
        if record is None or record.spec_key != key:
            record = fresh_record(key, plan, spec.serving.image)
        in_force = planning.corrected(record.plan_basis)
        shown = in_force if isinstance(in_force, Plan) else plan
        report = None
        seconds = now.timestamp()
        try:
            rendered = render_record(target, record)
        except RenderError as error:
            # What the record describes cannot be rendered any more (e.g. a catalog change): say so, keep it.
            return _Tuned(RenderFailed(shown, error.reason.value, error.detail), None, None)
        record = rendered.record
        if tuning_due(record, spec, current, seconds):
            model = ModelContext(
                request=planning.request,
                predictor=planning.predictor,
                calibration=record.calibration,
                plan=in_force,
                plan_workload=record.plan_basis.workload if record.plan_basis else planning.request.workload,
                image=spec.serving.image,
                router_replicas=spec.serving.router.replicas,
                weighted_route=spec.serving.traffic.weighted,
                route_refused=route_refused,
            )
            inputs = self._tick_input(
                target=target,
                record=record,
                rendered=rendered,
                model=model,
                annotations=annotations,
                observed=observed,
                now=now,
            )
            result = tick(inputs)
            report = result.report
            try:
                after = render_record(target, result.record)
                report = with_manifest_diff(report, target, after, seconds)
            except RenderError as error:
                # The action asks for a fleet the renderer refuses: nothing changes; the tick's learning stays.
                record = replace(record, calibration=result.record.calibration, last_tick_at=seconds)
                failed = f"{report.last_decision}: not applied, it cannot be rendered: {error.detail}"[:4000]
                report = replace(report, history=(), events=(EventNote("Warning", "TuningActionFailed", failed),))
            else:
                rendered, record = after, after.record
                if result.applied is not None:
                    metrics.DECISIONS.labels(type(result.applied).__name__).inc()
        tuned = None
        applied = record.applied
        # Against the plan status shows (after a re-plan, the corrected one): where the fleet differs from it,
        # status must say what actually runs.
        if applied.config != shown.chosen.config or applied.pool != shown.chosen.pool.name:
            pool = next(p for p in planning.request.pools if p.name == applied.pool)
            tuned = config_status(applied.config, applied.pool, pool.gpu.name)
        stable = rendered.stable
        outcome = Planned(shown, stable.revision, stable.objects, rendered.canary, tuned, stable.route)
        return _Tuned(outcome, report, record)

    def _tick_input(
        self,
        *,
        target: FrontierTarget,
        record: TuningRecord,
        rendered: RenderedRecord,
        model: ModelContext,
        annotations: Mapping[str, str],
        observed: tuple[ObservedWorkload, ...],
        now: datetime,
    ) -> TickInput:
        spec = target.spec
        namespace = str(target.metadata.get("namespace") or "default")
        name = str(target.metadata.get("name", ""))
        # Every revision of the target: the decision layer tells stable from canary by the variant label, and
        # waits for a change to leave the window before it trusts the numbers (pods of a pruned revision fade).
        selector = FleetSelector(namespace=namespace, target=name)
        answer = prometheus.query_fleet(spec.tuning.prometheus_url, selector, float(spec.tuning.window))
        crash_looping = rendered.canary is not None and kube.crash_looping(
            self.api, namespace, name, rendered.canary.revision
        )
        return TickInput(
            record=record,
            model=model,
            policy=policy_from_spec(spec.tuning),
            observation=answer.observation,
            metrics_error=answer.error,
            fleet=fleet_state(rendered, observed, canary_crash_looping=crash_looping),
            overrides=overrides_from(annotations),
            now=now.timestamp(),
            now_text=rfc3339(now),
        )


def _timestamp(rfc3339: str) -> float:
    return datetime.fromisoformat(rfc3339.replace("Z", "+00:00")).timestamp()


def _unique(events: list[EventNote]) -> tuple[EventNote, ...]:
    return tuple(dict.fromkeys(events))


def _tolerant_status(raw: Mapping[str, Any]) -> FrontierTargetStatus:
    """The stored status, or an empty one if it no longer parses (e.g. written by an older version)."""
    try:
        return FrontierTargetStatus.model_validate({k: v for k, v in raw.items() if k != "kopf"})
    except ValueError:
        return FrontierTargetStatus()
