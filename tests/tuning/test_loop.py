"""The closed loop over simulated hours: no flapping under stationary noise, convergence when the model is off.

Each tick observes the truth (the model with hidden factors, Poisson request counts, 5–6 % latency noise),
folds the window into the calibration and decides (`tuning.loop.tune`); actions apply at once and canary
pods are ready two minutes after they start.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from frontier_operator.perf.types import Role
from frontier_operator.tuning.actions import Decision, Replan, ReplanCause, ScaleReplicas, SetBatchCap, StartCanary
from frontier_operator.tuning.calibration import LatencyMetric
from frontier_operator.tuning.structure import replicas_of, with_replicas
from tuning_support import POLICY, Loop, Truth, applied, base_plan, context

SIX_HOURS = 6.0


def _met(decisions: list[Decision]) -> float:
    judged = [d for d in decisions if d.standing and all(x.observed_s is not None for x in d.standing)]
    return sum(all(not x.violated for x in d.standing) for d in judged) / len(judged)


def _reversals(decisions: list[Decision], within_s: float) -> int:
    """Replica steps of one role undone (opposite direction) within `within_s`."""
    steps = [d for d in decisions if isinstance(d.action, ScaleReplicas)]
    count = 0
    for first, second in itertools.pairwise(steps):
        a, b = first.action, second.action
        assert isinstance(a, ScaleReplicas) and isinstance(b, ScaleReplicas)
        opposite = (a.to_replicas - a.from_replicas) * (b.to_replicas - b.from_replicas) < 0
        if a.role is b.role and opposite and second.at - first.at < within_s:
            count += 1
    return count


def test_six_hours_of_stationary_noise_make_at_most_one_change() -> None:
    loop = Loop(
        Truth(ttft_factor=0.9, tpot_factor=0.95, noise=0.06), applied(), context(), replace(POLICY, exploration=False)
    )
    loop.run(SIX_HOURS)
    assert len(loop.changes) <= 1, [d.reason for d in loop.changes]
    assert _met(loop.decisions) >= 0.95


def test_exploration_under_stationary_noise_stays_within_one_experiment() -> None:
    loop = Loop(Truth(ttft_factor=0.9, tpot_factor=0.95, noise=0.06, seed=21), applied(), context())
    loop.run(SIX_HOURS)
    experiments = [d for d in loop.changes if isinstance(d.action, StartCanary)]
    assert len(experiments) <= 1
    in_place = [d for d in loop.changes if not isinstance(d.action, StartCanary) and d.kind != "RollbackCanary"]
    assert len(in_place) <= 1, [d.reason for d in in_place]


def test_an_over_provisioned_fleet_is_scaled_down_and_stays_down() -> None:
    eight = with_replicas(base_plan().chosen.config, Role.UNIFIED, 8)
    loop = Loop(Truth(noise=0.05), applied(eight), context())
    loop.run(SIX_HOURS)
    final = replicas_of(loop.applied.config, Role.UNIFIED)
    assert final < 8
    # Only removals, and a cap raised ahead of one where the remaining replicas' in-flight peaks would reach it.
    assert all(
        (isinstance(d.action, ScaleReplicas) and d.action.to_replicas < d.action.from_replicas)
        or (isinstance(d.action, SetBatchCap) and d.action.to_cap > d.action.from_cap)
        for d in loop.changes
    )
    settled = [d for d in loop.decisions if d.at > loop.decisions[0].at + 3600]
    assert _met(settled) >= 0.95


def test_a_model_that_underestimates_decode_drifts_replans_and_the_slo_is_restored() -> None:
    loop = Loop(Truth(tpot_factor=1.5, noise=0.05), applied(), context())
    loop.run(SIX_HOURS)
    replans = [d for d in loop.decisions if isinstance(d.action, Replan)]
    assert any(d.action.cause is ReplanCause.MODEL_DRIFT for d in replans if isinstance(d.action, Replan))
    tpot = loop.model.calibration.of_metric(LatencyMetric.TPOT)
    assert tpot is not None and abs(tpot.factor - 1.5) < 0.15
    settled = [d for d in loop.decisions if d.at > loop.decisions[0].at + 2 * 3600]
    assert _met(settled) >= 0.95
    assert _reversals(loop.decisions, within_s=POLICY.scale_down_stabilization_s) == 0
    assert len(loop.changes) <= 12
