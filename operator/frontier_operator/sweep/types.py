"""The sweep's vocabulary: what to measure (`SweepPoint`, `SweepPlan`) and what was measured (`SweepMeasurement`).

A point is one (configuration, concurrency) pair. The configuration is the *measured unit* of a candidate
fleet — one replica of an aggregated fleet, the smallest whole P:D unit of a disaggregated one — rendered
exactly as it would serve; the concurrency is the benchmark client's `--max-concurrency` against that unit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from frontier_operator.perf.types import ServingConfig

# Concurrency ladder of the benchmark (requests in flight per measured unit): powers of two, as SGLang's and
# InferenceX's own sweeps use (the silicon CSV's concurrencies are drawn from the same ladder).
DEFAULT_CONCURRENCY_LEVELS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# Deploying a candidate and warming it up before its first benchmark: scheduling, a cached image and
# checkpoint, weight loading and CUDA-graph capture. An assumption (no published figure covers all of it);
# SGLang's own default health budget for start-up is 600 s (sglang-0.5.23.md §8.5), most models take less.
DEFAULT_WARMUP_S = 300.0
# Requests per benchmark run: ten per concurrency slot (the convention of SGLang's and InferenceX's sweeps),
# and at least 200, where a percentile's relative standard error (≈ 0.63/√n for log-normal latencies,
# tuning/calibration.py) is 4.5 %, close to the 1–3 % run-to-run spread of real runs (silicon SOURCES.md).
PROMPTS_PER_CONCURRENCY = 10
MIN_PROMPTS = 200
# A measured point's own relative error: run-to-run spread of a repeated silicon run (SOURCES.md, 1–3 %).
MEASURED_SIGMA = 0.03
# Alternatives whose chance of beating the current choice is below this are not worth a measurement.
MIN_FLIP_PROBABILITY = 0.05


class SweepReason(StrEnum):
    """Why a point was chosen, in the order the planner considers them."""

    CHOSEN = "chosen"  # the configuration the plan deploys, at its operating load
    KNEE = "knee"  # the chosen configuration at its batch cap: does the largest batch still meet the SLO?
    RUNNER_UP = "runner-up"  # a runner-up whose cost is within the model's error of the chosen one
    UNCERTAIN = "least-calibrated"  # an alternative whose prediction rests on the least calibration data


@dataclass(frozen=True)
class SweepSettings:
    levels: tuple[int, ...] = DEFAULT_CONCURRENCY_LEVELS
    warmup_s: float = DEFAULT_WARMUP_S
    prompts_per_concurrency: int = PROMPTS_PER_CONCURRENCY
    min_prompts: int = MIN_PROMPTS
    min_flip_probability: float = MIN_FLIP_PROBABILITY
    measured_sigma: float = MEASURED_SIGMA

    def prompts(self, concurrency: int) -> int:
        return max(self.min_prompts, self.prompts_per_concurrency * concurrency)


@dataclass(frozen=True)
class PointPrediction:
    """The raw model's answer for the unit at a fixed number of requests in flight (a closed-loop client)."""

    ttft_p50_s: float
    ttft_p90_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p90_s: float
    # Requests per second the unit completes at that concurrency (Little's law: concurrency / latency).
    request_rate_per_s: float
    output_tokens_per_s: float


@dataclass(frozen=True)
class SweepPoint:
    unit: ServingConfig
    pool: str
    concurrency: int
    reason: SweepReason
    detail: str
    predicted: PointPrediction
    num_prompts: int
    # Benchmark run time alone, and GPU-minutes of the run (the unit's warm-up is charged per configuration).
    run_s: float
    run_gpu_minutes: float
    # `units.unit_key` of the measured unit: points with one key share a deployment.
    key: str
    # The target's mean lengths the benchmark draws around (`--random-range-ratio` makes the spread).
    input_tokens: float
    output_tokens: float
    input_cv: float = 0.0
    output_cv: float = 0.0


@dataclass(frozen=True)
class SweepPlan:
    points: tuple[SweepPoint, ...]
    # Deploy/warm-up plus run time of every point, GPU-minutes.
    gpu_minutes: float
    budget_gpu_minutes: float
    explanation: tuple[str, ...]
    # (configuration, why it is not measured) for alternatives considered and left out.
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p.key for p in self.points))


@dataclass(frozen=True)
class Latency:
    """A latency's statistics as the benchmark client reports them, seconds."""

    mean: float
    p50: float
    p90: float
    p99: float


@dataclass(frozen=True)
class SweepMeasurement:
    """One benchmark run against a measured unit, with what the raw model predicted for it."""

    key: str
    # `units.group_key` and `units.worker_key` (of the streaming worker) of the measured unit.
    group: str
    worker_key: str
    disaggregated: bool
    description: str
    model: str
    gpu: str
    weight_format: str
    gpus: int
    concurrency: int
    ttft: Latency
    tpot: Latency
    itl: Latency
    request_rate_per_s: float
    output_tokens_per_s: float
    completed: int
    duration_s: float
    # The benchmark's nominal lengths and range ratio (`--random-input-len`, `--random-output-len`, …).
    random_input_len: int
    random_output_len: int
    random_range_ratio: float
    predicted: PointPrediction
    gpu_minutes: float
    # Unix time of the run (0 when unknown, e.g. in the twin).
    measured_at: float = 0.0
    layout: tuple[tuple[str, int, int, int, int, int], ...] = field(default=())

    @property
    def mean_input_tokens(self) -> float:
        return self.random_input_len * (1 + max(self.random_range_ratio, 0.0)) / 2

    @property
    def mean_output_tokens(self) -> float:
        return self.random_output_len * (1 + max(self.random_range_ratio, 0.0)) / 2
