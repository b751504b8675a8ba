"""A small deterministic stand-in for the performance model, and builders for planner tests.

The physics is deliberately simple but monotone in the ways the planner relies on: a decode step
streams the active weights plus the batch's KV cache at HBM speed; prefill runs at peak FLOP/s; a
replica saturates when the batch its rate needs exceeds its cap or its KV pool; latency percentiles
are fixed multiples of the mean. Speculative decoding divides the step by a fixed acceptance.
"""

from __future__ import annotations

import math
from dataclasses import replace

from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.models import find_model
from frontier_operator.catalog.quantization import find_kv_cache_format, find_quant_format
from frontier_operator.catalog.types import GpuSpec, KvCacheFormat, ModelArch, QuantFormat
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import (
    LengthDistribution,
    MemoryFit,
    Percentiles,
    Prediction,
    Role,
    ServingConfig,
    WorkerConfig,
    Workload,
)
from frontier_operator.planner.types import (
    GpuPool,
    Objective,
    PlanRequest,
    SearchSpace,
    SloBound,
    SloMetric,
)

GB = 1e9
RESERVED_GB = 10.0
STEP_OVERHEAD_S = 1.5e-3
ACCEPTED_PER_DRAFT_STEP = 0.7
PERCENTILE_FACTOR = {50: 1.0, 90: 1.15, 95: 1.25, 99: 1.5}
UNCERTAINTY = 0.10


def weight_format(name: str) -> QuantFormat:
    fmt = find_quant_format(name)
    assert fmt is not None, name
    return fmt


def kv_format(name: str) -> KvCacheFormat:
    fmt = find_kv_cache_format(name)
    assert fmt is not None, name
    return fmt


def model(name: str) -> ModelArch:
    arch = find_model(name)
    assert arch is not None, name
    return arch


def gpu(name: str) -> GpuSpec:
    spec = find_gpu(name)
    assert spec is not None, name
    return spec


