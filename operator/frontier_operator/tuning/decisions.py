"""`decide`: the next action for a fleet, as a pure function of what was observed, what runs, what the
model knows, the policy and the time.

The rules, in the order they are checked (the first that applies wins; `docs/closed-loop.md` has the
table):

1. paused → nothing;
2. a canary that crash-loops or is not ready by its deadline → roll back (Kubernetes facts, no metrics
   needed);
3. no observation (Prometheus down or erroring), a stale one, or too few requests → nothing: no action
   is ever taken on missing or stale data;
4. a canary in flight → its verdict (promote, roll back, or keep comparing);
5. an SLO metric without data, or a previous step still rolling out (ready < desired) → nothing;
6. the plan is outdated (none yet, model drift — latency or measured capacity —, workload shift — not
   while a role is saturated, when the observed rate is its capacity) → re-plan with the corrected model
   for no less than the planned rate while a role is saturated (status only, so cooldown and budget do
   not hold it back);
7. within the cooldown, or the hourly change budget spent → nothing;
8. an SLO violated → nothing while the window still holds the backlog of before the last capacity-adding
   step or promotion, while pods being retired served in the window, or while the calibrated model predicts
   the fleet under the limit, no role is saturated and the SLO's error budget absorbs the window; otherwise the
   cheapest remedy predicted to clear it: per-token latency (TPOT/ITL) → lower the batch cap if TTFT can
   absorb the queueing, else shift the P:D ratio toward decode, else add decode replicas; TTFT → raise a
   binding cap with queueing if per-token latency has slack, else shift P:D toward prefill, else add
   replicas; never beyond the step (a saturated role may double) or the GPU budget. A remedy canary of
   the plan's cheapest fleet predicted to meet the SLO (`canary.remedy_canary`) comes first when no step
   is left within the budget, or when the role is saturated, one step cannot clear it, and either no
   replica count within the budget would come within the hysteresis band of the limits (by the anchored
   projection or the corrected model) or the corrected plan has moved to another structure;
9. the spec asks for a new engine image → canary it;
10. some SLO within the hysteresis band → nothing;
11. slack everywhere → save: remove replicas (once the fleet in force has two back-to-back windows, if both
    the window and the calibrated model say the smaller fleet keeps the band and its cap does not bind) or
    raise the cap that alone stands in the way of a removal, raise a binding cap, canary a cheaper plan, or
    explore a neighbour;
    otherwise "SLO met with no cheaper option".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from frontier_operator.api.units import format_duration
from frontier_operator.perf.types import Role, Workload
from frontier_operator.planner.types import PER_TOKEN_METRICS, Plan, SloMetric
from frontier_operator.tuning.actions import CanaryMotive, Decision, Hold, NoAction, ReplanCause, SloStanding
from frontier_operator.tuning.budget import WINDOW_GOAL
from frontier_operator.tuning.canary import (
    canary_health,
    cheaper_canary,
    explore,
    headroom_canary,
    held_canaries,
    image_canary,
    image_waiting,
    judge_canary,
    recent_changes,
    remedy_canary,
    rollback_decision,
)
from frontier_operator.tuning.forecast import Forecaster
from frontier_operator.tuning.observation import Observation, Variant
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.predictor import CalibratedPredictor
from frontier_operator.tuning.replan import current_workload, replan, replan_trigger
from frontier_operator.tuning.situation import Proposal, Situation
from frontier_operator.tuning.slo import describe_standings, standings
from frontier_operator.tuning.state import AppliedState, CanaryState, ChangeKind, ModelContext
from frontier_operator.tuning.steps import (
    batch_cap_down,
    batch_cap_up,
    cap_ahead,
    describe_violation,
    removal_waits,
    replicas_reach_within_budget,
    rise_outlasting_a_canary,
    scale_ahead,
    scale_down,
    scale_up,
    shift_ratio,
)
from frontier_operator.tuning.structure import decoding_role, latency_role, same_structure, with_replicas
from frontier_operator.tuning.workload import (
    demand,
    queue_visible,
    queued_share,
    serving_group,
    variant_workload,
)


def decide(
    observation: Observation | None,
    applied: AppliedState,
    model: ModelContext,
    policy: TuningPolicy,
    now: float,
) -> Decision:
    def hold(reason: Hold, why: str, standing: tuple[SloStanding, ...] = ()) -> Decision:
        return Decision(NoAction(reason), why, now, standing)

    if policy.paused:
        return hold(Hold.PAUSED, "tuning is paused (spec.tuning.paused or the frontier.dev/paused annotation)")
    unhealthy = _unhealthy_canary(applied.canary, policy, now)
    if unhealthy is not None:
        return unhealthy
    if observation is None:
        return hold(
            Hold.METRICS_UNAVAILABLE,
            "no metrics: Prometheus is unreachable or answered an error; nothing is changed on missing data",
        )
    age = now - observation.window_end
    if age > policy.max_staleness_s:
        return hold(
            Hold.STALE_METRICS,
            f"the newest metrics window ended {age:.0f} s ago (over {policy.max_staleness_s:.0f} s): stale",
        )
    standing = standings(model.request.slos, observation, Variant.STABLE)
    group = serving_group(observation, Variant.STABLE)
    samples = group.samples if group is not None else 0
    planned = model.plan_workload or model.request.workload
    workload = variant_workload(observation, Variant.STABLE, planned)
    if samples < policy.min_samples or workload is None:
        return hold(
            Hold.INSUFFICIENT_DATA,
            f"{samples} requests completed in the window; {policy.min_samples} are needed to trust percentiles",
            standing,
        )
    pool = model.pool(applied.pool)
    if pool is None:
        return hold(Hold.NO_REMEDY, f"pool {applied.pool!r} is no longer in the spec", standing)
    forecaster = Forecaster(
        CalibratedPredictor(model.predictor, model.calibration), model.request.arch, model.calibration.confidence
    )
    s = Situation(observation, applied, model, policy, now, standing, forecaster, pool, workload)
    if s.saturated_fleet:
        s = replace(s, workload=demand(workload, planned.request_rate_per_s, saturated=True))

    if applied.canary is not None:
        return judge_canary(s, applied.canary)
    missing = [x for x in standing if x.observed_s is None]
    if missing:
        labels = ", ".join(x.bound.label for x in missing)
        return hold(Hold.MISSING_METRIC, f"no data for {labels}: nothing is changed on missing data", standing)
    pending = applied.pending()
    if pending:
        rollout = ", ".join(f"{r.role.value} {r.ready}/{r.desired} ready" for r in pending)
        return hold(Hold.STEP_PENDING, f"the previous step is still rolling out ({rollout})", standing)
    trigger = replan_trigger(model, policy.workload_shift, policy.cache_hit_shift)
    if trigger is not None and not (trigger[0] is ReplanCause.WORKLOAD_SHIFT and s.saturated_fleet):
        return s.decision(replan(model, *trigger, workload=_replan_workload(s)))
    held = _change_gates(s)
    if held is not None:
        return held
    if any(x.violated for x in standing):
        held = _draining_backlog(s) or _within_budget(s)
        if held is not None:
            return held
        return s.decision(_remedy(s))
    image = image_canary(s)
    if image is not None:
        return s.decision(image)
    ahead = scale_ahead(s) or cap_ahead(s)
    if ahead is not None:
        return s.decision(ahead)
    if not all(x.slack(policy.hysteresis) for x in standing):
        return hold(
            Hold.HYSTERESIS,
            _noting_image(
                s,
                f"SLO met but within the {policy.hysteresis:.0%} hysteresis band ({describe_standings(standing)}): "
                "nothing is loosened this close to a limit",
            ),
            standing,
        )
    return s.decision(_save(s))


def _unhealthy_canary(canary: CanaryState | None, policy: TuningPolicy, now: float) -> Decision | None:
    if canary is None:
        return None
    unhealthy = canary_health(canary, policy, now)
    return rollback_decision(canary, *unhealthy, now) if unhealthy is not None else None


def _change_gates(s: Situation) -> Decision | None:
    changes = recent_changes(s)
    within_budget = changes < s.policy.max_changes_per_hour
    history = s.applied.history
    if history:
        last = max(history, key=lambda r: r.at)
        quiet = s.now - last.at
        # A rollback leaves the stable pods as they were and hands them the canary's share at once: what the
        # cooldown waits for, a change of the stable fleet showing in its windows, did not happen, and adding
        # capacity is the safe direction (Kubernetes' HPA scales up without a stabilization window by
        # default). Qwen3-32B under diurnal traffic rolled an exploration canary back twenty minutes after the
        # evening trough, on three replicas at 11.7 ms p50 TPOT of 12 and rising, and waited out the cooldown
        # into three missed windows. The hourly budget still holds: it bounds how often the fleet changes.
        after_rollback = quiet < s.policy.cooldown_s and last.kind is ChangeKind.ROLLBACK
        ahead = scale_ahead(s) if after_rollback and within_budget else None
        if ahead is not None:
            return s.decision(ahead)
        if quiet < s.policy.cooldown_s:
            return Decision(
                NoAction(Hold.COOLDOWN),
                f"cooldown: the last change was {quiet:.0f} s ago (cooldown {s.policy.cooldown_s:.0f} s); "
                f"{describe_standings(s.standing)}",
                s.now,
                s.standing,
            )
    if not within_budget:
        return Decision(
            NoAction(Hold.CHANGE_BUDGET),
            f"{changes} changes in the last hour, the most the policy allows ({s.policy.max_changes_per_hour})",
            s.now,
            s.standing,
        )
    return None


def _replan_workload(s: Situation) -> Workload:
    """The workload a re-plan is made for: the effective one, at no less than the offered rate while some role
    is saturated.

    SGLang counts a request when it finishes, so the observed rate of a saturated fleet is what it can
    serve, not what is offered; re-planning on it plans for less traffic than arrives (Kimi-K2.5: a 40
    requests/s target "moved" to 8.6 requests/s while 10 000 requests waited). The workload estimate is
    trusted for re-planning again once the queues are back under the running batch.
    """
    workload = current_workload(s.model)
    planned = s.model.plan_workload or s.model.request.workload
    return demand(workload, planned.request_rate_per_s, s.saturated_fleet)


def _draining_backlog(s: Situation) -> Decision | None:
    """Hold a remedy while the window still covers the rollout of the last capacity-adding step.

    The queue built while the fleet was short drains only once the new pods serve; a window that began
    before then reports that backlog as if the larger fleet were still short, and the anchored projection
    (observed × the model's ratio) then asks for the most one step may add — a second scale-up the load
    never needed (DeepSeek-R1 on the H200 table went 1 → 2 → 4 replicas for a load 2 carry). The cooldown
    is the loop's estimate of a step's rollout, so the window must start at least that long after the step.
    """
    # Pods being retired (a promoted canary's predecessors, removed replicas, a rolling restart) serve out the
    # queue they hold, and their requests are in the window: a promotion away from a saturated fleet left
    # Kimi-K2.5's old prefill pods an hour of backlog, answered by a second remedy canary and a scale-up the
    # fleet in force never needed. The fleet in force is judged on a window without them.
    retiring = [d.role for d in s.config.roles if s.draining(d.role)]
    if retiring:
        roles = ", ".join(role.value for role in retiring)
        return Decision(
            NoAction(Hold.COOLDOWN),
            f"{describe_violation([x for x in s.standing if x.violated])}, but more {roles} pods than the fleet's "
            "replicas served in the window: pods being retired still drain the requests they held, which no "
            "step on the fleet in force shortens; waiting for a window of the fleet in force",
            s.now,
            s.standing,
        )
    history = s.applied.history
    if not history:
        return None
    last = max(history, key=lambda r: r.at)
    # A promotion replaces the fleet: the old revision's pods drain the queue they hold, in the same window.
    adds = (last.kind is ChangeKind.SCALE and last.direction > 0) or last.kind in (
        ChangeKind.PD_RATIO,
        ChangeKind.PROMOTE,
    )
    settled_at = last.at + s.policy.cooldown_s
    if not adds or s.observation.window_start >= settled_at:
        return None
    return Decision(
        NoAction(Hold.COOLDOWN),
        f"{describe_violation([x for x in s.standing if x.violated])}, but the window began "
        f"{settled_at - s.observation.window_start:.0f} s before the last step ({last.kind.value}) can have "
        "drained the queue built before it: waiting for a window of the new fleet",
        s.now,
        s.standing,
    )


def _within_budget(s: Situation) -> Decision | None:
    """Hold a violation the calibrated model does not confirm while the SLO's error budget absorbs it.

    Capacity added for a window serves the windows after it. A violation that the model — smoothed over every
    window so far — does not predict for the running fleet at the window's rate of requests of today's shapes
    (`Situation.steady_workload`), with a typical window's tail (how often windows run over it is the budget's to
    count), on a fleet that is not saturated, is a burst or a percentile's sampling noise until the windows say
    otherwise: the goal forgives one window in twenty (`budget.WINDOW_GOAL`), and a fleet that spends more than
    that is acted on at its next miss, however small (`tuning.budget`).

    Not while requests wait for a decoding slot over the window (its queues hold more than a trace of its running
    requests): a burst passes within seconds, while a queue behind the slots is the miss's cause, visible in the
    window, and grows until a step removes it. Kimi-K2.5 held three windows on the budget while its decode queue
    grew from 871 to 1,456 requests. (The in-flight count's peaks reaching the cap are no such sign: a cap set
    at the SLO's knee is reached at peaks by design.)
    """
    smoothed = s.predict_absolute(s.config, s.steady_workload, typical=True)
    if smoothed is None or s.saturated_fleet or queue_visible(s.group(decoding_role(s.config))):
        return None
    confirmed = (
        item.violated and not predicted <= item.bound.limit_s
        for item, predicted in zip(s.standing, smoothed, strict=True)
    )
    if any(confirmed):
        return None
    budget = s.model.calibration.budget.with_miss(s.applied.fleet_changed_at, s.observation.window_start)
    if not budget.within:
        return None
    return Decision(
        NoAction(Hold.ERROR_BUDGET),
        f"{describe_violation([x for x in s.standing if x.violated])}, but the calibrated model predicts the fleet "
        f"under the limit at this traffic and the error budget absorbs the window ({budget.describe()} of the "
        f"fleet in force; the goal is {WINDOW_GOAL:.0%} of windows met): not acted on unless the windows keep missing",
        s.now,
        s.standing,
    )


def _first(attempts: list[Callable[[], Proposal | None]]) -> Proposal | None:
    for attempt in attempts:
        proposal = attempt()
        if proposal is not None:
            return proposal
    return None


def _remedy(s: Situation) -> Proposal:
    violated = [x for x in s.standing if x.violated]
    what = describe_violation(violated)
    tokens_role = decoding_role(s.config)
    if any(x.bound.metric in PER_TOKEN_METRICS for x in violated):
        role = tokens_role
        attempts = [lambda: batch_cap_down(s), lambda: shift_ratio(s, Role.DECODE), lambda: scale_up(s, role)]
    elif any(x.bound.metric is SloMetric.TTFT for x in violated):
        role, slot_wait = _ttft_role(s)
        what += slot_wait
        attempts = [
            (lambda: batch_cap_up(s, at_peaks=True)) if not s.config.disaggregated else (lambda: None),
            lambda: shift_ratio(s, role),
            lambda: scale_up(s, role),
        ]
    else:
        role = tokens_role
        attempts = [lambda: scale_up(s, role)]
    proposal = _first(attempts)
    if proposal is None or (not proposal.clears and s.saturated(role) and _beyond_in_place(s, role)):
        structural = remedy_canary(s)
        if structural is not None:
            return Proposal(structural.action, f"{what}: {structural.reason}")
    if proposal is not None:
        return Proposal(proposal.action, f"{what}: {proposal.reason}")
    deployment = s.config.role(role)
    if deployment is not None and with_replicas(s.config, role, deployment.replicas + 1).total_gpus > s.pool.max_gpus:
        return Proposal(
            NoAction(Hold.GPU_BUDGET),
            f"{what}, but one more {role.value} replica would exceed the {s.pool.max_gpus}-GPU budget of pool "
            f"{s.pool.name}, and no batch-cap or P:D change is predicted to help",
        )
    return Proposal(NoAction(Hold.NO_REMEDY), f"{what}, and no step is predicted to help")


def _ttft_role(s: Situation) -> tuple[Role, str]:
    """The role whose queue holds the first token, and, when that is decode's in P/D, the wait in words.

    Prefill's in P/D, unless decode's queues hold a larger share of its running requests (and more than a trace)
    — then prefilled requests wait for decode slots (SGLang's pre-allocation queue), and only decode replicas
    shorten the wait. Kimi-K2.5 on the perturbed truth: 2,400 requests decoding at the slot limit and up to 2,900
    waiting for a slot, against 10 of 95 waiting for prefill (its usual share: a P/D prefill worker batches its
    queue); six prefill steps (3 → 14 replicas) left p99 TTFT at 80-99 s of 30 s. The model has no term for that
    wait, so a decode step's projected first token stays where it was: the words say why the step is taken anyway.
    """
    role = latency_role(s.config, metric_is_ttft=True)
    decode = s.group(Role.DECODE)
    if role is not Role.PREFILL or decode is None or not queue_visible(decode):
        return role, ""
    decode_share = queued_share(decode)
    prefill_share = queued_share(s.group(Role.PREFILL))
    if decode_share is None or (prefill_share is not None and decode_share <= prefill_share):
        return role, ""
    against = f" against {prefill_share:.2g} at prefill" if prefill_share is not None else ""
    return Role.DECODE, (
        f", and the first token waits for a decode slot ({decode.queued_requests:.0f} requests queued at decode, "
        f"{decode_share:.2g} per request decoding{against}; the model does not project that wait)"
    )


def _beyond_in_place(s: Situation, role: Role) -> bool:
    """A saturated role that in-place steps will not mend soon: no replica count within the budget comes within
    the band of the limits, or the corrected plan has already moved to another structure.

    Only a saturated role is handed to a structural remedy while steps remain: its queue grows every minute
    the steps take and outlives the fix. A role that keeps up queues nothing meanwhile, and a projection is
    least reliable just where it says a few more replicas fall short (a TP4 fleet whose decode ran 2× slower
    than modelled: 6 replicas were projected over a 30 ms TPOT and served 27 ms); it takes the in-place
    steps until the budget stops them.
    """
    return _plan_moved_on(s) or not replicas_reach_within_budget(s, role)


def _plan_moved_on(s: Situation) -> bool:
    """The plan in force — made with the corrected model — chose another structure than the stable fleet's.

    Then growing a saturated stable structure step by step builds, one cooldown at a time, the fleet the
    corrected model ranks below another, while a queue grows that will outlive the fix (Kimi-K2.5: prefill
    doubled 3 → 6 and waited half an hour, its queue growing by 30 requests/s, for a structure the re-plan
    had already replaced).
    """
    plan = s.model.plan
    if not isinstance(plan, Plan):
        return False
    return plan.chosen.pool.name != s.pool.name or not same_structure(plan.chosen.config, s.config)


def _save(s: Situation) -> Proposal:
    proposal, held = scale_down(s)
    if proposal is not None:
        return proposal
    rising = rise_outlasting_a_canary(s)
    canaries = [lambda: cheaper_canary(s), lambda: headroom_canary(s), lambda: explore(s)] if rising is None else []
    proposal = _first([lambda: batch_cap_up(s), *canaries])
    if proposal is not None:
        return proposal
    if held:
        roles = ", ".join(role.value for role in held)
        return Proposal(
            NoAction(Hold.STABILIZING),
            f"SLO met with slack, but {roles} replicas were added less than "
            f"{format_duration(s.policy.scale_down_stabilization_s)} ago, or fewer violated the SLO in the last "
            f"{format_duration(s.policy.reversal_guard_s)} at today's traffic: not removing them",
        )
    if rising is not None:
        return Proposal(NoAction(Hold.RISING_TRAFFIC), rising)
    why = f"SLO met ({describe_standings(s.standing)})"
    waiting, why_waiting = held_canaries(s)
    if CanaryMotive.CHEAPER not in waiting:
        why += " and no cheaper option is predicted to keep it"
    if waiting:
        why += f"; {why_waiting}"
    removal = removal_waits(s)
    if removal is not None:
        why += f"; {removal}"
    return Proposal(NoAction(Hold.SLO_MET), _noting_image(s, why))


def _noting_image(s: Situation, why: str) -> str:
    """`why`, and why the engine image the spec asks for waits if it does: a setting that does nothing must say so."""
    image = image_waiting(s)
    return why if image is None else f"{why}; {image}"
