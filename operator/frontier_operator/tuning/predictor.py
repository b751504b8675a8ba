"""`CalibratedPredictor`: the performance model with this cluster's corrections, as the planner's `Predictor`.

Re-planning with it moves every candidate by what the observations taught: the configuration that was
observed by its full correction, others by the shared part of it (`calibration.transferred`). Decode
capacity scales with the TPOT correction (a fleet whose decode steps are 20 % slower than modelled carries
20 % fewer requests before its queues grow), and a fleet the corrected capacity cannot carry is reported
saturated (infinite latencies), as the model itself does. A role whose capacity was measured
(`calibration.CapacityEstimate`, on the same parallel layout) serves its modelled capacity divided by that factor
instead; the fleet's capacity is the least of its roles'.

The first token of a unified fleet faster than modelled waits in the corrected fleet's queue, not the raw one's:
the raw model is asked for its TTFT at the rate that loads it as much as the offered rate loads the corrected
fleet (`loaded`), and the TTFT factor scales that. Calibration learns the factor against the same reference
(`learning_reference`), so a fleet's own windows are still reproduced exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.correction import corrected_prediction
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.types import Percentiles, Prediction, Role, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.types import GpuPool, Predictor, PredictorWrapper
from frontier_operator.tuning.calibration import CalibrationState, Estimate, LatencyMetric, transferred
from frontier_operator.tuning.structure import (
    UNBOUNDED_CAP,
    decoding_role,
    latency_role,
    layout_key,
    replicas_of,
    structure_key,
    with_batch_cap,
    with_replicas,
    worker_key,
)

# A capacity factor this close under 1 loads the raw fleet as the corrected one: its TTFT is the raw one.
_SAME_LOAD = 0.02


@dataclass(frozen=True)
class Loaded:
    """What `CalibratedPredictor.loaded` finds: the capacity factor and the raw latencies the factors scale."""

    capacity_factor: float
    queued_ttft: Percentiles
    decoding: Prediction


@dataclass(frozen=True)
class CalibratedPredictor(PredictorWrapper):
    base: Predictor
    calibration: CalibrationState
    # p99 of a typical window instead of the one 19 windows in 20 keep (`Estimate.typical_tail_factor`).
    typical_tail: bool = False

    def correction(self, config: ServingConfig, metric: LatencyMetric) -> Estimate | None:
        """The estimate that applies to `config`: the learnt one on the observed structure, else its transfer."""
        source = self.calibration.of_metric(metric)
        if source is None:
            return None
        if structure_key(config) == self.calibration.reference:
            return source
        role = latency_role(config, metric is LatencyMetric.TTFT)
        return transferred(source, role, math.sqrt(source.prior_variance))

    def factors(self, config: ServingConfig, metric: LatencyMetric) -> tuple[float, float]:
        """The body factor of `metric` for `config` and its p99's further (tail) factor, from one lookup."""
        estimate = self.correction(config, metric)
        if estimate is None:
            return 1.0, 1.0
        return estimate.factor, estimate.typical_tail_factor if self.typical_tail else estimate.tail_factor

    def capacity_factors(self, config: ServingConfig) -> dict[Role, float]:
        """The measured service-time factor of each role of `config` whose worker's capacity was measured."""
        factors = {}
        for deployment in config.roles:
            estimate = self.calibration.capacity(deployment.role, layout_key(deployment.worker))
            if estimate is not None:
                factors[deployment.role] = estimate.factor
        return factors

    def predict(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        price_per_gpu_hour: float,
    ) -> Prediction:
        raw = self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)
        ttft_factor, ttft_tail = self.factors(config, LatencyMetric.TTFT)
        tpot_factor, tpot_tail = self.factors(config, LatencyMetric.TPOT)
        measured = self.capacity_factors(config)
        if (ttft_factor, tpot_factor, ttft_tail, tpot_tail) == (1.0, 1.0, 1.0, 1.0) and not measured:
            return raw
        loaded = self.loaded(
            arch,
            gpu,
            config,
            workload,
            price_per_gpu_hour=price_per_gpu_hour,
            raw=raw,
            tpot_factor=tpot_factor,
            measured=measured,
        )
        return corrected_prediction(
            raw,
            workload.request_rate_per_s,
            ttft_factor,
            tpot_factor,
            loaded.capacity_factor,
            ttft_tail=ttft_tail,
            tpot_tail=tpot_tail,
            queued_ttft=loaded.queued_ttft,
            decoding=loaded.decoding,
        )

    def loaded(
        self,
        arch: ModelArch,
        gpu: GpuSpec,
        config: ServingConfig,
        workload: Workload,
        *,
        price_per_gpu_hour: float,
        raw: Prediction,
        tpot_factor: float,
        measured: dict[Role, float],
    ) -> Loaded:
        """How many times the raw model's capacity the corrected fleet's is short of (< 1: it carries more), the
        raw model's TTFT at the rate that loads its fleet as the offered rate loads the corrected one, and the raw
        prediction whose decode the factor scales, given `config`'s TPOT factor and its roles' measured capacity
        factors (`factors`, `capacity_factors`).

        The raw TTFT holds the wait for a batch slot or a prefill at the raw fleet's utilisation. A fleet the
        windows show decoding 2.7× faster than modelled frees its slots 2.7× sooner: Llama-70B's TP2 cap 64 ×3 at
        26 requests/s was projected at 2.2 s p99 TTFT by the raw model's knee (its capacity 28 requests/s) where
        the corrected fleet, with a capacity of 76, ran at 0.5 s — and a canary of it was rolled back.

        Only a unified engine: its capacity is the one the factor corrects, and its first tokens wait for it. A
        P/D fleet's first tokens wait in its prefill role's queue, which the decode step's factor does not load.
        And only a fleet faster than modelled, whose raw queue is known to overstate the wait. A slower one's TTFT
        factor, learnt at its own load, already holds its queue there, and its corrected capacity saturates it
        past 1/factor; matched to its load as well, the raw model's knee — steeper than the twin's — confirmed
        one burst's window as a trend (DeepSeek-R1 on two TP8 replicas: p99 TTFT 1.43 s of 1 s once in 72 windows,
        a third replica added for the last three hours; measured in the closed-loop bench).

        Between the raw capacity and the corrected one the raw model is saturated, its decode infinite, where the
        corrected fleet still carries the rate (Llama-70B's TP2 cap 48 ×3, whose batch cap saturates the raw
        fleet at 25 requests/s, was rolled back as saturated on a window of 26 where the corrected fleet carries
        62). Its requests finish sooner than the raw fleet's, so fewer are in flight: the decode the factor scales
        there is the raw fleet's at the offered rate without its batch cap, whose batches are at least as large
        and whose prefills interleave at the offered rate, which the decode factor does not speed up. (Tried and
        not kept: the raw decode at full batches just under the raw knee, or at the matched rate, as for the first
        token: both leave out prefills the offered rate adds, and a fleet decoding 2.5× faster than modelled lost
        two of its three replicas on a projected 9.4 ms p50 TPOT, then measured 24 ms.)
        """
        factor = tpot_factor
        if measured:
            limits = role_capacities(
                self.base, arch, gpu, config, workload, price_per_gpu_hour=price_per_gpu_hour, raw=raw
            )
            # Roles without a measured capacity keep the default correction: the decode step's for decoding roles.
            capacity = min(
                limit / measured.get(role, 1.0 if role is Role.PREFILL else tpot_factor)
                for role, limit in limits.items()
            )
            factor = raw.max_request_rate_per_s / capacity if capacity > 0 else math.inf
        rate, knee = workload.request_rate_per_s, raw.max_request_rate_per_s
        decoding = raw
        if knee <= rate < knee / factor:
            uncapped = with_batch_cap(config, decoding_role(config), UNBOUNDED_CAP)
            decoding = self._raw_at(arch, gpu, uncapped, workload, price_per_gpu_hour=price_per_gpu_hour) or raw
        matched = rate * factor
        if config.disaggregated or factor > 1.0 - _SAME_LOAD or matched >= knee:
            return Loaded(factor, raw.ttft, decoding)  # P/D, not faster, or saturated either way
        at_load = self._raw_at(
            arch, gpu, config, replace(workload, request_rate_per_s=matched), price_per_gpu_hour=price_per_gpu_hour
        )
        return Loaded(factor, raw.ttft if at_load is None else at_load.ttft, decoding)

    def _raw_at(
        self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload, *, price_per_gpu_hour: float
    ) -> Prediction | None:
        try:
            return self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)
        except UnpredictableConfig:
            return None

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


