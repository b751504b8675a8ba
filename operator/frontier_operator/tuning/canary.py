"""Structural changes through a canary: when to start one, and the verdict that promotes or rolls it back.

**Start.** A configuration that differs in more than replicas and batch cap (layout, formats, speculation,
P/D, pool, engine image) never replaces the stable fleet directly. It is deployed as a second revision
with its replicas scaled to the traffic share it will receive (at least one per role), within the GPU budget.
Through the target's Service (the default) that share is the Service's (`render.traffic.service_share`): the
canary's entry pods over all entry pods, half with one router or one replica per revision; a canary whose share
would exceed `spec.tuning.canary.trafficShare`, when set, is not started, save a remedy canary, nor, when unset,
an exploration canary over a quarter that the model does not vouch for at its share (`_safe_at_share`). Behind
a weighted HTTPRoute (`render.route`) the share is `trafficShare` itself (a tenth if unset), a remedy canary's what
the stable fleet cannot carry.

**Verdict**, on one window holding both revisions:

* crash-looping, not ready by the startup deadline, or still without enough requests after the data
  deadline → roll back;
* serving far more of the requests than the share it was sized for (`_unplanned_split`) → roll back at once;
* an SLO the canary breaks while stable keeps it → roll back at once, before the minimum duration;
* after the minimum duration: the canary must meet every SLO itself, and its full fleet — projected with
  a correction learnt from the canary's own window, at the whole fleet's traffic — must meet every SLO and
  cost less than the stable fleet by more than the promotion margin (an image or a headroom canary: not cost
  more than the margin over it); otherwise roll back.

**Exploration** (the jagged frontier): among the plan's neighbours and those of the plan a
one-sigma-pessimistic model would hide (`_optimistic_neighbours`), the one whose optimistic cost (the corrected
prediction lowered by `optimism` × its one-sigma error, never below one replica per role) beats the stable fleet
by the margin most and that can start, unless it is a fleet of the plan's that the cheaper-canary rule starts. At
most one per exploration interval, only with room for two changes in the hourly budget, and never a
configuration rolled back in the last day.

**Headroom.** A stable fleet that meets the SLO but, by the corrected model, carries today's traffic without the
capacity headroom the planner sizes for, while the plan in force is a different structure that has it at no more
cost: the plan is canaried (`headroom_canary`).

**Remedy.** When the SLO is violated and no replica, batch-cap or P:D step within the GPU budget is projected
to clear it (`decisions._remedy`), the cheapest fleet of the plan in force — re-planned with the corrected
model, measured capacities included — that is predicted to meet every SLO and carry the offered traffic is
canaried. Its verdict is on the SLO, not on cost: while the stable fleet still violates the SLO, a canary that
meets it itself and whose full fleet is projected to do better than the stable one (more SLO bounds kept, or as
many and more capacity) is promoted whatever it costs; one that does no better is rolled back as any other.
Once the stable fleet meets the SLO again, a remedy canary is judged as a cheaper one.

A canary is started only when its traffic share yields enough requests per window to be judged, and a
candidate is priced at the rate it will be judged on (`_judged_workload`). While a stable role is saturated,
the fleet's rate is taken as at least the planned one (`workload.demand`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontier_operator.api.units import format_duration
from frontier_operator.perf.types import Prediction, Role, ServingConfig, Workload
from frontier_operator.planner.choose import slo_margin
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import PER_TOKEN_METRICS, Evaluated, GpuPool, Plan, SloBound, SloMetric
from frontier_operator.render.traffic import lightest_service_share, service_share
from frontier_operator.tuning.actions import (
    CanaryMotive,
    Decision,
    Hold,
    NoAction,
    PromoteCanary,
    RollbackCanary,
    RollbackCause,
    SloStanding,
    StartCanary,
    format_seconds,
)
from frontier_operator.tuning.calibration import CalibrationState, LatencyMetric, update_calibration
from frontier_operator.tuning.forecast import FasterModel, Forecaster
from frontier_operator.tuning.observation import Variant
from frontier_operator.tuning.policy import ROUTED_CANARY_SHARE, TuningPolicy
from frontier_operator.tuning.predictor import CalibratedPredictor, learning_reference
from frontier_operator.tuning.replan import corrected_plan, current_workload
from frontier_operator.tuning.situation import Proposal, Situation
from frontier_operator.tuning.slo import describe_standings, standings
from frontier_operator.tuning.state import CanaryState, ChangeKind
from frontier_operator.tuning.structure import rejection_key, same_structure, with_replicas
from frontier_operator.tuning.workload import (
    averaging_lag_s,
    demand,
    fleet_workload,
    serving_group,
    variant_workload,
    warming_up,
)

# ---------------------------------------------------------------------------------------------- start

# The largest traffic share a canary takes behind a weighted route (see `_routed_share`, `_remedy_share`): more
# would make the candidate, not yet judged, the main fleet.
ROUTED_MAX_SHARE = 0.5
# Behind a weighted route without `trafficShare`, a canary whose tenth would complete too few requests per window
# takes a share that completes this many times what a verdict needs: room for the window's Poisson noise and a
# falling rate while it is judged.
DATA_SHARE_MARGIN = 1.25
# A canary whose observed share exceeds its planned one × this, plus this slack, is not split as planned: a
# window's Poisson noise at 100 requests is a tenth of the share, and a saturated stable fleet completes less.
SPLIT_TOLERANCE = 1.5
SPLIT_SLACK = 0.05


def canary_fleet(config: ServingConfig, share: float) -> ServingConfig:
    """The deployed part of a canary: each role's replicas times the share, at least one."""
    return replace(
        config,
        roles=tuple(replace(r, replicas=max(1, math.ceil(r.replicas * share))) for r in config.roles),
    )


def _room_for(s: Situation, canary: ServingConfig, pool: GpuPool) -> bool:
    used = s.config.total_gpus if pool.name == s.pool.name else 0
    return used + canary.total_gpus <= pool.max_gpus


