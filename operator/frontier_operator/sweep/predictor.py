"""`SweepPredictor`: the performance model with measured sweep points overriding it near them.

Each measurement gives, per latency metric, `r = log(measured / predicted)` of the raw model at the point
(TTFT and TPOT, the geometric mean of p50 and p90, as the live calibration does). A prediction for a fleet is
corrected at the load each of its measured units carries (`units.unit_load`):

* **same unit**: `r` interpolated linearly in log(concurrency) between the unit's measured levels, held flat
  beyond them; it applies fully within `reach`× of the measured range and fades to the transferred part over
  `fade` further doublings (far from any measurement the measurement says little);
* **another unit of the same group** (model, GPU, weight format): a measurement shares part of its error with
  every configuration of the cluster — `shared_share` of the group's mean `r` (½, the equal split of shared
  and configuration-specific error that `tuning/calibration.py` assumes);
* capacity scales with the TPOT correction *at the unit's batch cap* (a measured knee says how fast the
  fullest batch runs), and a fleet the corrected capacity cannot carry is reported saturated, as the model
  itself does; cost per token grows when the corrected capacity serves less of the offered rate.

A ratio beyond ×3 either way is not a model error but a broken run (the live calibration's
`MAX_PLAUSIBLE_FACTOR`); such metrics are left out. Tuning's `CalibratedPredictor` can wrap this predictor:
live observations then correct what the sweep left.
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from frontier_operator.catalog.types import GpuSpec, ModelArch
from frontier_operator.perf.correction import corrected_prediction
from frontier_operator.perf.types import Prediction, ServingConfig, WorkerConfig, Workload
from frontier_operator.planner.types import Predictor, PredictorWrapper
from frontier_operator.sweep.types import Latency, SweepMeasurement
from frontier_operator.sweep.units import group_key, unit_cap, unit_key, unit_load, worker_key

MAX_PLAUSIBLE_FACTOR = 3.0
SHARED_ERROR_SHARE = 0.5
DEFAULT_REACH = 2.0
DEFAULT_FADE_DOUBLINGS = 3.0
# Relative error of a prediction at a measured load: twice the run-to-run spread (one run, one seed).
MEASURED_UNCERTAINTY = 0.06


def log_ratio(measured: Latency, predicted_p50: float, predicted_p90: float) -> float | None:
    pairs = ((measured.p50, predicted_p50), (measured.p90, predicted_p90))
    if any(not (m > 0 and p > 0 and math.isfinite(m) and math.isfinite(p)) for m, p in pairs):
        return None
    value = sum(math.log(m / p) for m, p in pairs) / len(pairs)
    return value if abs(value) <= math.log(MAX_PLAUSIBLE_FACTOR) else None


@dataclass(frozen=True)
class _Curve:
    """(concurrency, log ratio) of one unit and one metric, by concurrency."""

    points: tuple[tuple[float, float], ...]

    def at(self, load: float) -> float:
        points = self.points
        if load <= points[0][0]:
            return points[0][1]
        if load >= points[-1][0]:
            return points[-1][1]
        for (c0, r0), (c1, r1) in itertools.pairwise(points):
            if c0 <= load <= c1:
                weight = math.log(load / c0) / math.log(c1 / c0) if c1 > c0 else 0.0
                return r0 + weight * (r1 - r0)
        return points[-1][1]

    def weight(self, load: float, reach: float, fade: float) -> float:
        low, high = self.points[0][0] / reach, self.points[-1][0] * reach
        load = max(load, 1e-9)
        if low <= load <= high:
            return 1.0
        doublings = math.log2(low / load) if load < low else math.log2(load / high)
        return max(0.0, 1.0 - doublings / fade)


def _curves(measurements: Sequence[SweepMeasurement], metric: str) -> tuple[dict[str, _Curve], dict[str, float]]:
    by_key: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    by_group: dict[str, list[float]] = defaultdict(list)
    for m in measurements:
        if metric == "ttft":
            r = log_ratio(m.ttft, m.predicted.ttft_p50_s, m.predicted.ttft_p90_s)
        else:
            r = log_ratio(m.tpot, m.predicted.tpot_p50_s, m.predicted.tpot_p90_s)
        if r is None:
            continue
        by_key[m.key][float(m.concurrency)].append(r)
        by_group[m.group].append(r)
    curves = {
        key: _Curve(tuple((c, sum(rs) / len(rs)) for c, rs in sorted(levels.items()))) for key, levels in by_key.items()
    }
    groups = {group: sum(rs) / len(rs) for group, rs in by_group.items()}
    return curves, groups


@dataclass(frozen=True)
class SweepPredictor(PredictorWrapper):
    base: Predictor
    measurements: tuple[SweepMeasurement, ...]
    shared_share: float = SHARED_ERROR_SHARE
    reach: float = DEFAULT_REACH
    fade_doublings: float = DEFAULT_FADE_DOUBLINGS
    _ttft: tuple[dict[str, _Curve], dict[str, float]] = field(init=False, repr=False, compare=False)
    _tpot: tuple[dict[str, _Curve], dict[str, float]] = field(init=False, repr=False, compare=False)
    # Streaming worker → its measured aggregated unit (the knee search asks per-worker decode times).
    _workers: dict[str, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_ttft", _curves(self.measurements, "ttft"))
        object.__setattr__(self, "_tpot", _curves(self.measurements, "tpot"))
        workers = {m.worker_key: m.key for m in self.measurements if not m.disaggregated}
        object.__setattr__(self, "_workers", workers)

    def log_factor(self, config: ServingConfig, metric: str, load: float) -> float:
        """The log correction of `metric` ("ttft" or "tpot") for `config`'s units at `load` in flight each."""
        curves, groups = self._ttft if metric == "ttft" else self._tpot
        shared = self.shared_share * groups.get(group_key(config), 0.0)
        curve = curves.get(unit_key(config))
        if curve is None:
            return shared
        weight = curve.weight(load, self.reach, self.fade_doublings)
        return weight * curve.at(load) + (1.0 - weight) * shared

    def measured(self, config: ServingConfig) -> bool:
        return unit_key(config) in self._tpot[0] or unit_key(config) in self._ttft[0]

    def predict(
        self, arch: ModelArch, gpu: GpuSpec, config: ServingConfig, workload: Workload, price_per_gpu_hour: float
    ) -> Prediction:
        raw = self.base.predict(arch, gpu, config, workload, price_per_gpu_hour)
        if not self.measurements or not (math.isfinite(raw.tpot.p50) and math.isfinite(raw.ttft.p99)):
            return raw
        load = unit_load(config, raw)
        ttft_factor = math.exp(self.log_factor(config, "ttft", load))
        tpot_factor = math.exp(self.log_factor(config, "tpot", load))
        capacity_factor = math.exp(self.log_factor(config, "tpot", float(unit_cap(config))))
        if ttft_factor == 1.0 and tpot_factor == 1.0 and capacity_factor == 1.0:
            return raw
        corrected = corrected_prediction(raw, workload.request_rate_per_s, ttft_factor, tpot_factor, capacity_factor)
        return replace(corrected, uncertainty=self._uncertainty(config, load, raw.uncertainty))

    def _uncertainty(self, config: ServingConfig, load: float, model_sigma: float) -> float:
        """Near its measurements a unit is known to the measurement's own error; far from them, to the model's."""
        curve = self._tpot[0].get(unit_key(config))
        if curve is None:
            return model_sigma
        weight = curve.weight(load, self.reach, self.fade_doublings)
        return weight * min(model_sigma, MEASURED_UNCERTAINTY) + (1.0 - weight) * model_sigma

    def decode_token_time(
        self, arch: ModelArch, gpu: GpuSpec, worker: WorkerConfig, batch: float, context: float, *, kind: str = "chat"
    ) -> float:
        # The knee search asks per-batch decode time of a worker; the unit's TPOT correction at that batch applies.
        raw = self.base.decode_token_time(arch, gpu, worker, batch, context, kind=kind)
        key = self._workers.get(worker_key(worker))
        curve = self._tpot[0].get(key) if key is not None else None
        if curve is None:
            return raw
        weight = curve.weight(batch, self.reach, self.fade_doublings)
        return raw * math.exp(weight * curve.at(batch))
