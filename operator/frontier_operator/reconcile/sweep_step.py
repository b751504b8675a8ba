"""One step of a benchmark sweep inside the operator, as a pure function.

`sweep.loop.run_sweep` runs a whole sweep in one go on the twin; a live sweep waits for Kubernetes between
its moves, so the operator runs it one reconcile at a time: each step reads what the running benchmark Job
reports (the shell does the reading), and `decide_sweep` answers with what to apply, store and delete, the
next `SweepRecord`, `status.sweep` and the Events. Deployments run one after another, in the sweep plan's
order (one sweep unit holds GPUs at a time, as `run_sweep` measures), and rounds follow `run_sweep`: plan
the sweep with the budget left → measure each unit's points → re-plan on every measurement → another round
(at most `MAX_ROUNDS`) while the new choice is unmeasured at its operating load and budget is left.

**When** (issue 8 §4): `spec.sweep.onCreate`, a new `frontier.dev/sweep-start` value (`frontier sweep start`),
an engine image that differs from the one the last sweep measured, and `spec.sweep.period` after the last
sweep. Explicit requests start in every mode; the others start only in auto mode, and in recommend and
observe mode the sweep is *proposed* (phase Proposed, one Event) until `frontier sweep start` approves it.
The pause annotation (or `spec.tuning.paused`) holds every start and interrupts a running sweep.

**On creation, before the first deployment** (auto mode): the serving fleet waits for the sweep
(`hold_first_deployment`), so the first fleet is the measured plan's — no GPUs held twice (fleet and sweep
units), no canary to move a fleet that never served off an unmeasured choice. In recommend and observe mode,
when paused, or when the sweep ends (Done or Failed, e.g. a budget that covers nothing) the fleet deploys:
an optional measurement never blocks serving for long.

**Budget:** `spec.sweep.budget` per sweep and per `spec.sweep.period` (without a period every sweep has the
whole budget). GPU time is charged as each deployment ends: the deployment's GPUs for the time it existed,
and for a finished benchmark never less than `run_sweep` charges (the warm-up estimate plus the measured run
durations) up to what was left. A deployment whose estimate no longer fits what is left is not started, and one
still running when its GPU time reaches what is left is stopped: a sweep never spends more than its budget (give
or take one re-check).

**Interruptions** (a spec change, the pause, a target that no longer plans) delete the running deployment
and charge its GPU time; the trigger that started it starts a new sweep when it still holds (a request is
used up). An operator restart interrupts nothing: the record (an annotation, like the tuning record) names
the running Job, and the next step reads it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from frontier_operator.api.annotations import PAUSED, PREFIX, SWEEP_START
from frontier_operator.api.spec import FrontierTargetSpec, TuningMode
from frontier_operator.api.sweep import MAX_LINES, MAX_POINTS, SweepStatus
from frontier_operator.api.units import rfc3339
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import Plan, PlanRequest, Predictor
from frontier_operator.reconcile.events import EventNote
from frontier_operator.reconcile.record_codec import RecordCodec
from frontier_operator.render.errors import RenderError
from frontier_operator.render.request import owner_of
from frontier_operator.sweep.choose import plan_sweep, warmup_gpu_minutes
from frontier_operator.sweep.jobs import SweepDeployment, benchmark_spec, group_points, render_deployment, sweep_id
from frontier_operator.sweep.loop import DEFAULT_MAX_ROUNDS, choice_measured, replan, search_candidates, sweep_predictor
from frontier_operator.sweep.results import BenchmarkResultError, match_results
from frontier_operator.sweep.status import status_points
from frontier_operator.sweep.store import encode_points, merge_points
from frontier_operator.sweep.types import SweepMeasurement, SweepPoint, SweepSettings
from frontier_operator.sweep.units import deployment_unit

RECORD_ANNOTATION = f"{PREFIX}sweep-record"
RECORD_VERSION = 1
MAX_ROUNDS = DEFAULT_MAX_ROUNDS
MAX_LINE = 1024
# Where the measured points are kept (`adapters.sweep_jobs.store_sweep_results`, key `sweep.json`).
RESULTS_SUFFIX = "-sweep"


class Phase(StrEnum):
    IDLE = "Idle"
    PROPOSED = "Proposed"
    RUNNING = "Running"
    DONE = "Done"
    FAILED = "Failed"


class Trigger(StrEnum):
    REQUEST = "requested (frontier sweep start)"
    CREATE = "on creation (spec.sweep.onCreate)"
    IMAGE = "the engine image changed"
    PERIOD = "spec.sweep.period elapsed"


class JobState(StrEnum):
    """A benchmark Job as the shell found it."""

    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    MISSING = "Missing"


@dataclass(frozen=True)
class JobReport:
    state: JobState
    # The benchmark's result objects (from the pod's log once the Job succeeded).
    results: tuple[dict[str, Any], ...] = ()
    message: str = ""


# ------------------------------------------------------------------------------------------------ record


@dataclass(frozen=True)
class RunningJob:
    """The deployment of one measured unit and its benchmark Job, in flight."""

    sweep_id: str
    job_name: str
    points: tuple[SweepPoint, ...]
    started_at: float
    gpus: int
    # What `run_sweep` would charge for the deployment before any run: its warm-up.
    warmup_gpu_minutes: float


@dataclass(frozen=True)
class RunningSweep:
    trigger: Trigger
    started_at: float
    budget_gpu_minutes: float
    spent_gpu_minutes: float = 0.0
    round: int = 1
    # Units of this round not started yet, in the sweep plan's order.
    queue: tuple[tuple[SweepPoint, ...], ...] = ()
    job: RunningJob | None = None
    measured: int = 0
    failed: int = 0


@dataclass(frozen=True)
class SweepRecord:
    """The sweep's memory between reconciles, in the `frontier.dev/sweep-record` annotation."""

    spec_key: str
    first_seen_at: float
    period_started_at: float | None = None
    # GPU-minutes spent in the current period (without a period: by the last sweep).
    gpu_minutes_used: float = 0.0
    last_run_at: float | None = None
    # The engine image the last finished sweep measured (None: never swept).
    swept_image: str | None = None
    # The onCreate sweep has run (or ended); it is not started again.
    created_done: bool = False
    # The last `frontier.dev/sweep-start` value acted on: an annotation left in place is not obeyed twice.
    start_token: str | None = None
    running: RunningSweep | None = None
    phase: Phase = Phase.IDLE
    # The trigger of the sweep waiting for approval (recommend and observe mode).
    proposed: Trigger | None = None
    explanation: tuple[str, ...] = ()
    # (unit key, concurrency, reason) of the points the last (or running) sweep measured.
    points: tuple[tuple[str, int, str], ...] = ()
    version: int = RECORD_VERSION