def deployed_at_share(s: Situation, config: ServingConfig, motive: CanaryMotive) -> tuple[ServingConfig, float]:
    """The canary of `config` sized for the share of traffic it will receive, and that share.

    Behind a weighted route, the policy's share (a remedy canary's: `_remedy_share`). Through the target's
    Service, the Service's: one replica per role is one entry pod unless it is P/D; sized for its share, a canary
    of several replicas runs the router, whose pods are then its entry pods (more than one router pod: a larger
    share).
    """
    if s.model.weighted_route:
        share = _remedy_share(s, _fleet_workload(s)) if motive is CanaryMotive.REMEDY else _routed_share(s, motive)
        return canary_fleet(config, share), share
    router_replicas = s.model.router_replicas
    share = service_share(s.config, canary_fleet(config, 0.0), router_replicas)
    share = service_share(s.config, canary_fleet(config, share), router_replicas)
    return canary_fleet(config, share), share


def _routed_share(s: Situation, motive: CanaryMotive) -> float:
    """A canary's share behind a weighted route: `trafficShare` when set; else a tenth, or more if a tenth would
    complete too few requests per window to be judged — up to the motive's limit (`_share_limit`), else half.

    At low traffic a tenth never yields a verdict, so no canary started at all: DeepSeek-R1 at 2.5 requests/s
    (75 requests per window of the 100 needed) kept an EP8 fleet 1.5x the cost of the TP8 one its corrected plan
    chose, which the Service's half canaried and promoted.
    """
    if s.policy.canary_share is not None:
        return s.policy.canary_share
    per_window = _requests_per_window(s, 1.0)
    needed = s.policy.min_samples / per_window if per_window > 0 else ROUTED_MAX_SHARE
    if needed <= ROUTED_CANARY_SHARE:
        return ROUTED_CANARY_SHARE
    return min(_share_limit(s.policy, motive) or ROUTED_MAX_SHARE, DATA_SHARE_MARGIN * needed)


def _canary_gets_data(s: Situation, share: float) -> bool:
    """At today's rate the canary's share completes enough requests per window to be judged.

    A canary judged on fewer than `min_samples` requests is rolled back for lack of data after the data
    deadline, having held its GPUs and two changes of the hourly budget for nothing (seen at the trough of
    diurnal traffic: 60–80 requests per window at a 10 % share of 2–3 requests/s).
    """
    return _requests_per_window(s, share) >= s.policy.min_samples


def _requests_per_window(s: Situation, share: float) -> float:
    """Requests a canary taking `share` of today's rate completes in one window."""
    return share * s.workload.request_rate_per_s * s.policy.window_s


def _judged_workload(s: Situation) -> Workload:
    """The whole fleet's workload at the rate a canary started now will be judged on.

    A canary is judged at least `canary_min_duration` after it starts, on the traffic of that later window;
    while the traffic ramps up, a candidate sized for today's window is judged on a heavier load and rolled
    back, having cost its GPUs and two changes (Llama-70B under diurnal traffic: a TP2 canary started on the
    morning ramp, rolled back 20 min later for capacity). On the way up the candidate is priced at the window's
    rate plus the smoothed rate's lag behind it (`workload.rate_ahead` over `averaging_lag_s`, 43 min at
    5-min windows: beyond the judging window, a margin for the canary's own noise); on the way down, at the
    window's.
    """
    workload = _fleet_workload(s)
    factor = s.rise_over(averaging_lag_s(s.policy.window_s))
    return replace(workload, request_rate_per_s=workload.request_rate_per_s * factor)


def _rejected_recently(s: Situation, config: ServingConfig, pool: GpuPool, image: str | None = None) -> bool:
    """A canary of this structure was rolled back within `retry_rejected_after_s`, for a cause today still has.

    A full fleet projected to fail at the traffic of its verdict may not fail at a quarter less: the peak had
    rejected for the day the fleet that is cheapest at the trough (Llama-70B under diurnal traffic: TP2 ×1,
    projected over the TPOT bound at 5.8 requests/s at 0:25, is the plan's own choice at 3.5 requests/s).
    """
    key = rejection_key(config, pool.name, image)
    since = s.now - s.policy.retry_rejected_after_s
    rates = [r.at_rate_per_s for r in s.applied.rejected if r.key == key and r.at > since]
    if not rates:
        return False
    if None in rates:
        return True
    # Only now the rate it would be judged on: every candidate of every tick asks, and most have no rejection.
    judged = _judged_workload(s).request_rate_per_s
    return any(judged > rate * s.policy.retry_rejected_below for rate in rates if rate is not None)


def _fleet_workload(s: Situation) -> Workload:
    served = fleet_workload(s.observation, s.workload) or s.workload
    # `s.workload` is the stable pods' offered traffic (at least the planned rate while they are saturated).
    return demand(served, s.workload.request_rate_per_s, s.saturated_fleet)


@dataclass(frozen=True)
class _Priced:
    candidate: Evaluated
    prediction: Prediction
    sigma: float


def _start(
    s: Situation,
    *,
    config: ServingConfig,
    pool: GpuPool,
    motive: CanaryMotive,
    stable_cost: float | None,
    cost: float | None,
    why: str,
) -> Proposal | None:
    canary, share = deployed_at_share(s, config, motive)
    if _obstacle(s, canary, share, motive, pool) is not None:
        return None
    image = s.model.image if motive is CanaryMotive.IMAGE else None
    return Proposal(
        StartCanary(config, canary, pool.name, share, motive, cost, stable_cost, image),
        f"{why}; canary {describe_config(canary)} on pool {pool.name} takes {share:.0%} of traffic "
        f"for at least {format_duration(s.policy.canary_min_duration_s)}",
    )


