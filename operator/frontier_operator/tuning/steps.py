"""In-place steps on the stable fleet: replicas, the batch cap and the P:D ratio.

Each function proposes one bounded step, or None when it does not apply or is not predicted to help.
Projections are anchored on the observation (`Situation.project`). Steps that add capacity aim at least
half the hysteresis band under every limit; steps that remove it must land the full band under, so a
step and its reverse are never both attractive (no flapping).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from frontier_operator.api.units import format_duration
from frontier_operator.perf.types import Prediction, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.search import CAP_LADDER
from frontier_operator.planner.types import PER_TOKEN_METRICS, SloMetric
from frontier_operator.tuning.actions import ScaleReplicas, SetBatchCap, SetPdRatio, SloStanding, format_seconds
from frontier_operator.tuning.situation import Proposal, Situation
from frontier_operator.tuning.state import ChangeKind
from frontier_operator.tuning.structure import (
    decoding_role,
    latency_role,
    replicas_of,
    with_batch_cap,
    with_replicas,
)
from frontier_operator.tuning.workload import queue_exceeds_running

# KV pool fraction in use above which a larger batch cap would only make SGLang retract requests.
KV_NEARLY_FULL = 0.90
# The cap binds when the mean running batch per replica is at least this share of it.
CAP_BINDING = 0.90
# Standard deviations of the (Poisson) in-flight count a cap raised ahead of a removal must clear.
IN_FLIGHT_SIGMAS = 3.0
# A removal that needs a cap raised first is two changes away, and its projection is made before the first:
# it must land this many hysteresis bands under every limit, not one.
TWO_STEP_BAND = 1.5
# Back-to-back windows of the fleet in force that a removal rests on. The calibrated projection that must agree
# with the window's (`_removal_fits`) is that very window until a second one is folded in, and a p99 scatters
# from window to window: GLM-5's prefill went 4 → 3 replicas on the run's first window (p99 TTFT 1.48 s on four,
# 1.72 s projected on three, 14 % under the 2 s limit), then served 1.6-2.1 s on three, missed twice and went
# to five. After a change the default 10-minute cooldown covers most of the two windows (the ledger's windows
# begin where its last one ended, so the second may end up to a window later); at start nothing does.
REMOVAL_WINDOWS = 2


def _per_token(s: Situation) -> list[SloStanding]:
    return [x for x in s.standing if x.bound.metric in PER_TOKEN_METRICS]


def _ttft(s: Situation) -> list[SloStanding]:
    return [x for x in s.standing if x.bound.metric is SloMetric.TTFT]


def _all_slack(items: list[SloStanding], band: float) -> bool:
    return all(x.slack(band) for x in items)


# ------------------------------------------------------------------------------------------- replicas


def scale_up(s: Situation, role: Role, workload: Workload | None = None) -> Proposal | None:
    """The fewest extra replicas (at most the step) projected to clear every SLO, within the GPU budget, at
    today's traffic or at `workload`."""
    deployment = s.config.role(role)
    if deployment is None:
        return None
    current = deployment.replicas
    chosen: tuple[int, tuple[float, ...] | None] | None = None
    step = max(s.policy.max_replica_step, current) if saturated(s, role) else s.policy.max_replica_step
    clears = False
    for replicas in range(current + 1, current + step + 1):
        config = with_replicas(s.config, role, replicas)
        if config.total_gpus > s.pool.max_gpus:
            break
        values = s.project(config, workload)
        chosen = (replicas, values)
        clears = _clears(s, config, role, values, workload=workload)
        if clears:
            break
    if chosen is None:
        return None
    replicas, values = chosen
    if clears and values is not None:
        outlook = f"projected {s.describe_projection(values)}"
    else:
        projected = s.describe_projection(values) if values is not None else "unpredictable"
        outlook = f"the most one step may add; projected still short ({projected})"
    return Proposal(
        ScaleReplicas(role, current, replicas), f"{role.value} replicas {current} → {replicas}: {outlook}", clears
    )