_CODEC = RecordCodec(SweepRecord, RECORD_VERSION)
encode_sweep_record = _CODEC.encode
decode_sweep_record = _CODEC.decode


def sweep_spec_key(spec: FrontierTargetSpec) -> str:
    """What a running sweep measures for: the spec but its tuning and sweep sections (a new image counts)."""
    text = spec.model_dump_json(by_alias=True, exclude={"tuning": True, "sweep": True})
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def results_config_map(target_name: str) -> str:
    return f"{target_name}{RESULTS_SUFFIX}"


# ------------------------------------------------------------------------------------------ input/output


@dataclass(frozen=True)
class SweepInput:
    # None when the spec no longer parses; `request` and `plan` None when the target does not plan.
    target: FrontierTarget | None
    record: SweepRecord | None
    annotations: Mapping[str, str]
    request: PlanRequest | None
    plan: Plan | None
    # The raw model the measurements are compared with (`run_sweep`'s `base`).
    base: Predictor
    # Every measured point stored in the results ConfigMap.
    stored: tuple[SweepMeasurement, ...]
    # What the running Job reports (None when no Job runs).
    job: JobReport | None
    # No fleet has been rendered for the target yet (no tuning record, nothing applied).
    never_deployed: bool
    now: float


@dataclass(frozen=True)
class SweepDecision:
    # None: the target has never asked for a sweep (no record, nothing written).
    record: SweepRecord | None
    # None: leave status.sweep as it is.
    status: SweepStatus | None
    # Objects of the deployment to start (its engines, Service and benchmark Job).
    apply: tuple[dict[str, Any], ...] = ()
    # Sweep ids whose objects are deleted.
    delete: tuple[str, ...] = ()
    # Also delete every sweep object of the target but the running Job's (strays of an interrupted sweep).
    clean_up: bool = False
    # The new `sweep.json` document for the results ConfigMap.
    store: str | None = None
    events: tuple[EventNote, ...] = ()
    hold_first_deployment: bool = False
    hold_message: str = ""


