"""Closed loop (fixed concurrency) and open loop (fixed rate) describe the same steady state."""

from __future__ import annotations

import pytest

from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.model import PerformanceModel
from perf_support import calibration_of, gpu, model, unified, worker, workload


def _without_waves() -> PerformanceModel:
    coefficients = Coefficients.from_dict({**Coefficients.priors().as_dict(), "wave_sync": 0.0})
    return PerformanceModel(calibration_of(coefficients, "sm90"))


@pytest.mark.parametrize("concurrency", [4, 32, 128])
def test_open_loop_at_the_closed_loop_rate_reproduces_it(concurrency: int) -> None:
    perf = _without_waves()
    arch, spec = model("Qwen3-32B"), gpu("H100")
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=512))
    load = workload(rate=0.0, input_mean=2000, output_mean=500)
    closed = perf.predict_at_concurrency(arch, spec, config, load, concurrency)
    opened = perf.predict(
        arch, spec, config, workload(rate=closed.requests_per_s, input_mean=2000, output_mean=500), 1.0
    )
    assert opened.mean_batch == pytest.approx(closed.decode_batch, rel=0.02)
    # The open loop's mean TPOT (batch step plus prefill pauses) equals the closed loop's.
    assert opened.output_tokens_per_s_per_gpu == pytest.approx(closed.output_tokens_per_s_per_gpu, rel=1e-9)
    assert opened.tpot.p50 <= closed.tpot_s * 1.05


def test_waves_raise_ttft_in_a_closed_loop(shipped: PerformanceModel) -> None:
    arch, spec = model("Qwen3-32B"), gpu("H100")
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=512))
    load = workload(rate=0.0, input_mean=2000, output_mean=500)
    desynchronised = _without_waves().predict_at_concurrency(arch, spec, config, load, 128)
    waves = _in_waves().predict_at_concurrency(arch, spec, config, load, 128)
    assert waves.ttft_s > desynchronised.ttft_s
    assert shipped.predict_at_concurrency(arch, spec, config, load, 128).ttft_s > 0


def _in_waves() -> PerformanceModel:
    coefficients = Coefficients.from_dict({**Coefficients.priors().as_dict(), "wave_sync": 1.0, "wave_breakup": 0.0})
    return PerformanceModel(calibration_of(coefficients, "sm90"))


def test_a_wave_smaller_than_a_chunk_waits_for_its_own_forward_only() -> None:
    # 1k-token prompts with a 16k chunk: a full forward holds 16 of them; a wave of one or four is one forward
    # of just those prompts (before, every wave waited half a 16-prompt forward, so one client here saw 3.7x the
    # unloaded TTFT: DeepSeek-R1 on 8xB200 at 4 clients was predicted 323 ms against 183-207 ms measured).
    perf = _in_waves()
    arch, spec = model("Qwen3-32B"), gpu("H100")
    config = unified(arch.name, worker("H100", tp=4, weight_format="fp8", max_running=512, chunk=16384))
    load = workload(rate=0.0, input_mean=1024, output_mean=512)
    alone = perf.predict_at_concurrency(arch, spec, config, load, 1)
    assert alone.ttft_s == pytest.approx(perf.unloaded_ttft(arch, spec, config, load), rel=1e-9)
    four, full, double = (perf.predict_at_concurrency(arch, spec, config, load, c).ttft_s for c in (4, 16, 32))
    assert alone.ttft_s < four < full < double


def test_clients_beyond_the_kv_pool_wait_for_a_slot(priors: PerformanceModel) -> None:
    arch, spec = model("Qwen3-32B"), gpu("H100")
    config = unified(arch.name, worker("H100", tp=1, weight_format="bf16", max_running=512))
    load = workload(rate=0.0, input_mean=2048, output_mean=512)
    capacity = priors.memory_fit(arch, spec, config.roles[0].worker, 2048 + 256).max_batch_at_context
    assert 0 < capacity < 64
    within = priors.predict_at_concurrency(arch, spec, config, load, max(1, capacity // 2))
    beyond = priors.predict_at_concurrency(arch, spec, config, load, 4 * capacity)
    assert beyond.ttft_s > 5 * within.ttft_s
