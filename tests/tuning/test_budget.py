"""The SLO's error budget: which back-to-back windows of the fleet in force missed, and how many may."""

from __future__ import annotations

from frontier_operator.perf.types import Role
from frontier_operator.tuning.budget import (
    BUDGET_HORIZON_S,
    WINDOW_GOAL,
    BudgetStanding,
    ErrorBudget,
    allowed_misses,
)
from frontier_operator.tuning.loop import tune
from frontier_operator.tuning.state import ChangeKind, ChangeRecord
from tuning_support import NOW, POLICY, applied, context, group, observation

W = 300.0


def _windows(*missed: bool, start: float = 0.0) -> ErrorBudget:
    budget = ErrorBudget()
    for index, miss in enumerate(missed):
        begin = start + index * W
        budget = budget.record(begin, begin + W, miss)
    return budget


def test_misses_are_forgiven_only_as_the_window_goal_allows() -> None:
    # Four windows of five minutes: none may miss; twenty (the oracle's 100 minutes): one, as 95 % allows.
    assert allowed_misses(4, WINDOW_GOAL) == 0
    assert allowed_misses(19, WINDOW_GOAL) == 0
    assert allowed_misses(20, WINDOW_GOAL) == 1
    assert allowed_misses(40, WINDOW_GOAL) == 2
    assert allowed_misses(20, 1.0) == 0


def test_a_young_fleet_may_spend_one_window_and_an_old_one_its_share() -> None:
    assert BudgetStanding(windows=1, missed=1).within
    assert not BudgetStanding(windows=3, missed=2).within
    assert BudgetStanding(windows=72, missed=3).within
    assert not BudgetStanding(windows=72, missed=4).within


def test_only_back_to_back_windows_are_recorded() -> None:
    # The loop looks every minute at the last five: the overlapping windows in between are the same requests.
    budget = ErrorBudget().record(0, W, False).record(60, 60 + W, True).record(W, 2 * W, True)
    assert [(w.end, w.missed) for w in budget.windows] == [(W, False), (2 * W, True)]


def test_windows_past_the_horizon_are_forgotten() -> None:
    count = int(BUDGET_HORIZON_S / W)
    budget = _windows(True, *([False] * count))
    assert len(budget.windows) == count
    assert not any(w.missed for w in budget.windows)


def test_windows_of_an_earlier_fleet_are_not_the_fleet_in_forces() -> None:
    budget = _windows(True, True, False, False)
    assert len(budget.of_fleet(None)) == 4
    assert [w.missed for w in budget.of_fleet(2 * W)] == [False, False]
    assert budget.standing(None) == BudgetStanding(4, 2)
    assert budget.standing(2 * W) == BudgetStanding(2, 0)


def test_the_window_just_seen_counts_once() -> None:
    recorded = _windows(False, False, True)
    # The last recorded window itself: already counted.
    assert recorded.with_miss(None, 2 * W) == BudgetStanding(3, 1)
    # A sliding window overlapping that recorded miss: the same event seen again.
    assert recorded.with_miss(None, 2 * W + 60) == BudgetStanding(3, 1)
    # A sliding window overlapping a recorded window that met: a view of that window, not a new miss.
    assert _windows(False, False).with_miss(None, W + 60) == BudgetStanding(2, 0)
    # The next back-to-back window: a new miss.
    assert _windows(False, False).with_miss(None, 2 * W) == BudgetStanding(3, 1)
    # Only the fleet in force's windows count.
    assert recorded.with_miss(W, 2 * W) == BudgetStanding(2, 1)


def test_each_tick_records_its_window_when_the_fleet_was_settled() -> None:
    missed = tune(observation(group(ttft_p99=8.0)), applied(), context(), POLICY, NOW).calibration
    assert [(w.end, w.missed) for w in missed.budget.windows] == [(NOW, True)]
    met = tune(observation(group()), applied(), context(), POLICY, NOW).calibration
    assert [w.missed for w in met.budget.windows] == [False]
    # A change inside the window: the window is not the fleet in force's.
    step = ChangeRecord(at=NOW - 100, kind=ChangeKind.SCALE, role=Role.UNIFIED, direction=1, before=5, after=6)
    changed = tune(observation(group()), applied(history=(step,)), context(), POLICY, NOW).calibration
    assert changed.budget.windows == ()
