"""The imperative shell of sweeps: read the running Job and the stored points, decide, write.

Everything that decides is `reconcile.sweep_step.decide_sweep` (pure); this module reads what it needs from
the API server (`adapters.sweep_jobs`, `adapters.kube`), applies the sweep deployment it starts, stores the
measured points in the `<target>-sweep` ConfigMap, deletes what a finished, failed or interrupted sweep
leaves, and hands the controller the new `status.sweep`, the Events and the record annotation. The
controller calls `planning_predictor` so that every plan of the target is made with its measured points.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import lru_cache

from kubernetes.client import ApiClient

from frontier_operator.adapters import kube
from frontier_operator.adapters.sweep_jobs import (
    apply_sweep_objects,
    delete_sweep_objects,
    read_job_result,
    store_sweep_results,
)
from frontier_operator.api.status import FrontierTargetStatus
from frontier_operator.api.sweep import SweepStatus
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.types import Plan, PlanRequest, Predictor
from frontier_operator.reconcile.events import EventNote
from frontier_operator.reconcile.sweep_step import (
    RECORD_ANNOTATION,
    JobReport,
    JobState,
    SweepDecision,
    SweepInput,
    decide_sweep,
    decode_sweep_record,
    encode_sweep_record,
    results_config_map,
    running_sweep_id,
)
from frontier_operator.render.request import owner_of
from frontier_operator.sweep.loop import sweep_predictor
from frontier_operator.sweep.store import CONFIGMAP_KEY, decode_points
from frontier_operator.sweep.types import SweepMeasurement

CACHE_SIZE = 512
# Reason of the Progressing condition while the first deployment waits for its sweep.
HOLD_REASON = "Sweeping"
# Deployments refused by the API server in one step before the step gives up (the rest waits for the next).
MAX_REFUSED = 8


@dataclass(frozen=True)
class SweepStep:
    # None: status.sweep stays as it is.
    status: SweepStatus | None
    events: tuple[EventNote, ...]
    # The record annotation when it changed.
    annotations: dict[str, str]
    # Set while the first deployment waits for the sweep (spec.sweep.onCreate in auto mode): why.
    hold_message: str | None = None


def stored_document(api: ApiClient, namespace: str, name: str, annotations: Mapping[str, str]) -> str:
    """The target's `sweep.json` ("" when it never swept: no read at all for targets without a sweep record)."""
    if RECORD_ANNOTATION not in annotations:
        return ""
    return kube.read_config_map_key(api, namespace, results_config_map(name), CONFIGMAP_KEY) or ""


@lru_cache(maxsize=CACHE_SIZE)
def measured_points(document: str) -> tuple[SweepMeasurement, ...]:
    if not document:
        return ()
    try:
        return tuple(decode_points(document))
    except ValueError:
        # Not ours any more (edited by hand, another version): plan without it rather than fail.
        return ()


@lru_cache(maxsize=CACHE_SIZE)
def planning_predictor(document: str) -> Predictor:
    """What the target's plans are made with: the performance model, corrected by its measured points."""
    return sweep_predictor(PerformanceModel.default(), measured_points(document))


def _job_report(api: ApiClient, namespace: str, job_name: str) -> JobReport:
    try:
        result = read_job_result(api, namespace, job_name)
    except kube.KubeError as error:
        if error.retriable:
            raise
        return JobReport(JobState.FAILED, message=f"the Job could not be read: {error}")
    return result


def _write(api: ApiClient, namespace: str, name: str, target: FrontierTarget | None, decision: SweepDecision) -> None:
    """Store first (measurements outlive everything), then delete, then start the next deployment."""
    if decision.store is not None:
        owner = owner_of(target) if target is not None else None
        store_sweep_results(
            api,
            namespace,
            results_config_map(name),
            decision.store,
            labels={kube.TARGET_LABEL: name},
            owner=owner.to_dict() if owner is not None else None,
        )
    for ident in decision.delete:
        delete_sweep_objects(api, namespace, name, ident)
    if decision.clean_up:
        delete_sweep_objects(api, namespace, name, keep=running_sweep_id(decision.record))


def step(
    api: ApiClient,
    *,
    namespace: str,
    name: str,
    target: FrontierTarget | None,
    request: PlanRequest | None,
    plan: Plan | None,
    document: str,
    annotations: Mapping[str, str],
    current: FrontierTargetStatus,
    force_apply: bool,
    now: float,
) -> SweepStep:
    """One sweep step for the target (a no-op without any API call for targets that never asked for one)."""
    record = decode_sweep_record(annotations.get(RECORD_ANNOTATION))
    job = None
    if record is not None and record.running is not None and record.running.job is not None:
        job = _job_report(api, namespace, record.running.job.job_name)
    inputs = SweepInput(
        target=target,
        record=record,
        annotations=annotations,
        request=request,
        plan=plan,
        base=PerformanceModel.default(),
        stored=measured_points(document),
        job=job,
        # A fleet once planned and applied leaves its plan in status (a deferred first deployment does not).
        never_deployed=current.applied_revision is None and current.plan is None,
        now=now,
    )
    decision = decide_sweep(inputs)
    _write(api, namespace, name, target, decision)
    events = list(decision.events)
    for _ in range(MAX_REFUSED):
        if not decision.apply:
            break
        try:
            apply_sweep_objects(api, decision.apply)
            break
        except kube.KubeError as error:
            if error.retriable:
                raise
            # Refused for good (forbidden, invalid for this cluster): that deployment failed; decide again.
            stored = measured_points(decision.store) if decision.store is not None else inputs.stored
            refused = JobReport(JobState.FAILED, message=f"its objects were refused: {error}")
            inputs = replace(inputs, record=decision.record, stored=stored, job=refused)
            decision = decide_sweep(inputs)
            _write(api, namespace, name, target, decision)
            events += decision.events
    if force_apply and decision.record is not None and not decision.clean_up:
        # On create, update and operator start: what an interrupted sweep left (objects of a sweep id the record
        # no longer names) goes.
        delete_sweep_objects(api, namespace, name, keep=running_sweep_id(decision.record))
    text = encode_sweep_record(decision.record) if decision.record is not None else None
    changed = {RECORD_ANNOTATION: text} if text is not None and text != annotations.get(RECORD_ANNOTATION) else {}
    return SweepStep(decision.status, tuple(dict.fromkeys(events)), changed, decision.hold_message or None)


def with_sweep(status: FrontierTargetStatus, sweep: SweepStep) -> FrontierTargetStatus:
    """The reconcile's status with the sweep's section."""
    return status if sweep.status is None else status.model_copy(update={"sweep": sweep.status})