def _clears(
    s: Situation,
    config: ServingConfig,
    role: Role,
    values: tuple[float, ...] | None,
    band: float | None = None,
    *,
    workload: Workload | None = None,
) -> bool:
    """`config` is projected to keep every SLO `band` (default: half the hysteresis band) under its limit —
    and, for a saturated role, to carry the offered rate (today's, or `workload`'s) with the capacity headroom
    (its latency was projected from a queue, not a service)."""
    if values is None or not s.fits(values, s.policy.step_aim if band is None else band):
        return False
    if not s.saturated(role):
        return True
    offered = workload or s.workload
    prediction = s.forecaster.predict(config, s.pool, offered)
    return prediction is not None and s.forecaster.carries(prediction, offered, s.policy.capacity_headroom)


def _step_lead_s(s: Situation) -> float:
    """How far ahead a step taken for rising traffic looks: a window for the need to show, a cooldown to serve."""
    return s.policy.window_s + s.policy.cooldown_s


def scale_ahead(s: Situation) -> Proposal | None:
    """Replicas for the rate rising traffic reaches by the time a step would serve, when the fleet in force is
    projected over a limit there.

    A step answers a violation a window after it shows and serves a cooldown later, so on a rising edge every
    step comes late: GLM-5's p99 TTFT under diurnal traffic sat in the hysteresis band for ten minutes while the
    rate climbed, missed, and only then gained a prefill replica. The lead is the window plus the cooldown;
    the rise must stand out of the averages' noise (`workload.rate_ahead`). The trigger is the aim of the step
    itself, half the band under every limit: GLM-5's fleet, projected at up to 1.96 s against 2 s at the rate ahead,
    missed three windows by 0.5-3.3 % on the way up.
    """
    lead_s = _step_lead_s(s)
    past = _rise_past_aim(s, lead_s)
    if past is None:
        return None
    ahead, values = past
    if values is None:
        return None
    aim = 1.0 - s.policy.step_aim
    over = [item for item, value in zip(s.standing, values, strict=True) if value > item.bound.limit_s * aim]
    ttft_only = all(item.bound.metric is SloMetric.TTFT for item in over)
    role = latency_role(s.config, metric_is_ttft=True) if ttft_only else decoding_role(s.config)
    proposal = scale_up(s, role, ahead)
    if proposal is None or not proposal.clears:
        return None
    return Proposal(
        proposal.action,
        f"traffic rising{_rising_note(s, lead_s)}; the fleet in force is projected at "
        f"{s.describe_projection(values)} there: {proposal.reason}",
    )


def _rise_past_aim(s: Situation, horizon_s: float) -> tuple[Workload, tuple[float, ...] | None] | None:
    """The workload rising traffic reaches in `horizon_s` and the fleet in force's projection there (None:
    unpredictable), when the rise carries the fleet past the aim of an added step, half the band under a
    limit; None when the traffic is not rising or the fleet stays clear of that aim."""
    ahead = s.workload_in(horizon_s)
    if ahead.request_rate_per_s <= s.workload.request_rate_per_s:
        return None
    values = s.project(s.config, ahead)
    if values is not None and s.fits(values, s.policy.step_aim):
        return None
    return ahead, values


def rise_outlasting_a_canary(s: Situation) -> str | None:
    """Why no voluntary canary may start now, or None: the traffic rises, and the fleet in force is projected
    less than half the band under a limit at the rate it reaches before the canary's verdict and a cooldown.

    A canary in flight holds every other step: its verdict comes first. Qwen3-32B's exploration canary started
    twenty minutes after the evening trough on three replicas; the traffic climbed through the canary's
    window and the cooldown after its rollback, and three windows missed p50 TPOT before a replica came.
    """
    horizon_s = s.policy.canary_min_duration_s + s.policy.cooldown_s + s.policy.window_s
    past = _rise_past_aim(s, horizon_s)
    if past is None:
        return None
    values = past[1]
    projected = s.describe_projection(values) if values is not None else "unpredictable"
    return (
        f"SLO met, but traffic is rising{_rising_note(s, horizon_s)} and the fleet in force is projected at "
        f"{projected} there: no canary, which would hold every other step that long"
    )


