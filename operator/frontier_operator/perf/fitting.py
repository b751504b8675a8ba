"""Fit the calibration coefficients of each GPU family on measured rows (`frontier calibrate`).

For every family (GPU compute architecture) we minimise, over the log of each coefficient,

    Σ_rows w_model · [soft-L1(log(TTFT_pred / TTFT_meas)) + soft-L1(log(TPOT_pred / TPOT_meas))]
      + Σ_coefficients ((log c − log prior) / σ_prior)²

with a bounded Levenberg–Marquardt iteration from three deterministic starting points, keeping the best
(pure Python, deterministic: the same rows give the same coefficients to the last digit). `w_model` gives
every model architecture the same total weight in its family. Log residuals make the fit scale-free (a
2 ms and a 2 s TTFT count alike); the soft-L1 loss (IRLS weights 1/√(1 + (r/δ)²)) keeps a few wild rows
— a benchmark stuck behind a KV-cache stall — from dragging the rest; the prior keeps coefficients that the
rows barely constrain near physically sensible values instead of letting them wander to a bound. It is weak
(σ_prior = PRIOR_SIGMA) except where a coefficient's spec says how well physics knows it (`prior_log_sigma`).
From the best start the fit is then refined under a Cauchy loss (weights 1/(1 + (r/δ)²)): soft-L1 still
lets every row missed by more than δ pull about as hard as a row missed by δ, so the file's stalled runs (B200
DeepSeek FP4 runs of November 2025 waiting 5–9 s for a first token that their EP twins serve in 0.2–0.6 s)
pulled every B200 prefill slower; under the Cauchy loss a row missed by a factor of 8 pulls a sixth as hard.
A redescending loss needs a start already near the bulk of the rows, which the soft-L1 stage gives it.

The error the planner must cover is then measured on models the fit never saw (`with_held_out_errors`):
each model left out in turn, its families refitted without it, its fully specified rows predicted.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from frontier_operator.perf.calibration import (
    COEFFICIENT_SPECS,
    Calibration,
    Coefficients,
    FamilyFit,
)
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import SiliconCase, predict_row

PRIOR_SIGMA = 5.0  # natural-log units: weak, it only decides coefficients the rows leave open
ROBUST_SCALE = 0.25  # soft-L1 transition: residuals beyond ~25 % count linearly, not quadratically
REFINE_SCALE = 0.3  # Cauchy refinement: a residual of r pulls with r / (1 + (r / scale)²), fading beyond the scale
MAX_ITERATIONS = 40
FINITE_DIFFERENCE = 1e-3
_NAMES = tuple(spec.name for spec in COEFFICIENT_SPECS)


@dataclass(frozen=True)
class Residual:
    """log(predicted / measured) for one row; None where that row has no measurement of the quantity."""

    ttft: float | None
    tpot: float | None


def case_residual(model: PerformanceModel, case: SiliconCase) -> Residual | None:
    """The row's log errors on what is fitted, or None when the model cannot predict it: no TTFT error for a row
    whose TTFT is not fitted (`SiliconCase.ttft_not_fitted`)."""
    try:
        prediction = predict_row(model, case)
    except UnpredictableConfig:
        return None

    def log_ratio(predicted_s: float, measured_ms: float | None) -> float | None:
        if measured_ms is None or measured_ms <= 0 or not math.isfinite(predicted_s) or predicted_s <= 0:
            return None
        return math.log(predicted_s * 1e3 / measured_ms)

    ttft = None if case.ttft_not_fitted else log_ratio(prediction.ttft_s, case.measured_ttft_ms)
    return Residual(ttft, log_ratio(prediction.tpot_s, case.measured_tpot_ms))


def _bounds() -> tuple[list[float], list[float]]:
    lower, upper = [], []
    for spec in COEFFICIENT_SPECS:
        # Coefficients that may be 0 are fitted in log space down to a thousandth of their prior.
        floor = spec.lower if spec.lower > 0 else spec.prior * 1e-3
        lower.append(math.log(floor))
        upper.append(math.log(spec.upper))
    return lower, upper


def _log_point(coefficients: Coefficients) -> list[float]:
    """The fit's coordinates (log of each coefficient) of `coefficients`, clamped into the bounds."""
    lower, upper = _bounds()
    values = coefficients.as_dict()
    return [
        min(max(math.log(max(values[name], 1e-300)), lo), hi) for name, lo, hi in zip(_NAMES, lower, upper, strict=True)
    ]


