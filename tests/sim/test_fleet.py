"""The fleet simulation's mechanics on a transparent truth: queueing, batching, memory, P/D, canaries, changes."""

from __future__ import annotations

import statistics
from dataclasses import replace

import pytest

from frontier_operator.perf.types import Role
from frontier_operator.sim.changes import (
    PromoteCanary,
    ReplaceConfig,
    RollbackCanary,
    SetBatchCap,
    SetReplicas,
    StartCanary,
)
from frontier_operator.sim.fleet import FleetSimulation, PodState, RouterPolicy
from frontier_operator.sim.observe import observe, observe_window
from frontier_operator.sim.timing import Unavailable
from frontier_operator.tuning.observation import Variant
from sim.twin_fakes import FakeTruth, LinearTiming, capacity_rate, disaggregated, unified, workload

NOISY = LinearTiming(noise=0.05)
CAPACITY = capacity_rate(LinearTiming(), 1000, 200)  # ≈ 9.9 requests/s per replica at the default cap


def _conserved(fleet: FleetSimulation) -> bool:
    in_flight = sum(r.in_flight for r in fleet.revisions)
    return fleet.arrived == fleet.completed + in_flight + len(fleet._held)


def test_same_seed_same_run_and_another_seed_another_run() -> None:
    def run(seed: int) -> object:
        fleet = FleetSimulation(FakeTruth(default=NOISY), unified(2), workload(8, cv=0.5, hit=0.3), seed=seed)
        fleet.advance(600)
        return observe(fleet, 300)

    assert run(7) == run(7)
    assert run(7) != run(8)


def test_littles_law_holds() -> None:
    fleet = FleetSimulation(FakeTruth(default=NOISY), unified(2), workload(0.5 * 2 * CAPACITY, cv=0.5), seed=1)
    fleet.advance(300)
    start = fleet.now
    fleet.advance(1500)
    group = fleet.ledger.group((Role.UNIFIED, Variant.STABLE))
    in_system = statistics.fmean(g.running + g.queued for g in group.gauges_in(start, fleet.now))
    completions = group.completions.window(start, fleet.now)
    throughput = len(completions) / (fleet.now - start)
    mean_latency = statistics.fmean(c.e2e_s for c in completions)
    assert in_system == pytest.approx(throughput * mean_latency, rel=0.08)
    assert _conserved(fleet)


def test_latency_grows_with_load_and_explodes_past_capacity() -> None:
    p90 = {}
    queue_growth = {}
    for share in (0.3, 0.7, 1.3):
        fleet = FleetSimulation(FakeTruth(default=NOISY), unified(2), workload(share * 2 * CAPACITY, cv=0.3), seed=2)
        fleet.advance(900)
        middle = observe(fleet, 60).group(Role.UNIFIED)
        fleet.advance(900)
        late = observe(fleet, 60).group(Role.UNIFIED)
        assert middle is not None and late is not None and late.ttft is not None and late.tpot is not None
        p90[share] = late.ttft.p90 + 199 * late.tpot.p50
        queue_growth[share] = (late.queued_requests or 0.0) - (middle.queued_requests or 0.0)
    assert p90[0.3] < p90[0.7] < p90[1.3]
    assert p90[1.3] > 20 * p90[0.7]
    assert queue_growth[1.3] > 100 and abs(queue_growth[0.3]) < 5


def test_the_batch_cap_bounds_running_requests() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2, cap=8), workload(20), seed=3)
    fleet.advance(300)
    gauges = fleet.ledger.group((Role.UNIFIED, Variant.STABLE)).gauges
    assert max(g.running / g.pods for g in gauges) == 8
    assert all(p.engine.running <= 8 for p in fleet.pods)
    assert max(g.queued for g in gauges) > 0


