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
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from kubernetes.client import ApiClient

from frontier_operator import metrics
from frontier_operator.adapters import kube
from frontier_operator.api import SpecInvalid, parse_target
from frontier_operator.api.errors import FieldError
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import FrontierTargetStatus
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.from_spec import SpecResolutionError, plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Infeasible, Plan
from frontier_operator.reconcile.core import (
    EventNote,
    InvalidSpec,
    Outcome,
    Planned,
    ReconcileInput,
    RenderFailed,
    reconcile,
    refused_by_api,
)
from frontier_operator.reconcile.merge_patch import merge_patch
from frontier_operator.render.errors import RenderError
from frontier_operator.render.fleet import render_fleet
from frontier_operator.render.layout import resolve_layout
from frontier_operator.render.request import RenderRequest, owner_of
from frontier_operator.validation import catalog_errors

PLAN_CACHE_SIZE = 512


@dataclass(frozen=True)
class Step:
    """What one reconcile wants Kopf to do: patch the status (None: unchanged) and post Events."""

    status_patch: dict[str, Any] | None
    events: tuple[EventNote, ...]
    status: FrontierTargetStatus


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@lru_cache(maxsize=PLAN_CACHE_SIZE)
def _plan(spec_json: str, model_config_json: str) -> Plan | Infeasible:
    """Plan for one exact spec; raises SpecResolutionError or HfConfigError for names it cannot resolve."""
    spec = FrontierTargetSpec.model_validate_json(spec_json)
    model_config = json.loads(model_config_json)
    started = time.perf_counter()
    request = plan_request_from_spec(spec, model_config=model_config)
    result = make_plan(request, PerformanceModel.default())
    metrics.PLAN_SECONDS.observe(time.perf_counter() - started)
    return result


def plan_for(spec: FrontierTargetSpec, model_config: Mapping[str, Any] | None) -> Plan | Infeasible:
    spec_json = spec.model_dump_json(by_alias=True)
    return _plan(spec_json, json.dumps(model_config, sort_keys=True))


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

    def outcome(self, body: Mapping[str, Any], namespace: str) -> tuple[FrontierTarget | None, Outcome]:
        try:
            target = parse_target(body)
            problems = catalog_errors(target.spec) if target.spec.model.config is None else []
            if problems:
                raise SpecInvalid(problems)
            model_config = self._model_config(target, namespace)
            result = plan_for(target.spec, model_config)
        except SpecInvalid as invalid:
            return None, InvalidSpec(invalid.errors)
        except SpecResolutionError as unresolved:
            return None, InvalidSpec((FieldError(unresolved.path, str(unresolved), "fix the name"),))
        except HfConfigError as bad_config:
            path = f"spec.model.config ({bad_config.field})"
            return None, InvalidSpec((FieldError(path, bad_config.message, bad_config.hint or "fix config.json"),))
        if isinstance(result, Infeasible):
            return target, result
        chosen = result.chosen
        request = RenderRequest(target=target, config=chosen.config, pool_name=chosen.pool.name, owner=owner_of(target))
        try:
            objects = tuple(render_fleet(request))
            revision = resolve_layout(request).revision
        except RenderError as error:
            return target, RenderFailed(result, error.reason.value, error.detail)
        return target, Planned(result, revision, objects)

    # -------------------------------------------------------------------------------- reconcile

    def reconcile(self, body: Mapping[str, Any], *, force_apply: bool) -> Step:
        metadata = body.get("metadata", {})
        namespace, name = metadata.get("namespace", "default"), metadata.get("name", "")
        raw_status = body.get("status") or {}
        current = _tolerant_status(raw_status)
        target, outcome = self.outcome(body, namespace)
        observed = tuple(kube.list_workloads(self.api, namespace, name))
        inputs = ReconcileInput(
            spec=target.spec if target is not None else None,
            outcome=outcome,
            observed=observed,
            current=current,
            generation=int(metadata.get("generation", 0)),
            now=_rfc3339(self.clock()),
            force_apply=force_apply,
        )
        result = reconcile(inputs)
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
        new_status = result.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        old_status = {key: value for key, value in raw_status.items() if key != "kopf"}
        patch = merge_patch(old_status, new_status)
        self._export((namespace, name), target.spec if target is not None else None, result.status)
        return Step(status_patch=patch or None, events=_unique(events), status=result.status)


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