@dataclass(frozen=True)
class _Effects:
    apply: tuple[dict[str, Any], ...] = ()
    delete: tuple[str, ...] = ()
    clean_up: bool = False
    stored: tuple[SweepMeasurement, ...] | None = None
    events: tuple[EventNote, ...] = ()

    def then(self, other: _Effects) -> _Effects:
        return _Effects(
            apply=other.apply or self.apply,
            delete=(*self.delete, *other.delete),
            clean_up=self.clean_up or other.clean_up,
            stored=other.stored if other.stored is not None else self.stored,
            events=(*self.events, *other.events),
        )


@dataclass(frozen=True)
class _Context:
    """What every branch needs, derived once from the input."""

    inp: SweepInput
    target: FrontierTarget
    spec: FrontierTargetSpec
    request: PlanRequest
    plan: Plan
    settings: SweepSettings

    @property
    def name(self) -> str:
        return str(self.target.metadata.get("name", ""))


# ------------------------------------------------------------------------------------------------ helpers


def _line(text: str) -> str:
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 1] + "…"


def _explained(record: SweepRecord, *lines: str) -> SweepRecord:
    return replace(record, explanation=tuple(_line(x) for x in (*record.explanation, *lines))[-MAX_LINES:])


def paused(spec: FrontierTargetSpec, annotations: Mapping[str, str]) -> bool:
    return spec.tuning.paused or PAUSED in annotations


def settings_for(spec: FrontierTargetSpec) -> SweepSettings:
    levels = spec.sweep.concurrency
    return SweepSettings(levels=tuple(sorted(set(levels)))) if levels else SweepSettings()


def _period_s(spec: FrontierTargetSpec) -> float | None:
    return float(spec.sweep.period) if spec.sweep.period is not None else None


def current_period(record: SweepRecord, spec: FrontierTargetSpec, now: float) -> SweepRecord:
    """The record with its budget period restarted once it has run out (never while a sweep runs)."""
    period = _period_s(spec)
    if period is None or record.running is not None:
        return record
    if record.period_started_at is None or now - record.period_started_at >= period:
        return replace(record, period_started_at=now, gpu_minutes_used=0.0)
    return record


def budget_left(record: SweepRecord, spec: FrontierTargetSpec) -> float:
    """GPU-minutes a sweep starting now may spend (the whole budget without a period)."""
    budget = float(spec.sweep.budget)
    if _period_s(spec) is None:
        return budget
    return max(0.0, budget - record.gpu_minutes_used)


def due_trigger(
    record: SweepRecord, spec: FrontierTargetSpec, annotations: Mapping[str, str], now: float
) -> Trigger | None:
    """Why a sweep should start now, if it should (the first that holds, explicit requests first)."""
    token = annotations.get(SWEEP_START)
    if token and token != record.start_token:
        return Trigger.REQUEST
    if spec.sweep.on_create and not record.created_done:
        return Trigger.CREATE
    if record.swept_image is not None and record.swept_image != spec.serving.image:
        return Trigger.IMAGE
    period = _period_s(spec)
    if period is not None and now - (record.last_run_at or record.first_seen_at) >= period:
        return Trigger.PERIOD
    return None


def _elapsed_gpu_minutes(job: RunningJob, now: float) -> float:
    return max(0.0, now - job.started_at) * job.gpus / 60.0


def _over_budget(running: RunningSweep, job: RunningJob, now: float) -> bool:
    """The running deployment has held its GPUs for all the sweep had left."""
    return _elapsed_gpu_minutes(job, now) > running.budget_gpu_minutes - running.spent_gpu_minutes