def _coefficients(z: Sequence[float]) -> Coefficients:
    return Coefficients.from_dict({name: math.exp(value) for name, value in zip(_NAMES, z, strict=True)})


def _solve(matrix: list[list[float]], vector: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting for the small normal equations."""
    n = len(vector)
    a = [[*row, vector[i]] for i, row in enumerate(matrix)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            continue
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(col + 1, n):
            factor = a[r][col] / a[col][col]
            if factor:
                for k in range(col, n + 1):
                    a[r][k] -= factor * a[col][k]
    x = [0.0] * n
    for col in reversed(range(n)):
        if abs(a[col][col]) < 1e-300:
            continue
        x[col] = (a[col][n] - sum(a[col][k] * x[k] for k in range(col + 1, n))) / a[col][col]
    return x


class _FamilyProblem:
    def __init__(self, arch: str, cases: Sequence[SiliconCase], base: Calibration) -> None:
        self.arch = arch
        self.cases = list(cases)
        self.base = base
        self.prior = [math.log(spec.prior) for spec in COEFFICIENT_SPECS]
        self.prior_sigma = [spec.prior_log_sigma or PRIOR_SIGMA for spec in COEFFICIENT_SPECS]
        # Every model architecture weighs the same in its family, however many rows it has: otherwise the
        # best-measured model (DeepSeek: most of the file) decides coefficients that must serve all models.
        counts: dict[str, int] = {}
        for case in self.cases:
            counts[case.arch.name] = counts.get(case.arch.name, 0) + 1
        mean_rows = len(self.cases) / max(1, len(counts))
        self.row_weights = [mean_rows / counts[case.arch.name] for case in self.cases]

    def raw_residuals(self, z: Sequence[float]) -> list[float]:
        fit = FamilyFit(_coefficients(z), rows=len(self.cases), ttft_sigma=0.0, tpot_sigma=0.0)
        model = PerformanceModel(self.base.with_family(self.arch, fit))
        out: list[float] = []
        for case in self.cases:
            residual = case_residual(model, case)
            # A row that becomes unpredictable mid-fit (it cannot: only memory makes rows unpredictable) or
            # loses a measurement contributes a neutral zero, keeping the residual vector's shape fixed.
            out.append(0.0 if residual is None or residual.ttft is None else residual.ttft)
            out.append(0.0 if residual is None or residual.tpot is None else residual.tpot)
        return out

    def weighted(self, raw: Sequence[float], weights: Sequence[float], z: Sequence[float]) -> list[float]:
        row_weights = [w for w in self.row_weights for _ in (0, 1)]
        data = [math.sqrt(w * m) * r for w, m, r in zip(weights, row_weights, raw, strict=True)]
        prior = [(v - c) / s for v, c, s in zip(z, self.prior, self.prior_sigma, strict=True)]
        return data + prior


@dataclass(frozen=True)
class RobustLoss:
    """A robust loss on log residuals: soft-L1 (monotone influence) or Cauchy (influence that falls back to zero)."""

    scale: float
    redescending: bool

    def weights(self, raw: Sequence[float]) -> list[float]:
        """IRLS weights ρ'(r) / 2r."""
        if self.redescending:
            return [1.0 / (1.0 + (r / self.scale) ** 2) for r in raw]
        return [1.0 / math.sqrt(1.0 + (r / self.scale) ** 2) for r in raw]

    def value(self, r: float) -> float:
        scale2 = self.scale**2
        if self.redescending:
            return scale2 * math.log1p(r * r / scale2)
        return 2 * scale2 * (math.sqrt(1 + r * r / scale2) - 1)


SOFT_L1 = RobustLoss(ROBUST_SCALE, redescending=False)
CAUCHY = RobustLoss(REFINE_SCALE, redescending=True)


def _jacobian_columns(
    problem: _FamilyProblem, z: Sequence[float], weights: Sequence[float], r: Sequence[float]
) -> list[list[float]]:
    """∂r/∂z_j of the weighted residuals `r` at `z`, one column per coefficient (forward differences; backward
    at an upper bound, so that no step leaves the box)."""
    upper = _bounds()[1]
    columns = []
    for j in range(len(z)):
        step = FINITE_DIFFERENCE if z[j] + FINITE_DIFFERENCE <= upper[j] else -FINITE_DIFFERENCE
        shifted = list(z)
        shifted[j] += step
        r_shift = problem.weighted(problem.raw_residuals(shifted), weights, shifted)
        columns.append([(a - b) / step for a, b in zip(r_shift, r, strict=True)])
    return columns


def _gram(columns: Sequence[Sequence[float]]) -> list[list[float]]:
    """JᵀJ of a Jacobian given by its columns."""
    n = len(columns)
    return [[sum(a * b for a, b in zip(columns[i], columns[k], strict=True)) for k in range(n)] for i in range(n)]


def _levenberg_marquardt(
    problem: _FamilyProblem, start: list[float], max_iterations: int, loss: RobustLoss = SOFT_L1
) -> list[float]:
    lower, upper = _bounds()
    z = [min(max(v, lo), hi) for v, lo, hi in zip(start, lower, upper, strict=True)]
    raw = problem.raw_residuals(z)
    damping = 1e-2
    for _ in range(max_iterations):
        weights = loss.weights(raw)
        r = problem.weighted(raw, weights, z)
        cost = sum(v * v for v in r)
        jacobian_columns = _jacobian_columns(problem, z, weights, r)
        n = len(z)
        jtj = _gram(jacobian_columns)
        jtr = [sum(a * b for a, b in zip(jacobian_columns[i], r, strict=True)) for i in range(n)]
        improved = False
        for _attempt in range(8):
            matrix = [
                [jtj[i][k] + (damping * (jtj[i][i] + 1e-9) if i == k else 0.0) for k in range(n)] for i in range(n)
            ]
            delta = _solve(matrix, [-v for v in jtr])
            candidate = [min(max(v + d, lo), hi) for v, d, lo, hi in zip(z, delta, lower, upper, strict=True)]
            candidate_raw = problem.raw_residuals(candidate)
            candidate_cost = sum(v * v for v in problem.weighted(candidate_raw, weights, candidate))
            if candidate_cost < cost:
                relative_gain = (cost - candidate_cost) / max(cost, 1e-12)
                z, raw = candidate, candidate_raw
                damping = max(damping / 3.0, 1e-7)
                improved = True
                break
            damping *= 4.0
        if not improved or relative_gain < 1e-6:
            break
    return z


def robust_sigma(values: Sequence[float]) -> float:
    """1.4826 × median absolute deviation from zero: the one-sigma of a normal error, blind to a few outliers."""
    if not values:
        return 0.5
    return 1.4826 * statistics.median(abs(v) for v in values)


def _objective(problem: _FamilyProblem, z: Sequence[float]) -> float:
    """The soft-L1 objective itself (what IRLS minimises), to compare fits from different starts."""
    raw = problem.raw_residuals(z)
    row_weights = [w for w in problem.row_weights for _ in (0, 1)]
    data = sum(m * SOFT_L1.value(r) for m, r in zip(row_weights, raw, strict=True))
    prior = sum(((v - c) / s) ** 2 for v, c, s in zip(z, problem.prior, problem.prior_sigma, strict=True))
    return data + prior


# Deterministic starting points: the priors, then "slow hardware, small overheads" and the reverse. The
# landscape has shallow valleys where efficiencies trade against fixed overheads; a few starts find the
# deeper one without randomness.
_START_SCALES = (
    (1.0, 1.0),
    (0.5, 4.0),
    (1.5, 0.25),
)


def _start(scale_efficiency: float, scale_overhead: float) -> list[float]:
    lower, upper = _bounds()
    z = []
    for spec, lo, hi in zip(COEFFICIENT_SPECS, lower, upper, strict=True):
        value = spec.prior
        if spec.unit == "fraction" and spec.name.endswith("efficiency"):
            value *= scale_efficiency
        elif spec.unit in ("µs", "ms"):
            value *= scale_overhead
        z.append(min(max(math.log(value), lo), hi))
    return z


@dataclass(frozen=True)
class FitOptions:
    """Effort of the fit; the defaults are what `frontier calibrate` ships. Fewer is for quick looks and tests."""

    max_iterations: int = MAX_ITERATIONS
    starts: int = len(_START_SCALES)
    # Start from these coefficients instead of the priors (then `starts` − 1 of the fixed starts follow).
    # A refit on a subset of the rows (leave-one-model-out) starts where the full fit ended: it lands in the
    # same valley in a fraction of the iterations.
    warm_start: Coefficients | None = None


# Refits of the held-out estimate: warm-started from the full fit, one start.
HELD_OUT_OPTIONS = FitOptions(starts=1)


def fit_family(
    arch: str, cases: Sequence[SiliconCase], base: Calibration, options: FitOptions = FitOptions()
) -> FamilyFit:
    problem = _FamilyProblem(arch, cases, base)
    best: tuple[float, list[float]] | None = None
    starts = [_start(scale_efficiency, scale_overhead) for scale_efficiency, scale_overhead in _START_SCALES]
    if options.warm_start is not None:
        starts = [_log_point(options.warm_start), *starts]
    for z0 in starts[: max(1, options.starts)]:
        z_start = _levenberg_marquardt(problem, z0, options.max_iterations)
        score = _objective(problem, z_start)
        if best is None or score < best[0]:
            best = (score, z_start)
    assert best is not None
    z = _levenberg_marquardt(problem, best[1], options.max_iterations, CAUCHY)
    coefficients = _coefficients(z)
    model = PerformanceModel(base.with_family(arch, FamilyFit(coefficients, len(cases), 0.0, 0.0)))
    residuals = [res for res in (case_residual(model, case) for case in cases) if res is not None]
    ttft = [r.ttft for r in residuals if r.ttft is not None]
    tpot = [r.tpot for r in residuals if r.tpot is not None]
    return FamilyFit(coefficients, rows=len(cases), ttft_sigma=robust_sigma(ttft), tpot_sigma=robust_sigma(tpot))


@dataclass(frozen=True)
class CoefficientSpread:
    """How well a family's rows determine one coefficient: its value and the log-σ of its posterior."""

    name: str
    value: float
    # One sigma of log(coefficient) given the rows and the prior (Gauss–Newton, at the fitted point): the
    # coefficient is known to within a factor exp(log_sigma). `prior_log_sigma` means the rows say nothing.
    log_sigma: float
    at_bound: bool
    prior_log_sigma: float

    @property
    def prior_only(self) -> bool:
        return self.log_sigma > 0.9 * self.prior_log_sigma


def coefficient_spread(arch: str, cases: Sequence[SiliconCase], calibration: Calibration) -> list[CoefficientSpread]:
    """Per coefficient of `arch` in `calibration`: how tightly its fittable rows among `cases` pin it.

    The fit's curvature at the fitted point, the robust weights held: information = JᵀJ / s² over the rows
    (s² the weighted residual variance, RSS / (rows − coefficients)) plus the prior's 1 / σ_prior²; the
    diagonal of its inverse is each coefficient's variance in log units, correlations with the others
    included. A coefficient that only trades against another (an efficiency against a fixed overhead) comes
    out wide even where each alone would look sharp. The planner leans on such coefficients where the rows
    never went: long prompts, other GPUs.
    """
    # The family's rows first: `fittable` predicts every row it is given, and the CLI asks once per family.
    problem = _FamilyProblem(arch, fittable([case for case in cases if case.gpu.arch == arch]), calibration)
    lower, upper = _bounds()
    fitted = calibration.family(arch).coefficients
    z = _log_point(fitted)
    raw = problem.raw_residuals(z)
    weights = CAUCHY.weights(raw)
    r = problem.weighted(raw, weights, z)
    columns = [column[: len(raw)] for column in _jacobian_columns(problem, z, weights, r)]
    data = r[: len(raw)]
    variance = sum(v * v for v in data) / max(1, len(raw) - len(z))
    n = len(z)
    prior_information = [sigma**-2 for sigma in problem.prior_sigma]
    information = [
        [value / max(variance, 1e-12) + (prior_information[i] if i == k else 0.0) for k, value in enumerate(row)]
        for i, row in enumerate(_gram(columns))
    ]
    values = fitted.as_dict()
    out = []
    for j, name in enumerate(_NAMES):
        unit = [1.0 if k == j else 0.0 for k in range(n)]
        covariance = _solve(information, unit)[j]
        bound = abs(z[j] - lower[j]) < 1e-9 or abs(z[j] - upper[j]) < 1e-9
        spread = math.sqrt(max(covariance, 0.0))
        out.append(CoefficientSpread(name, values[name], spread, bound, problem.prior_sigma[j]))
    return out


def held_out_key(case: SiliconCase) -> str:
    """The unit left out together: one model (its checkpoint path as the CSV names it)."""
    return case.model_path


def _held_out_job(job: tuple[str, str, list[SiliconCase], FitOptions]) -> tuple[str, str, FamilyFit]:
    group, arch, cases, options = job
    return group, arch, fit_family(arch, cases, Calibration.uncalibrated(), options)


def leave_one_out_calibrations(
    training: Sequence[SiliconCase],
    predicted: Sequence[SiliconCase],
    full: Calibration,
    *,
    key: Callable[[SiliconCase], str] = held_out_key,
    workers: int = 1,
    options: FitOptions = HELD_OUT_OPTIONS,
    warm: bool = True,
) -> dict[str, Calibration]:
    """Per held-out group of `predicted`: the calibration refitted without that group's rows.

    Only the families that hold rows of the group are refitted, on `training` minus the group, warm-started
    from `full` (or, without `warm`, from the priors as `options` says). The other families keep `full`,
    which is what a refit returns: a family only sees its own rows and the fit is deterministic. A family
    left with no rows runs on the priors, as an unseen GPU would.
    """
    groups = sorted({key(case) for case in predicted})
    jobs: list[tuple[str, str, list[SiliconCase], FitOptions]] = []
    for group in groups:
        touched = sorted({case.gpu.arch for case in predicted if key(case) == group})
        for arch in touched:
            rows = [case for case in training if case.gpu.arch == arch and key(case) != group]
            if not rows:
                continue
            start = replace(options, warm_start=full.family(arch).coefficients) if warm else options
            jobs.append((group, arch, rows, start))
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_held_out_job, jobs))
    else:
        results = [_held_out_job(job) for job in jobs]
    out: dict[str, Calibration] = {}
    for group in groups:
        calibration = full
        for arch in sorted({case.gpu.arch for case in predicted if key(case) == group}):
            refit = next((fit for g, a, fit in results if g == group and a == arch), None)
            if refit is None:
                calibration = Calibration(
                    tuple((a, f) for a, f in calibration.families if a != arch), calibration.provenance
                )
            else:
                calibration = calibration.with_family(arch, refit)
        out[group] = calibration
    return out


