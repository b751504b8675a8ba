"""The oracle: the cheapest configuration the truth itself lets meet every SLO — the yardstick of the loop.

Among candidate layouts (typically the planner's candidates, or for a measured table the configurations it
contains), `find_oracle` looks for the cheapest fleet whose *simulated* windows meet every SLO while serving
the offered load. Judging by simulation rather than by a formula keeps the oracle honest about everything the
twin models (CUDA-graph buckets, queueing, prefill pauses, noise): the configuration the closed loop converges
to is compared with what the same twin would have allowed.

Search: every layout is sized from a lower bound on the replicas it needs (its truth-given capacity, made
optimistic), and sized fleets are tried best-first in order of cost ($/Mtok at the offered load is
proportional to GPU-hours), growing a fleet by one replica (P/D: one prefill or one decode worker) when it
fails. The first fleet that passes is therefore the cheapest — up to the simulation budget and the
assumption that adding a replica never hurts. Layouts whose single-request decode is already slower than a
per-token SLO are skipped.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from frontier_operator.perf.types import Role, ServingConfig, Workload
from frontier_operator.planner.types import PER_TOKEN_METRICS, SloBound, SloMetric
from frontier_operator.sim.changes import with_replicas
from frontier_operator.sim.fleet import FleetSimulation
from frontier_operator.sim.observe import observe_window
from frontier_operator.sim.timing import PrefillMode, ReplicaTiming, Truth, Unavailable
from frontier_operator.sim.traffic import TrafficPattern
from frontier_operator.tuning.budget import WINDOW_GOAL, allowed_misses
from frontier_operator.tuning.observation import GroupObservation, Observation, Variant

# The capacity bound is a mean-value estimate; shrinking the replicas it implies keeps it a lower bound.
_CAPACITY_OPTIMISM = 1.3
# A fleet must finish this share of what arrived while it was measured (below: it is falling behind).
SERVED_FRACTION = 0.95


def cost_per_mtok(config: ServingConfig, workload: Workload, price_per_gpu_hour: Mapping[str, float] | float) -> float:
    """$ per million output tokens when `config` serves `workload` (the planner's definition)."""
    dollars_per_hour = 0.0
    for deployment in config.roles:
        gpu = deployment.worker.gpu
        price = price_per_gpu_hour if isinstance(price_per_gpu_hour, float | int) else price_per_gpu_hour[gpu]
        dollars_per_hour += deployment.gpus * float(price)
    tokens_per_s = workload.request_rate_per_s * workload.output_tokens.mean
    return dollars_per_hour / 3600.0 / tokens_per_s * 1e6 if tokens_per_s > 0 else math.inf


def client_group(observation: Observation, variant: Variant = Variant.STABLE) -> GroupObservation | None:
    """The group whose latencies the client sees: unified, or decode for P/D."""
    return observation.group(Role.UNIFIED, variant) or observation.group(Role.DECODE, variant)


def slo_violations(group: GroupObservation | None, slos: Sequence[SloBound]) -> list[str]:
    """Every SLO `group` misses, in words; no data counts as a miss (an SLO cannot be shown met without data)."""
    return [text for _bound, text in _missed_bounds(group, slos)]


def _missed_bounds(group: GroupObservation | None, slos: Sequence[SloBound]) -> list[tuple[SloBound | None, str]]:
    """Each missed bound with its words (None: no data at all, which misses every bound)."""
    if group is None:
        return [(None, "no data")]
    missed: list[tuple[SloBound | None, str]] = []
    for bound in slos:
        values = getattr(group, bound.metric.value)
        if values is None:
            missed.append((bound, f"{bound.label}: no data"))
            continue
        value = values.at(bound.percentile)
        if value > bound.limit_s:
            missed.append((bound, f"{bound.label} {value * 1e3:.0f} ms > {bound.limit_s * 1e3:.0f} ms"))
    return missed


class Verdict(NamedTuple):
    """What simulating one fleet showed: met or not, why, and the metrics of the windows that missed
    (empty when the fleet failed otherwise — unavailable, falling behind, no data)."""

    met: bool
    reason: str
    missed_metrics: frozenset[SloMetric] = frozenset()


@dataclass(frozen=True)
class OracleCheck:
    config: ServingConfig
    cost_per_mtok: float
    met: bool
    reason: str


@dataclass(frozen=True)
class OracleResult:
    best: OracleCheck | None
    checks: tuple[OracleCheck, ...]
    exhausted: bool

    @property
    def config(self) -> ServingConfig | None:
        return None if self.best is None else self.best.config

    @property
    def cost_per_mtok(self) -> float | None:
        return None if self.best is None else self.best.cost_per_mtok


def check_config(
    truth: Truth,
    config: ServingConfig,
    workload: Workload,
    slos: Sequence[SloBound],
    *,
    traffic: TrafficPattern | None = None,
    warmup_s: float = 300.0,
    measure_s: float = 1200.0,
    window_s: float = 300.0,
    seed: int = 0,
    window_goal: float = WINDOW_GOAL,
) -> Verdict:
    """(met, reason): simulate `config`; every SLO must hold in at least `window_goal` of the windows (a
    measurement of fewer than 1 / (1 − goal) windows therefore allows no miss) and the fleet must keep up."""
    try:
        fleet = FleetSimulation(truth, config, workload, traffic=traffic, seed=seed)
    except Unavailable as error:
        return Verdict(False, f"unavailable: {error.reason}")
    fleet.advance(warmup_s)
    arrived, completed = fleet.arrived, fleet.completed
    windows = max(1, round(measure_s / window_s))
    allowed = allowed_misses(windows, window_goal)
    misses: list[str] = []
    metrics: set[SloMetric] = set()
    for index in range(windows):
        start = fleet.now
        fleet.advance(window_s)
        missed = _missed_bounds(client_group(observe_window(fleet, start, fleet.now)), slos)
        if missed:
            misses.append(f"window {index + 1}/{windows}: {'; '.join(text for _, text in missed)}")
            if any(bound is None for bound, _ in missed):
                return Verdict(False, "; ".join(misses))
            metrics.update(bound.metric for bound, _ in missed if bound is not None)
            if len(misses) > allowed:
                return Verdict(False, "; ".join(misses), frozenset(metrics))
    offered = fleet.arrived - arrived
    served = fleet.completed - completed
    if offered > 0 and served < SERVED_FRACTION * offered:
        return Verdict(False, f"falls behind: served {served} of {offered} requests")
    if misses:
        return Verdict(
            True, f"every SLO met in {windows - len(misses)} of {windows} windows of {window_s:.0f} s ({misses[0]})"
        )
    return Verdict(True, f"every SLO met in {windows} windows of {window_s:.0f} s")


def _entry_and_main(config: ServingConfig) -> tuple[Role, Role]:
    return (Role.PREFILL, Role.DECODE) if config.disaggregated else (Role.UNIFIED, Role.UNIFIED)


def _per_request_s(
    prefill: ReplicaTiming, decode: ReplicaTiming, workload: Workload, load: float
) -> tuple[float, float]:
    """(prefill seconds, decode seconds per output token) of one request at `load` requests per replica; with
    attention DP the ranks prefill side by side, so a request holds the replica for a share of its forward."""
    prompt = workload.input_tokens.mean
    cached = prompt * workload.prefix_cache_hit_rate
    context = prompt + workload.output_tokens.mean / 2.0
    batch = max(1, round(load))
    ranks = prefill.attention_ranks
    first = prefill.prefill_s(prompt - cached, cached, load, ranks) / ranks
    token = decode.decode_step_s(batch, context, load) / decode.accept_length
    return first, token


def replica_capacity(truth: Truth, config: ServingConfig, workload: Workload) -> tuple[float, float]:
    """(requests/s one entry replica sustains, requests/s one decode replica sustains): mean-value bounds."""
    entry, main = _entry_and_main(config)
    prefill = truth.timing(config, entry, workload)
    decode = truth.timing(config, main, workload)
    output = max(workload.output_tokens.mean - 1.0, 0.0)
    context = workload.input_tokens.mean + workload.output_tokens.mean
    cap = decode.batch_cap
    if decode.kv_capacity_tokens:
        cap = max(1, min(cap, int(decode.kv_capacity_tokens / max(context, 1.0))))
    loads = sorted({*(2**k for k in range(int(math.log2(max(cap, 1))) + 1)), cap})
    best_entry = best_decode = 0.0
    for load in loads:
        first, token = _per_request_s(prefill, decode, workload, load)
        if prefill.prefill_mode is PrefillMode.LOAD_INDEXED:
            # A measured replica: Little's law at `load` in flight.
            rate = load / (first + output * token) if first + output * token > 0 else 0.0
            best_entry = max(best_entry, rate)
            best_decode = max(best_decode, rate)
        elif config.disaggregated:
            best_entry = max(best_entry, 1.0 / first if first > 0 else math.inf)
            best_decode = max(best_decode, load / (output * token) if output * token > 0 else math.inf)
        else:
            # Prefill and decode share the GPU: GPU-seconds per request = prefill + its share of decode steps.
            busy = first + output * token / load
            best_entry = best_decode = max(best_entry, 1.0 / busy if busy > 0 else math.inf)
    return best_entry, best_decode


def _per_token_floor_s(truth: Truth, config: ServingConfig, workload: Workload) -> float:
    _entry, main = _entry_and_main(config)
    decode = truth.timing(config, main, workload)
    context = workload.input_tokens.mean + workload.output_tokens.mean / 2.0
    return decode.decode_step_s(1, context, 1.0) / decode.accept_length


def _sizes(config: ServingConfig) -> tuple[int, ...]:
    if config.disaggregated:
        prefill, decode = config.role(Role.PREFILL), config.role(Role.DECODE)
        assert prefill is not None and decode is not None
        return prefill.replicas, decode.replicas
    unified = config.role(Role.UNIFIED)
    assert unified is not None
    return (unified.replicas,)


def _sized(config: ServingConfig, sizes: tuple[int, ...]) -> ServingConfig:
    if config.disaggregated:
        return with_replicas(with_replicas(config, Role.PREFILL, sizes[0]), Role.DECODE, sizes[1])
    return with_replicas(config, Role.UNIFIED, sizes[0])


def _lower_bound_sizes(truth: Truth, config: ServingConfig, workload: Workload) -> tuple[int, ...]:
    entry_rate, decode_rate = replica_capacity(truth, config, workload)
    rate = workload.request_rate_per_s

    def needed(capacity: float) -> int:
        if capacity <= 0:
            return 1
        return max(1, math.ceil(rate / (capacity * _CAPACITY_OPTIMISM)))

    if config.disaggregated:
        return needed(entry_rate), needed(decode_rate)
    return (needed(entry_rate),)


def find_oracle(
    truth: Truth,
    candidates: Sequence[ServingConfig],
    workload: Workload,
    slos: Sequence[SloBound],
    price_per_gpu_hour: Mapping[str, float] | float,
    *,
    max_gpus: int | None = None,
    resize: bool = True,
    traffic: TrafficPattern | None = None,
    warmup_s: float = 300.0,
    measure_s: float = 1200.0,
    window_s: float = 300.0,
    seed: int = 0,
    max_simulations: int = 60,
) -> OracleResult:
    """The cheapest fleet among `candidates` (re-sized when `resize`) that meets `slos` in simulation."""
    checks: list[OracleCheck] = []
    queue: list[tuple[float, int, tuple[int, ...], int]] = []
    layouts: list[ServingConfig] = []
    seen: set[tuple[int, tuple[int, ...]]] = set()
    per_token = [b for b in slos if b.metric in PER_TOKEN_METRICS]

    def gpus(config: ServingConfig) -> int:
        return config.total_gpus

    def push(layout: int, sizes: tuple[int, ...]) -> None:
        if (layout, sizes) in seen or min(sizes) < 1:
            return
        seen.add((layout, sizes))
        sized = _sized(layouts[layout], sizes)
        if max_gpus is not None and gpus(sized) > max_gpus:
            return
        heapq.heappush(queue, (cost_per_mtok(sized, workload, price_per_gpu_hour), len(seen), sizes, layout))

    for config in candidates:
        try:
            floor = _per_token_floor_s(truth, config, workload)
            start = _lower_bound_sizes(truth, config, workload) if resize else _sizes(config)
        except Unavailable as error:
            checks.append(OracleCheck(config, cost_per_mtok(config, workload, price_per_gpu_hour), False, error.reason))
            continue
        if any(floor > bound.limit_s for bound in per_token):
            reason = f"one request alone decodes at {floor * 1e3:.1f} ms per token, above the per-token SLO"
            checks.append(OracleCheck(config, cost_per_mtok(config, workload, price_per_gpu_hour), False, reason))
            continue
        layouts.append(config)
        push(len(layouts) - 1, start)

    simulations = 0
    while queue:
        cost, _, sizes, layout = heapq.heappop(queue)
        if simulations >= max_simulations:
            return OracleResult(best=None, checks=tuple(checks), exhausted=True)
        sized = _sized(layouts[layout], sizes)
        simulations += 1
        met, reason, missed = check_config(
            truth,
            sized,
            workload,
            slos,
            traffic=traffic,
            warmup_s=warmup_s,
            measure_s=measure_s,
            window_s=window_s,
            seed=seed,
        )
        check = OracleCheck(sized, cost, met, reason)
        checks.append(check)
        if met:
            return OracleResult(best=check, checks=tuple(checks), exhausted=False)
        if not resize:
            continue
        if len(sizes) == 1:
            push(layout, (sizes[0] + 1,))
            continue
        # P/D: grow the role whose work set the missed latency — TTFT is the prefill's, the per-token metrics
        # the decode's, end-to-end both's; both when the verdict does not say (falling behind, no data).
        grow_prefill = not missed or bool(missed & {SloMetric.TTFT, SloMetric.E2E})
        grow_decode = not missed or bool(missed & (PER_TOKEN_METRICS | {SloMetric.E2E}))
        if grow_prefill:
            push(layout, (sizes[0] + 1, sizes[1]))
        if grow_decode:
            push(layout, (sizes[0], sizes[1] + 1))
    return OracleResult(best=None, checks=tuple(checks), exhausted=False)