def replicas_reach_within_budget(s: Situation, role: Role) -> bool:
    """Some replica count of `role` within the pool's GPU budget is projected — by the anchored projection or by
    the corrected model — to come within the hysteresis band of every limit, however many steps it takes.

    Either view may be the pessimistic one. The anchored projection scales the observed latency, and a
    latency set by a queue (a saturated role, a backlog) scales far worse with replicas than service does;
    the corrected model — measured capacity included — judges by capacity and service. A structural change
    is the larger, riskier step: it is preferred only when neither view sees the budget's replicas come
    within the band of the SLO, as the band keeps a fleet from being loosened on a projection at the limit.
    """
    deployment = s.config.role(role)
    if deployment is None:
        return False
    band = -s.policy.hysteresis
    replicas = deployment.replicas + 1
    while (config := with_replicas(s.config, role, replicas)).total_gpus <= s.pool.max_gpus:
        if _clears(s, config, role, s.project(config), band) or _clears(
            s, config, role, s.predict_absolute(config), band
        ):
            return True
        replicas += 1
    return False


def saturated(s: Situation, role: Role) -> bool:
    """More requests wait in `role`'s queues than run on it: the role serves at its limit and the queue grows.

    Then latency says nothing about how many replicas would suffice (the anchored projection only scales
    the backlog), and a step of two replicas on a fleet that is several times too small takes an hour of
    cooldowns (Kimi-K2.5's prefill on the perturbed truth: 3 replicas for a load that needed about 14, a
    queue of 10 000–60 000 requests). A saturated role may double in one step, as Kubernetes' HPA scales
    up by default (100 % of the pods per period, `behavior.scaleUp`), still within the GPU budget.
    """
    return queue_exceeds_running(s.group(role))


def _recently_scaled_up(s: Situation, role: Role) -> bool:
    since = s.now - s.policy.scale_down_stabilization_s
    return any(
        r.kind is ChangeKind.SCALE and r.role is role and r.direction > 0 and r.at > since for r in s.applied.history
    )


def _known_to_violate(s: Situation, role: Role, replicas: int) -> bool:
    """`replicas` of `role` were scaled up from, lately, at no less traffic than today's.

    Traffic is compared on the calibration's smoothed rate: one window's Poisson noise is not a drop.
    """
    since = s.now - s.policy.reversal_guard_s
    rate = s.model.calibration.workload.request_rate_per_s or s.workload.request_rate_per_s
    for record in s.applied.history:
        if record.kind is not ChangeKind.SCALE or record.role is not role or record.direction <= 0:
            continue
        if record.at <= since or record.before is None or replicas > record.before:
            continue
        if record.request_rate_per_s is None or rate >= record.request_rate_per_s * (1.0 - s.policy.hysteresis):
            return True
    return False


def _time_in_system(prediction: Prediction, output_tokens: float) -> float:
    """A request's mean time in the system by the model: its first token, then the rest at the per-token time."""
    return prediction.ttft.p50 + max(output_tokens - 1.0, 0.0) * prediction.tpot.p50


def _in_flight_per_replica(s: Situation, config: ServingConfig, role: Role) -> float | None:
    """Mean requests in flight per replica of `role` if the stable fleet became `config` under today's traffic.

    Little's law: the requests in flight are the rate times the time each spends in the system, so the
    observed total scales with the predicted time in system (new / current) and is shared by the new
    replica count. None when the window or the model cannot say.
    """
    group = s.group(role)
    deployment = config.role(role)
    current = s.current_prediction
    new = s.forecaster.predict(config, s.pool, s.workload)
    if group is None or group.running_requests is None or deployment is None or current is None or new is None:
        return None
    output = s.workload.output_tokens.mean
    now_s, then_s = _time_in_system(current, output), _time_in_system(new, output)
    if not (math.isfinite(now_s) and now_s > 0):
        return None
    return group.running_requests / deployment.replicas * then_s / now_s


def _cap_holds(s: Situation, config: ServingConfig, role: Role) -> bool:
    """The batch cap of `role` in `config` stays clear of its projected in-flight requests.

    Removing replicas raises the batch at each remaining one; a cap the model's capacity clears can still
    bind, and a binding cap queues requests the model's capacity does not see (a 2 → 1 step at cap 32 for
    about 30 requests in flight overloaded DeepSeek-R1 on the H200 table). The removal must not leave the cap
    binding by the loop's own test (`CAP_BINDING`, the threshold `batch_cap_up` acts on), nor within reach of
    the in-flight count's peaks — the test a cap raised ahead of a removal passes (`_clear_of_peaks`):
    DeepSeek-R1 under diurnal traffic went 2 → 1 replica at cap 24 for a mean of about 17 in flight, then
    missed its p99 TTFT by 5–7× in four windows.
    """
    if role is not decoding_role(config):
        return True
    deployment = config.role(role)
    if deployment is None:
        return True
    in_flight = _in_flight_per_replica(s, config, role)
    if in_flight is None:
        return True  # no running-requests gauge: the model's capacity check (with headroom) stands alone
    cap = deployment.worker.max_running_requests
    return (
        math.isfinite(in_flight)
        and in_flight < CAP_BINDING * cap
        and _clear_of_peaks(in_flight, cap, s.policy.hysteresis)
    )


