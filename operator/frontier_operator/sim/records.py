"""What the fleet simulation remembers for observation windows, per (role, variant) group.

Samples are stored in time order with the time at which SGLang would record them: TTFT when the first token
is produced, E2E/TPOT and token counts when the request finishes, inter-token latencies per decode step
(binned in time, weighted by the tokens they cover), and load gauges sampled at a fixed interval. A window
is then a pair of binary searches.
"""

from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass, field

from frontier_operator.perf.types import Role
from frontier_operator.tuning.observation import Variant

GroupKey = tuple[Role, Variant]

# Inter-token latencies are kept as a histogram per time bin: bins of 5 s, values on a 1 % log grid.
ITL_TIME_BIN_S = 5.0
_ITL_LOG_STEP = math.log(1.01)


def itl_bin(value: float) -> int:
    return math.floor(math.log(max(value, 1e-9)) / _ITL_LOG_STEP)


def itl_value(index: int) -> float:
    return math.exp((index + 0.5) * _ITL_LOG_STEP)


@dataclass
class TimedValues:
    """(time, value) samples appended in time order."""

    times: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)

    def add(self, at: float, value: float) -> None:
        if self.times and at < self.times[-1]:
            index = bisect.bisect_right(self.times, at)
            self.times.insert(index, at)
            self.values.insert(index, value)
            return
        self.times.append(at)
        self.values.append(value)

    def window(self, start: float, end: float) -> list[float]:
        low = bisect.bisect_right(self.times, start)
        high = bisect.bisect_right(self.times, end)
        return self.values[low:high]


@dataclass
class Completion:
    """A finished request as the pod that finished it counts it."""

    at: float
    e2e_s: float
    tpot_s: float | None
    prompt_tokens: int
    generated_tokens: int
    cached_tokens: int


@dataclass
class Completions:
    times: list[float] = field(default_factory=list)
    items: list[Completion] = field(default_factory=list)

    def add(self, item: Completion) -> None:
        if self.times and item.at < self.times[-1]:
            index = bisect.bisect_right(self.times, item.at)
            self.times.insert(index, item.at)
            self.items.insert(index, item)
            return
        self.times.append(item.at)
        self.items.append(item)

    def window(self, start: float, end: float) -> list[Completion]:
        low = bisect.bisect_right(self.times, start)
        high = bisect.bisect_right(self.times, end)
        return self.items[low:high]


@dataclass
class GaugeSample:
    at: float
    running: float
    queued: float
    kv_usage: float | None
    pods: int


@dataclass
class GroupLedger:
    ttft: TimedValues = field(default_factory=TimedValues)
    completions: Completions = field(default_factory=Completions)
    # time bin → {log-value bin → tokens}
    itl: dict[int, dict[int, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))
    # time bin → [decode iterations, tokens per request produced by them]
    accept: dict[int, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    # time bin → [new prompt tokens computed, prompt tokens served from the prefix cache]
    prefill: dict[int, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0.0]))
    gauges: list[GaugeSample] = field(default_factory=list)
    gauge_times: list[float] = field(default_factory=list)

    def add_gauge(self, sample: GaugeSample) -> None:
        self.gauges.append(sample)
        self.gauge_times.append(sample.at)

    def add_itl(self, at: float, value: float, weight: float) -> None:
        if weight > 0:
            self.itl[int(at // ITL_TIME_BIN_S)][itl_bin(value)] += weight

    def itl_window(self, start: float, end: float) -> dict[int, float]:
        merged: dict[int, float] = defaultdict(float)
        for time_bin in range(int(start // ITL_TIME_BIN_S), int(end // ITL_TIME_BIN_S) + 1):
            bins = self.itl.get(time_bin)
            if bins:
                for value_bin, weight in bins.items():
                    merged[value_bin] += weight
        return merged

    def binned_sums(self, table: dict[int, list[float]], start: float, end: float) -> tuple[float, float]:
        first = second = 0.0
        for time_bin in range(int(start // ITL_TIME_BIN_S), int(end // ITL_TIME_BIN_S) + 1):
            pair = table.get(time_bin)
            if pair:
                first += pair[0]
                second += pair[1]
        return first, second

    def gauges_in(self, start: float, end: float) -> list[GaugeSample]:
        times = self.gauge_times
        return self.gauges[bisect.bisect_right(times, start) : bisect.bisect_right(times, end)]


@dataclass
class Ledger:
    groups: dict[GroupKey, GroupLedger] = field(default_factory=dict)

    def group(self, key: GroupKey) -> GroupLedger:
        ledger = self.groups.get(key)
        if ledger is None:
            ledger = self.groups[key] = GroupLedger()
        return ledger
