"""Latency percentiles from the queue: ordered, and exploding as the request rate nears saturation."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.queueing import (
    ClosedLoopResult,
    DecodeService,
    PrefillService,
    closed_loop_aggregated,
    kingman_wait,
    lognormal_quantile,
    open_loop_aggregated,
    waiting_quantile,
)
from frontier_operator.perf.steps import PrefillCost
from frontier_operator.perf.types import Percentiles
from perf_support import gpu, model, unified, worker, workload


def _ordered(p: Percentiles) -> bool:
    return p.p50 <= p.p90 <= p.p95 <= p.p99


def _setup() -> tuple[object, object, object]:
    arch = model("Qwen3-32B")
    return arch, gpu("H100"), unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=128))


def test_percentiles_are_ordered_across_load(shipped: PerformanceModel) -> None:
    arch, spec, config = model("Qwen3-32B"), gpu("H100"), None
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=128))
    saturation = shipped.predict(arch, spec, config, workload(rate=0.1), 1.69).max_request_rate_per_s
    for share in (0.05, 0.3, 0.6, 0.9, 0.97):
        p = shipped.predict(arch, spec, config, workload(rate=share * saturation), 1.69)
        for percentiles in (p.ttft, p.tpot, p.itl, p.e2e):
            assert _ordered(percentiles), (share, percentiles)
        assert p.e2e.p50 > p.ttft.p50


def test_queueing_blows_up_near_saturation(shipped: PerformanceModel) -> None:
    arch = model("Qwen3-32B")
    spec = gpu("H100")
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=128))
    saturation = shipped.predict(arch, spec, config, workload(rate=0.1), 1.69).max_request_rate_per_s
    light = shipped.predict(arch, spec, config, workload(rate=0.2 * saturation), 1.69)
    heavy = shipped.predict(arch, spec, config, workload(rate=0.97 * saturation), 1.69)
    over = shipped.predict(arch, spec, config, workload(rate=1.2 * saturation), 1.69)
    assert heavy.ttft.p99 > 3 * light.ttft.p99
    assert heavy.tpot.p50 > 1.5 * light.tpot.p50
    assert heavy.mean_batch > 4 * light.mean_batch
    assert math.isinf(over.ttft.p99) and math.isinf(over.tpot.p50)
    # Past saturation the fleet still serves its maximum, which sets tokens/s and $/Mtok.
    assert over.output_tokens_per_s_per_gpu > heavy.output_tokens_per_s_per_gpu * 0.95


def test_throughput_and_cost_follow_the_rate(shipped: PerformanceModel) -> None:
    arch = model("Llama-3.1-8B-Instruct")
    config = unified(arch.name, worker("H200", tp=1, weight_format="fp8"))
    low = shipped.predict(arch, gpu("H200"), config, workload(rate=1.0), 1.74)
    high = shipped.predict(arch, gpu("H200"), config, workload(rate=8.0), 1.74)
    assert high.output_tokens_per_s_per_gpu == 8 * low.output_tokens_per_s_per_gpu
    assert high.cost_per_mtok == low.cost_per_mtok / 8
    # $/Mtok = GPU dollars per second / output tokens per second.
    assert low.cost_per_mtok == 1.74 / 3600 / (1.0 * 500) * 1e6


def test_replicas_split_the_rate(shipped: PerformanceModel) -> None:
    arch = model("Llama-3.1-8B-Instruct")
    w = worker("H200", tp=1, weight_format="fp8")
    one = shipped.predict(arch, gpu("H200"), unified(arch.name, w, 1), workload(rate=4.0), 1.74)
    two = shipped.predict(arch, gpu("H200"), unified(arch.name, w, 2), workload(rate=8.0), 1.74)
    assert two.mean_batch == one.mean_batch
    assert two.max_request_rate_per_s == 2 * one.max_request_rate_per_s


def test_queueing_primitives() -> None:
    assert kingman_wait(0.0, 1.0, 1.0, 1.0) == 0.0
    assert kingman_wait(0.5, 1.0, 1.0, 1.0) == 1.0  # M/M/1: ρ/(1−ρ)·s
    assert math.isinf(kingman_wait(1.0, 1.0, 1.0, 1.0))
    assert waiting_quantile(1.0, 0.3, 50) == 0.0  # most requests do not wait on a lightly loaded server
    assert waiting_quantile(1.0, 0.9, 99) > waiting_quantile(1.0, 0.9, 90) > 0
    assert lognormal_quantile(100.0, 0.0, 99) == 100.0
    assert lognormal_quantile(100.0, 0.5, 50) < 100.0 < lognormal_quantile(100.0, 0.5, 90)


def test_highest_rate_within_an_slo(shipped: PerformanceModel) -> None:
    arch = model("Qwen3-32B")
    spec = gpu("H100")
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=128))
    load = workload(rate=1.0)
    saturation = shipped.predict(arch, spec, config, load, 1.69).max_request_rate_per_s
    tight = shipped.max_rate_meeting(arch, spec, config, load, lambda p: math.isfinite(p.tpot.p50))
    assert tight == pytest.approx(saturation, rel=0.02)
    threshold = shipped.predict(arch, spec, config, replace(load, request_rate_per_s=0.5 * saturation), 1.69).tpot.p90
    rate = shipped.max_rate_meeting(arch, spec, config, load, lambda p: p.tpot.p90 <= threshold)
    assert 0.45 * saturation < rate < 0.6 * saturation
    assert shipped.max_rate_meeting(arch, spec, config, load, lambda p: p.ttft.p50 < 1e-6) == 0.0


def _receive_setup(tokens_per_step: float = 1.0) -> tuple[DecodeService, PrefillService]:
    decode = DecodeService(lambda batch: 0.02 + 0.0001 * batch, 256, tokens_per_step)
    # 8k-token prompts: 0.15 s alone, two to a 16k chunk at 0.28 s.
    prefill = PrefillService(PrefillCost(0.15, 0.15, 1.0), PrefillCost(0.28, 0.14, 2.0), overhead_s=0.1)
    return decode, prefill


def _closed(decode: DecodeService, prefill: PrefillService, recv_interval: int) -> ClosedLoopResult:
    return closed_loop_aggregated(
        64, decode, prefill, 1024, wave_sync=0.0, wave_breakup=0.0, recv_interval=recv_interval
    )


def test_a_scheduler_that_receives_every_n_iterations_holds_arrivals_back() -> None:
    """`--scheduler-recv-interval 30`: an arrival waits ~14.5 decode iterations for the next receive and is
    prefilled with the window's other arrivals; the decode pace is the same (the prefill work per request is)."""
    decode, prefill = _receive_setup()
    default, held = _closed(decode, prefill, 1), _closed(decode, prefill, 30)
    step_s = decode.token_seconds(held.decode_batch)
    assert held.ttft_s - default.ttft_s > 14.5 * step_s
    assert held.tpot_s == pytest.approx(default.tpot_s, rel=0.05)
    assert _closed(decode, prefill, 10).ttft_s < held.ttft_s