def _clear_of_peaks(in_flight: float, cap: int, band: float) -> bool:
    """A cap past the peaks of the in-flight count, not just its mean, by `band`: requests in flight fluctuate like
    a Poisson count (Poisson arrivals, each holding its slot for its whole life), so mean + 3√mean is exceeded
    less than 0.2 % of the time (DeepSeek-R1 on one replica at cap 48 for 33 in flight queued at its peaks; at
    64 it did not).

    The mean is the model's projection (today's count scaled by the predicted time in system), as uncertain as
    the latencies it comes from, so the peaks must stay the same band under the cap as the projected latencies
    stay under their limits: DeepSeek-R1 on the H200 table went 2 → 1 replica at cap 48 for a projected 29 in
    flight (peaks 45); it ran about 31 (peaks 48), queued at the cap, missed its p99 TTFT by 2.5× and went back
    to two replicas for good, where one replica at cap 64 or more meets the SLO in every window.
    """
    return _peak(in_flight) <= cap * (1.0 - band)


def _peak(in_flight: float) -> float:
    return in_flight + IN_FLIGHT_SIGMAS * math.sqrt(max(in_flight, 0.0))


def _removal_fits(
    s: Situation, smaller: ServingConfig, headroom: float | None = None, band: float | None = None
) -> tuple[float, ...] | None:
    """The anchored projection of `smaller` when both it and the calibrated model keep every SLO `band` under
    and the fleet carries the traffic with `headroom` (defaults: the policy's hysteresis and capacity
    headroom); else None.

    Judged at the rate rising traffic reaches within the scale-down stabilisation window: a removal must hold
    until capacity could return, and a step back up waits for a window to show the violation, then for the
    cooldown and the new pods.
    """
    # Both the window-anchored and the calibrated projection must agree: one quiet window alone does not
    # remove capacity, and the calibrated one is judged at the smoothed traffic, not at a quiet window's rate.
    ahead = s.workload_in(s.policy.scale_down_stabilization_s)
    values = s.project(smaller, ahead)
    smoothed = s.predict_absolute(smaller, s.workload_in(s.policy.scale_down_stabilization_s, steady=True))
    if values is None or smoothed is None:
        return None
    band = s.policy.hysteresis if band is None else band
    if not (s.fits(values, band) and s.fits(smoothed, band)):
        return None
    prediction = s.forecaster.predict(smaller, s.pool, ahead)
    spare = s.policy.capacity_headroom if headroom is None else headroom
    if prediction is None or not s.forecaster.carries(prediction, ahead, spare):
        return None
    return values


def _rising_note(s: Situation, horizon_s: float) -> str:
    now, ahead = s.workload.request_rate_per_s, s.workload_in(horizon_s).request_rate_per_s
    if ahead <= now:
        return ""
    return f" at {ahead:.3g} requests/s (now {now:.3g}, rising: where its trend leads in {format_duration(horizon_s)})"