def learning_reference(
    predictor: Predictor,
    arch: ModelArch,
    config: ServingConfig,
    pool: GpuPool,
    workload: Workload,
    *,
    calibration: CalibrationState,
) -> Prediction | None:
    """What a window of `config` at `workload` is compared with to learn its corrections (None: unpredictable).

    The raw model's prediction, its first token queued and its decode past the raw knee as `calibration` says
    the fleet is loaded (`CalibratedPredictor.loaded`): the factors learnt against it are the ones `predict`
    applies.
    """
    gpu, price = pool.gpu, pool.price_per_gpu_hour
    try:
        raw = predictor.predict(arch, gpu, config, workload, price)
    except UnpredictableConfig:
        return None
    calibrated = CalibratedPredictor(predictor, calibration)
    loaded = calibrated.loaded(
        arch,
        gpu,
        config,
        workload,
        price_per_gpu_hour=price,
        raw=raw,
        tpot_factor=calibrated.factors(config, LatencyMetric.TPOT)[0],
        measured=calibrated.capacity_factors(config),
    )
    decoding = loaded.decoding
    return replace(raw, ttft=loaded.queued_ttft, tpot=decoding.tpot, itl=decoding.itl)


# Replicas the other P/D role is multiplied by so that it cannot be what limits the fleet's capacity.
_UNBINDING_REPLICAS = 16


def role_capacities(
    predictor: Predictor,
    arch: ModelArch,
    gpu: GpuSpec,
    config: ServingConfig,
    workload: Workload,
    *,
    price_per_gpu_hour: float,
    raw: Prediction | None = None,
) -> dict[Role, float]:
    """The raw model's capacity (requests/s) of each role of `config` on its own.

    The model reports only the fleet's, the least of its roles'; one role's is the fleet's capacity when the
    other P/D role has so many replicas that it cannot be the limit. A unified fleet has one role.
    """
    raw = raw if raw is not None else predictor.predict(arch, gpu, config, workload, price_per_gpu_hour)
    if not config.disaggregated:
        return {deployment.role: raw.max_request_rate_per_s for deployment in config.roles}
    limits = {}
    for role, other in ((Role.PREFILL, Role.DECODE), (Role.DECODE, Role.PREFILL)):
        inflated = with_replicas(config, other, replicas_of(config, other) * _UNBINDING_REPLICAS)
        try:
            limits[role] = predictor.predict(arch, gpu, inflated, workload, price_per_gpu_hour).max_request_rate_per_s
        except UnpredictableConfig:
            limits[role] = raw.max_request_rate_per_s
    return limits
