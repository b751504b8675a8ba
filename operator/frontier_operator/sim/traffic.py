"""Request streams for the twin: open-loop traffic patterns, trace replay, and closed-loop benchmark clients.

A source yields requests in time order (`peek_time` / `pop`) and hears about completions (`on_complete`),
which only the closed-loop clients of a benchmark use. Every draw comes from the source's own seeded
`random.Random`, so a stream is the same on every run.

Lengths follow the workload's `LengthDistribution` as a log-normal with that mean and coefficient of
variation, clipped to [1, max] (the planner's queueing model makes the same assumption). Prefix-cache hits
are drawn per request from a Beta distribution whose mean is the workload's hit rate; at least one prompt
token is always left to compute.
"""

from __future__ import annotations

import csv
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from frontier_operator.perf.types import LengthDistribution, Workload

# Concentration of the per-request prefix-hit Beta distribution: 4 gives a broad spread around the mean.
_HIT_CONCENTRATION = 4.0
_MIN_RATE_FACTOR = 1e-6


@dataclass(frozen=True)
class ArrivingRequest:
    time: float
    input_tokens: int
    output_tokens: int
    cached_tokens: int = 0


class RequestSource(Protocol):
    def peek_time(self) -> float:
        """Time of the next request, math.inf when there is none (yet)."""
        ...

    def pop(self) -> ArrivingRequest: ...

    def on_complete(self, now: float) -> None:
        """A request of this source finished at `now` (closed-loop clients send their next one)."""
        ...


class TrafficKind(StrEnum):
    STEADY = "steady"
    BURSTY = "bursty"
    DIURNAL = "diurnal"
    STEP = "step"


@dataclass(frozen=True)
class TrafficPattern:
    """How the offered rate varies around the workload's mean `request_rate_per_s`, as a factor of time.

    steady: 1. bursty: bursts of `burst_factor` × the base rate for `burst_length_s` every `burst_every_s`,
    normalised so that the mean stays 1. diurnal: 1 + amplitude·sin(2π(t + phase)/period). step: 1, then
    `step_factor` from `step_at_s` (until `step_until_s` if given).
    """

    kind: TrafficKind = TrafficKind.STEADY
    period_s: float = 86_400.0
    amplitude: float = 0.5
    phase_s: float = 0.0
    step_at_s: float = 3_600.0
    step_factor: float = 2.0
    step_until_s: float | None = None
    burst_every_s: float = 600.0
    burst_length_s: float = 60.0
    burst_factor: float = 3.0

    def factor(self, t: float) -> float:
        if self.kind is TrafficKind.STEADY:
            return 1.0
        if self.kind is TrafficKind.DIURNAL:
            return max(
                _MIN_RATE_FACTOR, 1.0 + self.amplitude * math.sin(2 * math.pi * (t + self.phase_s) / self.period_s)
            )
        if self.kind is TrafficKind.STEP:
            after = t >= self.step_at_s and (self.step_until_s is None or t < self.step_until_s)
            return self.step_factor if after else 1.0
        share = min(1.0, self.burst_length_s / self.burst_every_s)
        base = 1.0 / (1.0 + (self.burst_factor - 1.0) * share)
        in_burst = (t % self.burst_every_s) < self.burst_length_s
        return base * self.burst_factor if in_burst else base


def sample_length(rng: random.Random, distribution: LengthDistribution) -> int:
    mean = max(1.0, distribution.mean)
    if distribution.cv <= 0:
        value = mean
    else:
        sigma2 = math.log(1.0 + distribution.cv**2)
        value = math.exp(math.log(mean) - sigma2 / 2 + math.sqrt(sigma2) * rng.gauss(0.0, 1.0))
    upper = distribution.max if distribution.max is not None else math.inf
    return int(max(1.0, min(round(value), upper)))


def sample_cached(rng: random.Random, input_tokens: int, hit_rate: float) -> int:
    if hit_rate <= 0 or input_tokens <= 1:
        return 0
    rate = min(hit_rate, 0.999)
    share = rng.betavariate(rate * _HIT_CONCENTRATION, (1 - rate) * _HIT_CONCENTRATION)
    return min(input_tokens - 1, int(share * input_tokens))


def workload_sampler(workload: Workload) -> Callable[[random.Random], tuple[int, int, int]]:
    """(input, output, cached) tokens of one request drawn from the workload's distributions."""

    def draw(rng: random.Random) -> tuple[int, int, int]:
        prompt = sample_length(rng, workload.input_tokens)
        output = sample_length(rng, workload.output_tokens)
        return prompt, output, sample_cached(rng, prompt, workload.prefix_cache_hit_rate)

    return draw


class OpenLoopSource:
    """Arrivals at `workload.request_rate_per_s × pattern.factor(t)`, inter-arrival times of the workload's
    coefficient of variation (1: Poisson; larger: burstier, a Gamma renewal process)."""

    def __init__(
        self,
        workload: Workload,
        pattern: TrafficPattern | None = None,
        *,
        seed: int = 0,
        start: float = 0.0,
        rate_scale: float = 1.0,
    ) -> None:
        self._workload = workload
        self._pattern = pattern or TrafficPattern()
        self._rng = random.Random(f"arrivals/{seed}")
        self._draw = workload_sampler(workload)
        self._rate = workload.request_rate_per_s * rate_scale
        cv = max(workload.arrival_cv, 1e-3)
        self._shape = 1.0 / (cv * cv)
        self._next = self._gap(start) if self._rate > 0 else math.inf

    def _gap(self, now: float) -> float:
        rate = self._rate * self._pattern.factor(now)
        if self._shape == 1.0:
            unit = self._rng.expovariate(1.0)
        else:
            unit = self._rng.gammavariate(self._shape, 1.0 / self._shape)
        return now + unit / max(rate, self._rate * _MIN_RATE_FACTOR)

    def peek_time(self) -> float:
        return self._next

    def pop(self) -> ArrivingRequest:
        now = self._next
        prompt, output, cached = self._draw(self._rng)
        self._next = self._gap(now)
        return ArrivingRequest(now, prompt, output, cached)

    def on_complete(self, now: float) -> None:
        return None


