"""The calibrated performance model: (model, GPU, serving configuration, workload) → latency, throughput, memory, $.

`PerformanceModel` is pure and cheap to call. It composes the physics (`kernels` roofline work, `comm`
collectives, `memory` fit) priced by the calibration coefficients of the GPU family (`steps`), speculative
acceptance (`speculative`) and the continuous-batching queue (`queueing`). Two entry points answer two
questions: `predict` for an open-loop request rate (what a planner needs) and `predict_at_concurrency` for a
closed-loop benchmark with a fixed number of clients (what the silicon measurements are). Both use the same
step times; at the rate the closed loop sustains, the open loop reproduces its desynchronised steady state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from statistics import NormalDist
from typing import TypeVar

from frontier_operator.catalog.data_files import load_data_file
from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.calibration import CALIBRATION_FILE, Calibration, Coefficients
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.formats import resolve_formats
from frontier_operator.perf.kernels import Layout, WorkerShape
from frontier_operator.perf.memory import (
    concurrent_capacity,
    kv_bytes_per_request,
    shape_of,
)
from frontier_operator.perf.memory import (
    memory_fit as _memory_fit,
)
from frontier_operator.perf.queueing import (
    DecodeService,
    PrefillService,
    SteadyState,
    closed_loop_aggregated,
    closed_loop_disaggregated,
    latency_quantiles,
    lognormal_quantile,
    max_rate_aggregated,
    max_rate_disaggregated,
    open_loop_aggregated,
    open_loop_disaggregated,
    poisson_count_quantile,
)
from frontier_operator.perf.speculative import accept_length
from frontier_operator.perf.steps import (
    Hardware,
    PrefillCost,
    decode_step_seconds,
    floor_seconds,
    iteration_overhead_seconds,
    prefill_cost,
    prefill_forward_seconds,
)
from frontier_operator.perf.types import (
    MemoryFit,
    Percentiles,
    Prediction,
    Role,
    ServingConfig,
    Speculative,
    WorkerConfig,
    Workload,
)

__all__ = ["ConcurrencyPrediction", "PerformanceModel", "UnpredictableConfig"]

_PERCENTILES = (50, 90, 95, 99)
# Equal-probability nodes of the input-length distribution. The prefill *time* distribution — its mean, its
# CV (what the prefill queue sees) and its quantiles (a request's own prefill at p99) — is the prefill cost
# at each length, not the length distribution scaled: fixed per-forward costs make it narrower, attention's
# quadratic term wider, and no prompt is longer than the workload's maximum.
_LENGTH_NODES = 8
_NODE_Z = tuple(NormalDist().inv_cdf((i + 0.5) / _LENGTH_NODES) for i in range(_LENGTH_NODES))
# Probability bins of a request's own prefill for the TTFT quantiles: finer in the tail, where p99 lives. Each
# bin is represented by its upper edge (the top one by the longest prompt), so the quantile is an upper bound.
_OWN_PREFILL_EDGES = (0.5, 0.75, 0.9, 0.95, 0.98, 0.99, 0.995, 0.999, 1.0)
# The last edge below 1 at which a workload without a maximum length is cut.
_UNBOUNDED_TOP = 0.9999


@dataclass(frozen=True)
class ConcurrencyPrediction:
    """Steady state of a closed-loop benchmark: `concurrency` clients, each resending when its reply ends."""

    ttft_s: float
    tpot_s: float
    requests_per_s: float
    output_tokens_per_s_per_gpu: float
    # Mean running requests per decode worker.
    decode_batch: float
    memory: MemoryFit
    uncertainty: float


@dataclass(frozen=True)
class _Role:
    """One role of the fleet resolved for prediction: hardware, replicas, memory, the decode side's service."""

    hardware: Hardware
    worker: WorkerConfig
    replicas: int
    memory: MemoryFit


@dataclass(frozen=True)
class _Plan:
    decode: _Role
    prefill: _Role | None  # None when aggregated
    decode_service: DecodeService
    prefill_service: PrefillService
    output_tokens: float
    # CV of one request's prefill time over the input-length distribution (the prefill queue's service CV).
    service_cv: float
    # A request's own latency at a probability level of the input-length distribution: the prefill of that
    # quantile's prompt and, in P/D, the transfer of its KV cache (only the open loop's percentiles ask, so it is
    # computed on demand).
    own_quantile_s: Callable[[float], float]
    # The hand-off's part that does not move with the prompt's length (P/D bootstrap; 0 when aggregated): the
    # prefill service's hand-off less the mean prompt's KV transfer, which the own latencies carry instead.
    fixed_handoff_s: float