def _obstacle(s: Situation, canary: ServingConfig, share: float, motive: CanaryMotive, pool: GpuPool) -> str | None:
    """Why a canary deployed as `canary` at `share` cannot start now, or None."""
    if s.model.route_refused is not None:
        return _route_refused(s.model.route_refused)
    limit = _share_limit(s.policy, motive)
    if limit is not None and share > limit and not _safe_at_share(s, canary, pool, share, motive):
        return f"the target's Service would give it {share:.0%} of the traffic, over the {limit:.0%} allowed"
    if not _room_for(s, canary, pool):
        used = s.config.total_gpus if pool.name == s.pool.name else 0
        return f"its {canary.total_gpus} GPUs beside the {used} in use exceed pool {pool.name}'s {pool.max_gpus}"
    if not _canary_gets_data(s, share):
        return f"its {_too_few_requests(s, share)}"
    return None


def _too_few_requests(s: Situation, share: float) -> str:
    expected = _requests_per_window(s, share)
    return (
        f"{share:.0%} of {s.workload.request_rate_per_s:.3g} requests/s would complete {expected:.0f} requests per "
        f"window, under the {s.policy.min_samples} a verdict needs"
    )


def _route_refused(why: str) -> str:
    return f"the HTTPRoute is not accepted ({why})"


def _safe_at_share(s: Situation, canary: ServingConfig, pool: GpuPool, share: float, motive: CanaryMotive) -> bool:
    """An exploration canary over the default quarter that the model vouches for at the share it would take.

    The quarter bounds how many users a fleet the model doubts can fail. Through the Service one entry pod
    beside one takes half, and exploration never ran there (Llama-70B stayed on TP4 ×1 at 2.0× the cost of the
    TP2 ×1 its route run found): yet a one-replica canary of a fleet sized for the whole traffic is lightly
    loaded at half of it. What the model doubts there is what the fleet carries in full, which the verdict
    projects; the users it serves while judged are as safe as in any fleet the planner deploys when it is
    predicted, with the planner's margins, to meet every SLO and carry that share with the headroom — by a model
    that was right about the fleet in force (`model_confirmed`): on the Qwen3-32B H100 table, whose TTFT came
    9× the model's, a TP2 canary predicted at 1.2 s p99 TTFT for half the traffic measured 4.15 s of 4 s. A share
    the spec asks for is a limit the user set and is never exceeded.
    """
    if not _vouchable(s, motive):
        return False
    judged = _judged_workload(s)
    at_share = replace(judged, request_rate_per_s=judged.request_rate_per_s * share)
    return s.serves(s.forecaster.predict(canary, pool, at_share), at_share)


def _may_exceed(policy: TuningPolicy, motive: CanaryMotive) -> bool:
    """A canary of `motive` may take more than its limit where the model vouches for it (`_safe_at_share`)."""
    return motive is CanaryMotive.EXPLORATION and policy.canary_share is None


def _vouchable(s: Situation, motive: CanaryMotive) -> bool:
    """A canary of `motive` may take more than its limit today: the model is confirmed on the running fleet."""
    return _may_exceed(s.policy, motive) and s.model.calibration.model_confirmed


def _share_limit(policy: TuningPolicy, motive: CanaryMotive) -> float | None:
    """The most traffic a canary started for `motive` may take (None: no limit).

    A remedy canary relieves a fleet that violates the SLO: the share asked for does not hold it back. An
    exploration canary runs a fleet the model doubts, so it stays light even when no share is asked for.
    """
    if motive is CanaryMotive.REMEDY:
        return None
    if motive is CanaryMotive.EXPLORATION:
        return policy.exploration_share
    return policy.canary_share


def held_canaries(s: Situation) -> tuple[tuple[CanaryMotive, ...], str]:
    """The motives whose canaries cannot start however good the candidate, and why ("" when none).

    Behind a weighted route that its Gateway or mesh has refused, no split is in force: every canary waits; an
    accepted one holds back a motive whose share (`_routed_share`) completes too few requests to be judged.
    Through the target's Service, the lightest canary is one entry pod beside the stable revision's; a motive
    whose limit is under even that share waits — save an exploration under no share the spec set while the
    model is confirmed on the running fleet, which may exceed its quarter where the model vouches for the canary
    (`_safe_at_share`): which canary is known only once the optimistic plan has found it.
    """
    motives = (CanaryMotive.CHEAPER, CanaryMotive.EXPLORATION) if s.policy.exploration else (CanaryMotive.CHEAPER,)
    if s.model.weighted_route:
        if s.model.route_refused is not None:
            return tuple(CanaryMotive), f"canaries wait: {_route_refused(s.model.route_refused)}"
        shares = {m: _routed_share(s, m) for m in motives}
        starved = tuple(m for m, share in shares.items() if not _canary_gets_data(s, share))
        if not starved:
            return (), ""
        largest = max(shares[m] for m in starved)
        return starved, f"{' and '.join(m.value for m in starved)} canaries wait: {_too_few_requests(s, largest)}"
    lightest = lightest_service_share(s.config, s.model.router_replicas)
    over = {
        m: limit
        for m in motives
        if (limit := _share_limit(s.policy, m)) is not None and lightest > limit and not _vouchable(s, m)
    }
    if not over:
        return (), ""
    held = tuple(over)
    limits = ", ".join(f"{m.value} {limit:.0%}" for m, limit in over.items())
    unconfirmed = (
        " (an exploration may take more once the model, confirmed on the running fleet, vouches for its canary)"
        if any(_may_exceed(s.policy, m) for m in held)
        else ""
    )
    return held, (
        f"{' and '.join(m.value for m in held)} canaries wait: the target's Service gives any canary at least "
        f"{lightest:.0%} of the traffic, over their limit ({limits}){unconfirmed}; "
        "spec.serving.traffic.splitting: http-route sets the share exactly"
    )


