"""The digital twin of an SGLang fleet: replicas serving a request stream on a simulated clock.

`FleetSimulation` is an event-driven simulation. Its clock only moves when `advance(seconds)` or `run_until(t)`
is called, and it jumps from event to event (an arrival, the end of one engine's iteration, the end of a KV
transfer, a pod becoming ready, a gauge sample), so six simulated hours take seconds of wall time and the
same seed gives the same run.

Pieces:

* revisions: each `ServingConfig` applied becomes a revision (variant stable or canary) with one pod per
  replica and role; pods start (ready after `startup_s`), serve, drain (finish what they hold, take nothing
  new) and go;
* the router: a request goes to the canary with probability equal to the canary weight (when the canary has a
  ready pod), else to the stable variant; within a variant to a revision in proportion to its ready pods,
  then to the least-loaded (or next, round-robin) ready pod of the entry role (unified, or prefill for P/D);
  with no ready pod anywhere the request waits at the router;
* P/D: a prefilled request's KV moves to the least-loaded decode pod of its revision after the truth's
  transfer time (which shows in the TTFT the client sees);
* engines: `sim.engine` (continuous batching, batch cap, KV limit, chunked prefill, speculative acceptance,
  CUDA-graph padding through the truth's step times);
* records: per-pod cumulative SGLang series (`sim.metrics`, for the exporter) and per (role, variant) ledgers
  (`sim.records`, for `observe`).
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum

from frontier_operator.perf.types import Role, ServingConfig, Workload
from frontier_operator.sim.changes import (
    ConfigChange,
    PromoteCanary,
    ReplaceConfig,
    RollbackCanary,
    SetBatchCap,
    SetCanaryWeight,
    SetReplicas,
    StartCanary,
    with_batch_cap,
    with_replicas,
)
from frontier_operator.sim.engine import Engine, SimRequest, _lognormal
from frontier_operator.sim.metrics import PodSeries
from frontier_operator.sim.observe import observe_window
from frontier_operator.sim.records import ITL_TIME_BIN_S, Completion, GaugeSample, GroupLedger, Ledger
from frontier_operator.sim.timing import PrefillMode, ReplicaTiming, Truth, Unavailable
from frontier_operator.sim.traffic import OpenLoopSource, RequestSource, TrafficPattern
from frontier_operator.tuning.observation import Observation, Variant

# Time from pod creation to serving. No single documented figure: the RBG example's liveness initialDelay is
# 300 s and large models load for longer (sglang-0.5.23.md §8.5); 300 s is the default, callers may change it.
DEFAULT_STARTUP_S = 300.0
# Spread of one KV transfer around the truth's mean (RDMA contention).
TRANSFER_NOISE_CV = 0.2
# Generation throughput gauge: tokens over the last window of this length.
GEN_THROUGHPUT_WINDOW_S = 10.0


class RouterPolicy(StrEnum):
    LEAST_LOAD = "least-load"
    ROUND_ROBIN = "round-robin"


class PodState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"
    GONE = "gone"


class _Event(IntEnum):
    # Order among simultaneous events: pods become ready before traffic arrives; samples see the result.
    READY = 0
    TRANSFER = 1
    ENGINE = 2
    ARRIVAL = 3
    SAMPLE = 4


@dataclass(eq=False)
class Revision:
    number: int
    variant: Variant
    config: ServingConfig
    timings: dict[Role, ReplicaTiming]
    pods: list[Pod] = field(default_factory=list)
    in_flight: int = 0
    retired: bool = False
    # Revisions this one replaces: each of its pods that becomes ready drains one of theirs.
    replaces: list[Revision] = field(default_factory=list)
    handoffs: deque[SimRequest] = field(default_factory=deque)
    # Ready pods of the entry role, cached between pod state changes (the router asks on every arrival).
    _ready_entry: list[Pod] | None = None
    disaggregated: bool = field(init=False)

    def __post_init__(self) -> None:
        self.disaggregated = self.config.disaggregated

    @property
    def label(self) -> str:
        return f"r{self.number}"

    @property
    def entry_role(self) -> Role:
        return Role.PREFILL if self.disaggregated else Role.UNIFIED

    def ready_entry(self) -> list[Pod]:
        if self._ready_entry is None:
            self._ready_entry = self.pods_of(self.entry_role, PodState.READY)
        return self._ready_entry

    def changed(self) -> None:
        self._ready_entry = None

    def pods_of(self, role: Role, *states: PodState) -> list[Pod]:
        return [p for p in self.pods if p.role is role and (not states or p.state in states)]

    def serving(self) -> bool:
        if self.retired or not self.ready_entry():
            return False
        return not self.disaggregated or any(
            p.role is Role.DECODE and p.state in (PodState.READY, PodState.DRAINING) for p in self.pods
        )


@dataclass(eq=False)
class Pod:
    index: int
    name: str
    role: Role
    revision: Revision
    engine: Engine
    gpu: str
    gpus: int
    created: float
    ready_at: float
    state: PodState
    gone_at: float = math.inf
    series: PodSeries = field(default_factory=PodSeries)
    pushed_version: int = -1
    gen_mark: tuple[float, float] = (0.0, 0.0)
    gen_throughput: float = 0.0

    @property
    def variant(self) -> Variant:
        return self.revision.variant

    @property
    def alive(self) -> bool:
        return self.state in (PodState.READY, PodState.DRAINING)


@dataclass(frozen=True)
class Usage:
    """GPU time held and tokens served over a window (for $/Mtok)."""

    gpu_seconds: Mapping[str, float]
    output_tokens: float
    requests: int

    def cost_per_mtok(self, price_per_gpu_hour: Mapping[str, float] | float) -> float | None:
        if self.output_tokens <= 0:
            return None
        dollars = 0.0
        for gpu, seconds in self.gpu_seconds.items():
            price = price_per_gpu_hour if isinstance(price_per_gpu_hour, float | int) else price_per_gpu_hour[gpu]
            dollars += seconds / 3600.0 * float(price)
        return dollars / self.output_tokens * 1e6


class FleetSimulation:
    """A simulated SGLang fleet; see the module docstring. Not thread-safe: drive it from one thread."""

    def __init__(
        self,
        truth: Truth,
        config: ServingConfig,
        workload: Workload,
        *,
        source: RequestSource | None = None,
        traffic: TrafficPattern | None = None,
        seed: int = 0,
        router: RouterPolicy = RouterPolicy.LEAST_LOAD,
        startup_s: float = DEFAULT_STARTUP_S,
        sample_every_s: float = 1.0,
        target: str = "twin",
        namespace: str = "default",
        model_name: str | None = None,
        start_ready: bool = True,
        keep_requests: bool = False,
    ) -> None:
        self.truth = truth
        self.workload = workload
        self.seed = seed
        self.router = router
        self.startup_s = startup_s
        self.sample_every_s = sample_every_s
        self.target = target
        self.namespace = namespace
        self.model_name = model_name or config.model
        self.now = 0.0
        self.source: RequestSource = source or OpenLoopSource(workload, traffic, seed=seed)
        self.ledger = Ledger()
        self.revisions: list[Revision] = []
        self.pods: list[Pod] = []
        self.canary_weight = 0.0
        self.history: list[tuple[float, ConfigChange | None, str]] = []
        self.completed = 0
        self.arrived = 0
        # Finished requests in finishing order, when asked for (the benchmark client needs each request).
        self.finished: list[SimRequest] | None = [] if keep_requests else None
        self._events: list[tuple[float, int, int, object, int]] = []
        self._seq = 0
        self._arrival_version = 0
        self._arrival_at = math.inf
        self._held: deque[SimRequest] = deque()
        self._router_rng = random.Random(f"router/{seed}")
        self._transfer_rng = random.Random(f"transfer/{seed}")
        self._round_robin = 0
        self._next_rid = 0
        self._revision_numbers = 0
        revision = self._new_revision(config, Variant.STABLE)
        for deployment in config.roles:
            for _ in range(deployment.replicas):
                self._new_pod(revision, deployment.role, ready=start_ready)
        self.history.append((0.0, None, f"start {self.describe_revision(revision)}"))
        self._push_arrival()
        if sample_every_s > 0:
            self._push(sample_every_s, _Event.SAMPLE, None)

    # ------------------------------------------------------------------------------------------- clock

    def advance(self, seconds: float) -> None:
        """Run the simulation for `seconds` of simulated time."""
        self.run_until(self.now + seconds)

    def run_until(self, until: float) -> None:
        events = self._events
        while events and events[0][0] <= until:
            at, kind, _, payload, version = heapq.heappop(events)
            self.now = at
            if kind == _Event.ENGINE:
                pod = payload
                assert isinstance(pod, Pod)
                if version == pod.engine.version and pod.state is not PodState.GONE:
                    pod.engine.fire(at)
                    self._after_engine(pod)
            elif kind == _Event.ARRIVAL:
                if version == self._arrival_version:
                    self._arrive()
            elif kind == _Event.TRANSFER:
                assert isinstance(payload, SimRequest)
                self._hand_over(payload)
            elif kind == _Event.READY:
                assert isinstance(payload, Pod)
                self._ready(payload)
            else:
                self._sample()
                self._push(at + self.sample_every_s, _Event.SAMPLE, None)
        self.now = max(self.now, until)

    def _push(self, at: float, kind: _Event, payload: object, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._events, (at, int(kind), self._seq, payload, version))

    def _after_engine(self, pod: Pod) -> None:
        engine = pod.engine
        if engine.version != pod.pushed_version and math.isfinite(engine.next_time):
            pod.pushed_version = engine.version
            self._push(engine.next_time, _Event.ENGINE, pod, engine.version)
        if pod.state is PodState.DRAINING:
            self._maybe_gone(pod)

    # -------------------------------------------------------------------------------------- revisions

    def _timings(self, config: ServingConfig) -> dict[Role, ReplicaTiming]:
        return {d.role: self.truth.timing(config, d.role, self.workload) for d in config.roles}

    def _new_revision(self, config: ServingConfig, variant: Variant) -> Revision:
        timings = self._timings(config)  # raises Unavailable before anything changes
        self._revision_numbers += 1
        revision = Revision(self._revision_numbers, variant, config, timings)
        self.revisions.append(revision)
        return revision

    def _load_function(self, revision: Revision, role: Role) -> Callable[[Engine], float]:
        timing = revision.timings[role]
        if timing.prefill_mode is PrefillMode.LOAD_INDEXED and revision.config.disaggregated:
            # A measured P/D unit was benchmarked as a whole: index by requests in flight per unit.
            share = timing.unit_share

            def per_unit(engine: Engine) -> float:
                alive = sum(1 for p in revision.pods if p.role is role and p.state is not PodState.GONE)
                return revision.in_flight / max(1.0, alive * share)

            return per_unit

        def own(engine: Engine) -> float:
            return float(engine.admitted)

        return own

    def _new_pod(self, revision: Revision, role: Role, *, ready: bool) -> Pod:
        index = len(self.pods)
        timing = revision.timings[role]
        deployment = revision.config.role(role)
        assert deployment is not None
        load = self._load_function(revision, role)
        engine = Engine(
            index=index,
            role=role,
            timing=timing,
            rng=random.Random(f"engine/{self.seed}/{index}"),
            sink=self,
            load=load,
        )
        ordinal = sum(1 for p in revision.pods if p.role is role)
        pod = Pod(
            index=index,
            name=f"{self.target}-{revision.label}-{role.value}-{ordinal}",
            role=role,
            revision=revision,
            engine=engine,
            gpu=deployment.worker.gpu,
            gpus=deployment.worker.gpus,
            created=self.now,
            ready_at=self.now if ready else self.now + self.startup_s,
            state=PodState.READY if ready else PodState.STARTING,
        )
        revision.pods.append(pod)
        revision.changed()
        self.pods.append(pod)
        if not ready:
            self._push(pod.ready_at, _Event.READY, pod)
        return pod

    def _ready(self, pod: Pod) -> None:
        if pod.state is not PodState.STARTING:
            return
        pod.state = PodState.READY
        revision = pod.revision
        revision.changed()
        # Rolling update: a new pod that is ready retires one old pod of its role.
        for old in revision.replaces:
            victims = old.pods_of(pod.role, PodState.READY, PodState.STARTING)
            if victims:
                self._drain(min(victims, key=lambda p: (p.engine.in_flight, -p.index)))
                break
        if not revision.pods_of(pod.role, PodState.STARTING) and not any(
            p.state is PodState.STARTING for p in revision.pods
        ):
            for old in revision.replaces:
                self._retire(old)
            revision.replaces.clear()
        self._flush_held()
        self._flush_handoffs(revision)

    def _drain(self, pod: Pod) -> None:
        pod.revision.changed()
        if pod.state is PodState.STARTING:
            pod.state = PodState.GONE
            pod.gone_at = self.now
            return
        if pod.state is PodState.READY:
            pod.state = PodState.DRAINING
        self._maybe_gone(pod)

    def _maybe_gone(self, pod: Pod) -> None:
        if pod.state is not PodState.DRAINING or pod.engine.busy:
            return
        revision = pod.revision
        last_decode = (
            pod.role is Role.DECODE and revision.disaggregated and not revision.pods_of(Role.DECODE, PodState.READY)
        )
        # The last decode pods of a revision stay while its prefill pods may still hand requests over.
        if last_decode and (revision.handoffs or revision.in_flight > 0):
            return
        pod.state = PodState.GONE
        pod.gone_at = self.now
        revision.changed()

    def _retire(self, revision: Revision) -> None:
        revision.retired = True
        for pod in revision.pods:
            self._drain(pod)

    def _serving_revisions(self, variant: Variant) -> list[Revision]:
        return [r for r in self.revisions if r.variant is variant and r.serving()]

    def _newest(self, variant: Variant) -> Revision | None:
        live = [r for r in self.revisions if r.variant is variant and not r.retired]
        return live[-1] if live else None

    # ------------------------------------------------------------------------------------------ changes

    def apply(self, change: ConfigChange) -> None:
        """Apply a configuration change now; raises `Unavailable` (and changes nothing) if the truth cannot
        serve the new configuration."""
        if isinstance(change, ReplaceConfig):
            self._rolling(change.config, change.variant)
        elif isinstance(change, SetBatchCap):
            current = self._newest(change.variant)
            if current is None:
                raise Unavailable(f"there is no {change.variant.value} revision")
            self._rolling(with_batch_cap(current.config, change.role, change.max_running_requests), change.variant)
        elif isinstance(change, SetReplicas):
            self._scale(change)
        elif isinstance(change, StartCanary):
            if self._newest(Variant.CANARY) is not None:
                self._rolling(change.config, Variant.CANARY)
            else:
                revision = self._new_revision(change.config, Variant.CANARY)
                for deployment in change.config.roles:
                    for _ in range(deployment.replicas):
                        self._new_pod(revision, deployment.role, ready=False)
            self.canary_weight = min(max(change.weight, 0.0), 1.0)
        elif isinstance(change, SetCanaryWeight):
            self.canary_weight = min(max(change.weight, 0.0), 1.0)
        elif isinstance(change, PromoteCanary):
            self._promote(change)
        elif isinstance(change, RollbackCanary):
            for revision in self.revisions:
                if revision.variant is Variant.CANARY and not revision.retired:
                    self._retire(revision)
            self.canary_weight = 0.0
        self.history.append((self.now, change, _describe_change(change)))

    def _rolling(self, config: ServingConfig, variant: Variant) -> None:
        old = [r for r in self.revisions if r.variant is variant and not r.retired]
        revision = self._new_revision(config, variant)
        revision.replaces = old
        for deployment in config.roles:
            for _ in range(deployment.replicas):
                self._new_pod(revision, deployment.role, ready=False)

    def _scale(self, change: SetReplicas) -> None:
        revision = self._newest(change.variant)
        if revision is None:
            raise Unavailable(f"there is no {change.variant.value} revision")
        if revision.config.role(change.role) is None:
            raise Unavailable(f"the {change.variant.value} revision has no {change.role.value} role")
        revision.config = with_replicas(revision.config, change.role, change.replicas)
        live = revision.pods_of(change.role, PodState.STARTING, PodState.READY)
        for _ in range(change.replicas - len(live)):
            self._new_pod(revision, change.role, ready=False)
        excess = len(live) - change.replicas
        if excess > 0:
            # Starting pods go first (nothing to drain), then the least loaded.
            ordered = sorted(live, key=lambda p: (p.state is not PodState.STARTING, p.engine.in_flight, -p.index))
            for pod in ordered[:excess]:
                self._drain(pod)

    def _promote(self, change: PromoteCanary) -> None:
        canary = self._newest(Variant.CANARY)
        if canary is None:
            raise Unavailable("there is no canary to promote")
        old_stable = [r for r in self.revisions if r.variant is Variant.STABLE and not r.retired]
        for revision in self.revisions:
            if revision.variant is Variant.CANARY and revision is not canary and not revision.retired:
                self._retire(revision)
        canary.variant = Variant.STABLE
        self.canary_weight = 0.0
        target = change.config or canary.config
        canary.replaces = old_stable
        for deployment in target.roles:
            live = canary.pods_of(deployment.role, PodState.STARTING, PodState.READY)
            for _ in range(deployment.replicas - len(live)):
                self._new_pod(canary, deployment.role, ready=False)
            for pod in sorted(live, key=lambda p: (p.state is not PodState.STARTING, p.engine.in_flight))[
                : max(0, len(live) - deployment.replicas)
            ]:
                self._drain(pod)
        canary.config = target
        if not any(p.state is PodState.STARTING for p in canary.pods):
            for revision in old_stable:
                self._retire(revision)
            canary.replaces = []

    # ------------------------------------------------------------------------------------------ routing

    def _push_arrival(self) -> None:
        at = self.source.peek_time()
        if at < self._arrival_at:
            self._arrival_version += 1
            self._arrival_at = at
            if math.isfinite(at):
                self._push(at, _Event.ARRIVAL, None, self._arrival_version)

    def _arrive(self) -> None:
        arriving = self.source.pop()
        self._arrival_at = math.inf
        request = SimRequest(
            rid=self._next_rid,
            arrival=arriving.time,
            input_tokens=arriving.input_tokens,
            output_tokens=arriving.output_tokens,
            cached_tokens=min(arriving.cached_tokens, max(0, arriving.input_tokens - 1)),
        )
        self._next_rid += 1
        self.arrived += 1
        self._route(request)
        self._push_arrival()

    def _route(self, request: SimRequest) -> None:
        revision = self._choose_revision()
        if revision is None:
            self._held.append(request)
            return
        request.revision = revision.number
        revision.in_flight += 1
        pod = self._choose_pod(revision.ready_entry())
        request.prefill_pod = pod.index
        if not revision.disaggregated:
            request.decode_pod = pod.index
        pod.engine.submit(request, self.now)
        self._after_engine(pod)

    def _choose_revision(self) -> Revision | None:
        canary = self._serving_revisions(Variant.CANARY)
        stable = self._serving_revisions(Variant.STABLE)
        use_canary = bool(canary) and (not stable or self._router_rng.random() < self.canary_weight)
        candidates = canary if use_canary else stable
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        weights = [len(r.ready_entry()) for r in candidates]
        pick = self._router_rng.random() * sum(weights)
        for revision, weight in zip(candidates, weights, strict=True):
            pick -= weight
            if pick < 0:
                return revision
        return candidates[-1]

    def _choose_pod(self, pods: list[Pod]) -> Pod:
        if self.router is RouterPolicy.ROUND_ROBIN:
            self._round_robin += 1
            return pods[self._round_robin % len(pods)]
        return min(pods, key=lambda p: (p.engine.in_flight, p.index))

    def _flush_held(self) -> None:
        while self._held and (self._serving_revisions(Variant.STABLE) or self._serving_revisions(Variant.CANARY)):
            self._route(self._held.popleft())

    def _hand_over(self, request: SimRequest) -> None:
        revision = next(r for r in self.revisions if r.number == request.revision)
        decode_pods = revision.pods_of(Role.DECODE, PodState.READY) or revision.pods_of(Role.DECODE, PodState.DRAINING)
        if not decode_pods:
            revision.handoffs.append(request)
            return
        pod = self._choose_pod(decode_pods)
        request.decode_pod = pod.index
        pod.engine.submit(request, self.now)
        self._after_engine(pod)

    def _flush_handoffs(self, revision: Revision) -> None:
        while revision.handoffs and revision.pods_of(Role.DECODE, PodState.READY):
            self._hand_over(revision.handoffs.popleft())

    # --------------------------------------------------------------------------------- engine callbacks

    def _group(self, pod: Pod) -> GroupLedger:
        return self.ledger.group((pod.role, pod.variant))

    def on_first_token(self, engine: Engine, request: SimRequest, at: float) -> None:
        pod = self.pods[engine.index]
        ttft = at - request.arrival
        pod.series.ttft.observe(ttft)
        self._group(pod).ttft.add(at, ttft)

    def on_prefill(self, engine: Engine, at: float, new_tokens: int, cached_tokens: int) -> None:
        pod = self.pods[engine.index]
        series = pod.series
        series.computed_prompt_tokens += new_tokens
        series.cached_tokens += cached_tokens
        if new_tokens + cached_tokens > 0:
            engine.last_cache_hit_rate = cached_tokens / (new_tokens + cached_tokens)
        pair = self._group(pod).prefill[int(at // ITL_TIME_BIN_S)]
        pair[0] += new_tokens
        pair[1] += cached_tokens

    def on_prefill_done(self, engine: Engine, request: SimRequest, at: float) -> None:
        """P/D: the prefill pod's own view of the request ends here; its KV starts moving."""
        pod = self.pods[engine.index]
        latency = at + engine.timing.first_token_overhead_s - request.arrival
        series = pod.series
        series.ttft.observe(latency)
        series.e2e.observe(latency)
        series.prompt_tokens += request.input_tokens
        series.generation_tokens += 1
        series.requests += 1
        ledger = self._group(pod)
        ledger.ttft.add(at, latency)
        ledger.completions.add(Completion(at, latency, None, request.input_tokens, 1, request.cached_tokens))
        transfer = engine.timing.transfer_s(request.input_tokens) * _lognormal(self._transfer_rng, TRANSFER_NOISE_CV)
        request.transfer_s = transfer
        series.kv_transfer_ms.observe(transfer * 1e3)
        self._push(at + transfer, _Event.TRANSFER, request)
        if pod.state is PodState.DRAINING:
            self._maybe_gone(pod)

    def on_finish(self, engine: Engine, request: SimRequest, at: float) -> None:
        pod = self.pods[engine.index]
        e2e = at - request.arrival
        tpot = None
        if request.output_tokens > 1 and not math.isnan(request.first_token):
            tpot = max(0.0, at - request.first_token) / (request.output_tokens - 1)
        series = pod.series
        series.e2e.observe(e2e)
        if tpot is not None:
            series.request_tpot.observe(tpot)
        series.prompt_tokens += request.input_tokens
        series.generation_tokens += request.output_tokens
        series.requests += 1
        self._group(pod).completions.add(
            Completion(at, e2e, tpot, request.input_tokens, request.output_tokens, request.cached_tokens)
        )
        revision = pod.revision
        revision.in_flight -= 1
        self.completed += 1
        if self.finished is not None:
            self.finished.append(request)
        self.source.on_complete(at)
        self._push_arrival()
        if pod.state is PodState.DRAINING:
            self._maybe_gone(pod)
        if revision.disaggregated:
            for decode in revision.pods_of(Role.DECODE, PodState.DRAINING):
                self._maybe_gone(decode)

    def on_decode(
        self,
        engine: Engine,
        at: float,
        *,
        running: int,
        steps: int,
        accept: float,
        step_s: float,
        stalls: tuple[tuple[int, float], ...],
    ) -> None:
        if running <= 0 or steps <= 0:
            return
        pod = self.pods[engine.index]
        ledger = self._group(pod)
        itl = step_s / accept
        for requests, stall_s in stalls:
            first = (stall_s + step_s) / accept
            pod.series.itl.observe(first, requests * accept)
            ledger.add_itl(at, first, requests * accept)
        if steps > 1:
            tokens = running * accept * (steps - 1)
            pod.series.itl.observe(itl, tokens)
            ledger.add_itl(at, itl, tokens)
        if engine.timing.speculative:
            pair = ledger.accept[int(at // ITL_TIME_BIN_S)]
            pair[0] += steps
            pair[1] += steps * accept

    # ----------------------------------------------------------------------------------------- sampling

    def _sample(self) -> None:
        now = self.now
        groups: dict[tuple[Role, Variant], list[Pod]] = {}
        for pod in self.pods:
            if pod.alive:
                groups.setdefault((pod.role, pod.variant), []).append(pod)
                mark_at, mark_tokens = pod.gen_mark
                if now - mark_at >= GEN_THROUGHPUT_WINDOW_S:
                    generated = pod.series.generation_tokens
                    pod.gen_throughput = (generated - mark_tokens) / (now - mark_at)
                    pod.gen_mark = (now, generated)
        for key, pods in groups.items():
            usages = [u for u in (p.engine.kv_usage() for p in pods) if u is not None]
            self.ledger.group(key).add_gauge(
                GaugeSample(
                    at=now,
                    running=float(sum(p.engine.running for p in pods)),
                    queued=float(sum(p.engine.queued for p in pods)),
                    kv_usage=sum(usages) / len(usages) if usages else None,
                    pods=len(pods),
                )
            )

    # ------------------------------------------------------------------------------------------ queries

    def observe(self, window_s: float) -> Observation:
        """The last `window_s` simulated seconds as the tuning layer's `Observation` (see `sim.observe`)."""
        return observe_window(self, max(0.0, self.now - window_s), self.now)

    def observe_window(self, start: float, end: float) -> Observation:
        return observe_window(self, start, end)

    def live_pods(self) -> list[Pod]:
        return [p for p in self.pods if p.alive]

    def stable_config(self) -> ServingConfig:
        revision = self._newest(Variant.STABLE)
        assert revision is not None
        return revision.config

    def canary_config(self) -> ServingConfig | None:
        revision = self._newest(Variant.CANARY)
        return None if revision is None else revision.config

    def usage(self, start: float, end: float) -> Usage:
        seconds: dict[str, float] = {}
        for pod in self.pods:
            overlap = min(end, pod.gone_at, self.now) - max(start, pod.created)
            if overlap > 0:
                seconds[pod.gpu] = seconds.get(pod.gpu, 0.0) + overlap * pod.gpus
        tokens = 0.0
        requests = 0
        for (role, _variant), ledger in self.ledger.groups.items():
            if role is Role.PREFILL:
                continue
            for completion in ledger.completions.window(start, end):
                tokens += completion.generated_tokens
                requests += 1
        return Usage(gpu_seconds=seconds, output_tokens=tokens, requests=requests)

    def describe_revision(self, revision: Revision) -> str:
        parts = []
        for deployment in revision.config.roles:
            w = deployment.worker
            parts.append(
                f"{deployment.replicas}×{deployment.role.value} {w.gpu} {w.weight_format} TP{w.tp}"
                f" cap {w.max_running_requests}"
            )
        return f"{revision.variant.value} {revision.label}: " + ", ".join(parts)


def _describe_change(change: ConfigChange) -> str:
    if isinstance(change, ReplaceConfig):
        return f"rolling update of {change.variant.value}"
    if isinstance(change, SetReplicas):
        return f"{change.role.value} replicas → {change.replicas} ({change.variant.value})"
    if isinstance(change, SetBatchCap):
        return f"{change.role.value} batch cap → {change.max_running_requests} ({change.variant.value})"
    if isinstance(change, StartCanary):
        return f"canary started at weight {change.weight:.0%}"
    if isinstance(change, SetCanaryWeight):
        return f"canary weight → {change.weight:.0%}"
    if isinstance(change, PromoteCanary):
        return "canary promoted"
    return "canary rolled back"
