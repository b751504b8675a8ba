"""Tail latency physics: long prompts, bursts, attention-DP prefill servers and sparse attention.

These are the terms that made the GLM-5 agentic-coding target look impossible (p99 TTFT 113 s on 64 H200s
whose prefill work at 6 req/s is a few % of their FLOPs): the p99 prompt was longer than the workload's
maximum, a fleet-wide burst hit every replica whole, the quantiles of the waits and of the prefill were
added as if the slowest of each came together, and the attention core read every cached token although
DeepSeek Sparse Attention reads 2,048.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.kernels import core_attended_tokens, indexer_bytes_per_token_layer
from frontier_operator.perf.memory import kv_bytes_per_request
from frontier_operator.perf.model import PerformanceModel, length_nodes, length_quantile, split_arrival_cv
from frontier_operator.perf.queueing import (
    PrefillService,
    kingman_wait,
    latency_quantile,
    max_rate_aggregated,
    prefill_busy_share,
    prefill_queue,
)
from frontier_operator.perf.steps import PrefillCost
from frontier_operator.perf.types import LengthDistribution, Role, RoleDeployment, ServingConfig, Workload
from perf_support import gpu, model, unified, worker

GLM = "GLM-5"


def agentic(rate: float, *, arrival_cv: float = 2.0) -> Workload:
    """examples/glm5-agentic-coding.yaml: 24k mean / 64k p90 / 128k max input, 85 % prefix hits, bursty."""
    return Workload(
        request_rate_per_s=rate,
        input_tokens=LengthDistribution(mean=24_000, cv=2.04, max=128_000),
        output_tokens=LengthDistribution(mean=700, cv=2.04, max=16_000),
        prefix_cache_hit_rate=0.85,
        kind="agentic-coding",
        arrival_cv=arrival_cv,
    )


def glm_tp8(replicas: int) -> tuple[object, object, object]:
    arch = model(GLM)
    config = unified(GLM, worker("H200", tp=8, ep=8, weight_format="fp8", kv="fp8_e4m3"), replicas)
    return arch, gpu("H200"), config


def test_no_prompt_is_longer_than_the_workload_maximum() -> None:
    # A log-normal with mean 24k and p90 64k puts its p99 at ~209k tokens; the workload says 128k at most.
    assert length_quantile(24_000, 2.04, None, 2.326) > 200_000
    assert length_quantile(24_000, 2.04, 128_000, 2.326) == 128_000
    nodes = length_nodes(24_000, 2.04, 128_000)
    assert max(nodes) <= 128_000
    assert sum(length_nodes(24_000, 2.04, None)) / 8 == pytest.approx(24_000)  # the stated mean is kept
    assert length_nodes(4_000, 0.0, None) == [4_000]


def test_the_p99_prefill_is_the_prefill_of_the_longest_prompt_not_the_mean_scaled(shipped: PerformanceModel) -> None:
    arch, spec, config = glm_tp8(8)
    trickle = agentic(0.01)
    p = shipped.predict(arch, spec, config, trickle, 2.30)
    longest = shipped.prefill_time(arch, spec, config.roles[0].worker, 128_000, cached_tokens=0.85 * 128_000)
    overhead = shipped.coefficients(spec).ttft_overhead_ms * 1e-3
    # Unloaded, p99 TTFT is the overhead plus at most the longest prompt's prefill (and a decode step).
    assert p.ttft.p99 <= overhead + longest + 0.05
    assert p.ttft.p99 >= 0.5 * longest


def test_the_p99_first_token_waits_for_the_longest_prompts_kv_transfer(shipped: PerformanceModel) -> None:
    # A P/D request's KV moves after its prefill, in time proportional to its length: the p99 request of an
    # agentic-coding stream is a 128k-token prompt, whose KV takes 5.3 times as long to move as a mean one's.
    arch, spec = model(GLM), gpu("H200")
    prefill = worker("H200", tp=8, ep=8, weight_format="fp8", kv="fp8_e4m3")
    config = ServingConfig(
        model=GLM,
        roles=(RoleDeployment(Role.PREFILL, prefill, 8), RoleDeployment(Role.DECODE, prefill, 1)),
        transfer_backend="nixl",
    )
    c = shipped.coefficients(spec)
    formats = resolve_formats(arch, spec, prefill.weight_format, prefill.kv_cache_format)
    link = spec.scale_out_bandwidth_gbs * 1e9 * c.link_efficiency

    def transfer(tokens: float) -> float:
        return kv_bytes_per_request(arch, formats, prefill, tokens) / link

    assert transfer(128_000) == pytest.approx(128 / 24 * transfer(24_000))
    longest = shipped.prefill_time(arch, spec, prefill, 128_000, cached_tokens=0.85 * 128_000)
    p99 = shipped.predict(arch, spec, config, agentic(0.01), 2.30).ttft.p99
    handoff = c.pd_handoff_ms * 1e-3
    # Unloaded, the p99 is the longest prompt's prefill and its own transfer (not the mean's) plus fixed costs.
    assert p99 >= longest + transfer(128_000) + handoff
    assert p99 <= c.ttft_overhead_ms * 1e-3 + longest + transfer(128_000) + handoff + 0.05


def test_a_fleet_far_from_saturation_keeps_its_tail_near_the_unloaded_one(shipped: PerformanceModel) -> None:
    # The regression: 6 req/s of 24k-token agentic turns on 64 H200s predicted a 113 s p99 TTFT.
    arch, spec, config = glm_tp8(8)
    loaded = shipped.predict(arch, spec, config, agentic(6.0), 2.30)
    unloaded = shipped.predict(arch, spec, config, agentic(0.01), 2.30)
    assert loaded.max_request_rate_per_s > 1.5 * 6.0  # far from saturation
    assert loaded.ttft.p99 < 1.5 * unloaded.ttft.p99
    assert loaded.ttft.p99 < 3.0


def test_the_router_spreads_a_burst_over_the_replicas() -> None:
    assert split_arrival_cv(2.0, 1) == 2.0
    assert split_arrival_cv(1.0, 8) == 1.0  # Poisson split is Poisson
    assert 1.0 < split_arrival_cv(2.0, 8) < split_arrival_cv(2.0, 2) < 2.0
    assert split_arrival_cv(0.5, 4) > 0.5  # a smooth stream split at random is less smooth


def test_a_bursty_stream_hurts_a_small_fleet_more_than_a_large_one(shipped: PerformanceModel) -> None:
    arch = model("Qwen3-32B")
    w = worker("H200", tp=2, weight_format="fp8")
    per_replica = 1.5

    def tail_excess(replicas: int) -> float:
        bursty = replace(agentic(per_replica * replicas), input_tokens=LengthDistribution(4_000, 0.4, 16_000))
        poisson = replace(bursty, arrival_cv=1.0)
        config = unified(arch.name, w, replicas)
        bursts = shipped.predict(arch, gpu("H200"), config, bursty, 1.74).ttft.p99
        return bursts / shipped.predict(arch, gpu("H200"), config, poisson, 1.74).ttft.p99

    assert tail_excess(1) > tail_excess(8) >= 1.0


def _wait_quantile(probability: float, mean: float, tail: float) -> float:
    """Quantile at 1 − tail of a wait that is 0 with probability 1 − p and exponential(mean) otherwise."""
    return 0.0 if tail >= probability else mean * math.log(probability / tail)


def _atom_quantile(values: list[float], tail: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil((1 - tail) * len(ordered) - 1e-9) - 1))]


@settings(max_examples=200, deadline=None)
@given(
    constant=st.floats(0.0, 1.0),
    p1=st.floats(0.0, 0.99),
    m1=st.floats(0.001, 5.0),
    p2=st.floats(0.0, 0.99),
    m2=st.floats(0.001, 5.0),
    xs=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=6),
    percentile=st.sampled_from([50, 90, 99]),
)
def test_the_quantile_of_the_sum_lies_between_its_parts_and_a_union_bound(
    *, constant: float, p1: float, m1: float, p2: float, m2: float, xs: list[float], percentile: int
) -> None:
    own = [(1.0 / len(xs), x) for x in xs]
    total = latency_quantile(constant, (p1, m1), (p2, m2), own, percentile)
    tail = 1 - percentile / 100
    # Every part is non-negative: the sum is at least each part at the same quantile.
    parts = (_atom_quantile(xs, tail), _wait_quantile(p1, m1, tail), _wait_quantile(p2, m2, tail))
    tolerance = 2e-4 * (1 + total)  # the solver stops within 0.01 % (on the high side)
    assert total >= constant + max(parts) - tolerance
    # Union bound: P(X + W1 + W2 > a + b + c) ≤ P(X > a) + P(W1 > b) + P(W2 > c) = tail with each at tail/3.
    third = tail / 3
    bound = _atom_quantile(xs, third) + _wait_quantile(p1, m1, third) + _wait_quantile(p2, m2, third)
    assert total <= constant + bound + tolerance


def _service(ranks: int, latency: float = 0.4) -> PrefillService:
    single = PrefillCost(latency, latency, 1.0)
    batched = PrefillCost(latency * 1.1, latency * 1.1 / max(ranks, 1), float(ranks))
    return PrefillService(single=single, batched=batched, overhead_s=0.0, ranks=ranks)


def test_one_prefill_server_is_kingmans_queue() -> None:
    service = _service(1)
    wait, probability, busy = prefill_queue(1.5, service, 1.0, 0.5)
    rho = 1.5 * 0.4
    assert busy == pytest.approx(rho)
    assert probability == pytest.approx(rho)
    assert wait == pytest.approx(kingman_wait(rho, 0.4, 1.0, 0.5))
    assert math.isinf(prefill_queue(3.0, service, 1.0, 0.5)[0])


def test_attention_dp_ranks_prefill_side_by_side() -> None:
    # Eight ranks each prefill their own prompt in the same forwards: decode pauses while any rank prefills,
    # which is less than the summed prefill work, and the worker saturates at eight times the rate.
    eight = _service(8)
    offered = 4.0 * eight.rank_service_s
    assert prefill_busy_share(offered, 8) < min(offered, 1.0)
    assert prefill_busy_share(offered, 1) == 1.0
    assert prefill_queue(4.0, eight, 1.0, 0.5)[0] < 0.05  # half the ranks busy: almost no queue
    assert math.isinf(prefill_queue(4.0, _service(1), 1.0, 0.5)[0])


def test_attention_dp_raises_the_rate_a_worker_sustains() -> None:
    from frontier_operator.perf.queueing import DecodeService  # noqa: PLC0415 - local to this test

    decode = DecodeService(lambda batch: 0.02 + 0.0001 * batch, 256)
    assert max_rate_aggregated(decode, _service(8), 500) > 1.4 * max_rate_aggregated(decode, _service(1), 500)


def test_sparse_attention_reads_the_top_k_and_indexes_everything(shipped: PerformanceModel) -> None:
    glm, dense = model(GLM), model("DeepSeek-R1")
    assert core_attended_tokens(glm, 100_000) == glm.num_layers * 2048
    assert core_attended_tokens(dense, 100_000) == dense.num_layers * 100_000
    assert indexer_bytes_per_token_layer(glm) == pytest.approx(132)  # 128 FP8 + one fp32 scale (SGLang NSA)
    assert indexer_bytes_per_token_layer(dense) == 0
    spec = gpu("H200")
    glm_worker = worker("H200", tp=8, ep=8, weight_format="fp8")
    r1_worker = worker("H200", tp=8, weight_format="fp8")
    glm_growth = shipped.decode_step_time(glm, spec, glm_worker, 32, 100_000) / shipped.decode_step_time(
        glm, spec, glm_worker, 32, 2_000
    )
    r1_growth = shipped.decode_step_time(dense, spec, r1_worker, 32, 100_000) / shipped.decode_step_time(
        dense, spec, r1_worker, 32, 2_000
    )
    assert glm_growth < r1_growth / 2  # long contexts cost GLM-5 the indexer, not the whole latent