def _stable_cost(s: Situation, workload: Workload) -> float | None:
    """What the stable structure costs once right-sized by in-place steps.

    A canary must beat the stable structure at its best, not an over-provisioned moment of it (a scale-down
    held back by the stabilisation window, or beyond one step): the cheapest of the running fleet, the
    plan's fleet when it shares the structure, and smaller replica counts of a unified fleet that are
    predicted to meet the SLO.
    """
    options = [s.config]
    plan = s.model.plan
    if isinstance(plan, Plan) and same_structure(plan.chosen.config, s.config) and plan.chosen.pool.name == s.pool.name:
        options.append(plan.chosen.config)
    unified = s.config.role(Role.UNIFIED)
    if unified is not None:
        options += [with_replicas(s.config, Role.UNIFIED, n) for n in range(1, unified.replicas)]
    current = s.forecaster.predict(s.config, s.pool, workload)
    costs = [current.cost_per_mtok] if current is not None and math.isfinite(current.cost_per_mtok) else []
    for option in options[1:]:
        prediction = s.forecaster.predict(option, s.pool, workload)
        if prediction is not None and s.forecaster.meets(prediction, s.slos):
            costs.append(prediction.cost_per_mtok)
    return min(costs) if costs else None


def _asked_image(s: Situation) -> str | None:
    """The engine image the spec asks for when the stable fleet runs another."""
    return s.model.image if s.model.image is not None and s.model.image != s.applied.image else None


def image_canary(s: Situation) -> Proposal | None:
    """The spec asks for another engine image than the stable fleet runs."""
    if _asked_image(s) is None or _rejected_recently(s, s.config, s.pool, s.model.image):
        return None
    cost = _stable_cost(s, _fleet_workload(s))
    return _start(
        s,
        config=s.config,
        pool=s.pool,
        motive=CanaryMotive.IMAGE,
        stable_cost=cost,
        cost=cost,
        why=f"the spec asks for engine image {s.model.image} (running {s.applied.image})",
    )


def image_waiting(s: Situation) -> str | None:
    """Why the engine image the spec asks for is not being canaried, or None (none asked, or it can start)."""
    image = _asked_image(s)
    if image is None:
        return None
    if _rejected_recently(s, s.config, s.pool, image):
        hours = s.policy.retry_rejected_after_s / 3600
        return f"engine image {image} waits: its canary was rolled back less than {hours:.0f} h ago"
    canary, share = deployed_at_share(s, s.config, CanaryMotive.IMAGE)
    obstacle = _obstacle(s, canary, share, CanaryMotive.IMAGE, s.pool)
    return f"engine image {image} waits: {obstacle}" if obstacle is not None else None


def _neighbours(s: Situation, plan: Plan | None = None) -> list[Evaluated]:
    """The chosen and runner-up fleets of `plan` (default: the plan in force) worth a canary from here."""
    plan = plan if plan is not None else s.model.plan if isinstance(s.model.plan, Plan) else None
    if plan is None:
        return []
    candidates = [plan.chosen, *(r.candidate for r in plan.runner_ups)]
    return [c for c in candidates if _worth_a_canary(s, c)]


def _worth_a_canary(s: Situation, candidate: Evaluated) -> bool:
    """`candidate` is not the stable structure, and was not rejected recently."""
    config, pool = candidate.config, candidate.pool
    if pool.name == s.pool.name and same_structure(config, s.config):
        return False
    return not _rejected_recently(s, config, pool)


def cheaper_canary(s: Situation) -> Proposal | None:
    """The plan (made with the corrected model) has a structurally different fleet cheaper by the margin."""
    workload = _judged_workload(s)
    stable_cost = _stable_cost(s, workload)
    if stable_cost is None:
        return None
    for candidate in _neighbours(s):
        prediction = s.forecaster.predict(candidate.config, candidate.pool, workload)
        if prediction is None or not s.serves(prediction, workload):
            continue
        if prediction.cost_per_mtok < stable_cost * (1.0 - s.policy.promote_margin):
            saving = 1.0 - prediction.cost_per_mtok / stable_cost
            why = (
                f"{describe_config(candidate.config)} is predicted to meet every SLO at "
                f"${prediction.cost_per_mtok:.3g}/Mtok, {saving:.0%} under the stable ${stable_cost:.3g}/Mtok"
            )
            proposal = _start(
                s,
                config=candidate.config,
                pool=candidate.pool,
                motive=CanaryMotive.CHEAPER,
                stable_cost=stable_cost,
                cost=prediction.cost_per_mtok,
                why=why,
            )
            if proposal is not None:
                return proposal
    return None


def headroom_canary(s: Situation) -> Proposal | None:
    """The plan in force, a different structure at no more cost, carries today's traffic with the headroom the
    planner sizes for, which the stable fleet, meeting the SLO for now, lacks.

    A fleet at its capacity meets the SLO until the rate's own fluctuations build a queue it cannot drain: after
    a drift re-plan Kimi-K2.5's corrected plan (the same 40 GPUs with an FP8 KV cache, room for twice the decode
    batch) cost what the stable fleet did, so no cheaper canary started, while the stable fleet, corrected to
    40.2 requests/s of capacity for 40 offered, met the SLO for an hour, then let its p99 TTFT climb from 6.5 s
    (1:24) to 43 s of 30 (2:00). Scaling up, and canarying the plan as the cheaper fleet 20 min later, took three
    changes after the first hour; this canary, started at 0:32 and promoted at 0:56, takes two before it. Judged
    as an image canary: it must meet the SLO and cost no more than the margin over the stable fleet.
    """
    plan = s.model.plan
    if not isinstance(plan, Plan) or not _worth_a_canary(s, plan.chosen):
        return None
    workload = _judged_workload(s)
    stable = s.forecaster.predict(s.config, s.pool, workload)
    if stable is None or s.forecaster.carries(stable, workload, s.policy.capacity_headroom):
        return None
    prediction = s.forecaster.predict(plan.chosen.config, plan.chosen.pool, workload)
    if prediction is None or not s.serves(prediction, workload):
        return None
    if prediction.cost_per_mtok > stable.cost_per_mtok * (1.0 + s.policy.promote_margin):
        return None
    why = (
        f"the stable fleet carries {stable.max_request_rate_per_s:.3g} requests/s for "
        f"{workload.request_rate_per_s:.3g}, under the {s.policy.capacity_headroom:.0%} headroom the planner sizes "
        f"for; the plan's {describe_config(plan.chosen.config)} carries {prediction.max_request_rate_per_s:.3g} at "
        f"${prediction.cost_per_mtok:.3g}/Mtok against the stable ${stable.cost_per_mtok:.3g}/Mtok"
    )
    return _start(
        s,
        config=plan.chosen.config,
        pool=plan.chosen.pool,
        motive=CanaryMotive.HEADROOM,
        stable_cost=stable.cost_per_mtok,
        cost=prediction.cost_per_mtok,
        why=why,
    )