@dataclass(frozen=True)
class HeldOutError:
    """One family's held-out error of one metric: log(predicted / measured) over the rows of models left out.

    `covered` are the residuals the under-prediction quantile (the planner's margin) is taken over: every
    row for TPOT; for TTFT the rows in the planner's regime (see `PREFILL_DOMINATED`).
    """

    residuals: tuple[float, ...]
    covered: tuple[float, ...] | None = None

    @property
    def sigma(self) -> float:
        return robust_sigma(self.residuals)

    @property
    def underprediction_q90(self) -> float | None:
        """90th percentile of log(measured / predicted): the under-prediction nine rows in ten stay within."""
        covered = self.residuals if self.covered is None else self.covered
        if not covered:
            return None
        return _upper_quantile([-r for r in covered], UNDERPREDICTION_QUANTILE)


UNDERPREDICTION_QUANTILE = 0.9
# A closed-loop benchmark's TTFT is mostly the harness's queue once clients outnumber what the prefill
# drains between replies (waves, slot waits: accuracy.md). The planner sizes fleets so that TTFT is mostly
# the request's own prefill, so the TTFT margin is measured on the rows where the model attributes at least
# this share of the predicted TTFT to the unloaded path (overhead + prefill + hand-off). The selection uses
# the prediction, never the measurement.
PREFILL_DOMINATED = 0.5


