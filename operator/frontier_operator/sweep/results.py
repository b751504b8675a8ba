"""Benchmark results → measured points; predicted-vs-measured rows; export in the silicon CSV schema.

The benchmark client writes one JSON object per run (`--output-file`, JSONL; sglang-0.5.23.md §9): TTFT,
TPOT, ITL and E2E latency as `{mean, median, std, p90, p95, p99}_{metric}_ms`, throughputs per second of the
run, `completed`, `duration`, and the run's own flags (`max_concurrency`, `random_input_len`, …, `tag`). The
sweep Job prints those lines to its log (`render.benchmark`); `parse_benchmark_log` picks them out.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from frontier_operator.perf.types import ServingConfig
from frontier_operator.planner.describe import describe_config
from frontier_operator.sweep.types import Latency, SweepMeasurement, SweepPoint
from frontier_operator.sweep.units import decoding_worker, group_key, unit_counts, worker_key

SGLANG_VERSION = "0.5.23"
_REQUIRED = ("max_concurrency", "duration", "completed", "median_ttft_ms", "median_tpot_ms")


class BenchmarkResultError(ValueError):
    """A benchmark result line lacks what a measured point needs."""


def parse_benchmark_log(text: str) -> list[dict[str, Any]]:
    """The benchmark's result objects in a log (one JSON object per line; other lines are ignored)."""
    results = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("{"):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and "max_concurrency" in value and "completed" in value:
            results.append(value)
    return results


def _number(result: Mapping[str, Any], key: str) -> float:
    value = result.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise BenchmarkResultError(f"the benchmark result has no finite {key!r}")
    return float(value)


def _latency(result: Mapping[str, Any], metric: str) -> Latency:
    return Latency(
        mean=_number(result, f"mean_{metric}_ms") / 1e3,
        p50=_number(result, f"median_{metric}_ms") / 1e3,
        p90=_number(result, f"p90_{metric}_ms") / 1e3,
        p99=_number(result, f"p99_{metric}_ms") / 1e3,
    )


def unit_layout(unit: ServingConfig) -> tuple[tuple[str, int, int, int, int, int], ...]:
    return tuple(
        (r.role.value, count, r.worker.tp, r.worker.pp, r.worker.attention_dp, r.worker.ep)
        for r, count in zip(unit.roles, unit_counts(unit), strict=True)
    )


def parse_benchmark_result(
    result: Mapping[str, Any], point: SweepPoint, *, measured_at: float = 0.0
) -> SweepMeasurement:
    """One result object of `point`'s run as a measured point; raises `BenchmarkResultError`."""
    for key in _REQUIRED:
        if key not in result:
            raise BenchmarkResultError(f"the benchmark result has no {key!r}")
    if int(_number(result, "completed")) <= 0:
        raise BenchmarkResultError("the benchmark completed no request")
    concurrency = result.get("max_concurrency")
    if concurrency != point.concurrency:
        raise BenchmarkResultError(f"the result is for concurrency {concurrency}, the point for {point.concurrency}")
    duration = _number(result, "duration")
    unit = point.unit
    worker = decoding_worker(unit)
    return SweepMeasurement(
        key=point.key,
        group=group_key(unit),
        worker_key=worker_key(worker),
        disaggregated=unit.disaggregated,
        description=describe_config(unit),
        model=unit.model,
        gpu=worker.gpu,
        weight_format=worker.weight_format,
        gpus=unit.total_gpus,
        concurrency=point.concurrency,
        ttft=_latency(result, "ttft"),
        tpot=_latency(result, "tpot"),
        itl=_latency(result, "itl"),
        request_rate_per_s=_number(result, "request_throughput"),
        output_tokens_per_s=_number(result, "output_throughput"),
        completed=int(_number(result, "completed")),
        duration_s=duration,
        random_input_len=int(_number(result, "random_input_len")),
        random_output_len=int(_number(result, "random_output_len")),
        random_range_ratio=_number(result, "random_range_ratio"),
        predicted=point.predicted,
        gpu_minutes=duration * unit.total_gpus / 60.0,
        measured_at=measured_at,
        layout=unit_layout(unit),
    )


def match_results(results: Iterable[Mapping[str, Any]], points: Sequence[SweepPoint]) -> list[SweepMeasurement]:
    """Measured points for the results whose concurrency matches a point of one deployment (last run wins)."""
    by_level = {p.concurrency: p for p in points}
    measured: dict[int, SweepMeasurement] = {}
    for result in results:
        point = by_level.get(result.get("max_concurrency"))  # type: ignore[arg-type]
        if point is not None:
            measured[point.concurrency] = parse_benchmark_result(result, point)
    return [measured[c] for c in sorted(measured)]