def _cap_ahead_of_removal(s: Situation, smaller: ServingConfig, role: Role) -> Proposal | None:
    """A larger cap (one bounded step, within memory) under which the smaller fleet would fit: raised first.

    SGLang changes the cap only by a rolling restart, and one decision makes one change; raising a cap that
    does not bind today changes nothing until the replica goes, so the safe order is cap first, then the
    removal, each re-checked on its own window.
    """
    deployment = s.config.role(role)
    if deployment is None or role is not decoding_role(s.config):
        return None
    worker = deployment.worker
    cap = worker.max_running_requests
    memory = s.forecaster.memory_batch(s.pool, worker, role, s.workload)
    ceiling = min(cap * s.policy.max_batch_cap_factor, memory if memory is not None else cap)
    target = replicas_of(smaller, role)
    band = TWO_STEP_BAND * s.policy.hysteresis
    # The largest cap one step allows (within memory): a cap above the batch the traffic sets costs nothing,
    # while one the in-flight count reaches queues requests — and the projected count is the model's.
    for candidate in sorted((c for c in _ladder(worker) if cap < c <= ceiling), reverse=True):
        raised = with_batch_cap(smaller, role, candidate)
        # Two changes for one removal: the removal must be safe with the whole band of spare capacity (the
        # margin its latency projections get), not just the headroom a single step needs — a removal made
        # possible only by a larger cap is one whose batch, and so capacity, moves most — and its latency a
        # band and a half under: the calibration still moves between the two changes (Qwen3-32B on steady
        # traffic raised its cap ten minutes after a removal, for a second removal that the next windows'
        # calibration no longer allowed within one band: every replica restarted for nothing).
        if _removal_fits(s, raised, headroom=s.policy.hysteresis, band=band) is None:
            continue
        in_flight = _in_flight_per_replica(s, raised, role)
        if in_flight is None or not math.isfinite(in_flight):
            continue
        if not _clear_of_peaks(in_flight, candidate, s.policy.hysteresis):
            continue
        return Proposal(
            SetBatchCap(role, cap, candidate),
            f"{role.value} batch cap {cap} → {candidate} ahead of removing replicas: {deployment.replicas} → "
            f"{target} replicas would keep every SLO {band:.0%} under its limit, "
            f"but their requests in flight would reach today's cap",
        )
    return None


def scale_down(s: Situation) -> tuple[Proposal | None, list[Role]]:
    """The largest replica removal (at most the step, any role) projected to keep every SLO a band under, once the
    fleet in force has `REMOVAL_WINDOWS` back-to-back windows.

    Also returns the roles held back by the anti-flap guards: the stabilisation window after a scale-up,
    and the reversal guard (never back to a count that violated the SLO lately at today's traffic). When
    the only obstacle to a removal is the decoding role's batch cap, the proposal is to raise the cap first.
    """
    best: tuple[int, Proposal] | None = None
    cap_first: Proposal | None = None
    held = []
    for deployment in s.config.roles:
        if deployment.replicas <= 1:
            continue
        if _recently_scaled_up(s, deployment.role):
            held.append(deployment.role)
            continue
        for fewer in range(min(s.policy.max_replica_step, deployment.replicas - 1), 0, -1):
            target = deployment.replicas - fewer
            if _known_to_violate(s, deployment.role, target):
                if fewer == 1:
                    held.append(deployment.role)
                continue
            smaller = with_replicas(s.config, deployment.role, target)
            values = _removal_fits(s, smaller)
            if values is None or not _cap_holds(s, smaller, deployment.role):
                if cap_first is None and fewer == 1:
                    cap_first = _cap_ahead_of_removal(s, smaller, deployment.role)
                continue
            saved = fewer * deployment.worker.gpus
            if best is None or saved > best[0]:
                proposal = Proposal(
                    ScaleReplicas(deployment.role, deployment.replicas, target),
                    f"{deployment.role.value} replicas {deployment.replicas} → {target} frees {saved} GPUs; "
                    f"projected {s.describe_projection(values)}{_rising_note(s, s.policy.scale_down_stabilization_s)}, "
                    f"every SLO at least {s.policy.hysteresis:.0%} under its limit",
                )
                best = (saved, proposal)
            break
    # A cap raised ahead of a removal is judged more strictly than the removal (`_cap_ahead_of_removal`), and the
    # removal it prepares still waits for its own windows.
    if best is not None and removal_waits(s) is None:
        return best[1], held
    return cap_first, held


def removal_waits(s: Situation) -> str | None:
    """Why no replica may go yet — the fleet in force has fewer than `REMOVAL_WINDOWS` back-to-back windows —
    else None."""
    seen = len(s.model.calibration.budget.of_fleet(s.applied.fleet_changed_at))
    if seen >= REMOVAL_WINDOWS:
        return None
    return (
        f"replicas are removed only after {REMOVAL_WINDOWS} back-to-back windows of the fleet in force ({seen} so far)"
    )


# ------------------------------------------------------------------------------------------ batch cap


def _ladder(worker: WorkerConfig) -> list[int]:
    # SGLang's CUDA-graph batch sizes per attention-DP rank, times the ranks: caps between them waste a graph.
    return [size * worker.attention_dp for size in CAP_LADDER]