def _upper_quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile, taken at the next order statistic up (the conservative side for a margin)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def held_out_errors(
    cases: Sequence[SiliconCase], calibrations: dict[str, Calibration], key: Callable[[SiliconCase], str] = held_out_key
) -> dict[str, tuple[HeldOutError, HeldOutError]]:
    """Per family: the (TTFT, TPOT) errors of `cases`, each predicted by the calibration that left it out."""
    ttft: dict[str, list[float]] = {}
    ttft_covered: dict[str, list[float]] = {}
    tpot: dict[str, list[float]] = {}
    for case in cases:
        model = PerformanceModel(calibrations[key(case)])
        residual = case_residual(model, case)
        if residual is None:
            continue
        if residual.ttft is not None:
            ttft.setdefault(case.gpu.arch, []).append(residual.ttft)
            if prefill_dominated(model, case):
                ttft_covered.setdefault(case.gpu.arch, []).append(residual.ttft)
        if residual.tpot is not None:
            tpot.setdefault(case.gpu.arch, []).append(residual.tpot)
    return {
        arch: (
            HeldOutError(tuple(ttft.get(arch, [])), tuple(ttft_covered.get(arch, []))),
            HeldOutError(tuple(tpot.get(arch, []))),
        )
        for arch in sorted(set(ttft) | set(tpot))
    }