# Memoised values per model instance; bounded so a long-running operator does not grow without limit.
_MEMO_LIMIT = 1 << 15


@dataclass
class _Memo:
    """Per-model memo of what a search asks again and again: the hardware of a worker and its prefills.

    Keys use the identity of the catalog objects (hashing a whole architecture on every call costs more than
    the prefill it saves); each entry keeps those objects alive and is checked against them, so an identity
    can never be recycled into a wrong hit.
    """

    hardware: dict[tuple[int, int, str, str, WorkerShape], tuple[ModelArch, GpuSpec, Hardware]] = field(
        default_factory=dict
    )
    prefill: dict[tuple[int, float, float, int, float], tuple[Hardware, PrefillCost]] = field(default_factory=dict)
    # Seconds per output token by (hardware, speculation, batch, context, workload kind): P/D sizing solves
    # the same decode side's batch for every prefill partner it tries, asking the same batches again.
    token: dict[tuple[int, Speculative | None, float, float, str], tuple[Hardware, float]] = field(default_factory=dict)


_Key = TypeVar("_Key")
_Value = TypeVar("_Value")


def _memoised(
    memo: dict[_Key, tuple[Hardware, _Value]], key: _Key, hw: Hardware, compute: Callable[[], _Value]
) -> _Value:
    """`compute()` once per key; the key holds `id(hw)`, so the entry keeps `hw` and is checked against it."""
    found = memo.get(key)
    if found is not None and found[0] is hw:
        return found[1]
    if len(memo) >= _MEMO_LIMIT:
        memo.clear()
    value = compute()
    memo[key] = (hw, value)
    return value


