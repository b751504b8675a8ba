"""The operator's side of a tuning tick (`reconcile.tuning_tick`): modes, the SRE's annotations, the record it
keeps between ticks, and what it reports for status and Events — pure, on the tuning tests' scenario."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from frontier_operator.api import parse_target
from frontier_operator.api.spec import TuningMode
from frontier_operator.api.status import ConditionStatus, ConditionType
from frontier_operator.perf.types import Role
from frontier_operator.reconcile.tuning_record import (
    Previous,
    TuningRecord,
    decode_action,
    decode_record,
    encode_action,
    encode_record,
    spec_key,
)
from frontier_operator.reconcile.tuning_tick import (
    FleetState,
    Overrides,
    TickInput,
    TickResult,
    tick,
    withheld_by_pin,
)
from frontier_operator.tuning.actions import (
    CanaryMotive,
    Decision,
    Hold,
    NoAction,
    RollbackCanary,
    RollbackCause,
    ScaleReplicas,
    SetBatchCap,
    StartCanary,
    describe_action,
)
from frontier_operator.tuning.canary import canary_fleet
from frontier_operator.tuning.policy import TuningPolicy
from frontier_operator.tuning.state import AppliedState, CanaryState, ChangeKind, RoleReadiness
from frontier_operator.tuning.structure import with_batch_cap, with_replicas
from tuning_support import NOW, POLICY, applied, base_plan, context, group, observation, runner_up

ROOT = Path(__file__).resolve().parents[2]
# The plan's fleet at 7 replicas with TPOT p50 of 42 ms against a 40 ms bound and TTFT room: the remedy is a
# lower batch cap (as in test_decisions).
SEVEN = with_replicas(base_plan().chosen.config, Role.UNIFIED, 7)
SLOW = observation(group(tpot_p50=0.042, ttft_p99=1.5, running=30 * 7))


NO_OVERRIDES = Overrides()


def _ready(state: AppliedState) -> FleetState:
    return FleetState(tuple(RoleReadiness(r.role, r.replicas, r.replicas) for r in state.config.roles))


def _tick(
    record: TuningRecord,
    seen: object = SLOW,
    *,
    policy: TuningPolicy = POLICY,
    overrides: Overrides = NO_OVERRIDES,
    fleet: FleetState | None = None,
    now: float = NOW,
    error: str | None = None,
) -> TickResult:
    return tick(
        TickInput(
            record=record,
            model=context(),
            policy=policy,
            observation=seen,  # type: ignore[arg-type]
            metrics_error=error,
            fleet=fleet or _ready(record.applied),
            overrides=overrides,
            now=now,
            now_text=f"t{now:.0f}",
        )
    )


def _record(**fields: object) -> TuningRecord:
    return replace(TuningRecord(spec_key="k", applied=applied(SEVEN)), **fields)  # type: ignore[arg-type]


def _condition(result: TickResult, kind: ConditionType) -> tuple[ConditionStatus, str] | None:
    found = [(u.status, u.reason) for u in result.report.conditions if u.type is kind]
    return found[0] if found else None


def test_auto_mode_applies_the_remedy_and_says_why() -> None:
    result = _tick(_record())
    remedy = result.applied
    assert isinstance(remedy, SetBatchCap | ScaleReplicas)
    assert remedy.to_cap < remedy.from_cap if isinstance(remedy, SetBatchCap) else remedy.to_replicas > 7
    assert result.record.applied.config != SEVEN
    assert result.record.last_tick_at == NOW
    (entry,) = result.report.history
    assert entry.action == describe_action(remedy) and entry.reason.startswith("p50 TPOT 42 ms over 40 ms")
    assert [e.reason for e in result.report.events] == [type(remedy).__name__]
    assert _condition(result, ConditionType.SLO_MET) == (ConditionStatus.FALSE, "SLOViolated")
    assert _condition(result, ConditionType.METRICS_AVAILABLE) == (ConditionStatus.TRUE, "MetricsFresh")
    assert result.report.observed is not None and result.report.observed.tpot_ms.p50 == pytest.approx(42.0)


def test_no_metrics_changes_nothing_and_says_why() -> None:
    result = _tick(_record(), None, error="Prometheus at http://p:9090 is unreachable: ConnectionError")
    assert result.applied is None and result.record.applied == applied(SEVEN)
    assert _condition(result, ConditionType.METRICS_AVAILABLE) == (ConditionStatus.FALSE, "MetricsUnavailable")
    assert _condition(result, ConditionType.SLO_MET) is None
    assert result.report.events == () and "unreachable" not in result.report.last_decision


def test_recommend_mode_proposes_once_and_applies_exactly_that_on_approval() -> None:
    policy = replace(POLICY, mode=TuningMode.RECOMMEND)
    first = _tick(_record(), policy=policy)
    assert first.applied is None and first.record.applied.config == SEVEN
    assert first.report.recommendation is not None and first.report.recommended is not None
    assert [e.reason for e in first.report.events] == ["Recommended"]
    proposed_at = first.report.recommendation.proposed_at

    # The same proposal a tick later keeps its time (an approval against it stays valid) and is not re-announced.
    again = _tick(first.record, policy=policy, now=NOW + 60)
    assert again.report.recommendation is not None and again.report.recommendation.proposed_at == proposed_at
    assert again.report.events == ()

    # A stale approval (another proposal's time) applies nothing.
    wrong = _tick(again.record, policy=policy, overrides=Overrides(approve="t0"), now=NOW + 120)
    assert wrong.applied is None

    approved = _tick(again.record, policy=policy, overrides=Overrides(approve=proposed_at), now=NOW + 120)
    assert approved.applied is not None and approved.applied == first.report.recommended
    assert approved.record.proposal is None
    assert "approved recommendation" in approved.report.history[0].reason


def test_observe_mode_reports_but_never_applies() -> None:
    policy = replace(POLICY, mode=TuningMode.OBSERVE)
    result = _tick(_record(), policy=policy)
    assert result.applied is None and result.record.applied.config == SEVEN
    assert result.report.recommendation is not None and "observe mode" in result.report.recommendation.action
    # Approving in observe mode does nothing either.
    proposed_at = result.report.recommendation.proposed_at
    approved = _tick(result.record, policy=policy, overrides=Overrides(approve=proposed_at), now=NOW + 60)
    assert approved.applied is None


def test_pause_annotation_holds_everything() -> None:
    result = _tick(_record(), overrides=Overrides(paused=True))
    assert result.applied is None and result.decision.action == NoAction(Hold.PAUSED)


def test_pin_allows_replicas_but_no_engine_change() -> None:
    cap = Decision(SetBatchCap(Role.UNIFIED, 32, 16), "TPOT over", NOW)
    held = withheld_by_pin(cap, "rev-stable")
    assert held.action == NoAction(Hold.PINNED) and "pinned to revision rev-stable" in held.reason
    scale = Decision(ScaleReplicas(Role.UNIFIED, 7, 8), "TPOT over", NOW)
    assert withheld_by_pin(scale, "rev-stable") == scale
    assert withheld_by_pin(cap, None) == cap


def _with_canary(crash_looping: bool = False) -> TuningRecord:
    full = runner_up(0)
    canary = CanaryState(
        revision="rev-canary",
        config=full,
        deployed=canary_fleet(full, 0.1),
        pool="h200",
        share=0.1,
        motive=CanaryMotive.CHEAPER,
        started_at=NOW - 600,
        ready_at=NOW - 300,
        crash_looping=crash_looping,
    )
    return _record(applied=applied(SEVEN, canary=canary))


def test_manual_rollback_is_obeyed_in_every_mode_and_only_once() -> None:
    policy = replace(POLICY, mode=TuningMode.OBSERVE)
    result = _tick(_with_canary(), policy=policy, overrides=Overrides(rollback="2026-11-30T03:00:00Z"))
    assert result.applied == RollbackCanary("rev-canary", RollbackCause.MANUAL)
    assert result.record.applied.canary is None and result.record.rollback_token == "2026-11-30T03:00:00Z"
    assert [e.reason for e in result.report.events] == ["CanaryRolledBack"]
    # The annotation left in place is not obeyed again.
    later = _tick(result.record, policy=policy, overrides=Overrides(rollback="2026-11-30T03:00:00Z"), now=NOW + 60)
    assert not isinstance(later.applied, RollbackCanary)


def test_manual_rollback_without_canary_returns_to_the_fleet_before_the_last_change() -> None:
    before = applied(SEVEN)
    now_running = applied(with_batch_cap(SEVEN, Role.UNIFIED, 16), revision="rev-capped")
    record = _record(applied=now_running, previous=Previous(before))
    back = _tick(record, overrides=Overrides(rollback="now"))
    assert back.applied == RollbackCanary("rev-stable", RollbackCause.MANUAL)
    assert back.record.applied.config == SEVEN and back.record.applied.revision == "rev-stable"
    assert back.record.applied.history[-1].kind is ChangeKind.ROLLBACK
    # Nothing to return to: said, nothing done.
    nothing = _tick(_record(), overrides=Overrides(rollback="now"))
    assert nothing.applied is None and "no canary and no earlier fleet" in nothing.decision.reason


def test_a_crash_looping_canary_is_rolled_back_without_metrics() -> None:
    record = _with_canary()
    fleet = replace(_ready(record.applied), canary_crash_looping=True)
    result = _tick(record, None, fleet=fleet)
    assert isinstance(result.applied, RollbackCanary) and result.applied.cause is RollbackCause.CRASH_LOOPING
    assert result.record.applied.canary is None and result.record.applied.rejected


def test_canary_readiness_is_taken_from_kubernetes() -> None:
    record = _with_canary()
    canary = record.applied.canary
    assert canary is not None
    record = replace(record, applied=replace(record.applied, canary=replace(canary, ready_at=None)))
    fleet = replace(_ready(record.applied), canary_ready=True)
    result = _tick(record, None, fleet=fleet)
    assert result.record.applied.canary is not None and result.record.applied.canary.ready_at == NOW


# ------------------------------------------------------------------------------------------ the record


def test_the_record_round_trips_through_its_annotation_text() -> None:
    result = _tick(_with_canary(), SLOW)
    text = encode_record(result.record)
    assert decode_record(text) == result.record
    assert len(text) < 32_000


@pytest.mark.parametrize("text", [None, "", "{", '{"spec_key": 3}', '{"version": 99}'])
def test_an_unreadable_record_starts_afresh(text: str | None) -> None:
    assert decode_record(text) is None


def test_every_proposable_action_round_trips() -> None:
    canary = runner_up(0)
    start = StartCanary(canary, canary_fleet(canary, 0.1), "h200", 0.1, CanaryMotive.CHEAPER, 1.0, 2.0)
    for action in (start, SetBatchCap(Role.UNIFIED, 32, 16), RollbackCanary("r", RollbackCause.SLO_BREACH)):
        assert decode_action(*encode_action(action)) == action


def test_the_spec_key_ignores_tuning_and_the_image_outside_observe_mode() -> None:
    target = parse_target(yaml.safe_load((ROOT / "examples" / "llama-70b-chat.yaml").read_text()))
    spec = target.spec
    retuned = spec.model_copy(update={"tuning": spec.tuning.model_copy(update={"cooldown": spec.tuning.cooldown * 2})})
    new_image = spec.model_copy(update={"serving": spec.serving.model_copy(update={"image": "sglang:next"})})
    other_slo = spec.model_copy(
        update={"hardware": spec.hardware.model_copy(update={"pools": spec.hardware.pools[:0]})}
    )
    assert spec_key(retuned) == spec_key(spec)
    assert spec_key(new_image) == spec_key(spec)
    assert spec_key(other_slo) != spec_key(spec)
    observing = spec.model_copy(update={"tuning": spec.tuning.model_copy(update={"mode": TuningMode.OBSERVE})})
    observing_new_image = observing.model_copy(update={"serving": new_image.serving})
    assert spec_key(observing_new_image) != spec_key(observing)