def _remedy_share(s: Situation, workload: Workload) -> float:
    """A remedy canary's share behind a weighted route: what the stable fleet cannot carry, within [the policy's,
    half].

    Every request the stable fleet cannot serve while the canary is judged joins a queue its pods keep after
    a promotion (Kimi-K2.5's attention-DP prefill served 9 of 40 requests/s: a 10 % canary left 27 requests/s
    to queue for its 20 min). Sending the canary the excess stops the queue growing; more than half of the
    traffic would make the candidate, not yet judged, the main fleet.
    """
    least = _routed_share(s, CanaryMotive.REMEDY)
    stable = s.forecaster.predict(s.config, s.pool, workload)
    if stable is None or not workload.request_rate_per_s > 0:
        return least
    excess = 1.0 - stable.max_request_rate_per_s / (workload.request_rate_per_s * (1.0 + s.policy.capacity_headroom))
    return min(max(least, excess), max(least, ROUTED_MAX_SHARE))


def remedy_canary(s: Situation) -> Proposal | None:
    """The cheapest fleet of the plan in force predicted to meet every SLO and carry the offered traffic, for a
    stable fleet that violates the SLO beyond what in-place steps within the GPU budget can mend."""
    workload = _fleet_workload(s)
    priced = []
    for candidate in _neighbours(s):
        # The pool as the spec defines it now: its budget may have changed since the plan was made.
        pool = s.model.pool(candidate.pool.name)
        if pool is None or candidate.config.total_gpus > pool.max_gpus:
            continue
        prediction = s.forecaster.predict(candidate.config, pool, workload)
        if prediction is None or not s.serves(prediction, workload):
            continue
        priced.append((prediction.cost_per_mtok, candidate.config, pool, prediction))
    stable_cost = _stable_cost(s, workload)
    for cost, config, pool, prediction in sorted(priced, key=lambda item: item[0]):
        why = (
            f"no in-place step within the {s.pool.max_gpus}-GPU budget of pool {s.pool.name} is projected to clear "
            f"it; {describe_config(config)} is predicted to meet every SLO at "
            f"{prediction.max_request_rate_per_s:.3g} requests/s of capacity for {workload.request_rate_per_s:.3g} "
            f"(${cost:.3g}/Mtok)"
        )
        proposal = _start(
            s,
            config=config,
            pool=pool,
            motive=CanaryMotive.REMEDY,
            stable_cost=stable_cost,
            cost=cost,
            why=why,
        )
        if proposal is not None:
            return proposal
    return None


def _exploration_allowed(s: Situation) -> bool:
    if not s.policy.exploration:
        return False
    last = s.applied.last_exploration_at
    if last is not None and s.now - last < s.policy.exploration_interval_s:
        return False
    # A canary costs two changes: its start and its verdict.
    if recent_changes(s) + 2 > s.policy.max_changes_per_hour:
        return False
    # Held for every candidate (its share through the Service, a refused route, too few requests): not worth
    # the optimistic re-plan `explore` would make on every tick only for `_start` to refuse each result.
    if CanaryMotive.EXPLORATION in held_canaries(s)[0]:
        return False
    lightest = lightest_service_share(s.config, s.model.router_replicas)
    if s.model.weighted_route or lightest <= s.policy.exploration_share:
        return True
    # Through a Service that gives more than the quarter, a canary must be vouched for (`_safe_at_share`) by a
    # confirmed model (`held_canaries`), and the candidate moves only with the windows the model learns from.
    # The optimistic re-plan is then made on the first tick of each window: on every tick, it had quadrupled the
    # closed-loop bench's CPU time (GLM-5: 12 s → 196 s for six simulated hours).
    return s.now % s.policy.window_s < s.policy.interval_s


def _optimistic_share(config: ServingConfig, optimism: float) -> float:
    """The share of `config`'s cost a fleet `optimism` times as fast would need: never under one replica per role.

    A faster engine serves the same traffic with fewer replicas — on average over the day a fraction of a
    replica, since traffic moves — but never with fewer than one per role: a fleet already at one replica
    per role costs the same however fast it is (an exploration of a same-sized single-replica neighbour of
    Llama-70B was started on an "optimistic" saving its fleet could not realise).
    """
    floor = sum(r.worker.gpus for r in config.roles)
    return max(optimism, floor / config.total_gpus) if config.total_gpus > 0 else 1.0


