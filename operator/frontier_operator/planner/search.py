"""The search: screen every shape, then size the promising ones, best bound first (branch and bound).

Predictions cost about a millisecond each, so the planner spends them where they can change the answer:

1. **Screen.** Each legal shape is predicted once with its batch cap at the memory limit. That gives its
   largest per-replica capacity, hence a lower bound on the GPUs (and $) any fleet of it needs for the
   request rate. P/D prefill and decode shapes are screened separately against a generous partner; per
   format group only the prefill shapes that can meet the TTFT bound unloaded and the cheapest few of
   each role are paired.
2. **Evaluate, best bound first.** A job (a unified shape, or a P/D pair) whose bound cannot beat the
   fleets already found — the plan and its runner-ups, the baseline-plus-one-technique fleets, and the
   best fleet of each alternative the explanation names — is skipped. Otherwise the planner checks the
   job unloaded (no replica count can beat that), sets the batch cap at the SLO knee and sizes replicas.

**Replicas first, without a batch guard.** From the analytic minimum (rate ÷ capacity) upward, galloping
then bisecting, until every SLO holds with margin within the budget (P/D grows whichever role's SLO
fails). A smaller cap can only need more replicas, so this fleet is a bound aware of the SLO, and the
job is pruned here if that bound cannot win.

**The knee.** Then the cap: the largest CUDA-graph batch size at which the per-token SLOs (TPOT, ITL)
would still hold, with margin, had the batch grown to it under today's traffic — each per-token
percentile scaled by the decode step time at that batch over the one at the fleet's mean batch
(`decode_token_time`, about a tenth of a prediction). The cap is an enforced SLO guard, not SGLang's
loose default; each batch size tried is a point of the capability frontier. The final fleet is
re-checked with the cap in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from frontier_operator.catalog.types import ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import (
    MemoryFit,
    Prediction,
    Role,
    RoleDeployment,
    ServingConfig,
    Speculative,
    WorkerConfig,
    Workload,
)
from frontier_operator.planner.choose import check_slos, largest_passing, objective_key, slo_margin, worst_ratio
from frontier_operator.planner.describe import describe_config, describe_worker
from frontier_operator.planner.enumerate import Shape, enumerate_shapes
from frontier_operator.planner.formats import quality_loss_pct
from frontier_operator.planner.legality import LegalityContext, check_fleet, check_memory, legality_context
from frontier_operator.planner.types import (
    PER_TOKEN_METRICS,
    BatchKnee,
    Disaggregation,
    Evaluated,
    FrontierPoint,
    GpuPool,
    Objective,
    PlanRequest,
    Predictor,
    Rejection,
    RejectionReason,
    SloBound,
    SloCheck,
    SloMetric,
    Technique,
)

# Per attention-DP rank: SGLang's decode CUDA-graph capture sizes (1, 2, 4, 8, 12, then multiples of 8,
# 16, 32: sglang-0.5.23.md §3.2), thinned to what a bisection needs.
CAP_LADDER = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
# Replicas given to the other P/D role, or to the probed role itself for an unloaded check, so that
# queueing never binds.
GENEROUS_REPLICAS = 64
# Caps per attention-DP rank at which the memory model is asked for the KV pool. SGLang's reserve grows
# with the cap (CUDA graphs, decode activations), so the largest cap the pool supports is a fixed point;
# the lower value is SGLang's decode-graph bound on 80–160 GB GPUs (§3.2).
MEMORY_PROBE_CAPS = (256, 1024)
# P/D shapes paired per format group: the cheapest per request of each role.
PD_PREFILL_FINALISTS = 2
PD_DECODE_FINALISTS = 3
# Replica growth while sizing P/D: at least one, else a quarter more, per step.
PD_SIZING_STEPS = 24
KV_TRANSFER_BACKEND = "mooncake"
# Hopeless jobs sized when nothing is feasible, to find the nearest point.
NEAREST_HOPELESS = 3
# Fleets kept per comparison group while pruning: the plan and its runner-ups, else the best one.
_RUNNER_UP_DEPTH = 4


class PredictionCache:
    """Memoises the predictor: the screen, the knee, the sizing and relaxed re-plans ask the same questions."""

    def __init__(self, predictor: Predictor) -> None:
        self._predictor = predictor
        self._predictions: dict[tuple[str, ServingConfig, Workload], Prediction | UnpredictableConfig] = {}
        self._memory: dict[tuple[str, WorkerConfig, int, Role], MemoryFit | UnpredictableConfig] = {}
        self._token_times: dict[tuple[str, WorkerConfig, int, float, str], float] = {}
        self.calls = 0

    def predict(self, arch: ModelArch, pool: GpuPool, config: ServingConfig, workload: Workload) -> Prediction:
        key = (f"{arch.name}/{pool.gpu.name}/{pool.price_per_gpu_hour}", config, workload)
        cached = self._predictions.get(key)
        if cached is None:
            self.calls += 1
            try:
                cached = self._predictor.predict(arch, pool.gpu, config, workload, pool.price_per_gpu_hour)
            except UnpredictableConfig as error:
                cached = error
            self._predictions[key] = cached
        if isinstance(cached, UnpredictableConfig):
            raise cached
        return cached

    def decode_token_time(
        self, arch: ModelArch, pool: GpuPool, worker: WorkerConfig, batch: int, *, context: float, kind: str
    ) -> float:
        key = (f"{arch.name}/{pool.gpu.name}", replace(worker, max_running_requests=1), batch, context, kind)
        cached = self._token_times.get(key)
        if cached is None:
            cached = self._predictor.decode_token_time(arch, pool.gpu, worker, float(batch), context, kind=kind)
            self._token_times[key] = cached
        return cached

    def memory_fit(
        self, arch: ModelArch, pool: GpuPool, worker: WorkerConfig, context_tokens: int, role: Role
    ) -> MemoryFit:
        key = (f"{arch.name}/{pool.gpu.name}", worker, context_tokens, role)
        cached = self._memory.get(key)
        if cached is None:
            try:
                cached = self._predictor.memory_fit(arch, pool.gpu, worker, context_tokens, role=role)
            except UnpredictableConfig as error:
                cached = error
            self._memory[key] = cached
        if isinstance(cached, UnpredictableConfig):
            raise cached
        return cached


@dataclass
class SearchOutcome:
    candidates: list[Evaluated] = field(default_factory=list)
    points: list[FrontierPoint] = field(default_factory=list)
    rejections: list[Rejection] = field(default_factory=list)
    shapes: int = 0
    pruned: int = 0
    # Jobs left when the prediction budget ran out (0 unless a budget was set and reached).
    unexplored: int = 0
    # Per SLO bound (by index): the lowest value any prediction reached, margin included — unloaded
    # fleets count, so a bound below it is out of reach of every configuration searched.
    best_seen: dict[int, float] = field(default_factory=dict)
    # Technique sets tried, including those whose every layout missed a bound even unloaded.
    tried: set[frozenset[Technique]] = field(default_factory=set)


@dataclass(frozen=True)
class _Screened:
    """A shape with its largest (memory-bound) cap and the capacity of one replica at that cap."""

    shape: Shape
    top_cap: int
    # Requests/s one replica sustains at the top cap (the probe's partner role never binds).
    capacity: float

    @property
    def gpu_seconds_per_request(self) -> float:
        return self.shape.worker.gpus / max(self.capacity, 1e-12)


@dataclass(frozen=True)
class _UnloadedPrefill:
    """A prefill shape's top cap, its latencies with both roles generously replicated, and how close it comes."""

    top_cap: int
    prediction: Prediction
    # The largest predicted/required ratio over the TTFT bounds (≤ 1 meets them all).
    worst_ttft_ratio: float


