"""The inputs of a decision besides the observation: what runs (`AppliedState`) and what the operator
knows about the model (`ModelContext`). Both are plain frozen data, built by the caller from the
Kubernetes objects and the target's status (or by the simulator from its twin)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from frontier_operator.perf.types import Role, ServingConfig, Workload
from frontier_operator.planner.types import GpuPool, Infeasible, Plan, PlanRequest, Predictor
from frontier_operator.tuning.actions import CanaryMotive
from frontier_operator.tuning.calibration import CalibrationState


class ChangeKind(StrEnum):
    SCALE = "ScaleReplicas"
    BATCH_CAP = "SetBatchCap"
    PD_RATIO = "SetPdRatio"
    CANARY_START = "StartCanary"
    PROMOTE = "PromoteCanary"
    ROLLBACK = "RollbackCanary"


# Changes that replace what the stable pods run (a canary's start or rollback leaves them as they were).
FLEET_CHANGES = frozenset({ChangeKind.SCALE, ChangeKind.BATCH_CAP, ChangeKind.PD_RATIO, ChangeKind.PROMOTE})


@dataclass(frozen=True)
class ChangeRecord:
    """One applied change, from the target's history: what the cooldown and the change budget count."""

    at: float
    kind: ChangeKind
    role: Role | None = None
    # +1 for more replicas or a larger cap, −1 for fewer, 0 otherwise.
    direction: int = 0
    # Replicas (or cap) before and after, and the stable request rate when the change was made.
    before: int | None = None
    after: int | None = None
    request_rate_per_s: float | None = None


@dataclass(frozen=True)
class RoleReadiness:
    role: Role
    desired: int
    ready: int


@dataclass(frozen=True)
class CanaryState:
    revision: str
    # The full fleet the canary stands for, and what is deployed of it (replicas scaled to the share).
    config: ServingConfig
    deployed: ServingConfig
    pool: str
    share: float
    motive: CanaryMotive
    started_at: float
    # When every canary pod became ready (None until then).
    ready_at: float | None = None
    crash_looping: bool = False
    image: str | None = None


@dataclass(frozen=True)
class RejectedConfig:
    """A configuration whose canary was rolled back (`structure.structure_key` with its pool)."""

    key: str
    at: float
    # The fleet's request rate when the rollback was for its full fleet's projection at that traffic (None:
    # any other cause): under a lighter load it is tried again before the day is out (`retry_rejected_below`).
    at_rate_per_s: float | None = None


@dataclass(frozen=True)
class AppliedState:
    config: ServingConfig
    pool: str
    revision: str
    image: str
    readiness: tuple[RoleReadiness, ...] = ()
    canary: CanaryState | None = None
    history: tuple[ChangeRecord, ...] = ()
    rejected: tuple[RejectedConfig, ...] = ()
    last_exploration_at: float | None = None

    def pending(self) -> tuple[RoleReadiness, ...]:
        """Roles with fewer ready replicas than desired: a previous step has not finished."""
        return tuple(r for r in self.readiness if r.ready < r.desired)

    @property
    def fleet_changed_at(self) -> float | None:
        """When the stable pods last started to run something else (None: not since the loop began)."""
        return max((r.at for r in self.history if r.kind in FLEET_CHANGES), default=None)


@dataclass(frozen=True)
class ModelContext:
    """The performance model and what the loop learnt: calibration, the plan in force and its workload."""

    request: PlanRequest
    predictor: Predictor
    calibration: CalibrationState
    plan: Plan | Infeasible | None = None
    # The workload `plan` was made for (the spec's, or an observed one after a re-plan).
    plan_workload: Workload | None = None
    # The engine image the spec asks for; a different one than the applied image is rolled out by canary.
    image: str | None = None
    # Router pods of a revision that runs the router (spec.serving.router.replicas): with the engine leader of one
    # that does not, they are the target Service's endpoints, which set a canary's share (`render.traffic`).
    router_replicas: int = 1
    # A weighted HTTPRoute splits traffic (spec.serving.traffic.splitting: http-route): a canary gets the share
    # the policy asks for, not the Service's.
    weighted_route: bool = False
    # Why the Gateway or mesh refuses that route (its RouteAccepted=False message); None while it is not refused.
    route_refused: str | None = None

    def pool(self, name: str) -> GpuPool | None:
        return next((p for p in self.request.pools if p.name == name), None)
