"""The measured unit of a fleet, its key, and how loaded each unit of a sized fleet is.

A sweep measures the smallest piece of a fleet that behaves like the whole: one replica of an aggregated
fleet (replicas share nothing), and the smallest whole P:D unit of a disaggregated one (2 prefill + 4 decode
workers are two units of 1 + 2; the router spreads load evenly over units). Its key names everything that sets
performance except replica counts and batch caps (a benchmark whose concurrency stays under the cap does not
see the cap), so a measurement applies to every fleet built of that unit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from frontier_operator.perf.types import Prediction, Role, RoleDeployment, ServingConfig, WorkerConfig
from frontier_operator.planner.describe import describe_worker


def _bare(worker: WorkerConfig) -> WorkerConfig:
    return replace(worker, max_running_requests=0, chunked_prefill_size=0, mem_fraction_static=None)


def unit_counts(config: ServingConfig) -> tuple[int, ...]:
    """Workers per role in one measured unit, in the configuration's role order."""
    replicas = [r.replicas for r in config.roles]
    if not config.disaggregated:
        return tuple(1 for _ in replicas)
    divisor = math.gcd(*replicas) if replicas else 1
    return tuple(max(1, r // max(divisor, 1)) for r in replicas)


def units_in(config: ServingConfig) -> int:
    """How many measured units the fleet is made of (the smallest whole number that covers every role)."""
    counts = unit_counts(config)
    return max((math.ceil(r.replicas / c) for r, c in zip(config.roles, counts, strict=True)), default=1)


def measured_unit(config: ServingConfig) -> ServingConfig:
    """The configuration with its replica counts cut to one measured unit."""
    counts = unit_counts(config)
    return replace(config, roles=tuple(replace(r, replicas=c) for r, c in zip(config.roles, counts, strict=True)))


def unit_key(config: ServingConfig) -> str:
    """A stable text key of the measured unit: layouts, formats and speculation per role, and the P:D ratio."""
    counts = unit_counts(config)
    roles = " | ".join(
        f"{r.role.value}×{c}: {r.worker.gpu} {describe_worker(_bare(r.worker))}"
        for r, c in zip(config.roles, counts, strict=True)
    )
    return f"{config.model} / {roles} / transfer={config.transfer_backend}"


def worker_key(worker: WorkerConfig) -> str:
    """A worker's GPU, layout, formats and speculation, without its batch cap."""
    return f"{worker.gpu} {describe_worker(_bare(worker))}"


def group_key(config: ServingConfig) -> str:
    """GPU and weight format of the streaming role: measurements share part of their error within a group."""
    worker = decoding_worker(config)
    return f"{config.model} / {worker.gpu} / {worker.weight_format}"


def decoding_worker(config: ServingConfig) -> WorkerConfig:
    deployment = config.role(Role.DECODE) or config.role(Role.UNIFIED) or config.roles[0]
    return deployment.worker


def decode_workers_per_unit(config: ServingConfig) -> int:
    counts = dict(zip((r.role for r in config.roles), unit_counts(config), strict=True))
    return counts.get(Role.DECODE, counts.get(Role.UNIFIED, 1))


def unit_load(config: ServingConfig, prediction: Prediction) -> float:
    """Requests in flight on each measured unit of the fleet at the prediction's rate."""
    return max(prediction.mean_batch, 0.0) * decode_workers_per_unit(config)


def unit_cap(config: ServingConfig) -> int:
    """Most requests one unit runs at once (its decode workers' batch caps)."""
    return max(1, decoding_worker(config).max_running_requests) * decode_workers_per_unit(config)


def nearest_level(load: float, levels: tuple[int, ...], cap: int) -> int:
    """The ladder's level nearest to `load` in log space, not above the cap (1 when the ladder has none)."""
    allowed = [level for level in levels if level <= cap] or [min(levels, default=1)]
    target = max(load, 1.0)
    return min(allowed, key=lambda level: (abs(math.log(level / target)), level))


def with_decode_cap(config: ServingConfig, cap: int) -> ServingConfig:
    """`config` with its streaming role's batch cap raised to at least `cap` (a knee run measures beyond it)."""
    role = Role.DECODE if config.disaggregated else Role.UNIFIED

    def raised(deployment: RoleDeployment) -> RoleDeployment:
        if deployment.role is not role or deployment.worker.max_running_requests >= cap:
            return deployment
        return replace(deployment, worker=replace(deployment.worker, max_running_requests=cap))

    return replace(config, roles=tuple(raised(r) for r in config.roles))


def deployment_unit(units: Sequence[ServingConfig]) -> ServingConfig:
    """One deployment for several points of one unit: the one with the largest batch cap (a benchmark whose
    concurrency stays under the cap does not see it)."""
    return max(units, key=lambda u: decoding_worker(u).max_running_requests)