@dataclass(frozen=True)
class PerformanceModel:
    calibration: Calibration
    # Not part of the model's identity: the same calibration gives the same answers with or without it.
    _memo: _Memo = field(default_factory=_Memo, compare=False, repr=False)

    def _prefill_cost(
        self, hw: Hardware, new_tokens: float, prefix_tokens: float, chunk: int, waiting: float
    ) -> PrefillCost:
        key = (id(hw), new_tokens, prefix_tokens, chunk, waiting)
        return _memoised(
            self._memo.prefill, key, hw, lambda: prefill_cost(hw, new_tokens, prefix_tokens, chunk, waiting)
        )

    def _token_seconds(self, hw: Hardware, worker: WorkerConfig, batch: float, context: float, kind: str) -> float:
        key = (id(hw), worker.speculative, batch, context, kind)
        return _memoised(self._memo.token, key, hw, lambda: _token_seconds(hw, worker, batch, context, kind))

    @staticmethod
    def default() -> PerformanceModel:
        """The model with the calibration shipped in the package (``catalog/data/calibration.yaml``)."""
        return PerformanceModel(_shipped_calibration())

    # -- building blocks -------------------------------------------------------------------------------

    def coefficients(self, gpu: GpuSpec) -> Coefficients:
        return self.calibration.family(gpu.arch).coefficients

    def hardware(self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig) -> Hardware:
        _validate_worker(arch, worker)
        memo = self._memo.hardware
        shape = shape_of(worker)
        # Batch cap, chunk size and speculation do not change the hardware: workers differing only in them
        # share one (and so share their memoised prefills).
        key = (id(arch), id(gpu), worker.weight_format, worker.kv_cache_format, shape)
        found = memo.get(key)
        if found is not None and found[0] is arch and found[1] is gpu:
            return found[2]
        formats = resolve_formats(arch, gpu, worker.weight_format, worker.kv_cache_format)
        hw = Hardware.build(Layout.of(arch, formats, shape), gpu, self.coefficients(gpu))
        if len(memo) >= _MEMO_LIMIT:
            memo.clear()
        memo[key] = (arch, gpu, hw)
        return hw

    def decode_step_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float
    ) -> float:
        """Seconds of one plain decode iteration of `batch` running requests at mean `context` tokens."""
        return decode_step_seconds(self.hardware(arch, gpu, worker), batch, context)

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        """Seconds per output token of each running request, speculative decoding included, no prefill pauses."""
        return self._token_seconds(self.hardware(arch, gpu, worker), worker, batch, context, kind)

    def prefill_time(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        worker: WorkerConfig,
        input_tokens: float,
        *,
        cached_tokens: float = 0.0,
        requests: float = 1.0,
    ) -> float:
        """Seconds until `requests` prompts of `input_tokens` (`cached_tokens` of them cached) are prefilled."""
        hw = self.hardware(arch, gpu, worker)
        new_tokens = input_tokens - cached_tokens
        cost = prefill_cost(hw, new_tokens, cached_tokens, _chunk(worker, new_tokens), requests)
        return cost.latency_s * _draft_prefill_factor(arch, worker)

    def prefill_forward_time(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        worker: WorkerConfig,
        *,
        sequences: float,
        new_tokens: float,
        prefix_tokens: float = 0.0,
        ranks: int = 1,
    ) -> float:
        """Seconds of one prefill forward: `sequences` prompts (or pieces of prompts) of `new_tokens` each, after
        `prefix_tokens` of context, on each of `ranks` busy attention-DP ranks; each attends to its own tokens."""
        hw = self.hardware(arch, gpu, worker)
        seconds = prefill_forward_seconds(hw, max(sequences, 1.0), max(new_tokens, 1.0), prefix_tokens, max(ranks, 1))
        return seconds * _draft_prefill_factor(arch, worker)

    def memory_fit(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, context_tokens: int, *, role: Role = Role.UNIFIED
    ) -> MemoryFit:
        """Weights + SGLang's reserve → KV pool → the largest batch whose KV fits at `context_tokens` each."""
        _validate_worker(arch, worker)
        formats = resolve_formats(arch, gpu, worker.weight_format, worker.kv_cache_format)
        return _memory_fit(arch, gpu, formats, worker, context_tokens, role=role)

    def physical_floor(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        worker: WorkerConfig,
        batch: float,
        context: float,
        *,
        new_tokens_per_request: float = 1.0,
    ) -> float:
        """Lower bound of one forward: unavoidable bytes ÷ peak HBM bandwidth vs FLOPs ÷ peak (no coefficients)."""
        _validate_worker(arch, worker)
        formats = resolve_formats(arch, gpu, worker.weight_format, worker.kv_cache_format)
        return floor_seconds(
            arch,
            gpu,
            formats,
            shape_of(worker),
            requests=batch,
            context=context,
            new_tokens_per_request=new_tokens_per_request,
        )

    # -- predictions -----------------------------------------------------------------------------------

    def predict(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        price_per_gpu_hour: float,
    ) -> Prediction:
        """Open loop: the fleet receives `workload.request_rate_per_s`; latencies are math.inf past saturation."""
        plan = self._plan(arch, gpu, config, workload)
        osl = plan.output_tokens
        if plan.prefill is None:
            replicas = plan.decode.replicas
            rate = workload.request_rate_per_s / replicas
            arrival_cv = split_arrival_cv(workload.arrival_cv, replicas)
            state = open_loop_aggregated(
                rate,
                plan.decode_service,
                plan.prefill_service,
                osl,
                arrival_cv=arrival_cv,
                service_cv=plan.service_cv,
            )
            fleet_max = replicas * max_rate_aggregated(plan.decode_service, plan.prefill_service, osl)
            prefill_utilization = state.prefill_utilization
        else:
            n_p, n_d = plan.prefill.replicas, plan.decode.replicas
            arrival_cv = split_arrival_cv(workload.arrival_cv, n_p)
            state = open_loop_disaggregated(
                workload.request_rate_per_s,
                plan.decode_service,
                plan.prefill_service,
                osl,
                prefill_workers=n_p,
                decode_workers=n_d,
                arrival_cv=arrival_cv,
                service_cv=plan.service_cv,
            )
            fleet_max = max_rate_disaggregated(
                plan.decode_service, plan.prefill_service, osl, prefill_workers=n_p, decode_workers=n_d
            )
            prefill_utilization = 0.0  # decode is never paused by prefill in P/D
        total_gpus = config.total_gpus
        family = self.calibration.family(gpu.arch)
        served_rate = min(workload.request_rate_per_s, fleet_max)
        tokens_per_s = served_rate * workload.output_tokens.mean
        gpu_dollars_per_s = total_gpus * price_per_gpu_hour / 3600.0
        ttft, tpot, itl, e2e = _percentiles(state, plan, workload, prefill_utilization, arrival_cv)
        return Prediction(
            ttft=ttft,
            tpot=tpot,
            itl=itl,
            e2e=e2e,
            mean_batch=state.decode_batch,
            max_request_rate_per_s=fleet_max,
            output_tokens_per_s_per_gpu=tokens_per_s / total_gpus,
            output_tokens_per_s_per_user=1.0 / tpot.p50 if tpot.p50 > 0 and math.isfinite(tpot.p50) else 0.0,
            cost_per_mtok=gpu_dollars_per_s / tokens_per_s * 1e6 if tokens_per_s > 0 else math.inf,
            memory=plan.decode.memory,
            uncertainty=family.uncertainty,
            ttft_uncertainty=family.ttft_sigma,
            tpot_uncertainty=family.tpot_sigma,
            ttft_underprediction_q90=family.ttft_underprediction_q90,
            tpot_underprediction_q90=family.tpot_underprediction_q90,
        )

    def unloaded_ttft(self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload) -> float:
        """Mean TTFT without any queue: overhead + the mean prompt's prefill (+ KV hand-off in P/D)."""
        prefill = self._plan(arch, gpu, config, workload).prefill_service
        return prefill.overhead_s + prefill.single.latency_s + prefill.handoff_s

    def max_rate_meeting(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        meets: Callable[[Prediction], bool],
        *,
        relative_tolerance: float = 0.01,
    ) -> float:
        """Highest fleet request rate whose prediction still `meets` the SLO (0.0 when even a trickle fails).

        Latencies grow monotonically with the rate, so a bisection between zero and saturation finds it.
        """
        probe = replace(workload, request_rate_per_s=1e-6)
        saturation = self.predict(arch, gpu, config, probe, 0.0).max_request_rate_per_s
        if not meets(self.predict(arch, gpu, config, probe, 0.0)):
            return 0.0
        low, high = 0.0, saturation
        while high - low > relative_tolerance * max(high, 1e-9):
            middle = 0.5 * (low + high)
            if meets(self.predict(arch, gpu, config, replace(workload, request_rate_per_s=middle), 0.0)):
                low = middle
            else:
                high = middle
        return low

    def predict_at_concurrency(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        concurrency: float,
        *,
        recv_interval: int = 1,
        overlap_schedule: bool = True,
        requests_per_client: float | None = None,
    ) -> ConcurrencyPrediction:
        """Closed loop: `concurrency` clients over the whole fleet (the silicon benchmarks' `batch_size`).

        `requests_per_client`: the run's length (its requests ÷ `concurrency`) when its mean is to include the
        wave every client sends at the start (`queueing` module docstring); None for the steady state alone.

        `recv_interval`: the aggregated servers' `--scheduler-recv-interval`, which some published benchmarks
        launched with (`silicon.scheduler_recv_interval_of`); the operator never sets it. A P/D prefill worker
        runs prefill forwards only, after each of which SGLang receives at once, so it matters there little and
        is not modelled.

        `overlap_schedule`: False for a server whose overlap scheduler was off, as in published speculative-decoding
        runs on SGLang before 0.5.11 that did not opt in to it (`silicon.speculative_overlap_of`); the
        operator's SGLang overlaps always. Its decode then pays the host's per-request work in series
        (`_without_overlap`)."""
        if concurrency <= 0:
            raise UnpredictableConfig("concurrency must be positive")
        if requests_per_client is not None and requests_per_client < 1:
            raise UnpredictableConfig("a run sends every client at least one request")
        plan = self._plan(arch, gpu, config, workload)
        if not overlap_schedule:
            plan = _without_overlap(plan)
        coefficients = plan.decode.hardware.coefficients
        # Waves hold together differently in P/D, where prefills never pause decode: each fleet kind has its own.
        wave_sync = coefficients.wave_sync if plan.prefill is None else coefficients.pd_wave_sync
        sync = wave_synchronisation(wave_sync, workload.output_tokens.cv)
        first_wave_share = 0.0 if requests_per_client is None else 1.0 / requests_per_client
        if plan.prefill is None:
            replicas = plan.decode.replicas
            result = closed_loop_aggregated(
                concurrency / replicas,
                plan.decode_service,
                plan.prefill_service,
                plan.output_tokens,
                wave_sync=sync,
                wave_breakup=coefficients.wave_breakup,
                arrival_cv=workload.arrival_cv,
                service_cv=plan.service_cv,
                recv_interval=recv_interval,
                first_wave_share=first_wave_share,
            )
            rate = result.rate_per_s * replicas
        else:
            result = closed_loop_disaggregated(
                concurrency,
                plan.decode_service,
                plan.prefill_service,
                plan.output_tokens,
                prefill_workers=plan.prefill.replicas,
                decode_workers=plan.decode.replicas,
                wave_sync=sync,
                wave_breakup=coefficients.wave_breakup,
                arrival_cv=workload.arrival_cv,
                service_cv=plan.service_cv,
                first_wave_share=first_wave_share,
            )
            rate = result.rate_per_s
        return ConcurrencyPrediction(
            ttft_s=result.ttft_s,
            tpot_s=result.tpot_s,
            requests_per_s=rate,
            output_tokens_per_s_per_gpu=rate * workload.output_tokens.mean / config.total_gpus,
            decode_batch=result.decode_batch,
            memory=plan.decode.memory,
            uncertainty=self.calibration.family(gpu.arch).uncertainty,
        )

    # -- internals -------------------------------------------------------------------------------------

    def _plan(self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload) -> _Plan:
        input_mean = max(1.0, workload.input_tokens.mean)
        output_mean = max(1.0, workload.output_tokens.mean)
        hit = min(max(workload.prefix_cache_hit_rate, 0.0), 1.0)
        cached = input_mean * hit
        new_tokens = max(1.0, input_mean - cached)
        decode_context = input_mean + output_mean / 2.0
        full_context = math.ceil(input_mean + output_mean)

        unified = config.role(Role.UNIFIED)
        decode_role = config.role(Role.DECODE)
        prefill_role = config.role(Role.PREFILL)
        if unified is not None and (decode_role or prefill_role):
            raise UnpredictableConfig("a configuration is either aggregated (unified) or P/D, not both")
        if unified is None and (decode_role is None or prefill_role is None):
            raise UnpredictableConfig("a P/D configuration needs both a prefill and a decode role")
        main = unified if unified is not None else decode_role
        assert main is not None
        if main.replicas < 1:
            raise UnpredictableConfig("every role needs at least one replica")
        if main.worker.attention_cp > 1:
            # Only the prefill path of context parallelism is modelled (and planned): decode would read a
            # KV cache split by position, which the decode-step model does not describe.
            raise UnpredictableConfig("prefill context parallelism is modelled on prefill workers only")

        decode = self._role(arch, gpu, main.worker, replicas=main.replicas, context=full_context, role=main.role)
        decode_hw = decode.hardware
        capacity = concurrent_capacity(arch, decode_hw.formats, main.worker, decode.memory, decode_context)
        if capacity < 1:
            raise UnpredictableConfig(
                f"the KV pool ({decode.memory.kv_pool_gb:.1f} GB per GPU) "
                f"holds no request of {decode_context:.0f} tokens"
            )
        kind = workload.kind

        def token_seconds(batch: float) -> float:
            return self._token_seconds(decode_hw, main.worker, batch, decode_context, kind)

        spec = main.worker.speculative
        decode_service = DecodeService(token_seconds, capacity, accept_length(spec, kind) if spec else 1.0)
        c = decode_hw.coefficients
        if prefill_role is None:
            prefill_side = decode
            fixed_handoff = 0.0
            waiting = capacity

            def transfer_of(input_tokens: float) -> float:
                return 0.0
        else:
            if prefill_role.replicas < 1:
                raise UnpredictableConfig("every role needs at least one replica")
            prefill_side = self._role(
                arch, gpu, prefill_role.worker, replicas=prefill_role.replicas, context=full_context, role=Role.PREFILL
            )
            link = gpu.scale_out_bandwidth_gbs * 1e9 * c.link_efficiency
            formats, worker = prefill_side.hardware.formats, prefill_role.worker

            def transfer_of(input_tokens: float) -> float:
                return kv_bytes_per_request(arch, formats, worker, input_tokens) / link

            fixed_handoff = c.pd_handoff_ms * 1e-3
            waiting = capacity * main.replicas / prefill_role.replicas
        p_hw = prefill_side.hardware
        chunk = _chunk(prefill_side.worker, new_tokens)
        drafted = _draft_prefill_factor(arch, prefill_side.worker)

        def prefill_of(input_tokens: float) -> PrefillCost:
            fresh = max(1.0, input_tokens * (1.0 - hit))
            cost = self._prefill_cost(p_hw, fresh, input_tokens * hit, _chunk(prefill_side.worker, fresh), 1.0)
            return cost.scaled(drafted)

        lengths = workload.input_tokens

        def own_quantile(probability: float) -> float:
            # A long prompt's KV takes longer to move, as its prefill does: on the GLM-5 example's prefill workers a
            # 128k-token prompt moves 7.2 GB (0.30 s on H200's network), its 24k-token mean 1.3 GB (0.06 s).
            if probability >= 1.0 and lengths.max:
                length = float(lengths.max)
            else:
                z = NormalDist().inv_cdf(min(probability, _UNBOUNDED_TOP))
                length = length_quantile(input_mean, lengths.cv, lengths.max, z)
            return prefill_of(length).latency_s + transfer_of(length)

        nodes = [prefill_of(length) for length in length_nodes(input_mean, lengths.cv, lengths.max)]
        mean_latency = sum(node.latency_s for node in nodes) / len(nodes)
        mean_gpu = sum(node.gpu_seconds_per_request for node in nodes) / len(nodes)
        spread = math.sqrt(sum((node.latency_s - mean_latency) ** 2 for node in nodes) / len(nodes))
        prefill_service = PrefillService(
            single=PrefillCost(mean_latency, mean_gpu, 1.0),
            batched=self._prefill_cost(p_hw, new_tokens, cached, chunk, waiting).scaled(drafted),
            overhead_s=c.ttft_overhead_ms * 1e-3,
            handoff_s=transfer_of(input_mean) + fixed_handoff,
            ranks=prefill_side.worker.attention_dp,
        )
        return _Plan(
            decode=decode,
            prefill=None if prefill_role is None else prefill_side,
            decode_service=decode_service,
            prefill_service=prefill_service,
            output_tokens=output_mean,
            service_cv=spread / mean_latency if mean_latency > 0 else 0.0,
            own_quantile_s=own_quantile,
            fixed_handoff_s=fixed_handoff,
        )

    def _role(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, *, replicas: int, context: int, role: Role
    ) -> _Role:
        hw = self.hardware(arch, gpu, worker)
        fit = _memory_fit(arch, gpu, hw.formats, worker, context, role=role)
        if fit.kv_pool_gb <= 0:
            raise UnpredictableConfig(
                f"weights need {fit.weights_gb:.1f} GB per GPU but only {fit.gpu_memory_gb - fit.reserved_gb:.1f} GB "
                f"are left after SGLang's reserve on {gpu.name} (tp={worker.tp}, pp={worker.pp})"
            )
        return _Role(hw, worker, replicas, fit)


