"""Communication's fixed costs: SGLang's custom all-reduce where it applies, NCCL's everywhere else, and the
attention-DP ranks' batch sync before every forward."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.perf.calibration import Coefficients
from frontier_operator.perf.comm import collective_time
from frontier_operator.perf.kernels import CollectiveKind, CollectiveWork
from frontier_operator.perf.model import PerformanceModel
from perf_support import calibration_of, gpu, model, worker

# Latencies far apart and a tiny buffer, so that a call's time is its latency to within a nanosecond.
COEFFICIENTS = replace(Coefficients.priors(), collective_latency_us=5.0, nccl_latency_us=40.0)
TINY = 8.0


def _latency_us(kind: CollectiveKind, group: int, gpu_name: str) -> float:
    spec = gpu(gpu_name)
    seconds = collective_time(CollectiveWork(kind, TINY, group, 1.0), spec, spec.gpus_per_node, COEFFICIENTS)
    return round(seconds * 1e6, 2)


@pytest.mark.parametrize("group", [2, 4, 8])
def test_an_all_reduce_on_one_hgx_node_takes_the_custom_kernel(group: int) -> None:
    assert _latency_us(CollectiveKind.ALL_REDUCE, group, "B200") == 5.0


def test_an_all_reduce_over_two_nvl72_trays_goes_through_nccl_though_nvlink_joins_them() -> None:
    assert _latency_us(CollectiveKind.ALL_REDUCE, 4, "GB200") == 5.0
    # Eight GB200 GPUs are two 4-GPU nodes: NCCL's latency, still no network hop (one NVLink domain).
    assert _latency_us(CollectiveKind.ALL_REDUCE, 8, "GB200") == 40.0
    assert _latency_us(CollectiveKind.ALL_REDUCE, 32, "GB200") == 40.0


def test_an_all_reduce_over_two_hgx_nodes_pays_nccl_and_the_network_hop() -> None:
    assert _latency_us(CollectiveKind.ALL_REDUCE, 16, "H100") == 50.0


def test_deepep_all_to_all_keeps_the_scale_up_latency() -> None:
    # Dispatch and combine run DeepEP's own kernels, not an all-reduce: the NCCL rule does not apply.
    assert _latency_us(CollectiveKind.ALL_TO_ALL, 8, "GB200") == 5.0


def test_every_attention_dp_rank_beyond_the_first_adds_its_sync_to_each_iteration() -> None:
    arch, spec = model("DeepSeek-R1"), gpu("B200")
    quiet = PerformanceModel(calibration_of(replace(Coefficients.priors(), dp_sync_us=0.0), "sm100"))
    synced = PerformanceModel(calibration_of(replace(Coefficients.priors(), dp_sync_us=100.0), "sm100"))
    for attention_dp in (1, 2, 8):
        w = worker("B200", tp=8, attention_dp=attention_dp, ep=8)
        extra = synced.decode_step_time(arch, spec, w, 64, 2048) - quiet.decode_step_time(arch, spec, w, 64, 2048)
        assert extra == pytest.approx((attention_dp - 1) * 100e-6, rel=1e-9), attention_dp


def test_an_expert_all_to_all_moves_its_bytes_at_its_own_efficiency_and_an_all_reduce_at_the_links() -> None:
    """DeepEP's dispatch and combine are not NCCL's all-reduce: over NVLink each has its own achieved share of the
    link; across nodes the NIC is the bottleneck, at the link's share for both."""
    spec = gpu("B200")
    big = 1e9
    half_a2a = replace(COEFFICIENTS, collective_latency_us=0.0, link_efficiency=0.8, all_to_all_efficiency=0.4)

    def seconds(kind: CollectiveKind, coefficients: Coefficients) -> float:
        return collective_time(CollectiveWork(kind, big, 8, 1.0), spec, spec.gpus_per_node, coefficients)

    link = spec.scale_up_bandwidth_gbs * 1e9
    assert seconds(CollectiveKind.ALL_TO_ALL, half_a2a) == pytest.approx(7 / 8 * big / (0.4 * link))
    assert seconds(CollectiveKind.ALL_REDUCE, half_a2a) == pytest.approx(2 * 7 / 8 * big / (0.8 * link))
    # The all-to-all's share does not move an all-reduce, nor the link's an all-to-all.
    assert seconds(CollectiveKind.ALL_REDUCE, replace(half_a2a, all_to_all_efficiency=0.1)) == seconds(
        CollectiveKind.ALL_REDUCE, half_a2a
    )
    assert seconds(CollectiveKind.ALL_TO_ALL, replace(half_a2a, link_efficiency=0.1)) == seconds(
        CollectiveKind.ALL_TO_ALL, half_a2a
    )
    h100 = gpu("H100")
    across = CollectiveWork(CollectiveKind.ALL_TO_ALL, big, 16, 1.0)
    assert collective_time(across, h100, h100.gpus_per_node, half_a2a) == collective_time(
        across, h100, h100.gpus_per_node, replace(half_a2a, all_to_all_efficiency=0.1)
    )
