"""Calibration: serialisation round-trip, bounds, and a reproducible fit."""

from __future__ import annotations

import dataclasses
import math
import statistics
from pathlib import Path

import pytest
import yaml

from frontier_operator.perf import fitting
from frontier_operator.perf.calibration import (
    COEFFICIENT_SPECS,
    Calibration,
    Coefficients,
    FamilyFit,
    render_calibration_yaml,
)
from frontier_operator.perf.fitting import (
    CAUCHY,
    PRIOR_SIGMA,
    SOFT_L1,
    FitOptions,
    RobustLoss,
    case_residual,
    coefficient_spread,
    fit_calibration,
    fit_family,
    robust_sigma,
)
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import iter_cases, read_rows

SILICON = Path(__file__).resolve().parents[3] / "shared" / "data" / "silicon" / "silicon_measurements.csv"


def _slice() -> list:  # type: ignore[type-arg]
    rows = read_rows(SILICON)
    return [case for _, case in iter_cases(rows, "sglang") if case.arch.name == "Qwen3-235B-A22B"]


def test_coefficients_are_clamped_into_physical_bounds() -> None:
    wild = Coefficients.from_dict({"hbm_efficiency": 3.0, "layer_overhead_us": -5.0, "wave_sync": float("nan")})
    assert wild.hbm_efficiency == 1.0
    assert wild.layer_overhead_us == 0.0
    assert wild.wave_sync == Coefficients.priors().wave_sync
    for spec in COEFFICIENT_SPECS:
        assert spec.lower <= spec.prior <= spec.upper, spec.name


def test_round_trip_through_yaml() -> None:
    fit = FamilyFit(Coefficients.priors(), rows=12, ttft_sigma=0.2, tpot_sigma=0.1)
    calibration = Calibration.uncalibrated().with_family("sm90", fit)
    text = render_calibration_yaml(calibration, "header line")
    assert text.startswith("# header line\n")
    again = Calibration.from_data(yaml.safe_load(text))
    assert again == calibration
    assert again.family("sm90").uncertainty == 0.2
    # Unknown families fall back to the priors with a wide uncertainty.
    assert again.family("gfx950").coefficients == Coefficients.priors()
    assert again.family("gfx950").uncertainty == 0.5


def test_shipped_calibration_loads_and_covers_the_measured_families() -> None:
    calibration = PerformanceModel.default().calibration
    archs = dict(calibration.families)
    assert {"sm90", "sm100", "sm103"} <= set(archs)
    for fit in archs.values():
        assert fit.rows > 0
        assert 0 < fit.tpot_sigma < 1
    assert dict(calibration.provenance)["backend"] == "sglang"


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_fit_is_reproducible_and_improves_on_the_priors() -> None:
    cases = _slice()
    assert len(cases) >= 20
    quick = FitOptions(max_iterations=6, starts=1)
    first = fit_calibration(cases, {"data": "slice"}, options=quick)
    second = fit_calibration(cases, {"data": "slice"}, options=quick)
    assert first == second
    assert render_calibration_yaml(first, "h") == render_calibration_yaml(second, "h")

    def error(model: PerformanceModel) -> float:
        residuals = [case_residual(model, case) for case in cases]
        logs = [abs(r.tpot) for r in residuals if r is not None and r.tpot is not None]
        logs += [abs(r.ttft) for r in residuals if r is not None and r.ttft is not None]
        return sum(logs) / len(logs)

    assert error(PerformanceModel(first)) < error(PerformanceModel(Calibration.uncalibrated()))
    fit = first.family("sm90")
    assert fit.rows == len(cases)
    assert math.isfinite(fit.ttft_sigma) and fit.tpot_sigma < 0.5


def test_robust_sigma_ignores_a_few_wild_rows() -> None:
    assert robust_sigma([0.1, -0.1, 0.1, -0.1, 5.0]) == pytest.approx(0.14826)


def test_the_refinement_lets_a_wild_row_go() -> None:
    """A residual's pull (weight × residual): soft-L1's saturates at its scale, so a run stalled 8× still pulls
    like any row missed by a third; the Cauchy refinement's falls back towards zero, and near zero both are
    least squares."""

    def pull(loss: RobustLoss, r: float) -> float:
        return loss.weights([r])[0] * r

    stalled = math.log(8.0)
    assert pull(SOFT_L1, stalled) > 0.9 * SOFT_L1.scale
    assert pull(CAUCHY, stalled) < 0.2 * pull(SOFT_L1, stalled)
    assert pull(CAUCHY, 0.02) == pytest.approx(0.02, rel=0.01) and pull(SOFT_L1, 0.02) == pytest.approx(0.02, rel=0.01)
    assert CAUCHY.value(stalled) < SOFT_L1.value(stalled)


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_stalled_runs_barely_move_the_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sixth Qwen3-235B run made to wait 8× longer for its first token: the refined fit keeps predicting the
    other runs' TTFT far better than soft-L1 alone would on the same rows."""
    cases = _slice()
    stalled = [
        dataclasses.replace(case, measured_ttft_ms=8.0 * case.measured_ttft_ms) if i % 6 == 0 else case
        for i, case in enumerate(cases)
    ]
    options = FitOptions(max_iterations=10, starts=1)

    def clean_rows_error() -> float:
        fit = fit_family("sm90", stalled, Calibration.uncalibrated(), options)
        model = PerformanceModel(Calibration.uncalibrated().with_family("sm90", fit))
        residuals = [case_residual(model, case) for i, case in enumerate(cases) if i % 6]
        return statistics.median(abs(r.ttft) for r in residuals if r is not None and r.ttft is not None)

    refined = clean_rows_error()
    monkeypatch.setattr(fitting, "CAUCHY", SOFT_L1)
    assert refined < 0.8 * clean_rows_error()


