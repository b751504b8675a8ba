"""The perturbed-model truth: hidden factors are seeded and stable, CUDA-graph padding makes steps jagged."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import (
    LengthDistribution,
    MoeA2ABackend,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    SpeculativeAlgorithm,
    WorkerConfig,
    Workload,
)
from frontier_operator.sim.cuda_graphs import capture_sizes, graph_max_batch, padded_batch
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.oracle import replica_capacity
from frontier_operator.sim.perturbed import Cliff, Perturbation, PerturbedModelTruth, hidden_factors
from frontier_operator.sim.timing import PrefillMode, Unavailable

_ARCH = find_model("Qwen3-32B")
assert _ARCH is not None
ARCH = _ARCH
WORKER = WorkerConfig(
    gpu="H100",
    gpus_per_node=8,
    weight_format="fp8",
    kv_cache_format="bf16",
    tp=2,
    max_running_requests=128,
    chunked_prefill_size=8192,
)
CONFIG = ServingConfig(model="Qwen3-32B", roles=(RoleDeployment(Role.UNIFIED, WORKER, 2),))
WORKLOAD = Workload(2.0, LengthDistribution(2000, 0.5, 8000), LengthDistribution(300, 0.5, 2000))


@pytest.fixture(scope="module")
def model() -> PerformanceModel:
    return PerformanceModel.default()


def test_capture_sizes_follow_sglang() -> None:
    sizes = capture_sizes(512)
    assert sizes[:7] == (1, 2, 4, 8, 12, 16, 24)
    assert 256 in sizes and 264 not in sizes and 272 in sizes and sizes[-1] == 512
    assert all(b - a == 16 for a, b in zip(sizes[sizes.index(256) :], sizes[sizes.index(256) + 1 :], strict=False))
    # A batch cap that is not a captured size is still captured (the list ends at the maximum).
    assert capture_sizes(100)[-1] == 100 and 96 in capture_sizes(100)
    assert padded_batch(9, sizes) == 12 and padded_batch(12, sizes) == 12 and padded_batch(13, sizes) == 16
    assert padded_batch(600, sizes) is None
    speculative = capture_sizes(48, speculative=True)
    assert speculative[:10] == (1, 2, 3, 4, 5, 6, 7, 8, 10, 12) and speculative[-1] == 48


def test_graph_max_batch_is_capped_by_the_batch_cap() -> None:
    h100 = find_gpu("H100")
    assert h100 is not None
    assert graph_max_batch(h100, WORKER) == 128
    assert graph_max_batch(h100, replace(WORKER, max_running_requests=4096)) == 256  # memory tier, tp < 4


def test_decode_step_is_a_step_function_of_the_batch(model: PerformanceModel) -> None:
    truth = PerturbedModelTruth(model, ARCH, Perturbation.none())
    timing = truth.timing(CONFIG, Role.UNIFIED, WORKLOAD)
    assert timing.prefill_mode is PrefillMode.SHARED_GPU
    # With no KV to read, every batch of one bucket replays the same graph: the same time.
    within = [timing.decode_step_s(b, 0.0, 0.0) for b in (9, 10, 11, 12)]
    assert max(within) - min(within) < 1e-6 * within[0]
    assert timing.decode_step_s(13, 0.0, 0.0) > timing.decode_step_s(12, 0.0, 0.0) * (1 + 1e-4)
    # Padding only ever adds work: a padded batch is never faster than the model at the real batch.
    gpu = find_gpu("H100")
    assert gpu is not None
    for batch in (3, 9, 13, 50, 100):
        assert timing.decode_step_s(batch, 2000.0, 0.0) >= model.decode_step_time(ARCH, gpu, WORKER, batch, 2000.0) * (
            1 - 1e-9
        )


def test_batches_past_the_largest_graph_run_eagerly(model: PerformanceModel) -> None:
    worker = replace(WORKER, max_running_requests=512)
    config = replace(CONFIG, roles=(RoleDeployment(Role.UNIFIED, worker, 1),))
    eager = PerturbedModelTruth(model, ARCH, replace(Perturbation.none(), eager_penalty=1.2))
    plain = PerturbedModelTruth(model, ARCH, Perturbation.none())
    fast, slow = plain.timing(config, Role.UNIFIED, WORKLOAD), eager.timing(config, Role.UNIFIED, WORKLOAD)
    assert fast.graph_sizes[-1] == 256  # H100 tier for TP < 4, below the batch cap
    assert slow.decode_step_s(256, 1000, 0) == pytest.approx(fast.decode_step_s(256, 1000, 0))
    assert slow.decode_step_s(300, 1000, 0) == pytest.approx(1.2 * fast.decode_step_s(300, 1000, 0))


def test_hidden_factors_are_fixed_by_the_seed_and_differ_between_seeds() -> None:
    first = hidden_factors(Perturbation(seed=3), WORKER, Role.UNIFIED, "chat")
    again = hidden_factors(Perturbation(seed=3), WORKER, Role.UNIFIED, "chat")
    other = hidden_factors(Perturbation(seed=4), WORKER, Role.UNIFIED, "chat")
    assert first == again
    assert first.decode != other.decode


def test_some_layouts_hide_cliffs_and_some_formats_are_faster_than_predicted() -> None:
    perturbation = Perturbation(seed=11)
    layouts = [
        replace(WORKER, tp=tp, weight_format=fmt, gpu=gpu)
        for tp in (1, 2, 4, 8)
        for fmt in ("fp8", "bf16", "nvfp4")
        for gpu in ("H100", "H200", "B200", "GB200")
    ]
    factors = [hidden_factors(perturbation, w, Role.UNIFIED, "chat") for w in layouts]
    cliffs = sum(1 for f in factors if any("cliff" in note for note in f.notes))
    assert 2 <= cliffs <= 18  # about 15 % of 48
    assert any(f.decode < 0.9 for f in factors) and any(f.decode > 1.1 for f in factors)


def test_a_pinned_cliff_slows_exactly_the_matching_configurations(model: PerformanceModel) -> None:
    cliff = Cliff(factor=1.25, reason="TP2 all-reduce does not overlap", tp=2)
    truth = PerturbedModelTruth(model, ARCH, replace(Perturbation.none(), cliffs=(cliff,)))
    plain = PerturbedModelTruth(model, ARCH, Perturbation.none())
    slow = truth.timing(CONFIG, Role.UNIFIED, WORKLOAD).decode_step_s(32, 2000, 0)
    assert slow == pytest.approx(1.25 * plain.timing(CONFIG, Role.UNIFIED, WORKLOAD).decode_step_s(32, 2000, 0))
    other = replace(CONFIG, roles=(RoleDeployment(Role.UNIFIED, replace(WORKER, tp=4), 1),))
    assert truth.timing(other, Role.UNIFIED, WORKLOAD).decode_step_s(32, 2000, 0) == pytest.approx(
        plain.timing(other, Role.UNIFIED, WORKLOAD).decode_step_s(32, 2000, 0)
    )
    assert "TP2 all-reduce" in truth.describe(CONFIG)


def test_prefill_matches_the_model_closely(model: PerformanceModel) -> None:
    timing = PerturbedModelTruth(model, ARCH, Perturbation.none()).timing(CONFIG, Role.UNIFIED, WORKLOAD)
    gpu = find_gpu("H100")
    assert gpu is not None
    for new, prefix in ((100, 0), (1500, 0), (4096, 3000), (8000, 20000)):
        expected = model.prefill_time(ARCH, gpu, WORKER, new + prefix, cached_tokens=prefix)
        assert timing.prefill_s(new, prefix, 0) == pytest.approx(expected, rel=0.01)
    # Two 4k prompts in one forward attend to 4k tokens each: the model's forward of two, cheaper than one 8k prompt.
    pair = timing.prefill_s(8000, 0, 0, sequences=2)
    assert pair == pytest.approx(model.prefill_forward_time(ARCH, gpu, WORKER, sequences=2, new_tokens=4000), rel=0.01)
    assert pair < timing.prefill_s(8000, 0, 0)


def test_an_attention_dp_prefill_replica_serves_what_its_ranks_can(model: PerformanceModel) -> None:
    # Eight attention-DP ranks prefill eight prompts per forward; a twin that ran one at a time served Kimi-K2.5's
    # prefill at a fifth of this bound.
    arch = find_model("Kimi-K2.5")
    assert arch is not None
    worker = WorkerConfig(
        gpu="H200",
        gpus_per_node=8,
        weight_format="nvfp4",
        kv_cache_format="bf16",
        tp=8,
        attention_dp=8,
        ep=8,
        moe_a2a_backend=MoeA2ABackend.DEEPEP,
        max_running_requests=2048,
        chunked_prefill_size=8192,
    )
    config = ServingConfig(
        model=arch.name,
        roles=(RoleDeployment(Role.PREFILL, worker, 1), RoleDeployment(Role.DECODE, worker, 4)),
        transfer_backend="nixl",
    )
    truth = PerturbedModelTruth(model, arch, Perturbation.none())
    bound, _ = replica_capacity(truth, config, WORKLOAD)
    fleet = FleetSimulation(truth, config, replace(WORKLOAD, request_rate_per_s=1.5 * bound), seed=3)
    fleet.advance(120)
    completed = fleet.completed
    fleet.advance(300)
    assert (fleet.completed - completed) / 300 == pytest.approx(bound, rel=0.2)


def test_unknown_gpu_and_missing_role_are_unavailable(model: PerformanceModel) -> None:
    truth = PerturbedModelTruth(model, ARCH)
    with pytest.raises(Unavailable):
        truth.timing(CONFIG, Role.DECODE, WORKLOAD)
    odd = replace(CONFIG, roles=(RoleDeployment(Role.UNIFIED, replace(WORKER, gpu="TPU-v5"), 1),))
    with pytest.raises(Unavailable, match="catalog"):
        truth.timing(odd, Role.UNIFIED, WORKLOAD)


def test_speculative_acceptance_is_perturbed_within_its_bounds(model: PerformanceModel) -> None:
    spec = Speculative(SpeculativeAlgorithm.EAGLE3, 3, 1, 4, "draft")
    worker = replace(WORKER, speculative=spec, max_running_requests=48)
    config = replace(CONFIG, roles=(RoleDeployment(Role.UNIFIED, worker, 1),))
    accepts = {
        PerturbedModelTruth(model, ARCH, Perturbation(seed=s)).timing(config, Role.UNIFIED, WORKLOAD).accept_length
        for s in range(6)
    }
    assert len(accepts) > 1
    assert all(1.0 <= a <= 4.0 for a in accepts)
