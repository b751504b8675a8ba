"""Answers to SGLang benchmark-client runs, from the twin's ground truth.

A sweep Job runs `python -m sglang.benchmark.serving --backend sglang --dataset-name random-ids …` against a
candidate deployment. In the twin, `answer_benchmark` reads that argv, runs the candidate as a fresh
`FleetSimulation` driven by the client's own closed loop (`--max-concurrency` requests in flight, `--num-prompts`
in all, sent at `--request-rate`, lengths drawn as the `random`/`random-ids` datasets draw them) and returns
the result dictionary the real client appends to `--output-file` — same keys, same definitions
(`sglang/benchmark/serving.py` of 0.5.23, `benchmark` and `calculate_metrics`):

* TTFT, E2E latency, TPOT = (latency − TTFT) / (output_len − 1) per request, each as mean, median, std, p90,
  p95 and p99 in ms (numpy's percentiles);
* ITL over the streamed chunks (one decode iteration per chunk, so a speculative chunk carries the accept
  length in tokens and its gap is the iteration time);
* throughputs per second of the run; `concurrency` = Σ E2E / duration; `max_output_tokens_per_s` and
  `max_concurrent_requests` over 1 s buckets;
* `accept_length` from the server (the truth's) for speculative decoding, else None; `server_info` None.

Noise is the truth's own (iteration jitter, per-request spread) and the client's seed (`--seed`) decides the
lengths, so two runs with different seeds differ as real runs do.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from frontier_operator.perf.types import LengthDistribution, Role, ServingConfig, Workload
from frontier_operator.sim.engine import SimRequest
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.observe import percentile
from frontier_operator.sim.records import itl_value
from frontier_operator.sim.timing import Truth
from frontier_operator.sim.traffic import ClosedLoopSource, random_ids_lengths

BENCHMARK_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
SUPPORTED_DATASETS = ("random", "random-ids")
# A benchmark that has not finished after this much simulated time is cut off; the rest count as failed.
DEFAULT_TIME_LIMIT_S = 6 * 3600.0
_CHUNK_S = 60.0


@dataclass(frozen=True)
class BenchmarkArgs:
    """The flags of `sglang.benchmark.serving` the twin's answer depends on (defaults as in 0.5.23)."""

    backend: str = "sglang"
    dataset_name: str = "sharegpt"
    num_prompts: int = 1000
    random_input_len: int = 1024
    random_output_len: int = 1024
    random_range_ratio: float = 0.0
    request_rate: float = math.inf
    max_concurrency: int | None = None
    output_file: str | None = None
    seed: int = 42
    tag: str | None = None
    sharegpt_output_len: int | None = None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sglang.benchmark.serving", add_help=False, allow_abbrev=False)
    parser.add_argument("--backend", default="sglang")
    parser.add_argument("--dataset-name", default="sharegpt")
    parser.add_argument("--num-prompts", type=int, default=1000)
    parser.add_argument("--random-input-len", type=int, default=1024)
    parser.add_argument("--random-output-len", type=int, default=1024)
    parser.add_argument("--random-range-ratio", type=float, default=0.0)
    parser.add_argument("--request-rate", type=float, default=math.inf)
    parser.add_argument("--max-concurrency", type=int, default=None)
    parser.add_argument("--output-file", default=None)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--sharegpt-output-len", type=int, default=None)
    return parser


def parse_benchmark_argv(argv: Sequence[str]) -> BenchmarkArgs:
    """The benchmark's flags from a Job's argv (`python -m sglang.benchmark.serving …` or the flags alone);
    flags that do not change the answer (host, port, model, tokenizer, …) are accepted and ignored."""
    tokens = list(argv)
    for module in BENCHMARK_MODULES:
        if module in tokens:
            tokens = tokens[tokens.index(module) + 1 :]
            break
    parsed, _unknown = _parser().parse_known_args(tokens)
    return BenchmarkArgs(
        backend=parsed.backend,
        dataset_name=parsed.dataset_name,
        num_prompts=parsed.num_prompts,
        random_input_len=parsed.random_input_len,
        random_output_len=parsed.random_output_len,
        random_range_ratio=parsed.random_range_ratio,
        request_rate=parsed.request_rate,
        max_concurrency=parsed.max_concurrency,
        output_file=parsed.output_file,
        seed=parsed.seed,
        tag=parsed.tag,
        sharegpt_output_len=parsed.sharegpt_output_len,
    )


