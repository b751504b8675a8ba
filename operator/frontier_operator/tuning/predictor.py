"""`CalibratedPredictor`: the performance model with this cluster's corrections, as the planner's `Predictor`.

Re-planning with it moves every candidate by what the observations taught: the configuration that was
observed by its full correction, others by the shared part of it (`calibration.transferred`). Decode
capacity scales with the TPOT correction (a fleet whose decode steps are 20 % slower than modelled carries
20 % fewer requests before its queues grow), and a fleet the corrected capacity cannot carry is reported
saturated (infinite latencies), as the model itself does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.correction import corrected_prediction
from frontier_operator.perf.types import MemoryFit, Prediction, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.types import Predictor
from frontier_operator.tuning.calibration import CalibrationState, Estimate, LatencyMetric, transferred
from frontier_operator.tuning.structure import latency_role, structure_key, worker_key


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
        return corrected_prediction(raw, workload.request_rate_per_s, ttft_factor, tpot_factor)

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