def _optimistic_neighbours(s: Situation, workload: Workload) -> list[Evaluated]:
    """The fleets the planner would choose if the corrected model were `exploration_optimism` sigmas pessimistic.

    The plan's runner-ups are fleets the model believes meet the SLO; a layout it believes narrowly misses
    it — half the GPUs, a few percent over a limit — is never among them, yet that is exactly where a model
    error hides the cheapest fleet (Llama-70B: the oracle is TP2 ×1, the plan TP4 ×1 and its runner-up
    larger). Re-planning with every latency lowered by the model's own one-sigma error finds it.
    """
    current = s.current_prediction
    sigma = current.uncertainty if current is not None and current.uncertainty > 0 else 0.0
    if sigma <= 0:
        return []
    optimism = math.exp(-s.policy.exploration_optimism * sigma)
    planned = replace(current_workload(s.model), request_rate_per_s=workload.request_rate_per_s)
    faster = FasterModel(s.model.predictor, optimism)
    result = corrected_plan(s.model.request, faster, s.model.calibration, planned)
    return _neighbours(s, result) if isinstance(result, Plan) else []


def explore(s: Situation) -> Proposal | None:
    if not _exploration_allowed(s):
        return None
    workload = _judged_workload(s)
    stable_cost = _stable_cost(s, workload)
    if stable_cost is None:
        return None
    # Upper confidence over both sets, the plan's runner-ups and the fleets an optimistic plan would choose: a
    # runner-up that could be a little cheaper must not hide a fleet that could be much cheaper (Llama-70B: TP2
    # cap 24 ×3, 9 %, against TP2 cap 137 ×1, 50 %); a tie goes to the plan's own fleet (the sort is stable).
    # The optimistic plan's fleets are sized by optimistic capacity; a canary at its traffic share cannot
    # show capacity (the verdict projects it from the model), so these must carry today's traffic with
    # the headroom by the expected prediction — only their latencies are given the benefit of the doubt.
    # The most promising fleet that can start is explored: one that the GPU budget or a share limit rules out
    # must not hold back the next (GLM-5 behind a route: a P/D canary of 24 GPUs beside the 64 in use).
    neighbours = _neighbours(s)
    planned = {(c.config, c.pool.name) for c in neighbours}
    ranked = sorted(
        [
            *_promising(s, neighbours, workload, stable_cost, planned),
            *_promising(s, _optimistic_neighbours(s, workload), workload, stable_cost, planned, expected_capacity=True),
        ],
        key=lambda option: -option[0],
    )
    for gain, priced in ranked:
        why = (
            f"exploring {describe_config(priced.candidate.config)}: expected "
            f"${priced.prediction.cost_per_mtok:.3g}/Mtok against the stable ${stable_cost:.3g}/Mtok, but its "
            f"prediction is uncertain (±{priced.sigma:.0%}) and could be {gain:.0%} cheaper"
        )
        proposal = _start(
            s,
            config=priced.candidate.config,
            pool=priced.candidate.pool,
            motive=CanaryMotive.EXPLORATION,
            stable_cost=stable_cost,
            cost=priced.prediction.cost_per_mtok,
            why=why,
        )
        if proposal is not None:
            return proposal
    return None


def _promising(
    s: Situation,
    candidates: list[Evaluated],
    workload: Workload,
    stable_cost: float,
    planned: set[tuple[ServingConfig, str]],
    *,
    expected_capacity: bool = False,
) -> list[tuple[float, _Priced]]:
    """The candidates whose optimistic cost beats the stable one by the margin (upper confidence), with that gain.

    `planned`: the (configuration, pool) of the plan's own fleets, which `cheaper_canary` weighs first."""
    kappa = s.policy.exploration_optimism
    promising: list[tuple[float, _Priced]] = []
    for candidate in candidates:
        prediction = s.forecaster.predict(candidate.config, candidate.pool, workload)
        if prediction is None or not math.isfinite(prediction.cost_per_mtok):
            continue
        sigma = s.forecaster.sigma(candidate.config, prediction)
        optimism = math.exp(-kappa * sigma)
        capacity = prediction.max_request_rate_per_s / (1.0 if expected_capacity else optimism)
        if capacity < workload.request_rate_per_s * (1.0 + s.policy.capacity_headroom):
            continue
        optimistic_slo = all(bound.predicted(prediction) * optimism <= bound.limit_s for bound in s.slos)
        expected_gain = 1.0 - prediction.cost_per_mtok / stable_cost
        optimistic_gain = 1.0 - prediction.cost_per_mtok * _optimistic_share(candidate.config, optimism) / stable_cost
        # What `cheaper_canary` would start is not exploration; a candidate predicted much cheaper but short of
        # the SLO by less than its uncertainty is (it fell through both rules before: Llama-70B's TP2 fleet,
        # half the GPUs of the plan, predicted a few percent over the limit, was the oracle). `cheaper_canary`
        # weighs only the plan's fleets: one only the optimistic plan holds is explored even when it is predicted
        # to serve plainly cheaper, or no rule starts it (DeepSeek-R1 behind a route, seed 2: nvfp4 TP8 cap 64 ×1,
        # half the cost, predicted to serve yet outside the planner's margins, lost the exploration to a same-cost
        # fleet; the loop stayed at twice the oracle's cost for six hours).
        plain = (
            expected_gain > s.policy.promote_margin
            and s.serves(prediction, workload)
            and (candidate.config, candidate.pool.name) in planned
        )
        if not optimistic_slo or plain:
            continue
        if optimistic_gain > s.policy.promote_margin:
            promising.append((optimistic_gain, _Priced(candidate, prediction, sigma)))
    return promising


def recent_changes(s: Situation) -> int:
    """Changes counted against the hourly budget (a rollback restores, it is not counted)."""
    since = s.now - 3600.0
    return sum(1 for r in s.applied.history if r.at > since and r.kind is not ChangeKind.ROLLBACK)


# -------------------------------------------------------------------------------------------- verdict


def _rollback(
    s: Situation, canary: CanaryState, cause: RollbackCause, why: str, at_rate_per_s: float | None = None
) -> Decision:
    return Decision(
        RollbackCanary(canary.revision, cause, at_rate_per_s),
        f"roll back canary {canary.revision}: {why}",
        s.now,
        s.standing,
    )


