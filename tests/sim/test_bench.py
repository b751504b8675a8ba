"""Benchmark-client answers: the real client's keys, its definitions, and the truth's numbers with noise."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import SiliconCase, parse_row
from frontier_operator.perf.types import LengthDistribution
from frontier_operator.sim.bench import (
    answer_benchmark,
    benchmark_gpu_minutes,
    benchmark_workload,
    parse_benchmark_argv,
    run_benchmark,
)
from frontier_operator.sim.measured import MeasuredTable, MeasuredTruth
from frontier_operator.sim.tables import write_rows
from frontier_operator.sim.truth import load_truth
from perf_support import calibration_of, silicon_row
from sim.twin_fakes import FakeTruth, LinearTiming, unified

# The result dictionary of sglang/benchmark/serving.py 0.5.23 (`benchmark`, without goodput/cache report).
CLIENT_KEYS = {
    "tag", "backend", "dataset_name", "request_rate", "max_concurrency", "sharegpt_output_len",
    "random_input_len", "random_output_len", "random_range_ratio", "server_info", "duration", "completed",
    "total_input_tokens", "total_input_text_tokens", "total_input_vision_tokens", "total_output_tokens",
    "total_output_tokens_retokenized", "request_throughput", "input_throughput", "output_throughput",
    "total_throughput", "concurrency", "accept_length", "max_output_tokens_per_s", "max_concurrent_requests",
} | {
    f"{stat}_{metric}_ms"
    for stat in ("mean", "median", "std", "p90", "p95", "p99")
    for metric in ("e2e_latency", "ttft", "tpot", "itl")
}  # fmt: skip

ARGV = [
    "python", "-m", "sglang.benchmark.serving", "--backend", "sglang", "--host", "svc", "--port", "30000",
    "--dataset-name", "random-ids", "--random-input-len", "1000", "--random-output-len", "200",
    "--random-range-ratio", "1.0", "--max-concurrency", "16", "--num-prompts", "160",
    "--output-file", "out/result.jsonl", "--seed", "3", "--model", "Qwen/Qwen3-32B",
]  # fmt: skip


def test_argv_is_read_like_the_client_reads_it() -> None:
    args = parse_benchmark_argv(ARGV)
    assert (args.random_input_len, args.random_output_len, args.random_range_ratio) == (1000, 200, 1.0)
    assert (args.max_concurrency, args.num_prompts, args.seed) == (16, 160, 3)
    assert args.request_rate == math.inf and args.output_file == "out/result.jsonl"
    defaults = parse_benchmark_argv(["--dataset-name", "random-ids"])
    assert (defaults.num_prompts, defaults.random_range_ratio, defaults.max_concurrency) == (1000, 0.0, None)


def test_range_ratio_draws_lengths_like_the_random_dataset() -> None:
    wide = benchmark_workload(parse_benchmark_argv(["--random-input-len", "1000", "--random-range-ratio", "0.0"]))
    fixed = benchmark_workload(parse_benchmark_argv(["--random-input-len", "1000", "--random-range-ratio", "1.0"]))
    assert wide.input_tokens.mean == pytest.approx(500.5) and wide.input_tokens.max == 1000
    assert fixed.input_tokens.mean == 1000 and fixed.input_tokens.cv == 0


def test_result_has_the_clients_keys_and_definitions(tmp_path: Path) -> None:
    truth = FakeTruth(default=LinearTiming(noise=0.03))
    result = answer_benchmark(ARGV, truth, unified(1), write=True, directory=tmp_path)
    assert set(result) == CLIENT_KEYS
    assert result["completed"] == 160
    assert result["total_output_tokens"] == 160 * 200
    assert result["output_throughput"] == pytest.approx(result["total_output_tokens"] / result["duration"])
    assert result["concurrency"] == pytest.approx(16, rel=0.1)
    # The client counts a request in every 1 s bucket it touches, so back-to-back requests overlap.
    assert 16 <= result["max_concurrent_requests"] <= 32
    # TPOT ≈ decode step at 16 running (prefill pauses included): 0.01 + 16 × 0.0002 s.
    assert result["median_tpot_ms"] == pytest.approx(13.2, rel=0.3)
    assert result["mean_itl_ms"] == pytest.approx(result["mean_tpot_ms"], rel=0.1)
    assert result["p99_ttft_ms"] >= result["median_ttft_ms"] > 0
    assert result["accept_length"] is None
    assert benchmark_gpu_minutes(result, unified(2)) == pytest.approx(result["duration"] * 2 / 60)
    lines = (tmp_path / "out/result.jsonl").read_text().splitlines()
    assert json.loads(lines[-1]) == json.loads(json.dumps(result))
    answer_benchmark(ARGV, truth, unified(1), write=True, directory=tmp_path)
    assert len((tmp_path / "out/result.jsonl").read_text().splitlines()) == 2  # appended, like the client


def test_speculative_servers_report_their_accept_length() -> None:
    truth = FakeTruth(default=LinearTiming(accept=2.4))
    result = run_benchmark(truth, unified(1, speculative=True), parse_benchmark_argv(ARGV))
    assert result["accept_length"] == pytest.approx(2.4, rel=0.05)
    # The client measures ITL per streamed chunk: one chunk per iteration, carrying the accepted tokens.
    assert result["mean_itl_ms"] == pytest.approx(result["mean_tpot_ms"] * 2.4, rel=0.15)


def test_different_client_seeds_give_different_runs() -> None:
    truth = FakeTruth(default=LinearTiming(noise=0.03))
    argv = [*ARGV, "--random-range-ratio", "0.5"]
    first = run_benchmark(truth, unified(1), parse_benchmark_argv([*argv, "--seed", "1"]))
    second = run_benchmark(truth, unified(1), parse_benchmark_argv([*argv, "--seed", "2"]))
    again = run_benchmark(truth, unified(1), parse_benchmark_argv([*argv, "--seed", "1"]))
    assert first == again
    assert first["mean_ttft_ms"] != second["mean_ttft_ms"]


def test_other_datasets_are_refused() -> None:
    with pytest.raises(ValueError, match="random-ids"):
        run_benchmark(FakeTruth(), unified(1), parse_benchmark_argv(["--dataset-name", "sharegpt"]))


def test_measured_truth_is_reproduced_at_measured_concurrencies(tmp_path: Path) -> None:
    rows = []
    for concurrency, ttft, tpot in ((4, 250.0, 11.0), (16, 400.0, 16.0), (64, 1200.0, 33.0)):
        row = silicon_row(
            backend="sglang",
            model_path="Qwen/Qwen3-32B",
            system="h100_sxm",
            mode="agg",
            isl="2048",
            osl="512",
            batch_size=str(concurrency),
            tp_size="2",
            silicon_ttft_ms=str(ttft),
            silicon_tpot_ms=str(tpot),
        )
        rows.append((concurrency, ttft, tpot, row))
    path = tmp_path / "table.csv"
    write_rows([r for *_, r in rows], path)
    table = MeasuredTable.from_csv(path)
    truth = MeasuredTruth(table)
    config = table.examples[table.configs[0]]
    for concurrency, ttft, tpot, _row in rows:
        argv = [
            "--dataset-name", "random-ids", "--random-input-len", "2048", "--random-output-len", "512",
            "--random-range-ratio", "1.0", "--max-concurrency", str(concurrency), "--num-prompts", str(8 * concurrency),
        ]  # fmt: skip
        result = answer_benchmark(argv, truth, config)
        assert result["mean_tpot_ms"] == pytest.approx(tpot, rel=0.06)
        assert result["mean_ttft_ms"] == pytest.approx(ttft, rel=0.12)


def _r1_nvfp4_on_four_b200() -> SiliconCase:
    """InferenceX's DeepSeek-R1 NVFP4 TP4 aggregated point on B200 at 64 clients, 8k/1k prompts."""
    row = silicon_row(
        backend="sglang", model_path="deepseek-ai/DeepSeek-R1", system="b200_sxm", precision="fp4", mode="agg",
        gemm_quant_mode="nvfp4", moe_quant_mode="nvfp4", isl="8192", osl="1024", batch_size="64", tp_size="4",
        pp_size="1", attention_dp_size="1", moe_tp_size="4", moe_ep_size="1",
        silicon_data_source="db-dump/2026-04-27; config_id=1",
    )  # fmt: skip
    return parse_row(row)


