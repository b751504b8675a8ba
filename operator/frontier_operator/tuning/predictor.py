"""`CalibratedPredictor`: the performance model with this cluster's corrections, as the planner's `Predictor`.

Re-planning with it moves every candidate by what the observations taught: the configuration that was
observed by its full correction, others by the shared part of it (`calibration.transferred`). Decode
capacity scales with the TPOT correction (a fleet whose decode steps are 20 % slower than modelled carries
20 % fewer requests before its queues grow), and a fleet the corrected capacity cannot carry is reported
saturated (infinite latencies), as the model itself does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.types import MemoryFit, Percentiles, Prediction, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.types import Predictor
from frontier_operator.tuning.calibration import CalibrationState, Estimate, LatencyMetric, transferred
from frontier_operator.tuning.structure import latency_role, structure_key, worker_key


def _scaled(percentiles: Percentiles, factor: float) -> Percentiles:
    return Percentiles(*(percentiles.at(p) * factor for p in (50, 90, 95, 99)))


def _e2e(e2e: Percentiles, ttft: Percentiles, ttft_factor: float, tpot_factor: float) -> Percentiles:
    # End-to-end = first token + the decode that follows; each part moves with its own correction.
    def one(p: int) -> float:
        total, first = e2e.at(p), ttft.at(p)
        if not math.isfinite(total):
            return total
        return total + (ttft_factor - 1.0) * first + (tpot_factor - 1.0) * max(0.0, total - first)

    return Percentiles(*(one(p) for p in (50, 90, 95, 99)))


def _served_ratio(before: float, now: float) -> float:
    if before == now:
        return 1.0
    return before / now if now > 0 else math.inf


@dataclass(frozen=True)
class CalibratedPredictor:
    base: Predictor
    calibration: CalibrationState

    def correction(self, config: ServingConfig, metric: LatencyMetric) -> Estimate | None:
        """The estimate that applies to `config`: the learnt one on the observed structure, else its transfer."""
        source = self.calibration.of_metric(metric)
        if source is None:
            return None
        if structure_key(config) == self.calibration.reference:
            return source
        role = latency_role(config, metric is LatencyMetric.TTFT)
        return transferred(source, role, math.sqrt(source.prior_variance))

    def factor(self, config: ServingConfig, metric: LatencyMetric) -> float:
        estimate = self.correction(config, metric)
        return estimate.factor if estimate is not None else 1.0

    def predict(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        price_per_gpu_hour: float,
    ) -> Prediction:
        raw = self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)
        ttft_factor = self.factor(config, LatencyMetric.TTFT)
        tpot_factor = self.factor(config, LatencyMetric.TPOT)
        if ttft_factor == 1.0 and tpot_factor == 1.0:
            return raw
        capacity = raw.max_request_rate_per_s / tpot_factor
        rate = workload.request_rate_per_s
        if rate >= capacity:
            infinite = Percentiles(math.inf, math.inf, math.inf, math.inf)
            ttft = tpot = itl = e2e = infinite
        else:
            ttft = _scaled(raw.ttft, ttft_factor)
            tpot = _scaled(raw.tpot, tpot_factor)
            itl = _scaled(raw.itl, tpot_factor)
            e2e = _e2e(raw.e2e, raw.ttft, ttft_factor, tpot_factor)
        # Cost per token grows when the corrected capacity serves less of the offered rate than the raw one.
        scale = _served_ratio(min(rate, raw.max_request_rate_per_s), min(rate, capacity))
        return replace(
            raw,
            ttft=ttft,
            tpot=tpot,
            itl=itl,
            e2e=e2e,
            max_request_rate_per_s=capacity,
            output_tokens_per_s_per_gpu=raw.output_tokens_per_s_per_gpu / scale,
            output_tokens_per_s_per_user=1.0 / tpot.p50 if tpot.p50 > 0 and math.isfinite(tpot.p50) else 0.0,
            cost_per_mtok=raw.cost_per_mtok * scale,
        )

    def memory_fit(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, context_tokens: int, *, role: Role = Role.UNIFIED
    ) -> MemoryFit:
        return self.base.memory_fit(arch, gpu, worker, context_tokens, role=role)

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        raw = self.base.decode_token_time(arch, gpu, worker, batch, context, kind=kind)
        source = self.calibration.of_metric(LatencyMetric.TPOT)
        if source is None:
            return raw
        if worker_key(worker) in self.calibration.reference_workers:
            return raw * source.factor
        return raw * transferred(source, source.role, math.sqrt(source.prior_variance)).factor