def _decode_load(s: Situation) -> tuple[Role, WorkerConfig, int, float, float | None] | None:
    """The decoding role, its worker, replicas, mean running and queued requests per replica."""
    role = decoding_role(s.config)
    deployment = s.config.role(role)
    group = s.group(role)
    if deployment is None or group is None or group.running_requests is None:
        return None
    replicas = deployment.replicas
    queued = group.queued_requests / replicas if group.queued_requests is not None else None
    return role, deployment.worker, replicas, group.running_requests / replicas, queued


def _scaled_per_token(s: Situation, worker: WorkerConfig, batch: float, cap: int) -> Callable[[float], bool] | None:
    """A test: does every per-token SLO, scaled from `batch` to `cap` running requests, stay under limit·(1−band)?"""
    now = s.forecaster.token_time(s.pool, worker, batch, s.workload)
    then = s.forecaster.token_time(s.pool, worker, float(cap), s.workload)
    if now is None or then is None or now <= 0:
        return None
    ratio = then / now
    items = [x for x in _per_token(s) if x.observed_s is not None]

    def holds(band: float) -> bool:
        return all(x.observed_s is not None and x.observed_s * ratio <= x.bound.limit_s * (1.0 - band) for x in items)

    return holds


def batch_cap_down(s: Situation) -> Proposal | None:
    """Lower the cap of the decoding role when per-token latency is violated and TTFT can absorb the queueing.

    TPOT grows with the running batch; a cap below today's mean batch shortens each step at the price of
    queueing, which lands on TTFT, so the cap is lowered only while every TTFT bound has the full band of
    slack and the fleet still carries the traffic with its capacity headroom.
    """
    if not _all_slack(_ttft(s), s.policy.hysteresis):
        return None
    load = _decode_load(s)
    if load is None:
        return None
    role, worker, _, batch, _ = load
    cap = worker.max_running_requests
    # The step is bounded relative to what binds today: the cap, or the batch when it runs below the cap.
    floor = min(cap, batch) / s.policy.max_batch_cap_factor
    for candidate in sorted((c for c in _ladder(worker) if floor <= c < min(cap, batch)), reverse=True):
        holds = _scaled_per_token(s, worker, batch, candidate)
        if holds is None or not holds(s.policy.step_aim):
            continue
        prediction = s.forecaster.predict(with_batch_cap(s.config, role, candidate), s.pool, s.workload)
        needed = s.workload.request_rate_per_s * (1.0 + s.policy.capacity_headroom)
        if prediction is None or prediction.max_request_rate_per_s < needed:
            return None  # a smaller cap would not carry the traffic: add replicas instead
        return Proposal(
            SetBatchCap(role, cap, candidate),
            f"{role.value} batch cap {cap} → {candidate}: {batch:.0f} requests run per replica; at {candidate} "
            f"each decode step is short enough for the per-token SLO, and TTFT has room for the queueing",
        )
    return None


def cap_ahead(s: Situation) -> Proposal | None:
    """Raise the cap for the in-flight peaks rising traffic brings within a step's lead (`batch_cap_up`'s peaks
    test at the rate the trend reaches), when per-token latency keeps the band at the raised cap.

    `scale_ahead` reads a rise in the projected latencies, which a cap the peaks reach does not show until its
    bursts queue: DeepSeek-R1 on one H200 replica at cap 24 met its p99 TTFT (1.1-2.1 s of 5 s) while the
    afternoon rise carried its peaks past the cap, then missed it at 8.8 s, and the raise, once a window had
    missed, came three windows late. With flat traffic the cap is not raised for its peaks (`batch_cap_up`).
    """
    if s.config.disaggregated:
        return None  # a P/D fleet's first token comes from prefill, not from a decode slot (as in `_remedy`)
    lead_s = _step_lead_s(s)
    rise = s.rise_over(lead_s)
    if rise <= 1.0:
        return None
    proposal = batch_cap_up(s, at_peaks=True, rise=rise)
    if proposal is None:
        return None
    return Proposal(proposal.action, f"traffic rising{_rising_note(s, lead_s)}: {proposal.reason}")