def _charge(record: SweepRecord, running: RunningSweep, gpu_minutes: float) -> tuple[SweepRecord, RunningSweep]:
    running = replace(running, spent_gpu_minutes=running.spent_gpu_minutes + gpu_minutes)
    return replace(record, gpu_minutes_used=record.gpu_minutes_used + gpu_minutes), running


# ------------------------------------------------------------------------------------------------ moves


def _interrupt(record: SweepRecord, cause: str, now: float) -> tuple[SweepRecord, _Effects]:
    running = record.running
    assert running is not None
    job = running.job
    delete: tuple[str, ...] = ()
    if job is not None:
        record, running = _charge(record, running, _elapsed_gpu_minutes(job, now))
        delete = (job.sweep_id,)
    message = (
        f"sweep interrupted: {cause}; its benchmark deployment was deleted after "
        f"{running.spent_gpu_minutes:.1f} GPU-min"
    )
    record = _explained(replace(record, running=None, phase=Phase.FAILED), message)
    return record, _Effects(delete=delete, clean_up=True, events=(EventNote("Warning", "SweepInterrupted", message),))


def _start(ctx: _Context, record: SweepRecord, trigger: Trigger) -> tuple[SweepRecord, _Effects]:
    inp, spec = ctx.inp, ctx.spec
    budget = budget_left(record, spec)
    token = inp.annotations.get(SWEEP_START) if trigger is Trigger.REQUEST else record.start_token
    record = replace(record, start_token=token, proposed=None)
    if budget <= 0:
        until = (record.period_started_at or inp.now) + (_period_s(spec) or 0.0)
        message = f"sweep {trigger} not started: this period's budget is spent (next period from {rfc3339(until)})"
        if trigger is Trigger.REQUEST:
            return _explained(record, message), _Effects(events=(EventNote("Warning", "SweepNotStarted", message),))
        # An automatic trigger waits for the next period (it stays due); said once.
        if record.explanation[-1:] == (message,):
            return record, _Effects()
        return _explained(record, message), _Effects()
    if _period_s(spec) is None:
        record = replace(record, period_started_at=inp.now, gpu_minutes_used=0.0)
    running = RunningSweep(trigger=trigger, started_at=inp.now, budget_gpu_minutes=budget)
    record = replace(record, running=running, phase=Phase.RUNNING, explanation=(), points=())
    record = _explained(record, f"sweep {trigger} at {rfc3339(inp.now)}, budget {budget:.1f} GPU-min")
    started = EventNote("Normal", "SweepStarted", f"benchmark sweep {trigger}: up to {budget:.1f} GPU-min")
    record, effects = _new_round(ctx, record, ctx.plan, ctx.inp.stored)
    return record, _Effects(events=(started,)).then(effects)


def _new_round(
    ctx: _Context, record: SweepRecord, plan: Plan, known: Sequence[SweepMeasurement]
) -> tuple[SweepRecord, _Effects]:
    running = record.running
    assert running is not None
    candidates = search_candidates(ctx.request, sweep_predictor(ctx.inp.base, known))
    left = running.budget_gpu_minutes - running.spent_gpu_minutes
    sweep = plan_sweep(plan, candidates, ctx.request, ctx.inp.base, left, measured=known, settings=ctx.settings)
    record = _explained(record, f"round {running.round}: {sweep.explanation[0]}", *sweep.explanation[1:])
    if not sweep.points:
        return _finish(ctx, record, plan)
    reasons = tuple((p.key, p.concurrency, p.reason.value) for p in sweep.points)
    record = replace(
        record, running=replace(running, queue=tuple(group_points(sweep.points))), points=(*record.points, *reasons)
    )
    return _launch_next(ctx, record, known)


