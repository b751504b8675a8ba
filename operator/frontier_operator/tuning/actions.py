"""What the tuning loop can decide, and how the mode gates it.

A `Decision` is one action with the sentence that explains it. Actions are frozen dataclasses forming a
closed union, so a caller's `match` over them is checked by mypy. `gate` turns a decision and the mode
(observe / recommend / auto) into what to apply now and what to propose for approval.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from frontier_operator.api.spec import TuningMode
from frontier_operator.perf.types import Role, ServingConfig, Workload
from frontier_operator.planner.types import Infeasible, Plan, SloBound
from frontier_operator.tuning.structure import replicas_of, with_batch_cap, with_replicas


class Hold(StrEnum):
    """Why nothing is done (CamelCase: used as Event and condition reasons)."""

    PAUSED = "Paused"
    METRICS_UNAVAILABLE = "MetricsUnavailable"
    STALE_METRICS = "StaleMetrics"
    INSUFFICIENT_DATA = "InsufficientData"
    MISSING_METRIC = "MissingMetric"
    STEP_PENDING = "StepPending"
    COOLDOWN = "Cooldown"
    CHANGE_BUDGET = "ChangeBudget"
    HYSTERESIS = "WithinHysteresis"
    # A violation the calibrated model does not confirm, absorbed by the SLO's error budget (`tuning.budget`).
    ERROR_BUDGET = "WithinErrorBudget"
    STABILIZING = "ScaleDownStabilization"
    GPU_BUDGET = "AtGpuBudget"
    NO_REMEDY = "NoRemedy"
    SLO_MET = "SloMetNoCheaperOption"
    # Rising traffic would outrun the fleet in force while a voluntary canary holds every other step.
    RISING_TRAFFIC = "RisingTraffic"
    CANARY_STARTING = "CanaryStarting"
    CANARY_COMPARING = "CanaryComparing"
    # `frontier pin` keeps the engine configuration: only replica counts may change.
    PINNED = "Pinned"


class CanaryMotive(StrEnum):
    CHEAPER = "cheaper"
    EXPLORATION = "exploration"
    IMAGE = "image"
    # The stable fleet meets the SLO without the capacity headroom the planner sizes for; the plan in force has
    # it at no more cost.
    HEADROOM = "headroom"
    # The SLO is violated and no in-place step within the GPU budget is projected to clear it.
    REMEDY = "remedy"


class RollbackCause(StrEnum):
    CRASH_LOOPING = "CrashLooping"
    NOT_READY = "NotReady"
    NO_DATA = "NoData"
    SLO_BREACH = "SloBreach"
    NOT_CHEAPER = "NotCheaper"
    # It receives far more of the traffic than it was sized for (a route no Gateway or mesh applies).
    TRAFFIC_SPLIT = "TrafficSplit"
    # `frontier rollback` (the frontier.dev/rollback annotation).
    MANUAL = "Manual"


class ReplanCause(StrEnum):
    NO_PLAN = "NoPlan"
    MODEL_DRIFT = "ModelDrift"
    WORKLOAD_SHIFT = "WorkloadShift"


@dataclass(frozen=True)
class NoAction:
    hold: Hold


@dataclass(frozen=True)
class ScaleReplicas:
    role: Role
    from_replicas: int
    to_replicas: int


@dataclass(frozen=True)
class SetBatchCap:
    """`--max-running-requests` of every replica of `role` (a rolling restart)."""

    role: Role
    from_cap: int
    to_cap: int


@dataclass(frozen=True)
class SetPdRatio:
    """Move capacity between prefill and decode replicas."""

    prefill_from: int
    prefill_to: int
    decode_from: int
    decode_to: int


@dataclass(frozen=True)
class StartCanary:
    """Deploy `config` as a second revision: `canary` (its replicas scaled to the share) takes `share` of the
    traffic until it is promoted (then `config` replaces the stable fleet) or rolled back."""

    config: ServingConfig
    canary: ServingConfig
    pool: str
    share: float
    motive: CanaryMotive
    # Predicted $/Mtok of `config` and of the stable fleet at the observed workload (None: unpredictable).
    predicted_cost_per_mtok: float | None
    stable_cost_per_mtok: float | None
    # A new engine image (motive IMAGE); None keeps the stable one.
    image: str | None = None

    @property
    def exploration(self) -> bool:
        return self.motive is CanaryMotive.EXPLORATION


@dataclass(frozen=True)
class PromoteCanary:
    revision: str


@dataclass(frozen=True)
class RollbackCanary:
    revision: str
    cause: RollbackCause
    # The fleet's request rate its full fleet was projected to fail at (None: rolled back for another reason).
    at_rate_per_s: float | None = None


@dataclass(frozen=True)
class Replan:
    """A new plan with the corrected model and the effective workload; the fleet is untouched (status only).

    The caller stores the plan and calls `calibration.rebase`; later decisions move the fleet toward it.
    """

    result: Plan | Infeasible
    workload: Workload
    confidence: float
    cause: ReplanCause


Action = NoAction | ScaleReplicas | SetBatchCap | SetPdRatio | StartCanary | PromoteCanary | RollbackCanary | Replan


@dataclass(frozen=True)
class SloStanding:
    """One SLO bound against the window's observed value (None: no data)."""

    bound: SloBound
    observed_s: float | None

    @property
    def ratio(self) -> float | None:
        return None if self.observed_s is None else self.observed_s / self.bound.limit_s

    @property
    def violated(self) -> bool:
        return self.observed_s is not None and self.observed_s > self.bound.limit_s

    def slack(self, band: float) -> bool:
        """At least `band` (relative) below the limit."""
        return self.observed_s is not None and self.observed_s <= self.bound.limit_s * (1.0 - band)

    def describe(self) -> str:
        if self.observed_s is None:
            return f"{self.bound.label} no data"
        return f"{self.bound.label} {format_seconds(self.observed_s)} of {format_seconds(self.bound.limit_s)}"