@pytest.mark.skipif(not SILICON.is_file(), reason="shared silicon data not present")
def test_the_spread_says_which_coefficients_the_rows_pin() -> None:
    """H200 rows: decode-heavy runs pin HBM efficiency and the first-token overhead; only P/D runs say anything
    about the P/D hand-off and the P/D waves — without them each is the prior's alone. sm90's attention efficiency
    sits at (within a percent of) peak."""
    calibration = PerformanceModel.default().calibration
    h200 = [case for _, case in iter_cases(read_rows(SILICON), "sglang") if case.gpu.arch == "sm90"]
    aggregated = [case for case in h200 if all(role.role.value == "unified" for role in case.config.roles)]
    assert 0 < len(aggregated) < len(h200)
    spread = {s.name: s for s in coefficient_spread("sm90", aggregated, calibration)}
    assert set(spread) == {spec.name for spec in COEFFICIENT_SPECS}
    assert all(0 < s.log_sigma <= PRIOR_SIGMA for s in spread.values())
    assert spread["pd_handoff_ms"].log_sigma == pytest.approx(PRIOR_SIGMA, rel=0.01)
    assert spread["pd_handoff_ms"].prior_only and not spread["hbm_efficiency"].prior_only
    # The per-layer and per-iteration costs have firm priors of their own; alone, the rows pin them far more
    # loosely (the per-layer cost ×/÷ 5 on sm90's 32-, 61- and 94-layer models). Held together, each narrows the
    # other: the rows then narrow each by a sixth to a third beyond its prior, where the GEMM efficiency, which
    # long prompts pin, owes its prior nearly nothing (×/÷ 1.05 against the prior's 1.35).
    for name in ("layer_overhead_us", "step_overhead_ms"):
        assert spread[name].prior_log_sigma == 0.5
        assert 0.5 * 0.6 < spread[name].log_sigma < 0.5 * 0.9 and not spread[name].prior_only
    assert spread["gemm_efficiency"].log_sigma < 0.2 * spread["gemm_efficiency"].prior_log_sigma
    assert spread["hbm_efficiency"].log_sigma < 0.3 and spread["ttft_overhead_ms"].log_sigma < 0.3
    assert spread["hbm_efficiency"].value == calibration.family("sm90").coefficients.hbm_efficiency
    assert spread["attention_efficiency"].value > 0.99 and not spread["hbm_efficiency"].at_bound
    assert spread["pd_wave_sync"].prior_only
    # With the P/D runs, their own wave synchronisation is pinned (×/÷ 1.8); the hand-off hardly (sm90's P/D
    # first tokens are mostly prefill and queue, and the waves they queue in).
    with_pd = {s.name: s for s in coefficient_spread("sm90", h200, calibration)}
    assert with_pd["pd_wave_sync"].log_sigma < 0.2 * PRIOR_SIGMA
    assert with_pd["pd_handoff_ms"].log_sigma < PRIOR_SIGMA


def test_the_coefficients_physics_knows_are_held_by_firm_priors() -> None:
    """Moving each coefficient one log unit off its prior costs (1 / σ)² in the objective: 1/0.3² for the GEMM
    efficiency, 4 for the per-layer and per-step costs, 1/0.4² for a collective's latency — what physics knows of
    them — 4 for an expert all-to-all's efficiency (what the families with many expert-parallel rows measured) and
    1/25 for the others (the weak default)."""
    problem = fitting._FamilyProblem("sm90", [], PerformanceModel.default().calibration)
    shifted = [center + 1.0 for center in problem.prior]
    penalties = dict(zip((spec.name for spec in COEFFICIENT_SPECS), problem.weighted([], [], shifted), strict=True))
    firm = {
        "gemm_efficiency": 0.3,
        "layer_overhead_us": 0.5,
        "step_overhead_ms": 0.5,
        "collective_latency_us": 0.4,
        "all_to_all_efficiency": 0.5,
    }
    for name, sigma in firm.items():
        assert penalties.pop(name) == pytest.approx(1.0 / sigma)
    assert all(value == pytest.approx(1.0 / PRIOR_SIGMA) for value in penalties.values())
    expected = sum(sigma**-2 for sigma in firm.values()) + (len(COEFFICIENT_SPECS) - len(firm)) / PRIOR_SIGMA**2
    assert fitting._objective(problem, shifted) == pytest.approx(expected)