# ------------------------------------------------------------------------------------ predicted vs measured


@dataclass(frozen=True)
class ComparisonRow:
    description: str
    concurrency: int
    predicted_ttft_p50_ms: float
    measured_ttft_p50_ms: float
    predicted_tpot_p50_ms: float
    measured_tpot_p50_ms: float
    predicted_output_tokens_per_s: float
    measured_output_tokens_per_s: float

    @property
    def tpot_error_pct(self) -> float:
        return (self.predicted_tpot_p50_ms / self.measured_tpot_p50_ms - 1) * 100 if self.measured_tpot_p50_ms else 0.0

    @property
    def ttft_error_pct(self) -> float:
        return (self.predicted_ttft_p50_ms / self.measured_ttft_p50_ms - 1) * 100 if self.measured_ttft_p50_ms else 0.0

    def describe(self) -> str:
        return (
            f"{self.description} at {self.concurrency} in flight: TTFT p50 {self.predicted_ttft_p50_ms:.4g} ms "
            f"predicted / {self.measured_ttft_p50_ms:.4g} ms measured ({self.ttft_error_pct:+.0f} %), TPOT p50 "
            f"{self.predicted_tpot_p50_ms:.4g} / {self.measured_tpot_p50_ms:.4g} ms ({self.tpot_error_pct:+.0f} %), "
            f"{self.predicted_output_tokens_per_s:.4g} / {self.measured_output_tokens_per_s:.4g} output tok/s"
        )


def comparison_rows(measurements: Sequence[SweepMeasurement]) -> list[ComparisonRow]:
    return [
        ComparisonRow(
            description=m.description,
            concurrency=m.concurrency,
            predicted_ttft_p50_ms=m.predicted.ttft_p50_s * 1e3,
            measured_ttft_p50_ms=m.ttft.p50 * 1e3,
            predicted_tpot_p50_ms=m.predicted.tpot_p50_s * 1e3,
            measured_tpot_p50_ms=m.tpot.p50 * 1e3,
            predicted_output_tokens_per_s=m.predicted.output_tokens_per_s,
            measured_output_tokens_per_s=m.output_tokens_per_s,
        )
        for m in sorted(measurements, key=lambda m: (m.description, m.concurrency))
    ]


# ------------------------------------------------------------------------------------------ CSV export


def _precision(weight_format: str) -> str:
    name = weight_format.lower()
    if "fp8" in name:
        return "fp8"
    if "fp4" in name:
        return "fp4"
    return name


def silicon_rows(
    measurements: Sequence[SweepMeasurement], *, model_path: str, system: str, source: str
) -> list[dict[str, str]]:
    """Rows in the schema of `shared/data/silicon/silicon_measurements.csv` (`perf.silicon.SCHEMA_COLUMNS`).

    `isl`/`osl` are the run's *mean* lengths (the schema reads non-InferenceX rows as fixed lengths), TTFT and
    TPOT their means (as the shared rows carry), `batch_size` the client's concurrency. `model_path` is the
    model's Hugging Face id and `system` the GPU as the catalog names it.
    """
    rows = []
    for index, m in enumerate(measurements):
        row: dict[str, str] = {
            "id": f"frontier-sweep-{index}-{m.gpu.lower()}-c{m.concurrency}",
            "silicon_data_source": f"{source}; silicon_concurrency={m.concurrency}; measured_at={m.measured_at:.0f}",
            "backend": "sglang",
            "backend_version": SGLANG_VERSION,
            "model_path": model_path,
            "system": system,
            "precision": _precision(m.weight_format),
            "mode": "disagg" if m.disaggregated else "agg",
            "isl": str(round(m.mean_input_tokens)),
            "osl": str(round(m.mean_output_tokens)),
            "gemm_quant_mode": m.weight_format,
            "silicon_ttft_ms": f"{m.ttft.mean * 1e3:.6g}",
            "silicon_tpot_ms": f"{m.tpot.mean * 1e3:.6g}",
        }
        for role, workers, tp, pp, dp, ep in m.layout:
            prefix = "" if role == "unified" else f"{role}_"
            row[f"{prefix}tp_size"] = str(tp // max(dp, 1))
            row[f"{prefix}pp_size"] = str(pp)
            row[f"{prefix}attention_dp_size"] = str(dp)
            row[f"{prefix}moe_ep_size"] = str(ep)
            row[f"{prefix}moe_tp_size"] = str(max(1, tp // max(ep, 1)))
            if prefix:
                row[f"{prefix}num_workers"] = str(workers)
        if not m.disaggregated:
            row["batch_size"] = str(m.concurrency)
        rows.append(row)
    return rows
