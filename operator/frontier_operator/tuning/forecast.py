"""Predictions for the decisions: the calibrated model at the observed workload, with the planner's margin.

Every "would this step meet the SLO?" the decision layer asks goes through `Forecaster`, so the same
corrected model and the same safety margin decide replicas, the batch cap, canaries and the plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import Percentiles, Prediction, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.choose import slo_margin
from frontier_operator.planner.types import GpuPool, Predictor, PredictorWrapper, SloBound
from frontier_operator.tuning.calibration import LatencyMetric
from frontier_operator.tuning.predictor import CalibratedPredictor
from frontier_operator.tuning.structure import UNBOUNDED_CAP


@dataclass(frozen=True)
class Forecaster:
    predictor: CalibratedPredictor
    arch: ModelArch
    confidence: float

    def predict(self, config: ServingConfig, pool: GpuPool, workload: Workload) -> Prediction | None:
        try:
            return self.predictor.predict(self.arch, pool.gpu, config, workload, pool.price_per_gpu_hour)
        except UnpredictableConfig:
            return None

    def meets(self, prediction: Prediction, slos: Sequence[SloBound], band: float = 0.0) -> bool:
        """Every bound predicted under its limit less its metric's safety margin (the planner's, so a step the
        planner would accept is accepted here too), and `band` (relative) below that."""
        return all(
            math.isfinite(value := bound.predicted(prediction))
            and value <= bound.limit_s * (1.0 - band) / (1.0 + slo_margin(prediction, bound, self.confidence))
            for bound in slos
        )

    @staticmethod
    def carries(prediction: Prediction, workload: Workload, headroom: float) -> bool:
        """The fleet's capacity exceeds the offered rate by `headroom` (relative): queues stay bounded under
        the rate's own fluctuations, which latency percentiles at the mean rate do not show."""
        return prediction.max_request_rate_per_s >= workload.request_rate_per_s * (1.0 + headroom)

    def sigma(self, config: ServingConfig, prediction: Prediction) -> float:
        """Relative one-sigma error of the corrected prediction for `config` (the worse of TTFT and TPOT)."""
        sigmas = [
            estimate.sigma
            for metric in LatencyMetric
            if (estimate := self.predictor.correction(config, metric)) is not None
        ]
        return max(sigmas) if sigmas else prediction.uncertainty

    def token_time(self, pool: GpuPool, worker: WorkerConfig, batch: float, workload: Workload) -> float | None:
        context = workload.input_tokens.mean + workload.output_tokens.mean / 2.0
        try:
            return self.predictor.decode_token_time(
                self.arch, pool.gpu, worker, max(1.0, batch), context, kind=workload.kind
            )
        except UnpredictableConfig:
            return None

    def memory_batch(self, pool: GpuPool, worker: WorkerConfig, role: Role, workload: Workload) -> int | None:
        """Largest batch per replica whose KV fits at the workload's mean context."""
        context = math.ceil(workload.input_tokens.mean + workload.output_tokens.mean)
        try:
            fit = self.predictor.memory_fit(
                self.arch, pool.gpu, replace(worker, max_running_requests=UNBOUNDED_CAP), context, role=role
            )
        except UnpredictableConfig:
            return None
        return fit.max_batch_at_context if fit.fits else None


def _faster(percentiles: Percentiles, optimism: float) -> Percentiles:
    return Percentiles(*(percentiles.at(p) * optimism for p in (50, 90, 95, 99)))


@dataclass(frozen=True)
class FasterModel(PredictorWrapper):
    """The model with every latency `optimism` (< 1) times its prediction and every capacity 1/`optimism`
    times: what the planner would choose if the model were pessimistic by that much — exploration's
    upper-confidence plan. A fleet the model reports saturated stays saturated (its queues are not modelled)."""

    base: Predictor
    optimism: float

    def predict(
        self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload, price_per_gpu_hour: float
    ) -> Prediction:
        raw = self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)
        tpot = _faster(raw.tpot, self.optimism)
        return replace(
            raw,
            ttft=_faster(raw.ttft, self.optimism),
            tpot=tpot,
            itl=_faster(raw.itl, self.optimism),
            e2e=_faster(raw.e2e, self.optimism),
            max_request_rate_per_s=raw.max_request_rate_per_s / self.optimism,
            output_tokens_per_s_per_user=1.0 / tpot.p50 if tpot.p50 > 0 and math.isfinite(tpot.p50) else 0.0,
        )

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        return self.base.decode_token_time(arch, gpu, worker, batch, context, kind=kind) * self.optimism