def _twin_run(model: PerformanceModel, case: SiliconCase, range_ratio: str, requests: int) -> dict[str, Any]:
    argv = [
        "--dataset-name", "random-ids", "--random-input-len", "8192", "--random-output-len", "1024",
        "--random-range-ratio", range_ratio, "--max-concurrency", "64", "--num-prompts", str(requests),
    ]  # fmt: skip
    return run_benchmark(load_truth("model-exact", case.arch, model=model), case.config, parse_benchmark_argv(argv))


def test_a_fixed_length_wave_takes_the_twin_what_it_takes_the_model() -> None:
    """With fixed lengths every cycle is one wave of 64 8k prompts, two to a 16k chunk. Each prompt attends to
    its own tokens: the twin's forward of two costs what the model's does (it used to price them as one 16k-token
    sequence, 0.47 s per forward against 0.33 s, and its waves took 7.8 s where the model said 6.1 s)."""
    case = _r1_nvfp4_on_four_b200()
    model = PerformanceModel.default()
    fixed = replace(
        case.workload,
        input_tokens=LengthDistribution(mean=8192, cv=0.0, max=8192),
        output_tokens=LengthDistribution(mean=1024, cv=0.0, max=1024),
    )
    predicted = model.predict_at_concurrency(case.arch, case.gpu, case.config, fixed, 64).ttft_s
    twin = _twin_run(model, case, "1.0", 5 * 64)
    assert twin["mean_ttft_ms"] == pytest.approx(predicted * 1e3, rel=0.05)