def test_requests_wait_when_the_kv_cache_is_full() -> None:
    # Room for five requests of 1000 + 200 tokens, far below the batch cap of 64.
    truth = FakeTruth(default=LinearTiming(kv_tokens=6000))
    fleet = FleetSimulation(truth, unified(1), workload(9), seed=4)
    fleet.advance(300)
    gauges = fleet.ledger.group((Role.UNIFIED, Variant.STABLE)).gauges
    assert max(g.running for g in gauges) == 5
    assert max(g.queued for g in gauges) > 5
    usage = observe(fleet, 300).group(Role.UNIFIED)
    assert usage is not None and usage.kv_usage is not None and 0.3 < usage.kv_usage <= 1.0


def test_kv_transfer_delay_shows_in_the_ttft_of_pd() -> None:
    def ttft_p50(transfer_s: float) -> tuple[float, float]:
        truth = FakeTruth(timing_by_role={Role.PREFILL: LinearTiming(transfer_fixed_s=transfer_s)})
        fleet = FleetSimulation(truth, disaggregated(1, 1), workload(4), seed=5)
        fleet.advance(600)
        observation = observe(fleet, 500)
        decode, prefill = observation.group(Role.DECODE), observation.group(Role.PREFILL)
        assert decode is not None and decode.ttft is not None and prefill is not None and prefill.ttft is not None
        return decode.ttft.p50, prefill.ttft.p50

    (fast, fast_prefill), (slow, slow_prefill) = ttft_p50(0.0), ttft_p50(0.5)
    assert slow - fast == pytest.approx(0.5, abs=0.03)
    assert slow_prefill == pytest.approx(fast_prefill, rel=0.05)


def test_pd_decode_is_not_paused_by_prefill() -> None:
    long_prompts = workload(2, prompt=8000)
    unified_fleet = FleetSimulation(FakeTruth(), unified(1), long_prompts, seed=6)
    pd_fleet = FleetSimulation(FakeTruth(), disaggregated(1, 1), long_prompts, seed=6)
    for fleet in (unified_fleet, pd_fleet):
        fleet.advance(600)
    agg = observe(unified_fleet, 500).group(Role.UNIFIED)
    pd = observe(pd_fleet, 500).group(Role.DECODE)
    assert agg is not None and pd is not None and agg.itl is not None and pd.itl is not None
    assert agg.itl.p99 > 3 * pd.itl.p99


def test_prefill_pauses_decode_for_every_chunk_of_a_prompt() -> None:
    # SGLang runs a prefill batch first whenever one can be formed, and a chunked request keeps forming one
    # until its last chunk (without --enable-mixed-chunk): decode waits for the whole prompt, and smaller
    # chunks only add per-iteration overhead.
    def itl_p99(chunk: int) -> float:
        truth = FakeTruth(default=LinearTiming(chunk=chunk))
        fleet = FleetSimulation(truth, unified(1), workload(2, prompt=8000), seed=7)
        fleet.advance(600)
        group = observe(fleet, 500).group(Role.UNIFIED)
        assert group is not None and group.itl is not None
        return group.itl.p99

    small, large = itl_p99(1024), itl_p99(8192)
    whole_prompt = 0.010 + 8000 * 0.00002
    assert large > whole_prompt
    assert small > large


def test_attention_dp_ranks_prefill_their_own_requests_in_the_same_forward() -> None:
    # One rank of 1,024 tokens a forward serves about 1024 / 1000 / 0.0305 s ≈ 34 prompts/s; four such ranks
    # (--chunked-prefill-size 4096 --dp-size 4) prefill four prompts per forward and keep up with 80/s.
    def served_per_s(ranks: int) -> float:
        prefill = LinearTiming(chunk=1024 * ranks, ranks=ranks)
        fleet = FleetSimulation(
            FakeTruth(timing_by_role={Role.PREFILL: prefill}), disaggregated(1, 2), workload(80, output=20), seed=8
        )
        fleet.advance(300)
        completed = fleet.completed
        fleet.advance(600)
        return (fleet.completed - completed) / 600

    one_rank = 1024 / 1000 / (0.010 + 1024 * 0.00002)
    assert served_per_s(1) == pytest.approx(one_rank, rel=0.1)
    assert served_per_s(4) == pytest.approx(80, rel=0.05)