def test_prefill_load_breaks_only_a_wave_that_varying_lengths_loosened() -> None:
    """Fixed output lengths (full synchronisation) keep the wave whatever the prefill load; with lengths that
    vary, the same load spreads the clients and the first token comes sooner."""
    decode, prefill = _receive_setup()

    def ttft(wave_sync: float, wave_breakup: float) -> float:
        return closed_loop_aggregated(64, decode, prefill, 1024, wave_sync=wave_sync, wave_breakup=wave_breakup).ttft_s

    assert ttft(1.0, 2.0) == ttft(1.0, 0.0)
    assert ttft(0.5, 2.0) < 0.85 * ttft(0.5, 0.0)


def test_the_receive_window_counts_iterations_not_tokens() -> None:
    """With speculative decoding an iteration yields several tokens: the same interval holds arrivals longer
    per output token."""
    plain_decode, prefill = _receive_setup()
    drafted_decode, _ = _receive_setup(tokens_per_step=2.0)
    plain = _closed(plain_decode, prefill, 30).ttft_s - _closed(plain_decode, prefill, 1).ttft_s
    drafted = _closed(drafted_decode, prefill, 30).ttft_s - _closed(drafted_decode, prefill, 1).ttft_s
    assert drafted > 1.8 * plain


def test_an_arrival_waits_for_half_the_decode_forward_in_flight() -> None:
    """A new prompt waits for the decode forward in progress, half of it on average. Under speculative decoding
    that forward (draft steps and verify) yields several tokens, so it lasts that many token times: at the same
    pace per token, three tokens per forward make the wait three times as long."""
    plain, prefill = _receive_setup()
    drafted, _ = _receive_setup(tokens_per_step=3.0)
    rate = 0.5
    open_plain = open_loop_aggregated(rate, plain, prefill, 1024, arrival_cv=1.0, service_cv=0.0)
    open_drafted = open_loop_aggregated(rate, drafted, prefill, 1024, arrival_cv=1.0, service_cv=0.0)
    assert open_drafted.ttft_s - open_plain.ttft_s == pytest.approx(open_plain.decode_token_s, rel=1e-9)
    closed_plain, closed_drafted = _closed(plain, prefill, 1), _closed(drafted, prefill, 1)
    assert closed_drafted.ttft_s - closed_plain.ttft_s == pytest.approx(closed_plain.decode_token_s, rel=0.05)


def test_the_first_wave_of_a_run_weighs_its_share_whatever_the_steady_state() -> None:
    """Every client sends at once onto an idle server: with ten requests per client a tenth of the run is that
    wave, even where the steady state has none (varying lengths, `wave_sync` 0); a run that is all first wave
    is the wave picture itself, and the share moves TTFT and TPOT linearly between the two."""
    decode, prefill = _receive_setup()

    def closed(first_wave_share: float, wave_sync: float = 0.0) -> ClosedLoopResult:
        return closed_loop_aggregated(
            64, decode, prefill, 1024, wave_sync=wave_sync, wave_breakup=0.0, first_wave_share=first_wave_share
        )

    steady, tenth, whole = closed(0.0), closed(0.1), closed(1.0)
    assert whole.ttft_s == pytest.approx(closed(0.0, wave_sync=1.0).ttft_s)
    assert whole.ttft_s > 3 * steady.ttft_s
    assert tenth.ttft_s == pytest.approx(0.9 * steady.ttft_s + 0.1 * whole.ttft_s)
    assert tenth.tpot_s == pytest.approx(0.9 * steady.tpot_s + 0.1 * whole.tpot_s)
    # A steady state already in waves gains nothing from its first one.
    assert closed(0.1, wave_sync=1.0).ttft_s == pytest.approx(whole.ttft_s)