def batch_cap_up(s: Situation, *, at_peaks: bool = False, rise: float = 1.0) -> Proposal | None:
    """Raise the cap when it binds — requests queue behind it, or (`at_peaks`) the peaks of the in-flight count,
    at the rate `rise` times today's, reach it — and per-token latency has the full band of slack.

    The peaks explain a missed first token before any mean queue shows: a cap that the peaks reach queues the
    requests of every burst (DeepSeek-R1 on the H200 table at cap 24 on one replica: 18 requests in flight at
    5:30 of a diurnal day, peaks of 31; the p99 TTFT went 1.1 s → 8.8 s of 5 s within fifteen minutes). Only
    for a TTFT the window shows missed, or for rising traffic (`cap_ahead`): with the SLO met at a steady rate,
    a larger batch is a point the model has not been shown — Qwen3-32B on the H100 table raised cap 64 → 128
    for peaks of 60 and its TTFT went 0.2 → 2 s, the measured runs' TTFT at 128 clients.
    """
    if not _all_slack(_per_token(s), s.policy.hysteresis):
        return None
    load = _decode_load(s)
    if load is None:
        return None
    role, worker, _, batch, queued = load
    cap = worker.max_running_requests
    queueing = queued is not None and queued >= 1.0 and batch >= CAP_BINDING * cap
    in_flight = (batch + (queued or 0.0)) * rise
    if not queueing and (not at_peaks or _clear_of_peaks(in_flight, cap, s.policy.hysteresis)):
        return None
    group = s.group(role)
    if group is not None and group.kv_usage is not None and group.kv_usage >= KV_NEARLY_FULL:
        return None
    memory = s.forecaster.memory_batch(s.pool, worker, role, s.workload)
    ceiling = min(cap * s.policy.max_batch_cap_factor, memory if memory is not None else cap)
    binding = (
        f"the cap binds ({batch:.0f} running, {queued or 0.0:.1f} queued per replica)"
        if queueing
        else f"the in-flight count's peaks {'there ' if rise > 1.0 else ''}reach the cap (about "
        f"{_peak(in_flight):.0f} per replica, {in_flight:.0f} on average)"
    )
    for candidate in sorted((c for c in _ladder(worker) if cap < c <= ceiling), reverse=True):
        # A queue fills whatever cap it is given; peaks without a queue reach the raised cap only as far as they go.
        reached = candidate if queueing else min(candidate, math.ceil(_peak(in_flight)))
        holds = _scaled_per_token(s, worker, batch, reached)
        if holds is not None and holds(s.policy.hysteresis):
            return Proposal(
                SetBatchCap(role, cap, candidate),
                f"{role.value} batch cap {cap} → {candidate}: {binding} and per-token latency stays "
                f"{s.policy.hysteresis:.0%} under its limit at {candidate}",
            )
    return None


# ------------------------------------------------------------------------------------------- P:D ratio


def shift_ratio(s: Situation, toward: Role) -> Proposal | None:
    """Give `toward` one more replica, paid for by replicas of the other P/D role, when that role has slack.

    The other role loses as many replicas as it takes to free one of `toward`'s (GPUs per replica may
    differ between roles), so the fleet never grows.
    """
    if not s.config.disaggregated:
        return None
    giver_role = Role.PREFILL if toward is Role.DECODE else Role.DECODE
    giver_slos = _ttft(s) if giver_role is Role.PREFILL else _per_token(s)
    if not _all_slack(giver_slos, s.policy.hysteresis):
        return None
    giver, taker = s.config.role(giver_role), s.config.role(toward)
    if giver is None or taker is None:
        return None
    given = math.ceil(taker.worker.gpus / giver.worker.gpus)
    if giver.replicas - given < 1:
        return None
    shifted = with_replicas(with_replicas(s.config, giver_role, giver.replicas - given), toward, taker.replicas + 1)
    values = s.project(shifted)
    if values is None or not s.fits(values, s.policy.step_aim):
        return None
    before = (replicas_of(s.config, Role.PREFILL), replicas_of(s.config, Role.DECODE))
    after = (replicas_of(shifted, Role.PREFILL), replicas_of(shifted, Role.DECODE))
    return Proposal(
        SetPdRatio(before[0], after[0], before[1], after[1]),
        f"P:D {before[0]}:{before[1]} → {after[0]}:{after[1]} replicas within the same GPUs: "
        f"{giver_role.value} has slack to give; projected {s.describe_projection(values)}",
    )


def describe_violation(items: list[SloStanding]) -> str:
    return ", ".join(
        f"{x.bound.label} {format_seconds(x.observed_s)} over {format_seconds(x.bound.limit_s)}"
        for x in items
        if x.observed_s is not None
    )