def _hold(s: Situation, hold: Hold, why: str) -> Decision:
    return Decision(NoAction(hold), why, s.now, s.standing)


def canary_health(canary: CanaryState, policy: TuningPolicy, now: float) -> tuple[RollbackCause, str] | None:
    """Why the canary must go from what Kubernetes says alone (no metrics needed), or None."""
    if canary.crash_looping:
        return RollbackCause.CRASH_LOOPING, "its pods are crash-looping"
    waited = now - canary.started_at
    if canary.ready_at is None and waited > policy.canary_startup_deadline_s:
        return RollbackCause.NOT_READY, f"not ready after {format_duration(waited)}"
    return None


def rollback_decision(canary: CanaryState, cause: RollbackCause, why: str, now: float) -> Decision:
    return Decision(RollbackCanary(canary.revision, cause), f"roll back canary {canary.revision}: {why}", now)


def judge_canary(s: Situation, canary: CanaryState) -> Decision:
    policy = s.policy
    unhealthy = canary_health(canary, policy, s.now)
    if unhealthy is not None:
        return _rollback(s, canary, *unhealthy)
    if canary.ready_at is None:
        waited = s.now - canary.started_at
        return _hold(s, Hold.CANARY_STARTING, f"canary {canary.revision} starting ({format_duration(waited)})")
    running_for = s.now - canary.ready_at
    group = serving_group(s.observation, Variant.CANARY)
    canary_standing = standings(s.slos, s.observation, Variant.CANARY)
    samples = group.samples if group is not None else 0
    if samples < policy.min_samples or any(x.observed_s is None for x in canary_standing):
        if running_for > policy.canary_data_deadline_s:
            return _rollback(
                s, canary, RollbackCause.NO_DATA, f"only {samples} requests after {format_duration(running_for)} ready"
            )
        return _hold(s, Hold.CANARY_COMPARING, f"canary {canary.revision} has {samples} requests in the window")
    unplanned = _unplanned_split(s, canary)
    if unplanned is not None:
        return _rollback(s, canary, RollbackCause.TRAFFIC_SPLIT, unplanned)
    breached = [x for x, stable in zip(canary_standing, s.standing, strict=True) if x.violated and not stable.violated]
    if breached:
        return _rollback(
            s, canary, RollbackCause.SLO_BREACH, f"{describe_standings(breached)} while stable meets the SLO"
        )
    if running_for < policy.canary_min_duration_s:
        return _hold(
            s,
            Hold.CANARY_COMPARING,
            f"canary {canary.revision} compared for {format_duration(running_for)} of "
            f"{format_duration(policy.canary_min_duration_s)}: {describe_standings(canary_standing)}",
        )
    verdict = _verdict(s, canary, canary_standing)
    if isinstance(verdict.action, PromoteCanary) and warming_up(s.observation, canary.ready_at):
        # A canary starts empty: until its slowest requests have had time to finish, its batch is still filling
        # and decodes faster than it will at its share (a 2x slower image measured 28 ms p50 TPOT of 30 ms in its
        # first window and was promoted; the loop, trusting that window, went from three replicas to one, and p50
        # TPOT reached 56-68 ms). Such a window flatters the canary: a rollback on it stands, a promotion waits.
        began = s.observation.window_start - canary.ready_at
        return _hold(
            s,
            Hold.CANARY_COMPARING,
            f"canary {canary.revision} still filling: its window began {began:.0f} s after it got ready, within the "
            f"p99 end-to-end latency of a request; its promotion waits for a window of it full",
        )
    return verdict


def _unplanned_split(s: Situation, canary: CanaryState) -> str | None:
    """Why the canary receives far more of the traffic than it was sized for (observed completions), or None.

    The loop sizes a canary for the share the split is meant to give it; a weighted HTTPRoute that no Gateway or
    mesh applies leaves the split to the target's Service, which gives one entry pod of two half the traffic. A
    canary sized for a tenth then serves half: overloaded, and in front of far more users than the spec allows.
    """
    mine, theirs = serving_group(s.observation, Variant.CANARY), serving_group(s.observation, Variant.STABLE)
    if mine is None or theirs is None or not mine.request_rate_per_s or theirs.request_rate_per_s is None:
        return None
    observed = mine.request_rate_per_s / (mine.request_rate_per_s + theirs.request_rate_per_s)
    if observed <= canary.share * SPLIT_TOLERANCE + SPLIT_SLACK:
        return None
    hint = (
        "is the HTTPRoute accepted by a Gateway or mesh, and do clients call through it?"
        if s.model.weighted_route
        else "the target's Service spreads connections, not requests, over the entry pods"
    )
    return f"it receives {observed:.0%} of the requests where {canary.share:.0%} was planned: {hint}"


def _remedy_verdict(
    s: Situation,
    canary: CanaryState,
    canary_standing: tuple[SloStanding, ...],
    projected: Prediction,
    stable: Prediction,
) -> Decision:
    """A remedy canary that meets the SLO itself, judged against the stable fleet that violates it.

    It replaces a fleet that fails, so it must do better, not be proven good enough: its full fleet projected
    to keep more SLO bounds than the stable one, or as many and more capacity — the model's capacity being what
    was wrong about the stable fleet, and what a canary at its share shows least. Once promoted, the in-place
    steps size it on its own windows, measured capacity included.
    """
    kept = sum(1 for b in s.slos if b.predicted(projected) <= b.limit_s)
    stable_kept = sum(1 for b in s.slos if b.predicted(stable) <= b.limit_s)
    more_capacity = projected.max_request_rate_per_s > stable.max_request_rate_per_s * (1.0 + s.policy.promote_margin)
    capacities = (
        f"{projected.max_request_rate_per_s:.3g} requests/s of projected capacity against the stable fleet's "
        f"{stable.max_request_rate_per_s:.3g}"
    )
    if kept < stable_kept or (kept == stable_kept and not more_capacity):
        return _rollback(s, canary, RollbackCause.SLO_BREACH, f"it does no better than the stable fleet ({capacities})")
    return Decision(
        PromoteCanary(canary.revision),
        f"promote canary {canary.revision}: the stable fleet violates the SLO ({describe_standings(s.standing)}); "
        f"the canary meets it ({describe_standings(canary_standing)}) with {capacities}",
        s.now,
        s.standing,
    )