def prefill_dominated(model: PerformanceModel, case: SiliconCase) -> bool:
    """Whether the model puts at least `PREFILL_DOMINATED` of the row's TTFT on the unloaded path."""
    try:
        predicted = predict_row(model, case)
        unloaded = model.unloaded_ttft(case.arch, case.gpu, case.config, case.workload)
    except UnpredictableConfig:
        return False
    return predicted.ttft_s > 0 and unloaded >= PREFILL_DOMINATED * predicted.ttft_s


def fittable(cases: Sequence[SiliconCase]) -> list[SiliconCase]:
    """Fully specified rows with both measurements that the model can predict (memory is coefficient-free).

    Rows whose deployment we had to guess (P/D worker counts missing) are left out of the fit: a guess
    that is wrong would teach the coefficients the guess, not the hardware.
    """
    prior_model = PerformanceModel(Calibration.uncalibrated())
    out = []
    for case in cases:
        if not case.fully_specified or case.not_fitted:
            continue
        if case.measured_ttft_ms is None or case.measured_tpot_ms is None:
            continue
        residual = case_residual(prior_model, case)
        if residual is not None and (residual.ttft is not None or case.ttft_not_fitted) and residual.tpot is not None:
            out.append(case)
    return out


def _fit_family_job(job: tuple[str, list[SiliconCase], FitOptions]) -> tuple[str, FamilyFit]:
    arch, cases, options = job
    return arch, fit_family(arch, cases, Calibration.uncalibrated(), options)