def length_quantile(mean: float, cv: float, longest: int | None, z: float) -> float:
    """Token length at standard-normal quantile `z` of a log-normal with this mean and CV, capped at `longest`."""
    value = mean
    if cv > 0 and mean > 0:
        sigma2 = math.log(1.0 + cv * cv)
        value = mean * math.exp(z * math.sqrt(sigma2) - sigma2 / 2.0)
    return min(value, float(longest)) if longest else value


def length_nodes(mean: float, cv: float, longest: int | None) -> list[float]:
    """Equal-probability lengths of the workload: log-normal midpoints rescaled to the stated mean, then capped.

    Rescaling keeps the workload's mean (a handful of midpoints under-represents a heavy tail); the cap keeps
    every prompt within the workload's maximum.
    """
    if cv <= 0:
        return [min(mean, float(longest)) if longest else mean]
    raw = [length_quantile(mean, cv, None, z) for z in _NODE_Z]
    scale = mean / (sum(raw) / len(raw))
    return [min(value * scale, float(longest)) if longest else value * scale for value in raw]


def split_arrival_cv(arrival_cv: float, servers: int) -> float:
    """Inter-arrival CV one of `servers` replicas sees when the router spreads the fleet's arrivals over them.

    Thinning a renewal process with probability p = 1/servers gives c² = p·c_a² + (1 − p) (a bursty stream's
    bursts land on different replicas); round-robin routing would smooth it further, so this is the safe side.
    """
    n = max(1, servers)
    return math.sqrt(max(0.0, arrival_cv**2 / n + (1.0 - 1.0 / n)))