def _launch_next(ctx: _Context, record: SweepRecord, known: Sequence[SweepMeasurement]) -> tuple[SweepRecord, _Effects]:
    """Start the next unit of the round that fits what is left; at the round's end, re-plan."""
    running = record.running
    assert running is not None
    queue = running.queue
    while queue:
        points, queue = queue[0], queue[1:]
        name = describe_config(points[0].unit)
        estimate = warmup_gpu_minutes(points[0], ctx.settings) + sum(p.run_gpu_minutes for p in points)
        left = running.budget_gpu_minutes - running.spent_gpu_minutes
        if estimate > left + 1e-9:
            record = _explained(record, f"{name}: not started, {estimate:.1f} GPU-min no longer fit {left:.1f}")
            continue
        unit = deployment_unit([p.unit for p in points])
        ident = sweep_id(ctx.name, ctx.inp.now, points[0].key)
        spec = benchmark_spec(points, ctx.request.workload, sweep=ident)
        try:
            objects = render_deployment(
                ctx.target, SweepDeployment(unit, points[0].pool, points, spec), owner_of(ctx.target)
            )
        except RenderError as error:
            record = _explained(record, f"{name}: not started, it cannot be rendered: {error.detail}")
            continue
        job_name = next(str(o["metadata"]["name"]) for o in objects if o["kind"] == "Job")
        job = RunningJob(
            ident, job_name, points, ctx.inp.now, unit.total_gpus, warmup_gpu_minutes(points[0], ctx.settings)
        )
        levels = ", ".join(str(p.concurrency) for p in points)
        record = replace(record, running=replace(running, queue=queue, job=job))
        return _explained(record, f"measuring {name} at concurrency {levels} (Job {job_name})"), _Effects(
            apply=tuple(objects)
        )
    record = replace(record, running=replace(running, queue=()))
    return _end_round(ctx, record, known)


def _end_round(ctx: _Context, record: SweepRecord, known: Sequence[SweepMeasurement]) -> tuple[SweepRecord, _Effects]:
    running = record.running
    assert running is not None
    after = replan(ctx.request, ctx.inp.base, known)
    if not isinstance(after, Plan):
        record = _explained(record, f"the re-plan on the measurements is infeasible: {after.summary}")
        return _finish(ctx, record, None)
    left = running.budget_gpu_minutes - running.spent_gpu_minutes
    if running.round < MAX_ROUNDS and left > 0 and not choice_measured(after, known, ctx.settings):
        record = replace(record, running=replace(running, round=running.round + 1))
        return _new_round(ctx, record, after, known)
    return _finish(ctx, record, after)


def _finish(ctx: _Context, record: SweepRecord, plan: Plan | None) -> tuple[SweepRecord, _Effects]:
    running = record.running
    assert running is not None
    failed = running.failed > 0 and running.measured == 0
    chosen = f"; the plan now: {describe_config(plan.chosen.config)}" if plan is not None else ""
    cost = f" at ${plan.chosen.prediction.cost_per_mtok:.3f}/Mtok" if plan is not None else ""
    summary = (
        f"sweep done: {running.measured} point(s) measured in {running.round} round(s), "
        f"{running.spent_gpu_minutes:.1f} of {running.budget_gpu_minutes:.1f} GPU-min{chosen}{cost}"
    )
    if failed:
        summary = (
            f"sweep failed: no benchmark succeeded ({running.failed} failed), {running.spent_gpu_minutes:.1f} GPU-min"
        )
    record = replace(
        record,
        running=None,
        phase=Phase.FAILED if failed else Phase.DONE,
        last_run_at=ctx.inp.now,
        swept_image=ctx.spec.serving.image,
        created_done=True,
    )
    event = EventNote("Warning", "SweepFailed", summary) if failed else EventNote("Normal", "SweepDone", summary)
    return _explained(record, summary), _Effects(clean_up=True, events=(event,))