@dataclass(frozen=True)
class _Job:
    """A unified shape, or a P/D pair, with the bound that orders and prunes the evaluation."""

    pool: GpuPool
    techniques: frozenset[Technique]
    allowed: bool
    quality_loss_pct: float
    groups: tuple[tuple[str, ...], ...]
    bound_gpus: int
    bound_capacity_per_gpu: float
    unified: _Screened | None = None
    prefill: _Screened | None = None
    decode: _Screened | None = None
    # Known to miss a latency bound whatever its size: evaluated once, only as a "nearest point".
    hopeless: bool = False


def comparison_groups(
    techniques: frozenset[Technique], allowed: bool, pool: GpuPool, worker: WorkerConfig, disaggregated: bool
) -> tuple[tuple[str, ...], ...]:
    """The comparisons a fleet takes part in: the plan, the technique shifts, each alternative explained."""
    groups: list[tuple[str, ...]] = []
    if len(techniques) <= 1:
        groups.append(("techniques", *sorted(t.value for t in techniques)))
    if allowed:
        groups += [
            ("all",),
            ("weights", worker.weight_format),
            ("kv", worker.kv_cache_format),
            ("speculation", "on" if worker.speculative else "off"),
            ("experts", "wide" if Technique.WIDE_EP in techniques else "narrow"),
            ("pool", pool.name),
            ("serving", "pd" if disaggregated else "aggregated"),
        ]
    return tuple(groups)


def _bound(objective: Objective, job: _Job, price_scale: float) -> tuple[float, ...] | None:
    """A lexicographic lower bound of the objective key (first three elements) of any fleet of the job."""
    cost = round(job.bound_gpus * job.pool.price_per_gpu_hour * price_scale, 9)
    quality = round(job.quality_loss_pct, 6)
    if objective is Objective.MINIMIZE_COST:
        return (cost, quality, float(job.bound_gpus))
    if objective is Objective.MINIMIZE_GPUS:
        return (float(job.bound_gpus), quality, cost)
    if objective is Objective.MAXIMIZE_THROUGHPUT:
        return (-job.bound_capacity_per_gpu, quality, cost)
    return None  # latency has no cheap bound: every job is evaluated


class _Incumbents:
    """The best objective keys found so far per comparison group, for pruning."""

    def __init__(self, objective: Objective, price_scale: float) -> None:
        self.objective = objective
        self.price_scale = price_scale
        self.best: dict[tuple[str, ...], list[tuple[float, ...]]] = {}

    @staticmethod
    def _depth(group: tuple[str, ...]) -> int:
        return _RUNNER_UP_DEPTH if group == ("all",) else 1

    def add(self, candidate: Evaluated, groups: Sequence[tuple[str, ...]]) -> None:
        if not (candidate.meets_slo and candidate.within_budget and candidate.sustains_rate):
            return
        key = objective_key(self.objective, candidate)
        for group in groups:
            keys = self.best.setdefault(group, [])
            keys.append(key)
            keys.sort()
            del keys[self._depth(group) :]

    def beaten(self, job: _Job) -> bool:
        """True when the job's bound is no better than the incumbents of every group it belongs to.

        A bound equal to a full group's worst kept key prunes too: fleets that tie on the objective,
        quality loss and GPU count are then compared on latency headroom among the first few found
        (jobs are ordered so that the fastest per GPU come first), not exhaustively.
        """
        bound = _bound(self.objective, job, self.price_scale)
        if bound is None:
            return False
        for group in job.groups:
            keys = self.best.get(group, [])
            if len(keys) < self._depth(group) or bound < keys[-1][: len(bound)]:
                return False
        return True


