"""What makes two fleets "the same configuration" for tuning: everything but replica counts and batch caps.

Replicas, the batch cap and the P:D ratio are nudged in place; anything else (pool, parallel layout,
number formats, speculative decoding, disaggregation, transfer backend) is a structural change that goes
through a canary, and calibration learned on one structure only partly transfers to another.
"""

from __future__ import annotations

from dataclasses import replace

from frontier_operator.perf.types import Role, RoleDeployment, ServingConfig, WorkerConfig
from frontier_operator.planner.describe import describe_worker


def _bare(worker: WorkerConfig) -> WorkerConfig:
    # The cap and the chunk are tuned in place; mem_fraction_static follows from them.
    return replace(worker, max_running_requests=0, chunked_prefill_size=0, mem_fraction_static=None)


def worker_key(worker: WorkerConfig) -> str:
    """A worker's layout, formats and speculation on its GPU, without its batch cap."""
    return f"{worker.gpu} {describe_worker(_bare(worker))}"


def layout_key(worker: WorkerConfig) -> str:
    """A worker's parallel layout on its GPU — how it splits and schedules work — without formats, speculation or
    caps: what a measured capacity belongs to (`calibration.CapacityEstimate`)."""
    parts = [worker.gpu, f"TP{worker.tp}", f"PP{worker.pp}", f"DPattn{worker.attention_dp}"]
    parts += [f"CP{worker.attention_cp}", f"EP{worker.ep}", f"a2a={worker.moe_a2a_backend.value}"]
    return " ".join(parts)


def structure_key(config: ServingConfig, pool: str | None = None) -> str:
    """A stable text key: equal keys differ at most in replicas, batch caps and chunk sizes.

    Without `pool` it names what sets performance (two pools of one GPU type perform alike); with it, a
    deployable choice (canaries, rejected configurations).
    """
    roles = " | ".join(f"{role.role.value}: {worker_key(role.worker)}" for role in config.roles)
    where = f"{pool} / " if pool is not None else ""
    return f"{where}{config.model} / {roles} / transfer={config.transfer_backend}"


def rejection_key(config: ServingConfig, pool: str, image: str | None = None) -> str:
    """What a rolled-back canary is remembered by: its deployable structure, and its engine image when the
    canary tried a new one (a crashing image must not be canaried again at every cooldown)."""
    key = structure_key(config, pool)
    return f"{key} / image={image}" if image else key


def same_structure(a: ServingConfig, b: ServingConfig) -> bool:
    if [r.role for r in a.roles] != [r.role for r in b.roles] or a.transfer_backend != b.transfer_backend:
        return False
    return all(_bare(x.worker) == _bare(y.worker) for x, y in zip(a.roles, b.roles, strict=True))


def latency_role(config: ServingConfig, metric_is_ttft: bool) -> Role:
    """The role whose work sets a latency: prefill sets TTFT and decode sets TPOT in P/D; unified does both."""
    if not config.disaggregated:
        return Role.UNIFIED
    return Role.PREFILL if metric_is_ttft else Role.DECODE


def with_replicas(config: ServingConfig, role: Role, replicas: int) -> ServingConfig:
    return replace(
        config,
        roles=tuple(replace(r, replicas=replicas) if r.role is role else r for r in config.roles),
    )


# A batch cap large enough not to bind.
UNBOUNDED_CAP = 1 << 16


def with_batch_cap(config: ServingConfig, role: Role, cap: int) -> ServingConfig:
    def capped(deployment: RoleDeployment) -> RoleDeployment:
        if deployment.role is not role:
            return deployment
        return replace(deployment, worker=replace(deployment.worker, max_running_requests=cap))

    return replace(config, roles=tuple(capped(r) for r in config.roles))


def replicas_of(config: ServingConfig, role: Role) -> int:
    deployment = config.role(role)
    return deployment.replicas if deployment is not None else 0


def decoding_role(config: ServingConfig) -> Role:
    """The role that streams tokens (decode in P/D, else unified): its batch cap bounds TPOT."""
    return Role.DECODE if config.disaggregated else Role.UNIFIED