def _job_ended(ctx: _Context, record: SweepRecord, report: JobReport) -> tuple[SweepRecord, _Effects]:
    """The running Job finished (or vanished): keep what it measured, charge its GPU time, delete it."""
    running = record.running
    assert running is not None and running.job is not None
    job, now = running.job, ctx.inp.now
    name = describe_config(job.points[0].unit)
    measured: list[SweepMeasurement] = []
    problem = ""
    if report.state is JobState.SUCCEEDED:
        try:
            measured = [replace(m, measured_at=now) for m in match_results(report.results, job.points)]
        except BenchmarkResultError as error:
            problem = f"its result is unusable: {error}"
        if not measured and not problem:
            problem = report.message or "its log holds no result for the planned concurrencies"
    else:
        problem = report.message or ("the Job is gone" if report.state is JobState.MISSING else "the Job failed")
    # The deployment held its GPUs from its start: that is the charge. A finished benchmark is charged at least
    # what `run_sweep` charges (its warm-up estimate and the runs' measured durations) — the wall clock can
    # under-report, e.g. a twin answering at once — but that estimate never beyond what was left: a Job still
    # running when its GPU time reaches the budget is stopped (`_over_budget`), so one that finished did so within it.
    charged = _elapsed_gpu_minutes(job, now)
    if measured:
        left = max(0.0, running.budget_gpu_minutes - running.spent_gpu_minutes)
        charged = max(charged, min(job.warmup_gpu_minutes + sum(m.gpu_minutes for m in measured), left))
    record, running = _charge(record, running, charged)
    known = tuple(ctx.inp.stored)
    effects = _Effects(delete=(job.sweep_id,))
    if measured:
        known = tuple(merge_points(known, measured))
        running = replace(running, measured=running.measured + len(measured))
        effects = replace(effects, stored=known)
        lines = [
            f"{name} at {m.concurrency} in flight: TPOT p50 {m.predicted.tpot_p50_s * 1e3:.4g} ms predicted, "
            f"{m.tpot.p50 * 1e3:.4g} ms measured; TTFT p50 {m.predicted.ttft_p50_s * 1e3:.4g} / "
            f"{m.ttft.p50 * 1e3:.4g} ms"
            for m in measured
        ]
        record = _explained(record, *lines)
    if problem:
        running = replace(running, failed=running.failed + (0 if measured else 1))
        message = f"benchmark of {name} (Job {job.job_name}): {problem}"[:MAX_LINE]
        record = _explained(record, message)
        effects = replace(effects, events=(EventNote("Warning", "SweepJobFailed", message),))
    record = replace(record, running=replace(running, job=None))
    record, more = _launch_next(ctx, record, known)
    return record, effects.then(more)


# ------------------------------------------------------------------------------------------------ status


def sweep_status(record: SweepRecord, stored: Sequence[SweepMeasurement], target_name: str) -> SweepStatus:
    reasons = {(key, level): reason for key, level, reason in record.points}
    mine = [m for m in stored if (m.key, m.concurrency) in reasons][-MAX_POINTS:]
    points = [
        p.model_copy(update={"reason": reasons[(m.key, m.concurrency)]})
        for m, p in zip(mine, status_points(mine), strict=True)
    ]
    return SweepStatus(
        phase=record.phase.value,
        gpu_minutes_used=round(record.gpu_minutes_used, 2),
        period_started_at=rfc3339(record.period_started_at) if record.period_started_at is not None else None,
        last_run_at=rfc3339(record.last_run_at) if record.last_run_at is not None else None,
        results_config_map=results_config_map(target_name) if stored else None,
        points=points,
        explanation=list(record.explanation),
    )


# ------------------------------------------------------------------------------------------------ step


def _wants_sweeps(spec: FrontierTargetSpec, annotations: Mapping[str, str]) -> bool:
    """Whether a target without a record asks for sweeps at all (most targets never do)."""
    return spec.sweep.on_create or spec.sweep.period is not None or bool(annotations.get(SWEEP_START))


def _request_waits(record: SweepRecord | None, inp: SweepInput) -> tuple[SweepRecord | None, _Effects]:
    """A target without a plan cannot be swept: a request waits for one, and says so once."""
    assert inp.target is not None
    message = "a sweep is requested, but the target does not plan (see its conditions); it starts once it does"
    base = record or SweepRecord(sweep_spec_key(inp.target.spec), inp.now)
    requested = due_trigger(base, inp.target.spec, inp.annotations, inp.now) is Trigger.REQUEST
    if not requested or base.explanation[-1:] == (message,):
        return record, _Effects()
    return _explained(base, message), _Effects(events=(EventNote("Warning", "SweepNotStarted", message),))


