"""Text report helpers: a repeated proposal is printed once, times read as h:mm."""

from __future__ import annotations

from frontier_operator.sim.closed_loop import TimelineEntry
from frontier_operator.sim.report import RepeatFilter, clock, event_line


def entry(at: float, kind: str, outcome: str, action: str) -> TimelineEntry:
    return TimelineEntry(
        at=at,
        kind=kind,
        reason="why",
        outcome=outcome,
        action=action,
        config="fp8 TP4 cap 48 ×1",
        gpus=4,
        canary=None,
        ttft_p50_s=None,
        ttft_p99_s=None,
        tpot_p50_s=None,
        tpot_p99_s=None,
        cost_per_mtok=None,
        slo_met=None,
    )


def test_a_repeated_proposal_is_printed_once_and_again_after_something_else() -> None:
    scale = "scale unified replicas 1 → 2"
    timeline = [
        entry(60, "ScaleReplicas", "proposed", scale),
        entry(120, "ScaleReplicas", "proposed", scale),
        entry(180, "NoAction", "", "no action (Cooldown)"),
        entry(240, "ScaleReplicas", "proposed", scale),
        entry(300, "SetBatchCap", "proposed", "set unified batch cap 48 → 32"),
        entry(360, "ScaleReplicas", "proposed", scale),
        entry(420, "Replan", "applied", "re-plan (ModelDrift)"),
        entry(480, "ScaleReplicas", "proposed", scale),
    ]
    repeats = RepeatFilter()
    printed = [e.at for e in timeline if repeats.fresh(e)]
    assert printed == [60, 300, 360, 420, 480]


def test_times_and_event_lines() -> None:
    assert clock(0) == "0:00"
    assert clock(3600 + 25 * 60) == "1:25"
    line = event_line(entry(5400, "ScaleReplicas", "applied", "scale unified replicas 1 → 2"))
    assert line.strip().startswith("1:30  APPLIED  scale unified replicas 1 → 2: why")