# Output-length CV at which the fitted `wave_sync` applies: the synchronisation left after clients'
# completion times have been spread by that much length variation.
WAVE_REFERENCE_CV = 0.1


def wave_synchronisation(wave_sync: float, output_cv: float) -> float:
    """How synchronised a closed-loop benchmark's clients stay: fully with fixed output lengths (they finish
    together and come back together), less the more the lengths vary (`wave_sync` per 0.1 of CV)."""
    return float(wave_sync ** (max(output_cv, 0.0) / WAVE_REFERENCE_CV))


def _validate_worker(arch: ModelArch, worker: WorkerConfig) -> None:
    if worker.tp < 1 or worker.pp < 1 or worker.attention_dp < 1 or worker.attention_cp < 1 or worker.ep < 1:
        raise UnpredictableConfig("tp, pp, attention_dp, attention_cp and ep must all be at least 1")
    if worker.tp % (worker.attention_dp * worker.attention_cp):
        raise UnpredictableConfig(
            f"attention_dp={worker.attention_dp} × attention_cp={worker.attention_cp} must divide tp={worker.tp}"
        )
    if arch.is_moe and worker.tp % worker.ep:
        raise UnpredictableConfig(f"ep={worker.ep} must divide tp={worker.tp}")
    attention_tp = worker.tp // (worker.attention_dp * worker.attention_cp)
    if arch.num_attention_heads % attention_tp:
        raise UnpredictableConfig(
            f"{arch.num_attention_heads} attention heads do not split over attention-TP {attention_tp}"
        )
    if worker.pp > arch.num_layers:
        raise UnpredictableConfig(f"pp={worker.pp} exceeds the {arch.num_layers} layers")
    if worker.max_running_requests < 1:
        raise UnpredictableConfig("max_running_requests must be at least 1")