class TraceSource:
    """Replays a CSV trace: `timestamp` (s) or `timestamp_ms`, `input_tokens`, `output_tokens`, optional
    `cached_tokens` (also accepted: `input_length` / `output_length`). Times are shifted to start at 0."""

    def __init__(self, rows: list[ArrivingRequest]) -> None:
        self._rows = deque(sorted(rows, key=lambda r: r.time))

    @staticmethod
    def from_csv(path: Path, *, time_scale: float = 1.0) -> TraceSource:
        with path.open(newline="", encoding="utf-8") as handle:
            records = list(csv.DictReader(handle))
        if not records:
            return TraceSource([])
        first = records[0]
        in_key = "input_tokens" if "input_tokens" in first else "input_length"
        out_key = "output_tokens" if "output_tokens" in first else "output_length"
        milliseconds = "timestamp" not in first and "timestamp_ms" in first
        time_key = "timestamp_ms" if milliseconds else "timestamp"
        for key in (time_key, in_key, out_key):
            if key not in first:
                raise ValueError(f"{path}: the trace needs a {key!r} column")
        scale = (1e-3 if milliseconds else 1.0) * time_scale
        times = [float(r[time_key]) * scale for r in records]
        origin = min(times)
        rows = []
        for when, record in zip(times, records, strict=True):
            prompt = max(1, int(float(record[in_key])))
            cached = min(prompt - 1, int(float(record.get("cached_tokens") or 0)))
            rows.append(ArrivingRequest(when - origin, prompt, max(1, int(float(record[out_key]))), max(0, cached)))
        return TraceSource(rows)

    def peek_time(self) -> float:
        return self._rows[0].time if self._rows else math.inf

    def pop(self) -> ArrivingRequest:
        return self._rows.popleft()

    def on_complete(self, now: float) -> None:
        return None


def random_ids_lengths(full_len: int, range_ratio: float) -> tuple[int, int]:
    """Bounds of SGLang's `random`/`random-ids` lengths: uniform integers on [max(⌊N·ratio⌋, 1), N]
    (sglang/benchmark/datasets/common.py `compute_random_lens`, 0.5.23)."""
    return max(int(full_len * range_ratio), 1), max(full_len, 1)


class ClosedLoopSource:
    """The benchmark client: at most `max_concurrency` requests in flight, `num_prompts` in all, sent at
    `request_rate` (Poisson; math.inf sends all at once) as far as the concurrency limit allows."""

    def __init__(
        self,
        num_prompts: int,
        draw: Callable[[random.Random], tuple[int, int, int]],
        *,
        max_concurrency: int | None = None,
        request_rate: float = math.inf,
        seed: int = 0,
        start: float = 0.0,
    ) -> None:
        self._rng = random.Random(f"clients/{seed}")
        self._draw = draw
        self._limit = max_concurrency if max_concurrency and max_concurrency > 0 else num_prompts
        self._remaining = num_prompts
        self._in_flight = 0
        self._slot_free_at = start
        self._scheduled = start
        self._rate = request_rate
        self.sent = 0
        self.completed = 0

    def peek_time(self) -> float:
        if self._remaining <= 0 or self._in_flight >= self._limit:
            return math.inf
        return max(self._scheduled, self._slot_free_at)

    def pop(self) -> ArrivingRequest:
        now = self.peek_time()
        prompt, output, cached = self._draw(self._rng)
        self._remaining -= 1
        self._in_flight += 1
        self.sent += 1
        if math.isfinite(self._rate) and self._rate > 0:
            self._scheduled = self._scheduled + self._rng.expovariate(self._rate)
        return ArrivingRequest(now, prompt, output, cached)

    def on_complete(self, now: float) -> None:
        self._in_flight -= 1
        self.completed += 1
        self._slot_free_at = now

    @property
    def done(self) -> bool:
        return self._remaining <= 0 and self._in_flight <= 0


def traffic_pattern(name: str, *, duration_s: float | None = None) -> TrafficPattern:
    """The `--traffic` patterns of `frontier simulate`, fitted to a run of `duration_s` when given: diurnal
    makes one full cycle over the run, step raises the rate by half over its middle third."""
    kind = TrafficKind(name)
    if kind is TrafficKind.DIURNAL and duration_s:
        return TrafficPattern(kind, period_s=duration_s)
    if kind is TrafficKind.STEP and duration_s:
        return TrafficPattern(kind, step_at_s=duration_s / 3, step_factor=1.5, step_until_s=2 * duration_s / 3)
    return TrafficPattern(kind)


def source_from_spec(spec: str, workload: Workload, *, seed: int = 0, duration_s: float | None = None) -> RequestSource:
    """A request source from a `--traffic` value: a pattern name, or the path of a trace CSV."""
    if spec.lower().endswith(".csv"):
        return TraceSource.from_csv(Path(spec))
    try:
        pattern = traffic_pattern(spec, duration_s=duration_s)
    except ValueError as error:
        known = ", ".join(k.value for k in TrafficKind)
        raise ValueError(f"unknown traffic {spec!r}: use {known} or a trace .csv") from error
    return OpenLoopSource(workload, pattern, seed=seed)