def _metric_margin(calibration: CalibrationState, prediction: Prediction, bound: SloBound) -> float:
    """The planner's margin for `bound` at the confidence of the calibration's estimate of that bound's metric."""
    metric = LatencyMetric.TTFT if bound.metric is SloMetric.TTFT else LatencyMetric.TPOT
    estimate = calibration.of_metric(metric)
    if bound.metric is SloMetric.E2E:
        confidence = calibration.confidence  # end-to-end latency adds both: the less certain of the two
    else:
        confidence = estimate.confidence if estimate is not None else 0.0
    return slo_margin(prediction, bound, confidence)


def _verdict(s: Situation, canary: CanaryState, canary_standing: tuple[SloStanding, ...]) -> Decision:
    violated = [x for x in canary_standing if x.violated]
    if violated:
        return _rollback(s, canary, RollbackCause.SLO_BREACH, f"{describe_standings(violated)}")
    pool = s.model.pool(canary.pool) or s.pool
    canary_load = variant_workload(s.observation, Variant.CANARY, s.workload)
    total = _fleet_workload(s)
    base = s.forecaster.predictor.base
    raw = (
        learning_reference(base, s.forecaster.arch, canary.deployed, pool, canary_load, calibration=s.model.calibration)
        if canary_load
        else None
    )
    learnt = (
        update_calibration(s.model.calibration, s.observation, canary.deployed, raw, s.now, variant=Variant.CANARY)
        if raw is not None
        else s.model.calibration
    )
    projector = Forecaster(CalibratedPredictor(base, learnt), s.forecaster.arch, learnt.confidence)
    projected = projector.predict(canary.config, pool, total)
    stable = s.forecaster.predict(s.config, s.pool, total)
    if projected is None or stable is None:
        return _rollback(s, canary, RollbackCause.NO_DATA, "its full fleet cannot be predicted")
    if canary.motive is CanaryMotive.REMEDY and any(x.violated for x in s.standing):
        return _remedy_verdict(s, canary, canary_standing, projected, stable)
    # The canary ran at its share of the traffic; its full fleet must meet the SLO with the planner's safety
    # margin at the confidence one window of it gives, since capacity is what a light canary shows least.
    # Each SLO's margin shrinks with the evidence on its own metric, as the planner sizes each SLO's margin
    # with its own metric's error: the least-measured metric's confidence (a TTFT estimate transferred, not
    # yet measured) held a TPOT bound the canary had measured to the full prior margin (Llama-70B's TP2
    # fleet, projected 24 ms of 30 ms, rolled back against 28 %; the oracle's fleet is that TP2 fleet).
    short = []
    margins = [_metric_margin(learnt, projected, bound) for bound in s.slos]
    for bound, needed in zip(s.slos, margins, strict=True):
        value, limit = bound.predicted(projected), bound.limit_s
        if not math.isfinite(value):
            short.append(f"{bound.label} (saturated)")
        elif value * (1.0 + needed) > limit:
            short.append(
                f"{bound.label} ({format_seconds(value)} with a {needed:.0%} margin, of {format_seconds(limit)})"
            )
    # Its capacity is a prediction too, and the one a light canary shows least: near it a p99 diverges, so the
    # full fleet must carry the traffic with the model's error to spare, not only the few percent of headroom
    # that absorb the rate's own fluctuations (Qwen3-32B TP2 on H100, promoted at 47 % of its real load on a
    # projected 3.34 requests/s for 2.73: it served 2.73 and its p99 TTFT reached 95 s). A unified engine
    # prefills and decodes on the same GPUs, so its capacity is as uncertain as the less certain of the two; a
    # P/D fleet's is its decode role's (a short prefill role lengthens TTFT, which that bound's margin covers).
    capacity_margins = [
        needed
        for bound, needed in zip(s.slos, margins, strict=True)
        if not canary.config.disaggregated or bound.metric in PER_TOKEN_METRICS
    ]
    headroom = max([s.policy.capacity_headroom, *capacity_margins])
    if not projector.carries(projected, total, headroom):
        short.append(
            f"capacity ({projected.max_request_rate_per_s:.3g} requests/s for {total.request_rate_per_s:.3g} "
            f"with a {headroom:.0%} margin)"
        )
    if short:
        return _rollback(
            s,
            canary,
            RollbackCause.SLO_BREACH,
            f"its full fleet at today's traffic ({total.request_rate_per_s:.3g} requests/s) is projected to miss "
            f"{', '.join(short)}",
            at_rate_per_s=total.request_rate_per_s,
        )
    margin = s.policy.promote_margin
    ratio = projected.cost_per_mtok / stable.cost_per_mtok if stable.cost_per_mtok > 0 else math.inf
    costs = f"${projected.cost_per_mtok:.3g}/Mtok against the stable ${stable.cost_per_mtok:.3g}/Mtok"
    no_dearer = canary.motive in (CanaryMotive.IMAGE, CanaryMotive.HEADROOM)
    good_enough = ratio <= 1.0 + margin if no_dearer else ratio < 1.0 - margin
    if not good_enough:
        return _rollback(s, canary, RollbackCause.NOT_CHEAPER, f"it meets the SLO but costs {costs}")
    return Decision(
        PromoteCanary(canary.revision),
        f"promote canary {canary.revision}: meets every SLO ({describe_standings(canary_standing)}) and its full "
        f"fleet costs {costs}",
        s.now,
        s.standing,
    )