def test_a_lone_prompt_prefills_on_one_attention_dp_rank() -> None:
    # Its 3,000 tokens stay on one rank, in chunks of 4096 / 4 tokens: three forwards instead of one.
    def prefill_ttft(ranks: int) -> float:
        prefill = LinearTiming(chunk=4096, ranks=ranks)
        fleet = FleetSimulation(
            FakeTruth(timing_by_role={Role.PREFILL: prefill}), disaggregated(1, 1), workload(0.2, prompt=3000), seed=9
        )
        fleet.advance(900)
        group = observe(fleet, 800).group(Role.PREFILL)
        assert group is not None and group.ttft is not None
        return group.ttft.p50

    assert prefill_ttft(1) == pytest.approx(0.010 + 3000 * 0.00002, rel=0.02)
    assert prefill_ttft(4) == pytest.approx(3 * 0.010 + 3000 * 0.00002, rel=0.02)


def test_speculative_decoding_yields_several_tokens_per_step() -> None:
    plain = FleetSimulation(FakeTruth(), unified(1), workload(2), seed=8)
    spec = FleetSimulation(
        FakeTruth(default=LinearTiming(accept=2.5)), unified(1, speculative=True), workload(2), seed=8
    )
    for fleet in (plain, spec):
        fleet.advance(600)
    slow, fast = observe(plain, 500).group(Role.UNIFIED), observe(spec, 500).group(Role.UNIFIED)
    assert slow is not None and fast is not None and slow.tpot is not None and fast.tpot is not None
    assert fast.spec_accept_length == pytest.approx(2.5, rel=0.03)
    assert slow.spec_accept_length is None
    assert fast.tpot.p50 == pytest.approx(slow.tpot.p50 / 2.5, rel=0.1)


def test_prefix_cache_hits_are_observed_and_shorten_prefill() -> None:
    cold = FleetSimulation(FakeTruth(), unified(1), workload(3, prompt=4000), seed=9)
    warm = FleetSimulation(FakeTruth(), unified(1), workload(3, prompt=4000, hit=0.7), seed=9)
    for fleet in (cold, warm):
        fleet.advance(600)
    a, b = observe(cold, 500).group(Role.UNIFIED), observe(warm, 500).group(Role.UNIFIED)
    assert a is not None and b is not None and a.ttft is not None and b.ttft is not None
    assert a.cache_hit_rate == 0.0
    assert b.cache_hit_rate == pytest.approx(0.7, abs=0.05)
    assert b.ttft.p50 < a.ttft.p50


def test_canary_takes_its_share_once_ready() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(10), seed=10, startup_s=120)
    fleet.advance(60)
    fleet.apply(StartCanary(unified(1, cap=32), 0.2))
    fleet.advance(100)
    early = observe(fleet, 100)
    assert early.group(Role.UNIFIED, Variant.CANARY) is None  # not ready yet: no traffic, no pod up
    fleet.advance(1000)
    window = observe(fleet, 900)
    stable, canary = window.group(Role.UNIFIED, Variant.STABLE), window.group(Role.UNIFIED, Variant.CANARY)
    assert stable is not None and canary is not None
    share = canary.samples / (stable.samples + canary.samples)
    assert share == pytest.approx(0.2, abs=0.03)


def test_promote_and_rollback() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(10), seed=11, startup_s=60)
    fleet.apply(StartCanary(unified(1, cap=32), 0.3))
    fleet.advance(300)
    fleet.apply(PromoteCanary(unified(3, cap=32)))
    fleet.advance(600)
    live = fleet.live_pods()
    assert len(live) == 3 and all(p.variant is Variant.STABLE and p.engine.timing.batch_cap == 32 for p in live)
    assert fleet.stable_config().roles[0].replicas == 3
    fleet.apply(StartCanary(unified(1, cap=16), 0.5))
    fleet.advance(300)
    fleet.apply(RollbackCanary())
    fleet.advance(300)
    assert fleet.canary_weight == 0.0
    assert all(p.variant is Variant.STABLE for p in fleet.live_pods())
    assert _conserved(fleet)


