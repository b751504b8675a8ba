"""`reconcile.sweep_step.decide_sweep`: every branch of a live sweep, one reconcile at a time, with benchmark Jobs
answered by the twin (`sim.bench.answer_benchmark`) from the Jobs' own argv."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

import pytest

from frontier_operator.api.annotations import PAUSED, SWEEP_START, request_token
from frontier_operator.api.spec import TuningMode
from frontier_operator.api.units import Duration, GpuMinutes
from frontier_operator.api.v1alpha1 import FrontierTarget
from frontier_operator.perf.types import ServingConfig
from frontier_operator.reconcile.sweep_step import (
    MAX_ROUNDS,
    RECORD_VERSION,
    JobReport,
    JobState,
    Phase,
    SweepDecision,
    SweepInput,
    SweepRecord,
    Trigger,
    budget_left,
    current_period,
    decide_sweep,
    decode_sweep_record,
    due_trigger,
    encode_sweep_record,
    running_sweep_id,
    sweep_spec_key,
)
from frontier_operator.render.benchmark import LABEL_SWEEP, benchmark_argvs, render_sweep
from frontier_operator.render.request import RenderRequest, Variant
from frontier_operator.sim.bench import answer_benchmark
from frontier_operator.sim.closed_loop import prepare
from frontier_operator.sim.timing import Truth
from frontier_operator.sweep.jobs import benchmark_spec
from frontier_operator.sweep.loop import run_sweep
from frontier_operator.sweep.results import parse_benchmark_result
from frontier_operator.sweep.store import decode_points
from frontier_operator.sweep.types import SweepMeasurement, SweepPoint
from frontier_operator.sweep.units import deployment_unit
from sweep_support import model, planned_examples

NAME = "llama"
T0 = 1_000_000.0
Answer = Callable[[list[str], ServingConfig], dict[str, Any]]


@cache
def _case() -> tuple[FrontierTarget, Any]:
    case = next(p for p in planned_examples() if p.name == "llama-70b-chat")
    target = case.target.model_copy(update={"metadata": {"name": NAME, "namespace": "ns", "uid": "uid-1"}})
    return target, case


@cache
def _truth() -> Truth:
    target, _ = _case()
    return prepare(target, truth_spec="model").truth


def _twin(argv: list[str], unit: ServingConfig) -> dict[str, Any]:
    return answer_benchmark(argv, _truth(), unit)


def _target(**sweep: Any) -> FrontierTarget:
    target, _ = _case()
    spec = target.spec
    tuning = sweep.pop("tuning", None)
    image = sweep.pop("image", None)
    changes: dict[str, Any] = {"sweep": spec.sweep.model_copy(update=sweep)}
    if tuning is not None:
        mode = tuning.pop("mode", None)
        changes["tuning"] = spec.tuning.model_copy(update={**tuning, **({"mode": TuningMode(mode)} if mode else {})})
    if image is not None:
        changes["serving"] = spec.serving.model_copy(update={"image": image})
    return target.model_copy(update={"spec": spec.model_copy(update=changes)})


def _input(target: FrontierTarget | None = None, **changes: Any) -> SweepInput:
    _, case = _case()
    base = SweepInput(
        target=target or _target(),
        record=None,
        annotations={},
        request=case.request,
        plan=case.plan,
        base=model(),
        stored=(),
        job=None,
        never_deployed=False,
        now=T0,
    )
    return replace(base, **changes)


def _job(decision: SweepDecision) -> dict[str, Any]:
    return next(o for o in decision.apply if o["kind"] == "Job")


def _succeeded(decision: SweepDecision, answer: Answer = _twin) -> JobReport:
    assert decision.record is not None and decision.record.running is not None
    job = decision.record.running.job
    assert job is not None
    unit = deployment_unit([p.unit for p in job.points])
    return JobReport(JobState.SUCCEEDED, tuple(answer(argv, unit) for argv in benchmark_argvs(_job(decision))))


def _next(inp: SweepInput, decision: SweepDecision, job: JobReport | None, seconds: float = 1.0) -> SweepInput:
    stored = tuple(decode_points(decision.store)) if decision.store is not None else inp.stored
    return replace(inp, record=decision.record, stored=stored, job=job, now=inp.now + seconds)


def _drive(inp: SweepInput, answer: Answer = _twin, steps: int = 40) -> tuple[SweepInput, list[SweepDecision]]:
    """Step until no sweep runs, every started Job answered at once; the last input and every decision."""
    decisions = []
    for _ in range(steps):
        decision = decide_sweep(inp)
        decisions.append(decision)
        record = decision.record
        if record is None or record.running is None:
            return _next(inp, decision, None), decisions
        assert decision.apply, "a running sweep always has its Job applied in the step that started it"
        inp = _next(inp, decision, _succeeded(decision, answer))
    raise AssertionError("the sweep did not end")


def _reasons(decisions: Sequence[SweepDecision]) -> list[str]:
    return [e.reason for d in decisions for e in d.events]


# ------------------------------------------------------------------------------------------ no sweep wanted


def test_a_target_that_never_asked_for_a_sweep_gets_no_record_and_no_status() -> None:
    decision = decide_sweep(_input())
    assert decision == SweepDecision(record=None, status=None)
    assert decide_sweep(_input(target=None)) == SweepDecision(record=None, status=None)


# ------------------------------------------------------------------------------------------ a whole sweep


def test_a_requested_sweep_starts_measures_stores_cleans_up_and_is_not_obeyed_twice() -> None:
    inp = _input(annotations={SWEEP_START: "2026-11-30T08:00:00Z"})
    first = decide_sweep(inp)
    record = first.record
    assert record is not None and record.running is not None and record.running.job is not None
    assert record.phase is Phase.RUNNING and first.status is not None and first.status.phase == "Running"
    assert _reasons([first]) == ["SweepStarted"]
    kinds = {o["kind"] for o in first.apply}
    assert {"Deployment", "Service", "Job"} <= kinds
    ident = record.running.job.sweep_id
    assert all(o["metadata"]["labels"][LABEL_SWEEP] == ident for o in first.apply)
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == "uid-1" for o in first.apply)
    assert record.start_token == "2026-11-30T08:00:00Z"

    # While the Job runs nothing changes.
    waiting = decide_sweep(_next(inp, first, JobReport(JobState.RUNNING)))
    assert waiting.record == record and waiting.apply == () and waiting.delete == () and waiting.events == ()

    last, decisions = _drive(_next(inp, first, _succeeded(first)))
    done = decisions[-1]
    assert done.record is not None and done.record.phase is Phase.DONE and done.record.running is None
    assert "SweepDone" in _reasons(decisions)
    assert ident in [i for d in decisions for i in d.delete]
    assert done.clean_up
    assert last.stored, "the measured points are stored"
    assert done.status is not None and done.status.points and done.status.results_config_map == f"{NAME}-sweep"
    point = done.status.points[0]
    assert point.reason and point.measured_tpot_ms and point.predicted_tpot_ms
    assert done.record.swept_image == last.target.spec.serving.image if last.target else False
    assert done.record.last_run_at is not None
    # GPU time within the budget, and at least the first deployment's warm-up (300 s on its GPUs).
    assert record.running.job.warmup_gpu_minutes <= done.record.gpu_minutes_used <= 30.0
    # The same annotation is not obeyed again.
    again = decide_sweep(last)
    assert again.apply == () and again.record == done.record


def test_a_sweep_requested_again_within_the_second_the_last_one_ended_starts() -> None:
    """`frontier sweep start` tokens differ within a second: a request right after a sweep ends is a new one."""
    moment = datetime(2026, 11, 30, 8, 0, 0, 100_000, tzinfo=UTC)
    first_token, second_token = request_token(moment), request_token(moment + timedelta(milliseconds=600))
    assert first_token == "2026-11-30T08:00:00.100000Z" and first_token[:19] == second_token[:19]
    inp = _input(annotations={SWEEP_START: first_token})
    first = decide_sweep(inp)
    last, decisions = _drive(_next(inp, first, _succeeded(first)))
    assert decisions[-1].record is not None and decisions[-1].record.phase is Phase.DONE

    again = decide_sweep(replace(last, annotations={SWEEP_START: second_token}))
    assert again.record is not None and again.record.phase is Phase.RUNNING
    assert again.record.start_token == second_token and "SweepStarted" in _reasons([again])


def test_the_step_machine_measures_what_run_sweep_measures() -> None:
    """Live rounds (one deployment per reconcile) and `run_sweep` (in one go) choose and charge alike."""
    _, case = _case()
    target = _target(budget=_budget(120.0))

    def measure(points: Sequence[SweepPoint]) -> list[SweepMeasurement]:
        unit = deployment_unit([p.unit for p in points])
        spec = benchmark_spec(points, case.request.workload, sweep="eq")
        job = next(
            o
            for o in render_sweep(RenderRequest(target, unit, points[0].pool, variant=Variant.SWEEP), spec)
            if o["kind"] == "Job"
        )
        return [
            parse_benchmark_result(_twin(argv, unit), point)
            for point, argv in zip(points, benchmark_argvs(job), strict=True)
        ]

    outcome = run_sweep(case.request, model(), budget_gpu_minutes=120.0, measure=measure)
    assert not isinstance(outcome, type(None))
    last, decisions = _drive(_input(target=target, annotations={SWEEP_START: "go"}))
    live = {(m.key, m.concurrency): m.tpot.p50 for m in last.stored}
    offline = {(m.key, m.concurrency): m.tpot.p50 for m in outcome.measurements}  # type: ignore[union-attr]
    # The same points, the same answers (stored to four significant digits).
    assert live.keys() == offline.keys() and len(live) >= 2
    assert all(live[k] == pytest.approx(offline[k], rel=1e-3) for k in live)
    record = decisions[-1].record
    assert record is not None
    # `run_sweep` charges a last unit whose runs took longer than estimated beyond the budget; live, that unit
    # would have been stopped at the budget, so the live charge stops there.
    assert record.gpu_minutes_used == pytest.approx(min(outcome.gpu_minutes, 120.0), rel=1e-6)  # type: ignore[union-attr]
    assert len(outcome.rounds) <= MAX_ROUNDS  # type: ignore[union-attr]


def _budget(minutes: float) -> GpuMinutes:
    return GpuMinutes.parse(f"{minutes:g} GPU-min")


def test_a_failed_job_is_charged_what_it_held_reported_and_the_sweep_fails_when_nothing_was_measured() -> None:
    inp = _input(annotations={SWEEP_START: "x"})
    first = decide_sweep(inp)
    assert first.record is not None and first.record.running is not None and first.record.running.job is not None
    ident = first.record.running.job.sweep_id
    failed = JobReport(JobState.FAILED, message="BackoffLimitExceeded")
    decision = decide_sweep(_next(inp, first, failed, seconds=2000.0))
    assert "SweepJobFailed" in _reasons([decision])
    assert ident in decision.delete and decision.store is None
    record = decision.record
    # 2000 s on its GPUs leave nothing of the 30 GPU-min for another deployment: the sweep ends, failed.
    assert record is not None and record.running is None
    assert record.phase is Phase.FAILED and "SweepFailed" in _reasons([decision])
    assert first.record.running.job is not None
    assert record.gpu_minutes_used == pytest.approx(2000 * first.record.running.job.gpus / 60)
    assert any("BackoffLimitExceeded" in line for line in record.explanation)


def test_a_job_that_vanished_or_printed_nothing_counts_as_failed() -> None:
    inp = _input(annotations={SWEEP_START: "x"})
    first = decide_sweep(inp)
    for report in (JobReport(JobState.MISSING), JobReport(JobState.SUCCEEDED, (), "no result in the log")):
        decision = decide_sweep(_next(inp, first, report))
        assert "SweepJobFailed" in _reasons([decision])
        assert decision.store is None


def test_a_result_for_another_concurrency_is_not_taken() -> None:
    inp = _input(annotations={SWEEP_START: "x"})
    first = decide_sweep(inp)
    report = _succeeded(first)
    wrong = JobReport(JobState.SUCCEEDED, tuple({**r, "max_concurrency": 9999} for r in report.results))
    decision = decide_sweep(_next(inp, first, wrong))
    assert decision.store is None and "SweepJobFailed" in _reasons([decision])


# ------------------------------------------------------------------------------------------ interruptions


def _running() -> tuple[SweepInput, SweepDecision]:
    inp = _input(annotations={SWEEP_START: "x"})
    return inp, decide_sweep(inp)


def test_a_spec_change_interrupts_the_running_sweep_and_deletes_its_objects() -> None:
    inp, first = _running()
    assert first.record is not None
    ident = running_sweep_id(first.record)
    target = _target()
    changed = target.model_copy(
        update={"spec": target.spec.model_copy(update={"slo": target.spec.slo.model_copy(update={"ttft": None})})}
    )
    decision = decide_sweep(replace(_next(inp, first, JobReport(JobState.RUNNING), 120.0), target=changed))
    assert ident in decision.delete and decision.clean_up
    assert "SweepInterrupted" in _reasons([decision])
    assert decision.record is not None and decision.record.running is None
    assert decision.record.phase is Phase.FAILED
    assert decision.record.spec_key == sweep_spec_key(changed.spec)
    assert decision.record.gpu_minutes_used == pytest.approx(120 * 4 / 60)


def test_pausing_interrupts_and_holds_every_start_until_resumed() -> None:
    inp, first = _running()
    paused_inp = replace(_next(inp, first, JobReport(JobState.RUNNING)), annotations={SWEEP_START: "y", PAUSED: "1"})
    decision = decide_sweep(paused_inp)
    assert "SweepInterrupted" in _reasons([decision]) and decision.apply == ()
    held = decide_sweep(_next(paused_inp, decision, None))
    assert held.apply == () and held.record is not None and held.record.running is None
    assert "paused" in held.record.explanation[-1]
    # The request waits for the resume (a paused target did not use it up).
    resumed = decide_sweep(replace(_next(paused_inp, held, None), annotations={SWEEP_START: "y"}))
    assert resumed.apply and "SweepStarted" in _reasons([resumed])
    # spec.tuning.paused works like the annotation.
    spec_paused = decide_sweep(_input(target=_target(tuning={"paused": True}), annotations={SWEEP_START: "z"}))
    assert spec_paused.apply == ()


def test_a_target_that_no_longer_plans_or_parses_stops_its_sweep() -> None:
    inp, first = _running()
    for broken in (replace(inp, plan=None, request=None), replace(inp, target=None)):
        decision = decide_sweep(_next(broken, first, JobReport(JobState.RUNNING)))
        assert decision.record is not None and decision.record.running is None
        assert decision.delete and "SweepInterrupted" in _reasons([decision])


def test_a_request_on_a_target_that_does_not_plan_waits_and_says_so_once() -> None:
    # Silently ignored before: nothing started, no Event, the status said nothing of the request.
    inp = replace(_input(annotations={SWEEP_START: "x"}), plan=None, request=None)
    said = decide_sweep(inp)
    assert said.apply == () and said.record is not None and said.record.running is None
    assert "does not plan" in said.record.explanation[-1] and _reasons([said]) == ["SweepNotStarted"]
    again = decide_sweep(_next(inp, said, None))
    assert again.apply == () and _reasons([again]) == [] and again.record == said.record
    # The request was not used up: once the target plans, it starts.
    planned = decide_sweep(replace(_next(inp, said, None), plan=_input().plan, request=_input().request))
    assert planned.apply and "SweepStarted" in _reasons([planned])
    # Without a request nothing is recorded for a target that does not plan.
    assert decide_sweep(replace(inp, annotations={})).record is None


def test_a_record_left_between_rounds_launches_the_next_deployment() -> None:
    inp, first = _running()
    record = first.record
    assert record is not None and record.running is not None and record.running.job is not None
    between = replace(record, running=replace(record.running, job=None, queue=(record.running.job.points,)))
    decision = decide_sweep(replace(inp, record=between, now=T0 + 5))
    assert decision.apply and decision.record is not None and decision.record.running is not None


# ------------------------------------------------------------------------------------------ when and how


def test_recommend_and_observe_mode_propose_an_automatic_sweep_once_and_start_it_on_approval() -> None:
    for mode in ("recommend", "observe"):
        inp = _input(target=_target(on_create=True, tuning={"mode": mode}), never_deployed=True)
        proposed = decide_sweep(inp)
        assert proposed.apply == () and not proposed.hold_first_deployment
        assert proposed.record is not None and proposed.record.phase is Phase.PROPOSED
        assert proposed.record.proposed is Trigger.CREATE
        assert _reasons([proposed]) == ["SweepProposed"]
        assert "frontier sweep start" in proposed.events[0].message
        again = decide_sweep(_next(inp, proposed, None))
        assert again.events == () and again.record == proposed.record
        approved = decide_sweep(replace(_next(inp, again, None), annotations={SWEEP_START: "ok"}))
        assert approved.apply and approved.record is not None and approved.record.proposed is None
        # Approved in recommend mode, the first deployment does not wait: it was never held.
        assert not approved.hold_first_deployment


def test_on_create_in_auto_mode_holds_the_first_deployment_until_the_sweep_ends() -> None:
    inp = _input(target=_target(on_create=True, tuning={"mode": "auto"}), never_deployed=True)
    first = decide_sweep(inp)
    assert first.hold_first_deployment and "waits for the sweep" in first.hold_message
    last, decisions = _drive(_next(inp, first, _succeeded(first)))
    assert all(d.hold_first_deployment for d in decisions[:-1])
    assert not decisions[-1].hold_first_deployment
    assert decisions[-1].record is not None and decisions[-1].record.created_done
    # Done: not started again.
    assert decide_sweep(last).apply == ()
    # Paused at creation: no hold, no sweep (it runs after the resume, beside the fleet).
    paused_first = decide_sweep(replace(inp, annotations={PAUSED: "1"}))
    assert not paused_first.hold_first_deployment and paused_first.apply == ()
    # Already deployed (onCreate added later): sweeps beside the fleet, holds nothing.
    beside = decide_sweep(replace(inp, never_deployed=False))
    assert beside.apply and not beside.hold_first_deployment


def test_triggers_in_order_request_create_image_period() -> None:
    record = SweepRecord(spec_key="k", first_seen_at=T0, created_done=True, swept_image="img:1", last_run_at=T0)
    spec = _target(period=_duration("1h")).spec
    spec = spec.model_copy(update={"serving": spec.serving.model_copy(update={"image": "img:1"})})
    assert due_trigger(record, spec, {}, T0 + 60) is None
    assert due_trigger(record, spec, {}, T0 + 3600) is Trigger.PERIOD
    new_image = spec.model_copy(update={"serving": spec.serving.model_copy(update={"image": "img:2"})})
    assert due_trigger(record, new_image, {}, T0 + 60) is Trigger.IMAGE
    on_create = spec.model_copy(update={"sweep": spec.sweep.model_copy(update={"on_create": True})})
    assert due_trigger(replace(record, created_done=False), on_create, {}, T0) is Trigger.CREATE
    assert due_trigger(record, spec, {SWEEP_START: "t"}, T0) is Trigger.REQUEST
    assert due_trigger(replace(record, start_token="t"), spec, {SWEEP_START: "t"}, T0) is None
    # Never swept: a new image alone does not start one (nothing measured is out of date).
    assert due_trigger(replace(record, swept_image=None), new_image, {}, T0 + 60) is None


def _duration(text: str) -> Duration:
    return Duration.parse(text)


def test_an_image_change_in_auto_mode_starts_a_sweep_with_the_new_image() -> None:
    target = _target(tuning={"mode": "auto"}, image="lmsysorg/sglang:v0.5.23-cu129")
    record = SweepRecord(
        spec_key=sweep_spec_key(target.spec), first_seen_at=T0, created_done=True, swept_image="old", last_run_at=T0
    )
    decision = decide_sweep(_input(target=target, record=record))
    assert decision.apply and decision.record is not None and decision.record.running is not None
    assert decision.record.running.trigger is Trigger.IMAGE
    engines = [o for o in decision.apply if o["kind"] == "Deployment"]
    images = {c["image"] for d in engines for c in d["spec"]["template"]["spec"]["containers"]}
    assert "lmsysorg/sglang:v0.5.23-cu129" in images


def test_the_budget_holds_per_period_and_resets_after_it() -> None:
    spec = _target(period=_duration("24h"), budget=_budget(30.0)).spec
    record = SweepRecord(spec_key="k", first_seen_at=T0, period_started_at=T0, gpu_minutes_used=25.0)
    assert budget_left(record, spec) == pytest.approx(5.0)
    assert current_period(record, spec, T0 + 3600) == record
    fresh = current_period(record, spec, T0 + 24 * 3600)
    assert fresh.gpu_minutes_used == 0.0 and fresh.period_started_at == T0 + 24 * 3600
    spent = replace(record, gpu_minutes_used=30.0, spec_key=sweep_spec_key(spec), created_done=True, last_run_at=T0)
    target = _target(period=_duration("24h"), budget=_budget(30.0))
    refused = decide_sweep(_input(target=target, record=spent, annotations={SWEEP_START: "more"}, now=T0 + 60))
    assert refused.apply == () and _reasons([refused]) == ["SweepNotStarted"]
    assert refused.record is not None and refused.record.start_token == "more"
    # Without a period, every sweep has the whole budget.
    assert budget_left(replace(record, gpu_minutes_used=1e6), _target().spec) == pytest.approx(30.0)


def test_a_budget_that_covers_nothing_ends_the_sweep_at_once_and_releases_the_hold() -> None:
    """A budget that covers nothing: the sweep ends at once, Done, with the reason, and releases the hold."""
    inp = _input(target=_target(on_create=True, tuning={"mode": "auto"}, budget=_budget(1.0)), never_deployed=True)
    decision = decide_sweep(inp)
    assert decision.apply == () and not decision.hold_first_deployment
    assert decision.record is not None and decision.record.phase is Phase.DONE
    assert any("nothing to measure" in line for line in decision.record.explanation)


# ------------------------------------------------------------------------------------------ record


def test_the_record_round_trips_and_unreadable_records_start_afresh() -> None:
    _, first = _running()
    assert first.record is not None
    assert decode_sweep_record(encode_sweep_record(first.record)) == first.record
    assert decode_sweep_record(None) is None
    assert decode_sweep_record("{not json") is None
    assert decode_sweep_record(encode_sweep_record(replace(first.record, version=RECORD_VERSION + 1))) is None
    # Well under the 256 KiB all annotations of an object may hold.
    assert len(encode_sweep_record(first.record)) < 32_000


def test_the_spec_key_ignores_tuning_and_sweep_but_not_the_image() -> None:
    base = _target().spec
    assert sweep_spec_key(base) == sweep_spec_key(_target(tuning={"mode": "auto"}, budget=_budget(99)).spec)
    assert sweep_spec_key(base) != sweep_spec_key(_target(image="other:1").spec)


def test_an_automatic_sweep_without_budget_waits_for_the_next_period_quietly() -> None:
    target = _target(period=_duration("24h"), budget=_budget(30.0), tuning={"mode": "auto"})
    spent = SweepRecord(
        spec_key=sweep_spec_key(target.spec),
        first_seen_at=T0,
        period_started_at=T0,
        gpu_minutes_used=30.0,
        created_done=True,
        swept_image="an older image",
        last_run_at=T0,
    )
    inp = _input(target=target, record=spent, now=T0 + 60)
    waiting = decide_sweep(inp)
    assert waiting.apply == () and waiting.events == ()
    assert waiting.record is not None and "budget is spent" in waiting.record.explanation[-1]
    again = decide_sweep(_next(inp, waiting, None))
    assert again.record == waiting.record and again.events == ()
    # The next period: the image change is swept.
    later = decide_sweep(replace(_next(inp, again, None), now=T0 + 24 * 3600 + 1))
    assert later.apply and later.record is not None and later.record.running is not None
    assert later.record.running.trigger is Trigger.IMAGE


def test_a_unit_whose_estimate_no_longer_fits_what_is_left_is_not_started() -> None:
    inp, first = _running()
    record = first.record
    assert record is not None and record.running is not None and record.running.job is not None
    points = record.running.job.points
    broke = replace(
        record,
        running=replace(record.running, job=None, queue=(points,), spent_gpu_minutes=record.running.budget_gpu_minutes),
    )
    decision = decide_sweep(replace(inp, record=broke, now=T0 + 5))
    assert decision.apply == ()
    assert decision.record is not None and decision.record.running is None
    assert any("no longer fit" in line for line in decision.record.explanation)


def test_a_proposal_whose_reason_went_away_is_withdrawn() -> None:
    target = _target(on_create=True)
    inp = _input(target=target)
    proposed = decide_sweep(inp)
    assert proposed.record is not None and proposed.record.phase is Phase.PROPOSED
    unset = decide_sweep(replace(_next(inp, proposed, None), target=_target(on_create=False)))
    assert unset.record is not None and unset.record.phase is Phase.IDLE and unset.record.proposed is None
    assert "no longer due" in unset.record.explanation[-1] and unset.apply == ()


def test_a_job_still_running_when_its_gpu_time_reaches_the_budget_is_stopped() -> None:
    inp, first = _running()
    assert first.record is not None and first.record.running is not None and first.record.running.job is not None
    gpus = first.record.running.job.gpus
    limit_s = first.record.running.budget_gpu_minutes * 60 / gpus  # 30 GPU-min on the unit's GPUs
    within = decide_sweep(_next(inp, first, JobReport(JobState.RUNNING), seconds=limit_s - 10))
    assert within.delete == () and within.record == first.record
    over = decide_sweep(_next(inp, first, JobReport(JobState.RUNNING), seconds=limit_s + 10))
    assert "SweepInterrupted" in _reasons([over]) and over.delete
    assert over.record is not None and over.record.running is None
    assert "budget" in over.record.explanation[-1]
    assert over.record.gpu_minutes_used == pytest.approx((limit_s + 10) * gpus / 60)


def test_a_finished_sweep_never_charges_more_than_its_budget() -> None:
    for budget in (30.0, 60.0, 120.0):
        _, decisions = _drive(_input(target=_target(budget=_budget(budget)), annotations={SWEEP_START: "b"}))
        record = decisions[-1].record
        assert record is not None and record.running is None
        assert record.gpu_minutes_used <= budget + 1e-9