def format_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.4g} ms" if seconds < 1 else f"{seconds:.3g} s"


@dataclass(frozen=True)
class Decision:
    action: Action
    reason: str
    at: float
    # The stable fleet's SLO standing in the window the decision looked at (empty without data).
    standing: tuple[SloStanding, ...] = ()

    @property
    def changes_fleet(self) -> bool:
        """True for actions that change running pods (what the change budget and the cooldown count)."""
        return not isinstance(self.action, NoAction | Replan)

    @property
    def kind(self) -> str:
        return type(self.action).__name__


def next_config(config: ServingConfig, action: Action) -> ServingConfig | None:
    """The stable fleet after an in-place action; None for actions that do not reshape it in place."""
    if isinstance(action, ScaleReplicas):
        return with_replicas(config, action.role, action.to_replicas)
    if isinstance(action, SetBatchCap):
        return with_batch_cap(config, action.role, action.to_cap)
    if isinstance(action, SetPdRatio):
        shifted = with_replicas(config, Role.PREFILL, action.prefill_to)
        return with_replicas(shifted, Role.DECODE, action.decode_to)
    return None


def describe_action(action: Action) -> str:
    if isinstance(action, NoAction):
        return f"no action ({action.hold.value})"
    if isinstance(action, ScaleReplicas):
        return f"scale {action.role.value} replicas {action.from_replicas} → {action.to_replicas}"
    if isinstance(action, SetBatchCap):
        return f"set {action.role.value} batch cap {action.from_cap} → {action.to_cap}"
    if isinstance(action, SetPdRatio):
        return f"set P:D {action.prefill_from}:{action.decode_from} → {action.prefill_to}:{action.decode_to} replicas"
    if isinstance(action, StartCanary):
        article = "an" if action.motive.value[0] in "aeiou" else "a"
        return f"start {article} {action.motive.value} canary at {action.share:.0%} of traffic"
    if isinstance(action, PromoteCanary):
        return f"promote canary {action.revision}"
    if isinstance(action, RollbackCanary):
        return f"roll back canary {action.revision} ({action.cause.value})"
    return f"re-plan ({action.cause.value})"


# ------------------------------------------------------------------------------------------------ gate


@dataclass(frozen=True)
class Gated:
    """What to apply now, and what to propose (status + Event; `approvable` in recommend mode)."""

    apply: Action | None
    propose: Action | None
    approvable: bool = False


def gate(decision: Decision, mode: TuningMode, approved: bool) -> Gated:
    """Apply according to the mode.

    * Nothing to do → nothing either way.
    * A re-plan only rewrites status, so every mode applies it.
    * observe: never touches the fleet; the action is proposed for information only.
    * recommend: applied once approved. Rolling back a canary needs no approval: the approval of the
      canary covered its automatic verdict, and rolling back restores the approved stable fleet.
    * auto: applied.
    """
    action = decision.action
    if isinstance(action, NoAction):
        return Gated(None, None)
    if isinstance(action, Replan):
        return Gated(action, None)
    if mode is TuningMode.OBSERVE:
        return Gated(None, action)
    if mode is TuningMode.RECOMMEND and not approved and not isinstance(action, RollbackCanary):
        return Gated(None, action, approvable=True)
    return Gated(action, None)


def replicas_step(config: ServingConfig, role: Role, to: int) -> ScaleReplicas:
    return ScaleReplicas(role, replicas_of(config, role), to)
