"""The SLO's error budget: how many of the fleet in force's recent windows missed.

The loop's goal is every SLO met in at least `WINDOW_GOAL` of the windows — one miss in twenty is allowed,
as an SRE error budget allows a share of bad minutes. The budget tells the two kinds of violation apart that
a single window cannot:

* a burst the fleet has already absorbed (DeepSeek-R1 at 2 requests/s: twenty requests in six seconds, each
  with a reasoning-length output, fill the batch cap of both replicas; one window's p99 TTFT is 2.1 s against
  1 s while its p50 stays at 225 ms, and the next window is back at 0.3 s) costs one window of the budget, and
  capacity added for it serves only the windows after it, which did not need it;
* a fleet whose windows keep missing by a little — each within its sampling noise, so no single window
  proves it — spends the budget, and once spent the next miss is acted on, noise or not (GLM-5: p99 TTFT of
  128k-token prompts scattering from 1.3 to 2.2 s around a mean just under the 2 s bound, 9 % of windows
  missed).

The ledger holds back-to-back (non-overlapping) windows of the stable pods only, over the last
`BUDGET_HORIZON_S`; a window counts for the fleet in force when it began after that fleet's last change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# The share of windows in which every SLO must hold: the closed loop's goal, and the oracle's yardstick.
WINDOW_GOAL = 0.95
# The budget is counted over at least this many windows, so a young fleet may miss one (a fleet judged on
# three windows would otherwise have none to spend) — the same twenty windows the oracle is judged on.
MIN_BUDGET_WINDOWS = 20
# Windows older than this are forgotten: the budget follows today's traffic, like the reversal guard.
BUDGET_HORIZON_S = 6 * 3600.0


def allowed_misses(windows: int, window_goal: float = WINDOW_GOAL) -> int:
    """Windows that may miss an SLO while `window_goal` of `windows` still meet every one."""
    return math.floor((1.0 - window_goal) * windows + 1e-9)


@dataclass(frozen=True)
class SloWindow:
    start: float
    end: float
    missed: bool


@dataclass(frozen=True)
class ErrorBudget:
    windows: tuple[SloWindow, ...] = ()

    def record(self, start: float, end: float, missed: bool) -> ErrorBudget:
        """This window added if it does not overlap the last one recorded; windows past the horizon dropped."""
        last = self.windows[-1] if self.windows else None
        if last is not None and start < last.end:
            return self
        kept = tuple(w for w in self.windows if w.end > end - BUDGET_HORIZON_S)
        return ErrorBudget((*kept, SloWindow(start, end, missed)))

    def of_fleet(self, since: float | None) -> tuple[SloWindow, ...]:
        """The recorded windows of the fleet in force (begun at or after its last change at `since`)."""
        return tuple(w for w in self.windows if since is None or w.start >= since)

    def standing(self, since: float | None) -> BudgetStanding:
        """Windows and misses of the fleet in force, changed last at `since`."""
        return _standing(self.of_fleet(since))

    def with_miss(self, since: float | None, window_start: float) -> BudgetStanding:
        """The standing if the window just observed (begun at `window_start`) missed, counted as the goal counts
        windows — back to back.

        A window that overlaps the last one recorded (it may be that window itself) is a sliding view of it and
        counts as it did, missed or met; only the next back-to-back window is a new miss. The loop looks at an
        overlapping window every minute: counting each as a window of its own gives a percentile that sits near
        its limit five chances per window to read over it (GLM-5's p99 TTFT, 1.84 s on average against 2 s
        on four prefill replicas, spent the budget of one in seven windows and took a fifth replica).
        """
        windows = self.of_fleet(since)
        recorded = _standing(windows)
        last = windows[-1] if windows else None
        if last is not None and window_start < last.end:
            return recorded
        return BudgetStanding(recorded.windows + 1, recorded.missed + 1)


@dataclass(frozen=True)
class BudgetStanding:
    windows: int
    missed: int

    @property
    def allowed(self) -> int:
        return allowed_misses(max(self.windows, MIN_BUDGET_WINDOWS))

    @property
    def within(self) -> bool:
        return self.missed <= self.allowed

    def describe(self) -> str:
        return f"{self.missed} of {self.windows} windows missed, {self.allowed} allowed"


def _standing(windows: tuple[SloWindow, ...]) -> BudgetStanding:
    return BudgetStanding(len(windows), sum(1 for w in windows if w.missed))