def decide_sweep(inp: SweepInput) -> SweepDecision:
    """Decide one step of the target's sweep (see the module docstring)."""
    target, record, now = inp.target, inp.record, inp.now
    if record is None and (target is None or not _wants_sweeps(target.spec, inp.annotations)):
        return SweepDecision(record=None, status=None)
    effects = _Effects()
    if target is None or inp.request is None or inp.plan is None:
        # Nothing to measure for: stop what runs; a request waits, said once (as for a paused target).
        if record is not None and record.running is not None:
            cause = "the spec no longer parses" if target is None else "the target no longer plans"
            record, effects = _interrupt(record, cause, now)
        elif target is not None:
            record, effects = _request_waits(record, inp)
        name = str(target.metadata.get("name", "")) if target is not None else ""
        return _decision(record, inp, effects, name, hold=False)
    spec = target.spec
    ctx = _Context(inp, target, spec, inp.request, inp.plan, settings_for(spec))
    key = sweep_spec_key(spec)
    if record is None:
        record = SweepRecord(spec_key=key, first_seen_at=now)
    stopped = paused(spec, inp.annotations)
    if record.running is not None and (record.spec_key != key or stopped):
        cause = "the spec changed" if record.spec_key != key else "the target is paused"
        record, more = _interrupt(record, cause, now)
        effects = effects.then(more)
    record = current_period(replace(record, spec_key=key), spec, now)

    running = record.running
    if running is not None and running.job is not None:
        report = inp.job or JobReport(JobState.RUNNING)
        if report.state is not JobState.RUNNING:
            record, more = _job_ended(ctx, record, report)
            effects = effects.then(more)
        elif _over_budget(running, running.job, now):
            record, more = _interrupt(record, "its GPU time reached the budget", now)
            effects = effects.then(more)
    elif running is not None:
        # A record written between a round's end and its next launch (an operator stopped in between).
        record, more = _launch_next(ctx, record, inp.stored)
        effects = effects.then(more)
    else:
        trigger = due_trigger(record, spec, inp.annotations, now)
        if trigger is None and record.proposed is not None:
            # What the proposal was for no longer holds (an image change reverted, onCreate unset): withdrawn.
            message = f"the proposed sweep ({record.proposed}) is no longer due"
            record = _explained(replace(record, proposed=None, phase=Phase.IDLE), message)
        if trigger is not None:
            automatic = trigger is not Trigger.REQUEST
            if stopped:
                message = f"a sweep is due ({trigger}) but the target is paused"
                if record.explanation[-1:] != (message,):
                    record = _explained(record, message)
            elif automatic and spec.tuning.mode != TuningMode.AUTO:
                if record.proposed is not trigger:
                    message = (
                        f"a sweep is due ({trigger}); in {spec.tuning.mode} mode it starts on approval: "
                        f"frontier sweep start {ctx.name}"
                    )
                    record = _explained(replace(record, proposed=trigger, phase=Phase.PROPOSED), message)
                    effects = effects.then(_Effects(events=(EventNote("Normal", "SweepProposed", message),)))
            else:
                record, more = _start(ctx, record, trigger)
                effects = effects.then(more)
    hold = (
        inp.never_deployed
        and spec.sweep.on_create
        and spec.tuning.mode == TuningMode.AUTO
        and not stopped
        and not record.created_done
        and record.running is not None
    )
    return _decision(record, inp, effects, ctx.name, hold=hold)


def _decision(
    record: SweepRecord | None, inp: SweepInput, effects: _Effects, name: str, *, hold: bool
) -> SweepDecision:
    stored = effects.stored if effects.stored is not None else inp.stored
    return SweepDecision(
        record=record,
        status=sweep_status(record, stored, name) if record is not None else None,
        apply=effects.apply,
        delete=tuple(dict.fromkeys(effects.delete)),
        clean_up=effects.clean_up,
        store=encode_points(effects.stored) if effects.stored is not None else None,
        events=effects.events,
        hold_first_deployment=hold,
        hold_message="the first deployment waits for the sweep before it (spec.sweep.onCreate): "
        + (record.explanation[-1] if record is not None and record.explanation else "starting")
        if hold
        else "",
    )


def running_sweep_id(record: SweepRecord | None) -> str | None:
    """The sweep id of the deployment the record says is running (its objects are not strays)."""
    if record is None or record.running is None or record.running.job is None:
        return None
    return record.running.job.sweep_id
