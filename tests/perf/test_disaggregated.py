"""P/D disaggregation: decode runs undisturbed by prefills, TTFT pays the KV hand-off."""

from __future__ import annotations

from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import Role, RoleDeployment, ServingConfig
from perf_support import calibration_of, gpu, model, unified, worker, workload


def _pd(prefill_replicas: int, decode_replicas: int) -> ServingConfig:
    prefill = worker("H200", tp=8, weight_format="fp8-block", kv="fp8_e4m3", max_running=1024)
    decode = worker("H200", tp=8, weight_format="fp8-block", kv="fp8_e4m3", max_running=1024)
    return ServingConfig(
        model="DeepSeek-R1",
        roles=(
            RoleDeployment(Role.PREFILL, prefill, prefill_replicas),
            RoleDeployment(Role.DECODE, decode, decode_replicas),
        ),
        transfer_backend="nixl",
    )


def test_pd_prediction_is_complete_and_ordered(shipped: PerformanceModel) -> None:
    arch, spec = model("DeepSeek-R1"), gpu("H200")
    p = shipped.predict(arch, spec, _pd(1, 1), workload(rate=2.0, input_mean=4000, output_mean=800), 1.74)
    assert 0 < p.ttft.p50 <= p.ttft.p99 < float("inf")
    assert 0 < p.tpot.p50 <= p.tpot.p99 < float("inf")
    assert p.memory.fits and p.max_request_rate_per_s > 2.0
    assert p.output_tokens_per_s_per_gpu == 2.0 * 800 / 16


def test_pd_tpot_does_not_suffer_from_prefill_load(shipped: PerformanceModel) -> None:
    """At the same per-GPU load, aggregated TPOT carries the prefill pauses that P/D avoids."""
    arch, spec = model("DeepSeek-R1"), gpu("H200")
    load = workload(rate=3.0, input_mean=8000, output_mean=400)
    agg_worker = worker("H200", tp=8, weight_format="fp8-block", kv="fp8_e4m3", max_running=1024)
    aggregated = shipped.predict(arch, spec, unified(arch.name, agg_worker, 2), load, 1.74)
    disaggregated = shipped.predict(arch, spec, _pd(1, 1), load, 1.74)
    assert disaggregated.tpot.p99 < aggregated.tpot.p99
    # The decode worker's own step time is the same hardware and batch regime; the gap is the pauses.
    assert disaggregated.tpot.p50 < aggregated.tpot.p50


def test_more_prefill_workers_cut_ttft_under_load(shipped: PerformanceModel) -> None:
    arch, spec = model("DeepSeek-R1"), gpu("H200")
    load = workload(rate=4.0, input_mean=8000, output_mean=400)
    one = shipped.predict(arch, spec, _pd(1, 2), load, 1.74)
    three = shipped.predict(arch, spec, _pd(3, 2), load, 1.74)
    assert three.ttft.p90 < one.ttft.p90
    assert three.max_request_rate_per_s >= one.max_request_rate_per_s


def test_pd_at_concurrency(shipped: PerformanceModel) -> None:
    arch, spec = model("DeepSeek-R1"), gpu("H200")
    load = workload(rate=0.0, input_mean=1000, output_mean=1000)
    small = shipped.predict_at_concurrency(arch, spec, _pd(1, 1), load, 8)
    large = shipped.predict_at_concurrency(arch, spec, _pd(1, 1), load, 256)
    assert large.tpot_s > small.tpot_s and large.ttft_s > small.ttft_s
    assert large.requests_per_s > small.requests_per_s


def test_a_pd_closed_loop_waves_by_its_own_synchronisation(shipped: PerformanceModel) -> None:
    """P/D clients come back in waves to the extent `pd_wave_sync` says, aggregated ones as `wave_sync` says: each
    fleet kind reads its own coefficient and ignores the other's."""
    arch, spec = model("DeepSeek-R1"), gpu("H200")
    load = workload(rate=0.0, input_mean=8000, output_mean=1000)
    aggregated = unified(arch.name, worker("H200", tp=8, weight_format="fp8-block", kv="fp8_e4m3", max_running=1024))
    base = shipped.coefficients(spec).as_dict()

    def ttft(config: ServingConfig, **sync: float) -> float:
        perf = PerformanceModel(calibration_of(Coefficients.from_dict({**base, **sync}), spec.arch))
        return perf.predict_at_concurrency(arch, spec, config, load, 64).ttft_s

    apart = ttft(_pd(1, 1), wave_sync=0.0, pd_wave_sync=0.0)
    assert ttft(_pd(1, 1), wave_sync=1.0, pd_wave_sync=0.0) == apart
    assert ttft(_pd(1, 1), wave_sync=0.0, pd_wave_sync=1.0) > 1.5 * apart
    alone = ttft(aggregated, wave_sync=0.0, pd_wave_sync=0.0)
    assert ttft(aggregated, wave_sync=0.0, pd_wave_sync=1.0) == alone
    assert ttft(aggregated, wave_sync=1.0, pd_wave_sync=0.0) > 1.5 * alone