def _chunk(worker: WorkerConfig, new_tokens: float) -> int:
    """Chunked-prefill tokens per attention rank (SGLang divides the flag by attn_dp); ≤ 0 disables chunking."""
    if worker.chunked_prefill_size <= 0:
        return max(1, math.ceil(new_tokens))
    return max(1, worker.chunked_prefill_size // max(1, worker.attention_dp))


def _without_overlap(plan: _Plan) -> _Plan:
    """`plan` on a server that does its host work between the GPU's forwards (SGLang's overlap scheduler off).

    With the overlap scheduler, SGLang builds iteration n + 1 and processes iteration n's results while the GPU
    runs n, and the calibration's per-request cost (`request_overhead_us`) is what stays visible. Without it, that
    work waits for the forward and the forward for it: each iteration pays the per-request cost once more, in
    series. Only the part that grows with the batch is added; a fixed part cannot be told from the draft's
    acceptance in the runs this describes, which the model already predicts slower than measured at 4–8 clients.
    For DeepSeek-R1 FP8 with MTP on 8×B200 it is 2 % of an iteration at 64 requests and 8 % at 512, within
    SGLang's measured gain of overlapping speculative decoding, 5–10 % (sgl-project/sglang#9588)."""
    service = plan.decode_service
    hw = plan.decode.hardware
    per_request_s = hw.coefficients.request_overhead_us * 1e-6 / hw.shape.attention_dp

    def token_seconds(batch: float) -> float:
        return service.token_seconds(batch) + per_request_s * batch / service.tokens_per_step

    return replace(plan, decode_service=replace(service, token_seconds=token_seconds))


def _draft_prefill_factor(arch: ModelArch, worker: WorkerConfig) -> float:
    """Prefill time with speculative decoding over without: after the target's prefill forward SGLang runs the
    draft over the same prompt tokens (eagle_worker_v2 `_forward_prefill_batch`, "Draft prefill"), and a draft
    (an MTP head, an EAGLE-3 head) is about one layer of the target, as in `_token_seconds`."""
    return 1.0 + 1.0 / arch.num_layers if worker.speculative is not None else 1.0


def _token_seconds(hw: Hardware, worker: WorkerConfig, batch: float, context: float, kind: str) -> float:
    spec = worker.speculative
    if spec is None:
        return decode_step_seconds(hw, batch, context)
    # Draft steps: each is about one layer of the target at the same batch plus its fixed costs; the verify
    # pass scores every draft token in one target forward. Tokens per iteration = accept length.
    c = hw.coefficients
    per_draft_tokens = max(1.0, float(spec.eagle_topk))
    full = decode_step_seconds(hw, batch, context, per_draft_tokens)
    per_request = c.request_overhead_us * 1e-6 * batch / hw.shape.attention_dp
    fixed = hw.arch.num_layers * c.layer_overhead_us * 1e-6 + iteration_overhead_seconds(hw) + per_request
    per_layer = max(0.0, full - fixed) / hw.arch.num_layers
    # Every draft step is its own forward: it samples for every request as the target step does. It pays the
    # step overhead but not attention-DP's batch sync, which SGLang runs once per scheduler iteration.
    draft_step = per_layer + c.layer_overhead_us * 1e-6 + c.step_overhead_ms * 1e-3 + per_request
    verify = decode_step_seconds(hw, batch, context, float(max(1, spec.num_draft_tokens)))
    return (spec.num_steps * draft_step + verify) / accept_length(spec, kind)


def _percentiles(
    state: SteadyState, plan: _Plan, workload: Workload, prefill_utilization: float, arrival_cv: float
) -> tuple[Percentiles, Percentiles, Percentiles, Percentiles]:
    if state.saturated:
        inf = Percentiles(math.inf, math.inf, math.inf, math.inf)
        return inf, inf, inf, inf
    prefill = plan.prefill_service
    osl = plan.output_tokens
    steps = max(osl - 1.0, 1.0)
    token_s = state.decode_token_s
    ttft_q: dict[int, float] = {}
    tpot_q: dict[int, float] = {}
    itl_q: dict[int, float] = {}
    e2e_q: dict[int, float] = {}
    # Prefill pauses a running request suffers: arrivals during its decode, variance scaled by burstiness.
    pauses = prefill_utilization / max(prefill.single.gpu_seconds_per_request, 1e-12) * steps * state.tpot_s
    pause_s = prefill.single.gpu_seconds_per_request
    interrupted_share = min(1.0, prefill_utilization / max(prefill.single.gpu_seconds_per_request, 1e-12) * token_s)
    # Half the decode forward in flight (queueing.open_loop_aggregated).
    residual = 0.5 * plan.decode_service.forward_s(token_s) if plan.prefill is None and state.decode_batch > 0 else 0.0
    prefill_wait = _conditional_wait(state.prefill_wait_s - residual, state.prefill_wait_probability)
    slot = _conditional_wait(state.slot_wait_s, state.slot_wait_probability)
    lower = 0.0
    own: list[tuple[float, float]] = []
    for edge in _OWN_PREFILL_EDGES:
        own.append((edge - lower, plan.own_quantile_s(edge)))
        lower = edge
    # The own latencies carry each prompt's KV transfer; only the hand-off's fixed part is common to all.
    constant = prefill.overhead_s + residual + plan.fixed_handoff_s
    # The quantile of the sum of the waits and the request's own prefill (not the sum of their quantiles).
    for q, value in zip(_PERCENTILES, latency_quantiles(constant, prefill_wait, slot, own, _PERCENTILES), strict=True):
        ttft_q[q] = max(value, 0.0)
        tpot = token_s + pause_s * poisson_count_quantile(pauses, arrival_cv**2, q) / steps
        tpot_q[q] = max(tpot, token_s)
        itl_q[q] = token_s + (prefill.single.latency_s if 1 - q / 100 < interrupted_share else 0.0)
        output_q = lognormal_quantile(osl, workload.output_tokens.cv, q)
        e2e_q[q] = ttft_q[q] + max(output_q - 1.0, 0.0) * tpot_q[q]
    return (
        Percentiles(*(ttft_q[q] for q in _PERCENTILES)),
        Percentiles(*(tpot_q[q] for q in _PERCENTILES)),
        Percentiles(*(itl_q[q] for q in _PERCENTILES)),
        Percentiles(*(e2e_q[q] for q in _PERCENTILES)),
    )


def _conditional_wait(mean_wait: float, probability: float) -> tuple[float, float]:
    """(probability of waiting, mean wait of those who wait) from the unconditional mean wait."""
    if mean_wait <= 0 or probability <= 0:
        return 0.0, 0.0
    if not math.isfinite(mean_wait):
        return 1.0, math.inf
    p = min(probability, 0.999999)
    return p, mean_wait / p


@cache
def _shipped_calibration() -> Calibration:
    try:
        data = load_data_file(CALIBRATION_FILE)
    except FileNotFoundError:
        return Calibration.uncalibrated()
    return Calibration.from_data(data)