@pytest.mark.parametrize("requests_per_client", [10, 30])
def test_the_closed_loop_model_follows_the_twin_through_a_runs_first_wave(requests_per_client: int) -> None:
    """The twin's scheduler, on the model's own step times, runs InferenceX's harness: 64 clients, 8k/1k prompts
    drawn on [0.8, 1] × nominal, 10 or 30 requests each, against DeepSeek-R1 NVFP4 on 4×B200. Its steady state
    has no waves (its median TTFT is one prompt's prefill), but its first cycle is one: the model with the run's
    first wave and a steady state without waves (`wave_sync` 0) matches its mean TTFT and TPOT; the steady state
    alone misses the ten-request run's mean by more than a third."""
    case = _r1_nvfp4_on_four_b200()
    shipped = PerformanceModel.default().coefficients(case.gpu)
    without_waves = Coefficients.from_dict({**shipped.as_dict(), "wave_sync": 0.0})
    model = PerformanceModel(calibration_of(without_waves, case.gpu.arch))
    twin = _twin_run(model, case, "0.8", 64 * requests_per_client)

    def predicted(run_length: int | None) -> tuple[float, float]:
        p = model.predict_at_concurrency(
            case.arch, case.gpu, case.config, case.workload, 64, requests_per_client=run_length
        )
        return p.ttft_s * 1e3, p.tpot_s * 1e3

    ttft_ms, tpot_ms = predicted(requests_per_client)
    assert ttft_ms == pytest.approx(twin["mean_ttft_ms"], rel=0.15)
    assert tpot_ms == pytest.approx(twin["mean_tpot_ms"], rel=0.05)
    assert twin["median_ttft_ms"] < 1.3e3 * model.unloaded_ttft(case.arch, case.gpu, case.config, case.workload)
    if requests_per_client == 10:
        assert predicted(None)[0] < twin["mean_ttft_ms"] / 1.5