class _Search:
    """One search over a request: the shared prediction cache, the incumbents and the outcome."""

    def __init__(self, request: PlanRequest, cache: PredictionCache) -> None:
        self.request = request
        self.cache = cache
        self.outcome = SearchOutcome()
        self.per_token_slos = tuple(b for b in request.slos if b.metric in PER_TOKEN_METRICS)
        workload = request.workload
        served_tokens_per_hour = workload.request_rate_per_s * workload.output_tokens.mean * 3600.0
        # $/Mtok per GPU-dollar-hour at the workload's rate: a fleet's cost is GPUs × price × this.
        self.price_scale = 1e6 / served_tokens_per_hour if served_tokens_per_hour > 0 else math.inf
        self.incumbents = _Incumbents(request.objective, self.price_scale)
        formats = (*request.search.quantizations, *request.search.fallback_quantizations)
        kv_formats = (*request.search.kv_cache_formats, *request.search.fallback_kv_cache_formats)
        self.weight_formats = {fmt.name: fmt for fmt in formats}
        self.prefill_unloaded: dict[Shape, _UnloadedPrefill | None] = {}
        # Unloaded predictions that missed a TTFT bound, by layout without speculation: prefill does not
        # change with the draft, so the speculative variants of a layout share the verdict.
        self.ttft_hopeless: dict[tuple[str, WorkerConfig], Prediction] = {}
        # Hopeless jobs' fleets, evaluated only when nothing else meets the SLO: (how far off, job, fleet).
        self.deferred: list[tuple[float, _Job, Callable[[], Evaluated]]] = []
        self.kv_formats = {fmt.name: fmt for fmt in kv_formats}

    # ------------------------------------------------------------------------------------ helpers

    def _margin(self, prediction: Prediction, bound: SloBound) -> float:
        return slo_margin(prediction, bound, self.request.calibration_confidence)

    def _checks(self, slos: Sequence[SloBound], prediction: Prediction) -> tuple[SloCheck, ...]:
        return check_slos(slos, prediction, calibration_confidence=self.request.calibration_confidence)

    def _predict(self, pool: GpuPool, config: ServingConfig, rate: float | None = None) -> Prediction:
        workload = self.request.workload if rate is None else replace(self.request.workload, request_rate_per_s=rate)
        return self.cache.predict(self.request.arch, pool, config, workload)

    def _reject(self, worker: WorkerConfig, reason: RejectionReason, detail: str) -> None:
        self.outcome.rejections.append(Rejection(describe_worker(worker), reason, detail, worker))

    def _quality(self, worker: WorkerConfig) -> float:
        return quality_loss_pct(
            self.request.arch, self.weight_formats[worker.weight_format], self.kv_formats[worker.kv_cache_format]
        )

    def _context_tokens(self, role: Role) -> int:
        workload = self.request.workload
        tokens = workload.input_tokens.mean + (0 if role is Role.PREFILL else workload.output_tokens.mean)
        return max(1, round(tokens))

    def _observe(self, prediction: Prediction) -> None:
        for index, bound in enumerate(self.request.slos):
            value = bound.predicted(prediction) * (1 + self._margin(prediction, bound))
            if value < self.outcome.best_seen.get(index, math.inf):
                self.outcome.best_seen[index] = value

    def _all_met(self, slos: Sequence[SloBound], prediction: Prediction) -> bool:
        return all(check.met for check in self._checks(slos, prediction))

    def _minimum_replicas(self, capacity_per_replica: float) -> int:
        request = self.request
        needed = request.workload.request_rate_per_s / max(capacity_per_replica, 1e-12)
        if request.min_output_tokens_per_s is not None:
            per_replica_tokens = capacity_per_replica * request.workload.output_tokens.mean
            needed = max(needed, request.min_output_tokens_per_s / max(per_replica_tokens, 1e-12))
        return max(1, math.ceil(needed - 1e-9))

    def _unified_config(self, worker: WorkerConfig, replicas: int) -> ServingConfig:
        return ServingConfig(self.request.arch.name, (RoleDeployment(Role.UNIFIED, worker, replicas),))

    def _pd_config(self, prefill: WorkerConfig, prefills: int, decode: WorkerConfig, decodes: int) -> ServingConfig:
        return ServingConfig(
            self.request.arch.name,
            (RoleDeployment(Role.PREFILL, prefill, prefills), RoleDeployment(Role.DECODE, decode, decodes)),
            transfer_backend=KV_TRANSFER_BACKEND,
        )

    # ------------------------------------------------------------------------------------ screening

    def _top_cap(self, shape: Shape) -> int | None:
        """Largest batch cap the KV cache supports at the workload's mean context (None: rejected)."""
        ranks = shape.worker.attention_dp
        best: int | None = None
        for per_rank in MEMORY_PROBE_CAPS:
            worker = replace(shape.worker, max_running_requests=per_rank * ranks)
            try:
                fit = self.cache.memory_fit(
                    self.request.arch, shape.pool, worker, self._context_tokens(shape.role), shape.role
                )
            except UnpredictableConfig as error:
                self._reject(shape.worker, RejectionReason.UNPREDICTABLE, error.reason)
                return None
            rejection = check_memory(shape.worker, fit, self.request.workload, shape.role)
            if rejection is not None:
                if best is None:
                    self.outcome.rejections.append(rejection)
                return best
            # SGLang also caps a given max_running_requests at half the pool's tokens (§3.2).
            cap = min(fit.max_batch_at_context, fit.kv_tokens // 2 * ranks)
            best = max(best or 0, cap)
            if cap < per_rank * ranks:
                break  # the pool, not this probe cap, is the limit
        return best if best is not None and best >= ranks else None

    def _decode_capacity(self, shape: Shape, top: int) -> _Screened | None:
        """Capacity bound of a decode (or unified) replica at its top cap, from decode step time alone.

        A replica holding `top` requests emits `top` tokens per step, so it finishes at most
        top / ((OSL − 1) · D(top)) requests per second; prefill only lowers that, so this upper bound of
        the capacity keeps the GPU bound a true lower bound, at a tenth of the cost of a prediction.
        """
        steps = max(self.request.workload.output_tokens.mean - 1.0, 1.0)
        try:
            step = self._token_time(shape.pool, replace(shape.worker, max_running_requests=top), top)
        except UnpredictableConfig as error:
            self._reject(shape.worker, RejectionReason.UNPREDICTABLE, error.reason)
            return None
        return _Screened(shape, top, top / (steps * step) if step > 0 else math.inf)

    def _screen_decodes(self, shapes: Sequence[Shape]) -> list[_Screened]:
        screened = []
        for shape in shapes:
            top = self._top_cap(shape)
            result = None if top is None else self._decode_capacity(shape, top)
            if result is not None:
                screened.append(result)
        return screened

    def screen_unified(self, ctx: LegalityContext) -> list[_Job]:
        enumeration = enumerate_shapes(ctx, Role.UNIFIED, self.request.slos)
        self.outcome.rejections.extend(enumeration.rejections)
        self.outcome.shapes += len(enumeration.shapes)
        jobs = []
        for screened in self._screen_decodes(enumeration.shapes):
            shape = screened.shape
            jobs.append(
                _Job(
                    pool=shape.pool,
                    techniques=shape.techniques,
                    allowed=shape.allowed,
                    quality_loss_pct=self._quality(shape.worker),
                    groups=comparison_groups(shape.techniques, shape.allowed, shape.pool, shape.worker, False),
                    bound_gpus=self._minimum_replicas(screened.capacity) * shape.worker.gpus,
                    bound_capacity_per_gpu=screened.capacity / shape.worker.gpus,
                    unified=screened,
                )
            )
        return jobs

    def screen_disaggregated(self, ctx: LegalityContext) -> list[_Job]:
        decode_enumeration = enumerate_shapes(ctx, Role.DECODE, self.request.slos)
        self.outcome.rejections.extend(decode_enumeration.rejections)
        groups: dict[tuple[str, str, Speculative | None], list[Shape]] = {}
        for shape in decode_enumeration.shapes:
            worker = shape.worker
            groups.setdefault((worker.weight_format, worker.kv_cache_format, worker.speculative), []).append(shape)
        # Prefill workers carry their decode partner's speculative settings (the draft hands over its hidden
        # state), but prefill speed hardly depends on them: prefill shapes are screened once, without.
        prefill_enumeration = enumerate_shapes(ctx, Role.PREFILL, self.request.slos, (None,))
        self.outcome.rejections.extend(prefill_enumeration.rejections)
        self.outcome.shapes += len(decode_enumeration.shapes) + len(prefill_enumeration.shapes)
        jobs: list[_Job] = []
        for (weight_format, kv_format, _), decodes in groups.items():
            prefills = [
                shape
                for shape in prefill_enumeration.shapes
                if shape.worker.weight_format == weight_format and shape.worker.kv_cache_format == kv_format
            ]
            jobs += self._pd_group_jobs(ctx, prefills, decodes)
        return jobs

    def _pd_group_jobs(self, ctx: LegalityContext, prefills: list[Shape], decodes: list[Shape]) -> list[_Job]:
        decode_finalists = sorted(self._screen_decodes(decodes), key=lambda s: s.gpu_seconds_per_request)
        if not decode_finalists or not prefills:
            return []
        decode_partner = replace(decode_finalists[0].shape.worker, max_running_requests=decode_finalists[0].top_cap)
        speculative = decode_partner.speculative
        sample = replace(prefills[0].worker, max_running_requests=1, speculative=speculative)
        rejection = check_fleet(self._pd_config(sample, 1, decode_partner, 1), (ctx.pool,))
        # The budget is each pair's business (sizing checks it); the P/D rules are the group's.
        if rejection is not None and rejection.reason is not RejectionReason.OVER_BUDGET:
            self.outcome.rejections.append(rejection)
            return []
        prefill_finalists, hopeless = self._prefill_finalists(prefills, replace(decode_partner, speculative=None))
        jobs = []
        for prefill in prefill_finalists:
            for decode in _finalists(decode_finalists, PD_DECODE_FINALISTS):
                techniques = prefill.shape.techniques | decode.shape.techniques | {Technique.DISAGGREGATION}
                allowed = prefill.shape.allowed and decode.shape.allowed
                prefill_gpus = self._minimum_replicas(prefill.capacity) * prefill.shape.worker.gpus
                decode_gpus = self._minimum_replicas(decode.capacity) * decode.shape.worker.gpus
                seconds_per_request = prefill.gpu_seconds_per_request + decode.gpu_seconds_per_request
                jobs.append(
                    _Job(
                        pool=ctx.pool,
                        techniques=techniques,
                        allowed=allowed,
                        quality_loss_pct=self._quality(decode.shape.worker),
                        groups=comparison_groups(techniques, allowed, ctx.pool, decode.shape.worker, True),
                        bound_gpus=prefill_gpus + decode_gpus,
                        bound_capacity_per_gpu=1.0 / seconds_per_request,
                        prefill=prefill,
                        decode=decode,
                        hopeless=hopeless,
                    )
                )
        return jobs

    def _unloaded_prefill(self, shape: Shape, decode_partner: WorkerConfig) -> _UnloadedPrefill | None:
        """A prefill shape screened unloaded (a rejection if it misses a TTFT bound even so); cached per shape."""
        if shape in self.prefill_unloaded:
            return self.prefill_unloaded[shape]
        top = self._top_cap(shape)
        result = None
        if top is not None:
            worker = replace(shape.worker, max_running_requests=top)
            config = self._pd_config(worker, GENEROUS_REPLICAS, decode_partner, GENEROUS_REPLICAS)
            try:
                unloaded = self._predict(shape.pool, config)
                self._observe(unloaded)
            except UnpredictableConfig as error:
                self._reject(shape.worker, RejectionReason.UNPREDICTABLE, error.reason)
            else:
                ttft = [bound for bound in self.request.slos if bound.metric is SloMetric.TTFT]
                checks = self._checks(ttft, unloaded)
                worst = _worst(checks)
                if worst is not None and not worst.met:
                    detail = _unreachable(worst, "as a prefill server")
                    self._reject(shape.worker, RejectionReason.SLO_UNREACHABLE, detail)
                result = _UnloadedPrefill(top, unloaded, worst_ratio(checks))
        self.prefill_unloaded[shape] = result
        return result

    def _prefill_capacity(self, shape: Shape, top: int, decode_partner: WorkerConfig) -> _Screened | None:
        """Requests/s one prefill replica sustains (decode never binds)."""
        worker = replace(shape.worker, max_running_requests=top)
        try:
            probe = self._pd_config(worker, 1, decode_partner, GENEROUS_REPLICAS)
            return _Screened(shape, top, self._predict(shape.pool, probe).max_request_rate_per_s)
        except UnpredictableConfig as error:
            self._reject(shape.worker, RejectionReason.UNPREDICTABLE, error.reason)
            return None

    def _prefill_finalists(self, shapes: list[Shape], decode_partner: WorkerConfig) -> tuple[list[_Screened], bool]:
        """The cheapest prefill shapes per request among those that meet the TTFT bound unloaded.

        Only those get a capacity probe. When none meets it, the one that comes closest stays (flagged
        hopeless), so that an infeasible answer can still name the nearest P/D fleet.
        """
        closeness: list[tuple[float, Shape, int]] = []
        for shape in shapes:
            unloaded = self._unloaded_prefill(shape, decode_partner)
            if unloaded is not None:
                closeness.append((unloaded.worst_ttft_ratio, shape, unloaded.top_cap))
        meeting = [
            screened
            for worst, shape, top in closeness
            if worst <= 1.0 and (screened := self._prefill_capacity(shape, top, decode_partner)) is not None
        ]
        if meeting:
            ranked = sorted(meeting, key=lambda c: c.gpu_seconds_per_request)
            return _finalists(ranked, PD_PREFILL_FINALISTS), False
        nearest = sorted(closeness, key=lambda item: item[0])
        narrow = [item for item in nearest if Technique.WIDE_EP not in item[1].techniques]
        keep = {id(item): item for item in (*nearest[:1], *narrow[:1])}.values()
        probed = [self._prefill_capacity(shape, top, decode_partner) for _, shape, top in keep]
        return [s for s in probed if s is not None], True

    # ------------------------------------------------------------------------------------ the knee

    def _token_time(self, pool: GpuPool, worker: WorkerConfig, batch: int) -> float:
        workload = self.request.workload
        context = workload.input_tokens.mean + workload.output_tokens.mean / 2
        return self.cache.decode_token_time(self.request.arch, pool, worker, batch, context=context, kind=workload.kind)

    def _knee(self, job: _Job, worker: WorkerConfig, top_cap: int, fleet: Evaluated, point_gpus: float) -> BatchKnee:
        """Largest cap (CUDA-graph sizes per attention-DP rank) whose per-token SLOs would hold at full batch.

        The sized fleet runs at a mean batch B with per-token latencies T_q (each percentile q). Had the
        batch grown to b under the same traffic, each would scale by the decode step: T_q · D(b) / D(B).
        The largest ladder size b meeting every per-token bound with margin is the cap. Each ladder size
        tried is also a point of the capability frontier.
        """
        prediction = fleet.prediction
        pool = job.pool
        ranks = worker.attention_dp
        top = max(1, top_cap // ranks)
        ladder = [size for size in CAP_LADDER if size < top] + [top]
        base = self._token_time(pool, worker, max(1, round(prediction.mean_batch)))
        required = {id(bound): bound.limit_s / (1 + self._margin(prediction, bound)) for bound in self.per_token_slos}
        per_token = [(bound, bound.predicted(prediction) / base) for bound in self.per_token_slos]
        p50 = prediction.tpot.p50 / base

        probed: dict[int, list[tuple[SloBound, float]]] = {}

        def values(index: int) -> list[tuple[SloBound, float]]:
            if index not in probed:
                batch = ladder[index] * ranks
                step = self._token_time(pool, worker, batch)
                scaled = [(bound, step * scale) for bound, scale in per_token]
                meets = all(value <= required[id(bound)] for bound, value in scaled)
                self._capability_point(job, worker, batch, seconds_per_token=step * p50, gpus=point_gpus, meets=meets)
                probed[index] = scaled
            return probed[index]

        def passes(index: int) -> bool:
            return all(value <= required[id(bound)] for bound, value in values(index))

        last = len(ladder) - 1
        if not per_token or passes(last):
            return BatchKnee(ladder[last] * ranks, None)
        passing = largest_passing(last, passes)
        passing = max(passing, 0)
        beyond = passing + 1
        bound, value = max(values(beyond), key=lambda item: item[1] / item[0].limit_s)
        return BatchKnee(ladder[passing] * ranks, bound, ladder[beyond] * ranks, value)

    def _capability_point(
        self,
        job: _Job,
        worker: WorkerConfig,
        batch: int,
        *,
        seconds_per_token: float,
        gpus: float,
        meets: bool,
    ) -> None:
        """A point of the capability frontier: one replica (or a balanced P/D pair) at a given batch."""
        per_gpu = batch / seconds_per_token / gpus if seconds_per_token > 0 else 0.0
        cost = job.pool.price_per_gpu_hour * 1e6 / (3600 * per_gpu) if per_gpu > 0 else math.inf
        prefix = "P/D " if Technique.DISAGGREGATION in job.techniques else ""
        self.outcome.points.append(
            FrontierPoint(
                summary=f"{job.pool.name}: {prefix}{describe_worker(worker)} @ batch {batch}",
                pool=job.pool.name,
                techniques=job.techniques,
                tokens_per_s_per_user=1 / seconds_per_token if seconds_per_token > 0 else 0.0,
                tokens_per_s_per_gpu=per_gpu,
                cost_per_mtok=cost,
                gpus=max(1, round(gpus)),
                meets_slo=meets,
                allowed=job.allowed,
            )
        )

    # ---------------------------------------------------------------------------------- evaluation

    def _evaluate(
        self, job: _Job, config: ServingConfig, prediction: Prediction, knee: BatchKnee | None
    ) -> tuple[Evaluated, bool]:
        """The verdict on one sized fleet; the flag says whether it meets every SLO, the rate and the budget."""
        request = self.request
        checks = self._checks(request.slos, prediction)
        capacity = prediction.max_request_rate_per_s
        sustains = capacity >= request.workload.request_rate_per_s and (
            request.min_output_tokens_per_s is None
            or capacity * request.workload.output_tokens.mean >= request.min_output_tokens_per_s
        )
        self._observe(prediction)
        evaluated = Evaluated(
            config=config,
            pool=job.pool,
            prediction=prediction,
            techniques=job.techniques,
            checks=checks,
            margin=max((check.margin for check in checks), default=0.0),
            knee=knee,
            allowed=job.allowed,
            within_budget=config.total_gpus <= job.pool.max_gpus,
            sustains_rate=sustains,
            quality_loss_pct=job.quality_loss_pct,
        )
        return evaluated, _acceptable(evaluated)

    def _hopeless(self, job: _Job, unloaded: Prediction, fleet: Callable[[], Evaluated]) -> None:
        """A job that misses a bound even unloaded: a rejection now, a "nearest point" only if needed.

        Its fleet at the rate's minimum size is predicted later, and only when nothing meets the SLO, for
        the few such jobs that came closest.
        """
        worst = _worst(self._checks(self.request.slos, unloaded))
        screened = job.unified or job.decode
        assert screened is not None and worst is not None
        self._reject(screened.shape.worker, RejectionReason.SLO_UNREACHABLE, _unreachable(worst))
        if job.allowed:
            self.deferred.append((worst.ratio, job, fleet))
        self.outcome.tried.add(job.techniques)

    def _record(self, job: _Job, evaluated: Evaluated) -> None:
        self.outcome.tried.add(job.techniques)
        self.outcome.candidates.append(evaluated)
        self.incumbents.add(evaluated, job.groups)
        prediction = evaluated.prediction
        # The sized fleet is an operating point too; it keeps the frontier drawn when nothing is feasible.
        self.outcome.points.append(
            FrontierPoint(
                summary=f"{job.pool.name}: {describe_config(evaluated.config)}",
                pool=job.pool.name,
                techniques=job.techniques,
                tokens_per_s_per_user=prediction.output_tokens_per_s_per_user,
                tokens_per_s_per_gpu=prediction.output_tokens_per_s_per_gpu,
                cost_per_mtok=prediction.cost_per_mtok,
                gpus=evaluated.config.total_gpus,
                meets_slo=evaluated.meets_slo,
                allowed=job.allowed,
            )
        )

    def _beaten_at(self, job: _Job, loose: Evaluated) -> bool:
        """Whether the job is beaten now that its fleet without a batch guard is known.

        A smaller cap only lowers a worker's capacity, so no fleet of the job at its knee needs fewer
        GPUs than the fleet sized with the cap at its memory limit: that is a bound aware of the SLO.
        """
        if self.incumbents.beaten(replace(job, bound_gpus=loose.config.total_gpus)):
            self.outcome.pruned += 1
            return True
        return False

    def evaluate(self, job: _Job) -> None:
        try:
            if job.unified is not None:
                self._evaluate_unified(job, job.unified)
            else:
                self._evaluate_pd(job)
        except UnpredictableConfig as error:
            screened = job.unified or job.decode
            assert screened is not None
            self._reject(screened.shape.worker, RejectionReason.UNPREDICTABLE, error.reason)

    def _evaluate_unified(self, job: _Job, screened: _Screened) -> None:
        """Unloaded check, replicas without a batch guard (a bound), then the knee and the final fleet."""
        shape = screened.shape
        budget = job.pool.max_gpus // shape.worker.gpus

        def attempt(worker: WorkerConfig, knee: BatchKnee | None) -> Callable[[int], tuple[Evaluated, bool]]:
            def sized(replicas: int) -> tuple[Evaluated, bool]:
                config = self._unified_config(worker, replicas)
                return self._evaluate(job, config, self._predict(job.pool, config), knee)

            return sized

        top_worker = replace(shape.worker, max_running_requests=screened.top_cap)
        lowest = self._minimum_replicas(screened.capacity)
        # Unloaded (many replicas), every latency is as low as this shape gets: if a bound fails even then,
        # no cap or replica count fixes it.
        layout = (job.pool.name, replace(shape.worker, speculative=None, max_running_requests=1))
        unloaded = self.ttft_hopeless.get(layout)
        if unloaded is None:
            unloaded = self._predict(job.pool, self._unified_config(top_worker, GENEROUS_REPLICAS * lowest))
            self._observe(unloaded)
            ttft = [b for b in self.request.slos if b.metric is SloMetric.TTFT]
            if not self._all_met(ttft, unloaded):
                self.ttft_hopeless[layout] = unloaded
        if not self._all_met(self.request.slos, unloaded):
            rate = self.request.workload.request_rate_per_s
            # Its nearest point is the best it does within the budget: as many replicas as the pool allows.
            widest = max(lowest, budget)
            self._hopeless(job, unloaded, lambda: _smallest_passing(attempt(top_worker, None), widest, widest, rate))
            return
        loose = _smallest_passing(attempt(top_worker, None), lowest, budget, self.request.workload.request_rate_per_s)
        if not _acceptable(loose) or self._beaten_at(job, loose):
            if not _acceptable(loose):
                self._record(job, loose)
            return
        knee = self._knee(job, top_worker, screened.top_cap, loose, shape.worker.gpus)
        guarded = replace(shape.worker, max_running_requests=knee.cap)
        start = loose.config.roles[0].replicas
        self._record(
            job, _smallest_passing(attempt(guarded, knee), start, budget, self.request.workload.request_rate_per_s)
        )

    def _evaluate_pd(self, job: _Job) -> None:
        """Replicas of both roles without a batch guard (a bound), then the decode knee and the final fleet."""
        prefill, decode = job.prefill, job.decode
        assert prefill is not None and decode is not None
        prefill_worker = replace(
            prefill.shape.worker, max_running_requests=prefill.top_cap, speculative=decode.shape.worker.speculative
        )
        top_decode = replace(decode.shape.worker, max_running_requests=decode.top_cap)
        start = (self._minimum_replicas(prefill.capacity), self._minimum_replicas(decode.capacity))
        if job.hopeless:
            config = self._pd_config(prefill_worker, start[0], top_decode, start[1])
            prefill_screen = self.prefill_unloaded.get(prefill.shape)
            assert prefill_screen is not None
            self._hopeless(
                job,
                prefill_screen.prediction,
                lambda: self._evaluate(job, config, self._predict(job.pool, config), None)[0],
            )
            return
        loose = self._size_pd(job, prefill_worker, top_decode, start, None)
        if not _acceptable(loose) or self._beaten_at(job, loose):
            if not _acceptable(loose):
                self._record(job, loose)
            return
        prefills, decodes = loose.config.roles[0].replicas, loose.config.roles[1].replicas
        # A capability point is a balanced fleet: one decode replica and its share of the prefill replicas.
        point_gpus = decode.shape.worker.gpus + prefill.shape.worker.gpus * prefills / decodes
        knee = self._knee(job, top_decode, decode.top_cap, loose, point_gpus)
        decode_worker = replace(decode.shape.worker, max_running_requests=knee.cap)
        self._record(job, self._size_pd(job, prefill_worker, decode_worker, (prefills, decodes), knee))

    def _size_pd(
        self,
        job: _Job,
        prefill_worker: WorkerConfig,
        decode_worker: WorkerConfig,
        start: tuple[int, int],
        knee: BatchKnee | None,
    ) -> Evaluated:
        """Grow whichever role's SLOs fail, from `start` (prefill, decode replicas), within the budget."""
        prefills, decodes = start
        within: Evaluated | None = None
        evaluated: Evaluated | None = None
        for _ in range(PD_SIZING_STEPS):
            config = self._pd_config(prefill_worker, prefills, decode_worker, decodes)
            evaluated, ok = self._evaluate(job, config, self._predict(job.pool, config), knee)
            if not evaluated.within_budget:
                break
            within = evaluated
            if ok:
                break
            failing = {check.bound.metric for check in evaluated.checks if not check.met}
            starved = not evaluated.sustains_rate or SloMetric.E2E in failing
            if starved or failing & PER_TOKEN_METRICS:
                decodes += max(1, decodes // 4)
            if starved or SloMetric.TTFT in failing:
                prefills += max(1, prefills // 4)
        final = within or evaluated
        assert final is not None
        return final

    # ------------------------------------------------------------------------------------ driving

    def run(self, jobs: list[_Job], prediction_budget: int | None) -> None:
        def order(job: _Job) -> tuple[float, ...]:
            bound = _bound(self.request.objective, job, self.price_scale) or (float(job.bound_gpus),)
            return (*bound, 1.0 / max(job.bound_capacity_per_gpu, 1e-12))

        start = self.cache.calls
        ordered = sorted(jobs, key=order)
        for index, job in enumerate(ordered):
            if prediction_budget is not None and self.cache.calls - start >= prediction_budget:
                self.outcome.unexplored = len(ordered) - index
                return
            if self.incumbents.beaten(job):
                self.outcome.pruned += 1
                continue
            self.evaluate(job)
        if not any(candidate.allowed and _acceptable(candidate) for candidate in self.outcome.candidates):
            # Closest to the bounds first, among those whose fleet can fit the budget at all.
            def closeness(item: tuple[float, _Job, Callable[[], Evaluated]]) -> tuple[bool, float]:
                return (item[1].bound_gpus > item[1].pool.max_gpus, item[0])

            for _, job, fleet in sorted(self.deferred, key=closeness)[:NEAREST_HOPELESS]:
                try:
                    self._record(job, fleet())
                except UnpredictableConfig:
                    continue


def _finalists(ranked: Sequence[_Screened], count: int) -> list[_Screened]:
    """The first `count` shapes, plus the best narrow-EP one if none is narrow.

    Keeping a narrow shape lets the technique comparison see P/D without wide EP.
    """
    chosen = list(ranked[:count])
    if all(Technique.WIDE_EP in s.shape.techniques for s in chosen):
        narrow = next((s for s in ranked if Technique.WIDE_EP not in s.shape.techniques), None)
        if narrow is not None:
            chosen.append(narrow)
    return chosen


def _worst(checks: Sequence[SloCheck]) -> SloCheck | None:
    """The check furthest over (or least under) its bound."""
    return max(checks, key=lambda check: check.ratio, default=None)


def _unreachable(worst: SloCheck, role: str = "") -> str:
    where = f" {role}" if role else ""
    return (
        f"misses {worst.bound.label} even unloaded{where}: {worst.predicted_s * 1e3:.4g} ms against "
        f"{worst.required_s * 1e3:.4g} ms (the limit less the margin)"
    )


def _acceptable(candidate: Evaluated) -> bool:
    return candidate.meets_slo and candidate.sustains_rate and candidate.within_budget


def _replicas_for_rate(candidate: Evaluated, rate: float) -> int:
    """Replicas the rate needs, from the capacity a sized fleet reported (capacity scales with replicas)."""
    replicas = candidate.config.roles[0].replicas
    per_replica = candidate.prediction.max_request_rate_per_s / replicas
    return math.ceil(rate / per_replica - 1e-9) if per_replica > 0 else replicas


def _smallest_passing(
    attempt: Callable[[int], tuple[Evaluated, bool]], lowest: int, budget: int, rate: float
) -> Evaluated:
    """The fleet at the smallest replica count ≥ `lowest` meeting every SLO: gallop to the budget, bisect.

    Each step also jumps to the count the reported capacity needs for the rate. When even the budget
    falls short, the fleet at the budget (the best this shape can do within it); when the rate alone
    needs more than the budget, the fleet the rate needs.
    """
    results: dict[int, tuple[Evaluated, bool]] = {}

    def ok(replicas: int) -> bool:
        if replicas not in results:
            results[replicas] = attempt(replicas)
        return results[replicas][1]

    if lowest >= budget:
        first = attempt(lowest)[0]
        needed = _replicas_for_rate(first, rate)
        return attempt(needed)[0] if needed > lowest else first
    failed, step, replicas = lowest - 1, 1, lowest
    while not ok(replicas):
        failed = replicas
        if replicas >= budget:
            return results[replicas][0]
        replicas = min(budget, max(replicas + step, _replicas_for_rate(results[replicas][0], rate)))
        step *= 2
    while replicas - failed > 1:
        middle = (failed + replicas) // 2
        if ok(middle):
            replicas = middle
        else:
            failed = middle
    return results[replicas][0]


def run_search(request: PlanRequest, cache: PredictionCache, prediction_budget: int | None = None) -> SearchOutcome:
    """Screen every legal configuration of the request on every pool, then evaluate best bound first.

    `prediction_budget` bounds the predictions spent after screening; jobs left are counted as unexplored.
    """
    search = _Search(request, cache)
    jobs: list[_Job] = []
    for pool in request.pools:
        ctx = legality_context(request.arch, pool, request.search)
        if request.search.disaggregation is not Disaggregation.ALWAYS:
            jobs += search.screen_unified(ctx)
        if request.search.disaggregation is not Disaggregation.NEVER:
            jobs += search.screen_disaggregated(ctx)
    search.run(jobs, prediction_budget)
    return search.outcome
