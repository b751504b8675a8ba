"""Six simulated hours of a four-replica fleet on the perturbed model: it runs, keeps up, and we record how fast.

The wall time is reported (`record_property` and stdout), not asserted: this is not a timed test.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from frontier_operator.catalog.models import find_model
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import LengthDistribution, Role, RoleDeployment, ServingConfig, WorkerConfig, Workload
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.observe import observe
from frontier_operator.sim.perturbed import Perturbation, PerturbedModelTruth
from frontier_operator.sim.traffic import TrafficKind, TrafficPattern

SIX_HOURS = 6 * 3600.0


def test_six_simulated_hours_of_four_replicas(record_property: Callable[[str, object], None]) -> None:
    arch = find_model("Qwen3-32B")
    assert arch is not None
    worker = WorkerConfig(
        gpu="H100",
        gpus_per_node=8,
        weight_format="fp8",
        kv_cache_format="bf16",
        tp=2,
        max_running_requests=128,
        chunked_prefill_size=8192,
    )
    config = ServingConfig(model=arch.name, roles=(RoleDeployment(Role.UNIFIED, worker, 4),))
    load = Workload(
        request_rate_per_s=8.0,
        input_tokens=LengthDistribution(2000, 0.8, 16000),
        output_tokens=LengthDistribution(300, 0.8, 4000),
        prefix_cache_hit_rate=0.3,
        kind="chat",
    )
    truth = PerturbedModelTruth(PerformanceModel.default(), arch, Perturbation(seed=1))
    traffic = TrafficPattern(TrafficKind.DIURNAL, period_s=SIX_HOURS, amplitude=0.3)
    fleet = FleetSimulation(truth, config, load, traffic=traffic, seed=1)
    started, started_cpu = time.perf_counter(), time.process_time()
    for _ in range(36):
        fleet.advance(600)
        assert observe(fleet, 600).group(Role.UNIFIED) is not None  # a tuning tick every 10 minutes
    wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
    record_property("wall_seconds", round(wall, 2))
    record_property("cpu_seconds", round(cpu, 2))
    record_property("requests", fleet.completed)
    print(f"\n6 simulated hours, 4 replicas, {fleet.completed} requests: {wall:.1f} s wall, {cpu:.1f} s CPU")
    assert fleet.now == SIX_HOURS
    assert fleet.completed == pytest.approx(8.0 * SIX_HOURS, rel=0.03)
    assert fleet.arrived - fleet.completed < 200