def fit_calibration(
    cases: Sequence[SiliconCase],
    provenance: dict[str, str] | None = None,
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    options: FitOptions = FitOptions(),
    *,
    held_out: bool = True,
) -> Calibration:
    """One FamilyFit per GPU compute architecture present in `cases`, families in sorted order.

    Families are independent (a row only ever uses its own GPU's coefficients), so `workers` > 1 fits
    them in parallel processes; the result does not depend on it.

    With `held_out` (what ships), each family's TTFT and TPOT sigma is measured leave-one-model-out on the
    fully specified rows — every model predicted by a refit that never saw it — not on the fit's own
    residuals: it is the error the planner should expect on a model it plans for, and it is what sizes the
    safety margin. Without it, the in-sample residual spread (quick looks, tests).
    """
    usable = fittable(cases)
    by_arch: dict[str, list[SiliconCase]] = {}
    for case in usable:
        by_arch.setdefault(case.gpu.arch, []).append(case)
    jobs = [(arch, by_arch[arch], options) for arch in sorted(by_arch)]
    if progress is not None:
        for arch, rows, _ in jobs:
            progress(f"fitting {arch} on {len(rows)} rows")
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as pool:
            results = list(pool.map(_fit_family_job, jobs))
    else:
        results = [_fit_family_job(job) for job in jobs]
    calibration = Calibration(families=(), provenance=tuple(sorted((provenance or {}).items())))
    for arch, fit in results:
        calibration = calibration.with_family(arch, fit)
    if not held_out:
        return calibration
    return with_held_out_errors(calibration, usable, workers=workers, progress=progress)


def with_held_out_errors(
    calibration: Calibration,
    usable: Sequence[SiliconCase],
    *,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
    warm: bool = False,
) -> Calibration:
    """`calibration` with each family's sigmas and under-prediction quantiles measured leave-one-model-out.

    The refits are cold — from the priors, every start, as the full fit — because a refit warm-started from
    the full fit keeps something of the model it leaves out (Qwen3-32B's held-out TPOT error: 13 % warm,
    22.5 % cold): the margins must not be optimistic. `warm` is for quick looks. The refits use the
    coefficients as the file stores them (six significant digits), so the shipped file alone reproduces them.
    """
    stored = Calibration.from_data(calibration.to_data())
    if progress is not None:
        progress("leave-one-model-out refits for the held-out error")
    options = HELD_OUT_OPTIONS if warm else FitOptions()
    refits = leave_one_out_calibrations(usable, usable, stored, workers=workers, options=options, warm=warm)
    for arch, (ttft, tpot) in held_out_errors(usable, refits).items():
        fit = replace(
            stored.family(arch),
            ttft_sigma=ttft.sigma,
            tpot_sigma=tpot.sigma,
            ttft_underprediction_q90=ttft.underprediction_q90,
            tpot_underprediction_q90=tpot.underprediction_q90,
        )
        stored = stored.with_family(arch, fit)
    return stored


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