def test_rolling_update_replaces_pods_after_startup_without_losing_requests() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(8), seed=12, startup_s=200)
    fleet.advance(100)
    fleet.apply(SetBatchCap(Role.UNIFIED, 16))
    fleet.advance(100)
    caps = sorted(p.engine.timing.batch_cap for p in fleet.live_pods())
    assert caps == [64, 64]  # the new pods are still starting
    fleet.advance(300)
    assert sorted(p.engine.timing.batch_cap for p in fleet.live_pods()) == [16, 16]
    assert all(p.state is PodState.GONE for p in fleet.pods if p.engine.timing.batch_cap == 64)
    assert _conserved(fleet)
    assert len(fleet.history) == 2


def test_pd_rolling_update_moves_every_request_to_the_new_revision() -> None:
    truth = FakeTruth(timing_by_role={Role.PREFILL: LinearTiming(transfer_fixed_s=0.2)})
    fleet = FleetSimulation(truth, disaggregated(1, 2), workload(6), seed=17, startup_s=60)
    fleet.advance(120)
    fleet.apply(ReplaceConfig(disaggregated(2, 1, cap=32)))
    fleet.advance(600)
    live = fleet.live_pods()
    assert sorted(p.role.value for p in live) == ["decode", "prefill", "prefill"]
    assert {p.revision.number for p in live} == {2}
    assert all(p.state is PodState.GONE for p in fleet.pods if p.revision.number == 1)
    assert _conserved(fleet)
    decode = observe(fleet, 300).group(Role.DECODE)
    assert decode is not None and decode.samples > 0


def test_pd_decode_pods_scale_down_under_load() -> None:
    fleet = FleetSimulation(FakeTruth(), disaggregated(2, 3), workload(12), seed=18)
    fleet.advance(200)
    fleet.apply(SetReplicas(Role.DECODE, 1))
    fleet.advance(300)
    assert sum(1 for p in fleet.live_pods() if p.role is Role.DECODE) == 1
    assert _conserved(fleet)


def test_scaling_up_waits_for_startup_and_down_drains() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(2), workload(8), seed=13, startup_s=100)
    fleet.apply(SetReplicas(Role.UNIFIED, 4))
    fleet.advance(50)
    assert len(fleet.live_pods()) == 2
    fleet.advance(100)
    assert len(fleet.live_pods()) == 4
    fleet.apply(SetReplicas(Role.UNIFIED, 1))
    assert sum(1 for p in fleet.pods if p.state is PodState.DRAINING) >= 1
    fleet.advance(120)
    assert len(fleet.live_pods()) == 1
    assert _conserved(fleet)


def test_a_configuration_the_truth_cannot_serve_changes_nothing() -> None:
    fleet = FleetSimulation(FakeTruth(refuse_gpu="B200"), unified(2), workload(4), seed=14)
    with pytest.raises(Unavailable):
        fleet.apply(ReplaceConfig(unified(2, gpu="B200")))
    assert len(fleet.revisions) == 1 and len(fleet.history) == 1


def test_round_robin_spreads_requests_evenly() -> None:
    fleet = FleetSimulation(FakeTruth(), unified(4), workload(8), seed=15, router=RouterPolicy.ROUND_ROBIN)
    fleet.advance(600)
    counts = [p.series.requests for p in fleet.pods]
    assert max(counts) - min(counts) <= 0.05 * max(counts) + 2


def test_usage_counts_gpu_time_of_every_pod_that_existed() -> None:
    fleet = FleetSimulation(
        FakeTruth(), replace(unified(2), roles=(replace(unified(2).roles[0]),)), workload(5), seed=16
    )
    fleet.advance(1000)
    usage = fleet.usage(0, 1000)
    assert usage.gpu_seconds == {"H100": pytest.approx(2000.0)}
    cost = usage.cost_per_mtok(2.0)
    assert cost is not None and cost == pytest.approx(2 * 2.0 * 1000 / 3600 / usage.output_tokens * 1e6)
    assert observe_window(fleet, 0, 1000).group(Role.UNIFIED) is not None