def _uniform(low: int, high: int) -> LengthDistribution:
    mean = (low + high) / 2.0
    return LengthDistribution(mean=mean, cv=(high - low) / math.sqrt(12.0) / mean if mean > 0 else 0.0, max=high)


def benchmark_workload(args: BenchmarkArgs, kind: str = "random") -> Workload:
    """What the benchmark's traffic looks like to the truth: uniform lengths, no prefix reuse, random text."""
    return Workload(
        request_rate_per_s=0.0,
        input_tokens=_uniform(*random_ids_lengths(args.random_input_len, args.random_range_ratio)),
        output_tokens=_uniform(*random_ids_lengths(args.random_output_len, args.random_range_ratio)),
        prefix_cache_hit_rate=0.0,
        kind=kind,
    )


def _stats(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return dict.fromkeys(("mean", "median", "std", "p90", "p95", "p99"), 0.0)
    ordered = sorted(values)
    return {
        "mean": statistics.fmean(ordered),
        "median": percentile(ordered, 50),
        "std": statistics.pstdev(ordered),
        "p90": percentile(ordered, 90),
        "p95": percentile(ordered, 95),
        "p99": percentile(ordered, 99),
    }


def _weighted_stats(bins: dict[float, float]) -> dict[str, float]:
    total = sum(bins.values())
    if total <= 0:
        return _stats([])
    ordered = sorted(bins.items())
    mean = sum(v * w for v, w in ordered) / total
    variance = sum(w * (v - mean) ** 2 for v, w in ordered) / total

    def quantile(q: float) -> float:
        threshold, running = total * q / 100.0, 0.0
        for value, weight in ordered:
            running += weight
            if running >= threshold:
                return value
        return ordered[-1][0]

    return {
        "mean": mean,
        "median": quantile(50),
        "std": math.sqrt(variance),
        "p90": quantile(90),
        "p95": quantile(95),
        "p99": quantile(99),
    }


def _chunk_gaps(fleet: FleetSimulation, accept: float) -> dict[float, float]:
    """Streamed-chunk gaps (s) → chunks: the ledgers hold per-token gaps weighted by tokens."""
    merged: dict[float, float] = {}
    for (role, _variant), ledger in fleet.ledger.groups.items():
        if role is Role.PREFILL:
            continue
        for bins in ledger.itl.values():
            for index, tokens in bins.items():
                gap = itl_value(index) * accept
                merged[gap] = merged.get(gap, 0.0) + tokens / accept
    return merged


def _peaks(requests: Sequence[SimRequest]) -> tuple[float, int]:
    """(max output tokens in one second, max requests in flight in one second), as the client buckets them."""
    if not requests:
        return 0.0, 0
    start = min(r.arrival for r in requests)
    seconds = math.ceil(max(r.finish for r in requests) - start) + 1
    tokens = [0.0] * seconds
    in_flight = [0] * seconds
    for r in requests:
        first, end = r.first_token - start, r.finish - start
        tokens[min(int(first), seconds - 1)] += 1
        remaining = r.output_tokens - 1
        if remaining > 0:
            span = max(end - first, 1e-9)
            for second in range(int(first), min(int(end), seconds - 1) + 1):
                overlap = min(end, second + 1) - max(first, second)
                tokens[second] += remaining * max(0.0, overlap) / span
        for second in range(int(r.arrival - start), min(int(end), seconds - 1) + 1):
            in_flight[second] += 1
    return max(tokens), max(in_flight)


def _accept_length(fleet: FleetSimulation) -> float | None:
    steps = accepted = 0.0
    for ledger in fleet.ledger.groups.values():
        for pair in ledger.accept.values():
            steps += pair[0]
            accepted += pair[1]
    return accepted / steps if steps > 0 else None


def run_benchmark(
    truth: Truth,
    config: ServingConfig,
    args: BenchmarkArgs,
    *,
    kind: str = "random",
    time_limit_s: float = DEFAULT_TIME_LIMIT_S,
) -> dict[str, Any]:
    """The result dictionary `sglang.benchmark.serving` would write for `args` against `config` under `truth`."""
    if args.dataset_name not in SUPPORTED_DATASETS:
        raise ValueError(
            f"the twin answers --dataset-name {' or '.join(SUPPORTED_DATASETS)} only, not {args.dataset_name!r}"
        )
    workload = benchmark_workload(args, kind)
    in_low, in_high = random_ids_lengths(args.random_input_len, args.random_range_ratio)
    out_low, out_high = random_ids_lengths(args.random_output_len, args.random_range_ratio)

    def draw(rng: random.Random) -> tuple[int, int, int]:
        return rng.randint(in_low, in_high), rng.randint(out_low, out_high), 0

    source = ClosedLoopSource(
        args.num_prompts, draw, max_concurrency=args.max_concurrency, request_rate=args.request_rate, seed=args.seed
    )
    fleet = FleetSimulation(
        truth, config, workload, source=source, seed=args.seed, sample_every_s=0.0, keep_requests=True
    )
    while not source.done and fleet.now < time_limit_s:
        fleet.advance(_CHUNK_S)
    requests = fleet.finished or []
    duration = max((r.finish for r in requests), default=fleet.now)
    duration = max(duration, 1e-9)
    ttfts = [r.first_token - r.arrival for r in requests]
    e2es = [r.finish - r.arrival for r in requests]
    tpots = [(r.finish - r.first_token) / (r.output_tokens - 1) for r in requests if r.output_tokens > 1]
    accept = _accept_length(fleet)
    itl = _weighted_stats(_chunk_gaps(fleet, accept or 1.0))
    total_input = sum(r.input_tokens for r in requests)
    total_output = sum(r.output_tokens for r in requests)
    peak_tokens, peak_requests = _peaks(requests)
    result: dict[str, Any] = {
        "tag": args.tag,
        "backend": args.backend,
        "dataset_name": args.dataset_name,
        "request_rate": args.request_rate,
        "max_concurrency": args.max_concurrency,
        "sharegpt_output_len": args.sharegpt_output_len,
        "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len,
        "random_range_ratio": args.random_range_ratio,
        "server_info": None,
        "duration": duration,
        "completed": len(requests),
        "total_input_tokens": total_input,
        "total_input_text_tokens": total_input,
        "total_input_vision_tokens": 0,
        "total_output_tokens": total_output,
        "total_output_tokens_retokenized": total_output,
        "request_throughput": len(requests) / duration,
        "input_throughput": total_input / duration,
        "output_throughput": total_output / duration,
        "total_throughput": (total_input + total_output) / duration,
    }
    for name, stats in (("e2e_latency", _stats(e2es)), ("ttft", _stats(ttfts)), ("tpot", _stats(tpots)), ("itl", itl)):
        for statistic in ("mean", "median", "std", "p90", "p95", "p99"):
            result[f"{statistic}_{name}_ms"] = stats[statistic] * 1000.0
    result["concurrency"] = sum(e2es) / duration
    result["accept_length"] = accept
    result["max_output_tokens_per_s"] = peak_tokens
    result["max_concurrent_requests"] = peak_requests
    return result


def answer_benchmark(
    argv: Sequence[str],
    truth: Truth,
    config: ServingConfig,
    *,
    kind: str = "random",
    write: bool = False,
    directory: Path | None = None,
) -> dict[str, Any]:
    """Parse a benchmark Job's argv and answer it; with `write`, append the JSON line to its `--output-file`
    (relative to `directory`), as the real client does."""
    args = parse_benchmark_argv(argv)
    result = run_benchmark(truth, config, args, kind=kind)
    if write and args.output_file:
        path = Path(args.output_file)
        if directory is not None and not path.is_absolute():
            path = directory / path
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(result) + "\n")
    return result


def benchmark_gpu_minutes(result: dict[str, Any], config: ServingConfig) -> float:
    """GPU-minutes a benchmark run held its deployment for (the sweep budget's unit)."""
    return float(result["duration"]) * config.total_gpus / 60.0
