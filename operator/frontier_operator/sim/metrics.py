"""SGLang 0.5.23's metric names, types and buckets, and the cumulative per-pod series the twin keeps.

Names, types, label sets and bucket bounds are those of `shared/docs/reference/sglang-0.5.23-metrics.tsv`
and `sglang-0.5.23.md` §7.3. Two things to remember: 0.5.23 has no `sglang:time_per_output_token_seconds`
(the per-request TPOT histogram is `sglang:request_time_per_output_token_seconds`), and counters are
exposed with the `_total` suffix (`sglang:prompt_tokens_total`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from enum import StrEnum


class MetricType(StrEnum):
    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


class Side(StrEnum):
    """Which SGLang collector writes the metric: it decides the base label set (§7.2)."""

    TOKENIZER = "tokenizer"
    SCHEDULER = "scheduler"


# §7.3 default buckets.
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
ITL_BUCKETS = (
    0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
    0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1, 2, 4, 6, 8,
)  # fmt: skip
E2E_BUCKETS = (*TTFT_BUCKETS, 600, 1200, 1800, 2400)
# sglang-0.5.23-metrics.tsv, sglang:kv_transfer_latency_ms.
KV_TRANSFER_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)


@dataclass(frozen=True)
class MetricSpec:
    name: str
    type: MetricType
    side: Side
    help: str
    # Labels beyond the base set (values are filled by the exporter).
    extra_labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()


TTFT = MetricSpec(
    "sglang:time_to_first_token_seconds",
    MetricType.HISTOGRAM,
    Side.TOKENIZER,
    "Histogram of time to first token in seconds.",
    ("is_streaming",),
    TTFT_BUCKETS,
)
ITL = MetricSpec(
    "sglang:inter_token_latency_seconds",
    MetricType.HISTOGRAM,
    Side.TOKENIZER,
    "Histogram of inter-token latency in seconds.",
    (),
    ITL_BUCKETS,
)
REQUEST_TPOT = MetricSpec(
    "sglang:request_time_per_output_token_seconds",
    MetricType.HISTOGRAM,
    Side.TOKENIZER,
    "Per-request TPOT in seconds: (finished_time - first_token_time) / (completion_tokens - 1).",
    ("is_streaming",),
    ITL_BUCKETS,
)
E2E = MetricSpec(
    "sglang:e2e_request_latency_seconds",
    MetricType.HISTOGRAM,
    Side.TOKENIZER,
    "Histogram of End-to-end request latency in seconds",
    ("is_streaming",),
    E2E_BUCKETS,
)
PROMPT_TOKENS = MetricSpec(
    "sglang:prompt_tokens_total",
    MetricType.COUNTER,
    Side.TOKENIZER,
    "Number of prefill tokens processed.",
    ("is_streaming",),
)
GENERATION_TOKENS = MetricSpec(
    "sglang:generation_tokens_total",
    MetricType.COUNTER,
    Side.TOKENIZER,
    "Number of generation tokens processed.",
    ("is_streaming",),
)
NUM_REQUESTS = MetricSpec(
    "sglang:num_requests_total", MetricType.COUNTER, Side.TOKENIZER, "Number of requests processed.", ("is_streaming",)
)
CACHED_TOKENS = MetricSpec(
    "sglang:cached_tokens_total",
    MetricType.COUNTER,
    Side.TOKENIZER,
    "Number of cached prompt tokens by source (device/host/storage).",
    ("cache_source",),
)
PREFILL_EFFECTIVE_TOKENS = MetricSpec(
    "sglang:prefill_effective_tokens_total",
    MetricType.COUNTER,
    Side.SCHEDULER,
    "Effective prefill tokens by mode (input, device_hit, host_hit, storage_hit).",
    ("mode",),
)
NUM_RUNNING = MetricSpec("sglang:num_running_reqs", MetricType.GAUGE, Side.SCHEDULER, "The number of running requests.")
NUM_QUEUE = MetricSpec(
    "sglang:num_queue_reqs", MetricType.GAUGE, Side.SCHEDULER, "The number of requests in the waiting queue."
)
TOKEN_USAGE = MetricSpec("sglang:token_usage", MetricType.GAUGE, Side.SCHEDULER, "The token usage.")
NUM_USED_TOKENS = MetricSpec("sglang:num_used_tokens", MetricType.GAUGE, Side.SCHEDULER, "The number of used tokens.")
MAX_TOTAL_NUM_TOKENS = MetricSpec(
    "sglang:max_total_num_tokens",
    MetricType.GAUGE,
    Side.SCHEDULER,
    "Maximum total number of tokens in the KV cache pool.",
)
CACHE_HIT_RATE = MetricSpec("sglang:cache_hit_rate", MetricType.GAUGE, Side.SCHEDULER, "The prefix cache hit rate.")
GEN_THROUGHPUT = MetricSpec(
    "sglang:gen_throughput", MetricType.GAUGE, Side.SCHEDULER, "The generation throughput (token/s)."
)
SPEC_ACCEPT_LENGTH = MetricSpec(
    "sglang:spec_accept_length",
    MetricType.GAUGE,
    Side.SCHEDULER,
    "Mean acceptance length of speculative decoding (accepted drafts + bonus token per forward).",
)
KV_TRANSFER_LATENCY = MetricSpec(
    "sglang:kv_transfer_latency_ms",
    MetricType.HISTOGRAM,
    Side.SCHEDULER,
    "Histogram of KV cache transfer latency in ms.",
    (),
    KV_TRANSFER_MS_BUCKETS,
)

ALL_METRICS = (
    TTFT,
    ITL,
    REQUEST_TPOT,
    E2E,
    PROMPT_TOKENS,
    GENERATION_TOKENS,
    NUM_REQUESTS,
    CACHED_TOKENS,
    PREFILL_EFFECTIVE_TOKENS,
    NUM_RUNNING,
    NUM_QUEUE,
    TOKEN_USAGE,
    NUM_USED_TOKENS,
    MAX_TOTAL_NUM_TOKENS,
    CACHE_HIT_RATE,
    GEN_THROUGHPUT,
    SPEC_ACCEPT_LENGTH,
    KV_TRANSFER_LATENCY,
)


@dataclass
class Histogram:
    """Cumulative Prometheus-style histogram: per-bucket counts (non-cumulative), +Inf last, sum and count."""

    bounds: tuple[float, ...]
    counts: list[float] = field(default_factory=list)
    total: float = 0.0
    count: float = 0.0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0.0] * (len(self.bounds) + 1)

    def observe(self, value: float, weight: float = 1.0) -> None:
        # Prometheus buckets are "less than or equal": the first bound ≥ value.
        self.counts[bisect.bisect_left(self.bounds, value)] += weight
        self.total += value * weight
        self.count += weight

    def cumulative(self) -> list[float]:
        running, out = 0.0, []
        for c in self.counts:
            running += c
            out.append(running)
        return out


@dataclass
class PodSeries:
    """Everything cumulative one simulated SGLang pod exports; gauges are read live from its engine."""

    ttft: Histogram = field(default_factory=lambda: Histogram(TTFT_BUCKETS))
    itl: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    request_tpot: Histogram = field(default_factory=lambda: Histogram(ITL_BUCKETS))
    e2e: Histogram = field(default_factory=lambda: Histogram(E2E_BUCKETS))
    kv_transfer_ms: Histogram = field(default_factory=lambda: Histogram(KV_TRANSFER_MS_BUCKETS))
    prompt_tokens: float = 0.0
    generation_tokens: float = 0.0
    requests: float = 0.0
    cached_tokens: float = 0.0
    computed_prompt_tokens: float = 0.0