class FakePredictor:
    """Counts its calls; `fail_tp` makes every worker of that TP width unpredictable."""

    def __init__(self, fail_tp: int | None = None) -> None:
        self.predict_calls = 0
        self.fail_tp = fail_tp

    # -- pieces --------------------------------------------------------------------------------------

    @staticmethod
    def _bytes_per_param(worker: WorkerConfig) -> float:
        return weight_format(worker.weight_format).weight_bytes_per_param

    @staticmethod
    def _kv_bytes_per_token(arch: ModelArch, worker: WorkerConfig) -> float:
        attention_tp = worker.tp // worker.attention_dp
        elements = arch.kv_elements_per_token()
        if arch.mla is None:
            elements = elements / min(attention_tp, arch.num_kv_heads)
        return elements * kv_format(worker.kv_cache_format).bytes_per_element

    def _check(self, worker: WorkerConfig) -> None:
        if self.fail_tp is not None and worker.tp == self.fail_tp:
            raise UnpredictableConfig(f"TP{worker.tp} is outside what the fake model covers")

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        self._check(worker)
        bandwidth = gpu.hbm_bandwidth_tbs * 1e12 * worker.gpus
        weights = arch.active_params * self._bytes_per_param(worker)
        kv = batch * context * self._kv_bytes_per_token(arch, worker) * (worker.tp // worker.attention_dp)
        step = (weights + kv) / bandwidth + STEP_OVERHEAD_S
        spec = worker.speculative
        if spec is None:
            return step
        tokens = 1 + ACCEPTED_PER_DRAFT_STEP * spec.num_steps
        return step * (1 + 0.15 * spec.num_steps) / tokens

    def memory_fit(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, context_tokens: int, *, role: Role = Role.UNIFIED
    ) -> MemoryFit:
        self._check(worker)
        weights_gb = arch.total_params * self._bytes_per_param(worker) / worker.gpus / GB
        pool_gb = max(0.0, gpu.memory_gb - RESERVED_GB - weights_gb)
        per_token = self._kv_bytes_per_token(arch, worker)
        kv_tokens = int(pool_gb * GB / per_token)
        per_rank = kv_tokens // max(1, context_tokens)
        max_batch = min(per_rank * worker.attention_dp, worker.max_running_requests) if pool_gb > 0 else 0
        return MemoryFit(gpu.memory_gb, weights_gb, RESERVED_GB, pool_gb, kv_tokens, max_batch)

    def _prefill_seconds(self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, workload: Workload) -> float:
        new_tokens = workload.input_tokens.mean * (1 - workload.prefix_cache_hit_rate)
        tflops = gpu.tflops("fp8") or gpu.tflops("bf16") or 100.0
        return 2 * arch.active_params * new_tokens / (tflops * 1e12 * 0.5 * worker.gpus) + 0.02

    # -- prediction ----------------------------------------------------------------------------------

    def predict(
        self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload, price_per_gpu_hour: float
    ) -> Prediction:
        self.predict_calls += 1
        decode_role = config.role(Role.DECODE) or config.role(Role.UNIFIED)
        prefill_role = config.role(Role.PREFILL)
        assert decode_role is not None
        worker = decode_role.worker
        for role in config.roles:
            self._check(role.worker)
        context = workload.input_tokens.mean + workload.output_tokens.mean / 2
        fit = self.memory_fit(arch, gpu, worker, math.ceil(context))
        if fit.max_batch_at_context < 1:
            raise UnpredictableConfig("no request fits")
        capacity_batch = float(fit.max_batch_at_context)
        steps = max(workload.output_tokens.mean - 1, 1)
        prefill_worker = prefill_role.worker if prefill_role else worker
        prefill_s = self._prefill_seconds(arch, gpu, prefill_worker, workload)

        def token_s(batch: float) -> float:
            return self.decode_token_time(arch, gpu, worker, max(batch, 1.0), context, kind=workload.kind)

        decodes = decode_role.replicas
        if prefill_role is None:
            decode_max = decodes * capacity_batch / (steps * token_s(capacity_batch) + capacity_batch * prefill_s)
            prefill_max = decodes / prefill_s
            rho = workload.request_rate_per_s / decodes * prefill_s
        else:
            decode_max = decodes * capacity_batch / (steps * token_s(capacity_batch))
            prefill_max = prefill_role.replicas / prefill_s
            rho = workload.request_rate_per_s / prefill_role.replicas * prefill_s
        fleet_max = min(decode_max, prefill_max)
        rate = workload.request_rate_per_s
        total_gpus = config.total_gpus
        served = min(rate, fleet_max)
        tokens_per_s = served * workload.output_tokens.mean
        cost = total_gpus * price_per_gpu_hour / 3600 / tokens_per_s * 1e6 if tokens_per_s > 0 else math.inf
        if rate >= fleet_max or rho >= 1:
            inf = Percentiles(math.inf, math.inf, math.inf, math.inf)
            return Prediction(
                inf, inf, inf, inf, capacity_batch, fleet_max, tokens_per_s / total_gpus, 0.0, cost, fit, UNCERTAINTY
            )
        slowdown = 1 / (1 - rho) if prefill_role is None else 1.0
        batch = 1.0
        for _ in range(50):
            batch = rate / decodes * steps * token_s(batch) * slowdown
        tpot = token_s(batch) * slowdown
        ttft = prefill_s * (1 + rho / (1 - rho))
        tpots = Percentiles(*(tpot * PERCENTILE_FACTOR[q] for q in (50, 90, 95, 99)))
        ttfts = Percentiles(*(ttft * PERCENTILE_FACTOR[q] for q in (50, 90, 95, 99)))
        e2e = Percentiles(*(ttfts.at(q) + steps * tpots.at(q) for q in (50, 90, 95, 99)))
        return Prediction(
            ttft=ttfts,
            tpot=tpots,
            itl=tpots,
            e2e=e2e,
            mean_batch=batch,
            max_request_rate_per_s=fleet_max,
            output_tokens_per_s_per_gpu=tokens_per_s / total_gpus,
            output_tokens_per_s_per_user=1 / tpot,
            cost_per_mtok=cost,
            memory=fit,
            uncertainty=UNCERTAINTY,
        )


# --------------------------------------------------------------------------------------------- builders


def pool(
    name: str = "h200", gpu_name: str = "H200", max_gpus: int = 16, rdma: bool = True, price: float = 2.0
) -> GpuPool:
    spec = gpu(gpu_name)
    return GpuPool(name, spec, spec.gpus_per_node, price, max_gpus, rdma)


def search(
    formats: tuple[str, ...] = ("bf16", "fp8"),
    kv: tuple[str, ...] = ("bf16",),
    **fields: object,
) -> SearchSpace:
    allowed = tuple(weight_format(name) for name in formats)
    allowed_kv = tuple(kv_format(name) for name in kv)
    fallback = tuple(weight_format(name) for name in ("bf16", "fp8", "nvfp4", "mxfp4") if name not in formats)
    fallback_kv = tuple(kv_format(name) for name in ("bf16", "fp8_e4m3") if name not in kv)
    space = SearchSpace(allowed, allowed_kv, fallback_quantizations=fallback, fallback_kv_cache_formats=fallback_kv)
    return replace(space, **fields)  # type: ignore[arg-type]


def chat_workload(rate: float = 4.0, input_mean: float = 1000, output_mean: float = 300) -> Workload:
    return Workload(
        request_rate_per_s=rate,
        input_tokens=LengthDistribution(input_mean, 0.5, int(input_mean * 4)),
        output_tokens=LengthDistribution(output_mean, 0.5, int(output_mean * 4)),
    )


def request(
    model_name: str = "Llama-3.1-70B-Instruct",
    *,
    tpot_ms: float = 30.0,
    ttft_ms: float = 2000.0,
    pools: tuple[GpuPool, ...] | None = None,
    space: SearchSpace | None = None,
    workload: Workload | None = None,
    objective: Objective = Objective.MINIMIZE_COST,
) -> PlanRequest:
    slos = (
        SloBound(SloMetric.TPOT, 50, tpot_ms / 1e3),
        SloBound(SloMetric.TTFT, 99, ttft_ms / 1e3),
    )
    return PlanRequest(
        arch=model(model_name),
        workload=workload or chat_workload(),
        slos=slos,
        pools=pools or (pool(),),
        search=space or search(),
        objective=objective,
    )
