"""Configuration changes the twin applies at runtime, as the operator would through Kubernetes.

Each is a frozen value; `FleetSimulation.apply` executes it at the simulated now:

* `ReplaceConfig`: a rolling update of one variant — new pods start (ready after the startup delay), and
  each one that becomes ready drains one old pod of its role; when all are ready the old revision drains.
* `SetReplicas`: scale one role of a variant (new pods start; removed pods drain, starting ones first).
* `SetBatchCap`: `--max-running-requests` of one role — a flag change, hence a rolling update.
* `StartCanary` / `SetCanaryWeight` / `PromoteCanary` / `RollbackCanary`: a second revision that takes a
  share of the arriving requests; promotion makes it the stable revision (scaled to the given config,
  the old stable revision draining as the new pods become ready); rollback drains it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from frontier_operator.perf.types import Role, ServingConfig
from frontier_operator.tuning.observation import Variant


@dataclass(frozen=True)
class ReplaceConfig:
    config: ServingConfig
    variant: Variant = Variant.STABLE


@dataclass(frozen=True)
class SetReplicas:
    role: Role
    replicas: int
    variant: Variant = Variant.STABLE


@dataclass(frozen=True)
class SetBatchCap:
    role: Role
    max_running_requests: int
    variant: Variant = Variant.STABLE


@dataclass(frozen=True)
class StartCanary:
    config: ServingConfig
    weight: float


@dataclass(frozen=True)
class SetCanaryWeight:
    weight: float


@dataclass(frozen=True)
class PromoteCanary:
    # The stable fleet the canary becomes (its full replica counts); None keeps the canary's own size.
    config: ServingConfig | None = None


@dataclass(frozen=True)
class RollbackCanary:
    pass


ConfigChange = (
    ReplaceConfig | SetReplicas | SetBatchCap | StartCanary | SetCanaryWeight | PromoteCanary | RollbackCanary
)


def with_replicas(config: ServingConfig, role: Role, replicas: int) -> ServingConfig:
    roles = tuple(replace(d, replicas=replicas) if d.role is role else d for d in config.roles)
    return replace(config, roles=roles)


def with_batch_cap(config: ServingConfig, role: Role, cap: int) -> ServingConfig:
    roles = tuple(
        replace(d, worker=replace(d.worker, max_running_requests=cap)) if d.role is role else d for d in config.roles
    )
    return replace(config, roles=roles)
