"""Accuracy benchmark: leave-one-model-out over the SGLang rows of the silicon measurements.

For every model of the file: refit the calibration without that model's rows, predict its rows at their
concurrency, compare with the measured TTFT and TPOT. Reports median and p90 absolute percentage error,
overall, per model and per GPU, and the coverage (share of rows predicted at all). A family (GPU
architecture) without any row of the left-out model keeps the full-data fit, which is exactly what a refit
would return (the fit of a family only sees that family's rows, and it is deterministic).

The full-data fit is the shipped calibration when it was fitted on this very file (its SHA-256 matches),
else a fresh fit. The refits are the ones `frontier calibrate` uses for its held-out errors
(`fitting.leave_one_out_calibrations`): from the priors, every start, as the full fit. `--warm` starts them
from the full fit with one start — about twice as fast, but a refit that starts where the full fit ended
keeps something of the model it leaves out (Qwen3-32B's TPOT error: 13 % warm, 22.5 % cold).

Two stricter / looser views are reported next to the headline:
* leave-one-architecture-out: DeepSeek-R1 and DeepSeek-V3 share one architecture and many of their rows
  are the same measurements filed under both names, so leaving out R1 still trains on V3. Leaving out the
  whole architecture shows how the model does on an unseen architecture.
* in-sample: the full fit predicting its own rows (how much of the error is the model, how much the data).

And the file's own repeatability: where one setup (model architecture, GPU, deployment, lengths,
concurrency) was measured more than once with different results, each result is "predicted" by the geometric
mean of the setup's other results — the error a perfect replay of another run would have — next to the
model's leave-one-model-out error on the same rows.

Usage: python bench/accuracy.py [--out bench/results/accuracy.json] [--data CSV] [--workers N]
Writes JSON and prints one summary line.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from frontier_operator.perf.calibration import Calibration
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.fitting import (
    HELD_OUT_OPTIONS,
    FitOptions,
    file_digest,
    fit_calibration,
    fittable,
    held_out_errors,
    leave_one_out_calibrations,
)
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.silicon import (
    DEPLOYMENT_ALTERNATIVES_PATH,
    DEPLOYMENT_SUPPLEMENT_PATH,
    SiliconCase,
    alternatives_of,
    complete_deployments,
    describe_deployment,
    flag_runs_slower_than_weaker_gpus,
    parse_row,
    predict_case,
    read_deployment_alternatives,
    read_deployment_supplement,
    read_rows,
)
from frontier_operator.planner.choose import covering_margin

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "silicon" / "silicon_measurements.csv"
DEFAULT_OUT = ROOT / "bench" / "results" / "accuracy.json"
BACKEND = "sglang"
GOALS = {"median_tpot_ape": 0.10, "median_ttft_ape": 0.20, "coverage": 0.95}


@dataclass(frozen=True)
class Row:
    index: int
    model: str
    gpu: str
    mode: str
    case: SiliconCase | None
    parse_error: str | None
    # Where a P/D row's missing worker counts came from ("twin <id>" or the supplement's source), else "".
    deployment: str = ""


@dataclass(frozen=True)
class Outcome:
    row: Row
    ttft_ape: float | None
    tpot_ape: float | None
    error: str | None
    # A request's mean end-to-end latency, TTFT + (OSL − 1) × TPOT, measured and predicted: how much of the
    # error is the split between the first token and the others (a harness's waves) rather than the work.
    e2e_ape: float | None = None
    # Signed: log(predicted / measured), > 0 where the model is slow. A group's median says which way it leans,
    # which the absolute errors cannot (a group can miss by 30 % with no bias at all, or all one way).
    ttft_log_error: float | None = None
    tpot_log_error: float | None = None


def load(path: Path) -> list[Row]:
    out = []
    published = read_deployment_alternatives()
    rows = flag_runs_slower_than_weaker_gpus(complete_deployments(read_rows(path), read_deployment_supplement()))
    for index, raw in enumerate(rows):
        if (raw.get("backend") or "").strip().lower() != BACKEND:
            continue
        model = (raw.get("model_path") or "").strip()
        gpu = (raw.get("system") or "").strip()
        mode = (raw.get("mode") or "").strip()
        alternatives = alternatives_of(raw, published)
        deployment = describe_deployment(raw, alternatives)
        try:
            out.append(Row(index, model, gpu, mode, parse_row(raw, alternatives), None, deployment))
        except UnpredictableConfig as error:
            out.append(Row(index, model, gpu, mode, None, error.reason, deployment))
    return out


def full_calibration(usable: Sequence[SiliconCase], data: Path, workers: int) -> tuple[Calibration, str]:
    """The fit on every usable row: the shipped file if it was fitted on `data` (and the shipped deployment
    supplement), else a fresh fit."""
    shipped = dict(PerformanceModel.default().calibration.provenance)
    digests = {
        "data_sha256": file_digest(data),
        "deployments_sha256": file_digest(DEPLOYMENT_SUPPLEMENT_PATH),
        "alternatives_sha256": file_digest(DEPLOYMENT_ALTERNATIVES_PATH),
    }
    if all(shipped.get(key) == digest for key, digest in digests.items()):
        return PerformanceModel.default().calibration, "shipped calibration (fitted on this file)"
    return fit_calibration(usable, workers=workers, held_out=False), "fitted afresh (the shipped file is of other data)"


def model_key(case: SiliconCase) -> str:
    return case.model_path


def architecture_key(case: SiliconCase) -> str:
    # DeepSeek-R1 and DeepSeek-V3 are one architecture (and share many measurements): left out together.
    return case.arch.architecture


def held_out(
    rows: Sequence[Row],
    usable: Sequence[SiliconCase],
    full: Calibration,
    key: Callable[[SiliconCase], str],
    *,
    workers: int,
    cold: bool,
) -> tuple[list[Outcome], dict[str, Calibration]]:
    """Every row predicted by the calibration refitted without its group (`key`); unparsed rows keep their error.

    Also returns the refits, one per group."""
    cases = [row.case for row in rows if row.case is not None]
    options = FitOptions() if cold else HELD_OUT_OPTIONS
    refits = leave_one_out_calibrations(usable, cases, full, key=key, workers=workers, options=options, warm=not cold)
    models = {group: PerformanceModel(calibration) for group, calibration in refits.items()}
    out = []
    for row in rows:
        if row.case is None:
            out.append(Outcome(row, None, None, row.parse_error))
        else:
            out.extend(evaluate(models[key(row.case)], [row]))
    return out, refits


def margin_data(usable: Sequence[SiliconCase], refits: dict[str, Calibration]) -> dict[str, dict[str, object]]:
    """Per GPU family, what sizes the planner's margins: the held-out log errors' sigma and 90th-percentile
    under-prediction (the same numbers `frontier calibrate` writes into the calibration file)."""
    out: dict[str, dict[str, object]] = {}
    for arch, (ttft, tpot) in held_out_errors(usable, refits, key=model_key).items():
        out[arch] = {
            "ttft_rows": len(ttft.residuals),
            "ttft_prefill_dominated_rows": len(ttft.covered or ()),
            **_margin_fields("ttft", ttft.sigma, ttft.underprediction_q90),
            "tpot_rows": len(tpot.residuals),
            **_margin_fields("tpot", tpot.sigma, tpot.underprediction_q90),
        }
    return out


def _margin_fields(metric: str, sigma: float, underprediction_q90: float | None) -> dict[str, object]:
    """The metric's held-out sigma and q90 under-prediction, and the planner's margin from it at zero confidence."""
    q90 = _rounded(underprediction_q90)
    margin = None if underprediction_q90 is None else round(covering_margin(underprediction_q90, 0.0), 4)
    return {f"{metric}_sigma": round(sigma, 4), f"{metric}_underprediction_q90": q90, f"{metric}_margin": margin}


def evaluate(model: PerformanceModel, rows: Iterable[Row]) -> list[Outcome]:
    out = []
    for row in rows:
        if row.case is None:
            out.append(Outcome(row, None, None, row.parse_error))
            continue
        case = row.case
        try:
            ttft_s, tpot_s = predict_case(model, case)
        except UnpredictableConfig as error:
            out.append(Outcome(row, None, None, error.reason))
            continue

        def ratio(predicted_s: float, measured_ms: float | None) -> float | None:
            if measured_ms is None or measured_ms <= 0 or not math.isfinite(predicted_s):
                return None
            return predicted_s * 1e3 / measured_ms

        def ape(predicted_s: float, measured_ms: float | None) -> float | None:
            r = ratio(predicted_s, measured_ms)
            return None if r is None else abs(r - 1.0)

        def log_error(predicted_s: float, measured_ms: float | None) -> float | None:
            r = ratio(predicted_s, measured_ms)
            return None if r is None or r <= 0 else math.log(r)

        steps = max(case.workload.output_tokens.mean - 1.0, 0.0)
        ttft_ms, tpot_ms = case.measured_ttft_ms, case.measured_tpot_ms
        e2e_ms = ttft_ms + steps * tpot_ms if ttft_ms is not None and tpot_ms is not None else None
        e2e = ape(ttft_s + steps * tpot_s, e2e_ms)
        signed = log_error(ttft_s, ttft_ms), log_error(tpot_s, tpot_ms)
        out.append(Outcome(row, ape(ttft_s, ttft_ms), ape(tpot_s, tpot_ms), None, e2e, *signed))
    return out


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise(outcomes: Sequence[Outcome]) -> dict[str, float | int | None]:
    ttft = [o.ttft_ape for o in outcomes if o.ttft_ape is not None]
    tpot = [o.tpot_ape for o in outcomes if o.tpot_ape is not None]
    e2e = [o.e2e_ape for o in outcomes if o.e2e_ape is not None]
    ttft_signed = [o.ttft_log_error for o in outcomes if o.ttft_log_error is not None]
    tpot_signed = [o.tpot_log_error for o in outcomes if o.tpot_log_error is not None]
    predicted = sum(1 for o in outcomes if o.error is None)
    return {
        "rows": len(outcomes),
        "predicted": predicted,
        "coverage": predicted / len(outcomes) if outcomes else None,
        "median_ttft_ape": statistics.median(ttft) if ttft else None,
        "p90_ttft_ape": _quantile(ttft, 0.9) if ttft else None,
        "median_tpot_ape": statistics.median(tpot) if tpot else None,
        "p90_tpot_ape": _quantile(tpot, 0.9) if tpot else None,
        "median_e2e_ape": statistics.median(e2e) if e2e else None,
        "p90_e2e_ape": _quantile(e2e, 0.9) if e2e else None,
        "median_ttft_log_error": statistics.median(ttft_signed) if ttft_signed else None,
        "median_tpot_log_error": statistics.median(tpot_signed) if tpot_signed else None,
    }


def grouped(outcomes: Sequence[Outcome], key: str) -> dict[str, dict[str, float | int | None]]:
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        label = {
            "model": outcome.row.model,
            "gpu": outcome.row.gpu,
            "model_gpu": f"{outcome.row.model} @ {outcome.row.gpu}",
            "mode": outcome.row.mode,
        }[key]
        case = outcome.row.case
        if key == "mode" and case is not None and case.alternatives:
            if outcome.row.mode == "disagg":
                label += " (worker counts missing, predicted over InferenceX's published alternatives)"
            elif len(case.alternatives) == 1:
                label += " (ran MTP, known from InferenceX's configs; predicted with its draft, not fitted)"
            else:
                label += " (with or without MTP, predicted over InferenceX's published runs)"
        elif key == "mode" and case is not None and not case.fully_specified:
            label += " (worker counts missing)"
        elif key == "mode" and outcome.row.deployment:
            twin = outcome.row.deployment.startswith("twin")
            label += " (worker counts from a twin row)" if twin else " (worker counts from InferenceX configs)"
        groups.setdefault(label, []).append(outcome)
    return {label: summarise(group) for label, group in sorted(groups.items())}


def _deployment_key(case: SiliconCase) -> tuple[object, ...]:
    """What was deployed and fed, by architecture (the dumps file DeepSeek-R1 runs again as DeepSeek-V3), in one
    measurement campaign: the same deployment on another engine release is another engine (`campaign_of`)."""
    return (architecture_key(case), case.gpu.name, case.config.roles, case.workload, case.campaign)


def _setup_key(case: SiliconCase) -> tuple[object, ...]:
    """What a measurement measured: the deployment and its load."""
    return (*_deployment_key(case), case.concurrency)


def repeatability(outcomes: Sequence[Outcome]) -> dict[str, object]:
    """How far repeated measurements of one fully specified setup disagree, against the model on the same rows.

    Results equal to six significant digits are one measurement filed twice (R1 and V3 twins), not a repeat.
    """
    groups: dict[tuple[object, ...], list[tuple[Outcome, tuple[float, float]]]] = {}
    for outcome in outcomes:
        case = outcome.row.case
        if case is None or not case.fully_specified or not case.measured_ttft_ms or not case.measured_tpot_ms:
            continue
        result = (float(f"{case.measured_ttft_ms:.6g}"), float(f"{case.measured_tpot_ms:.6g}"))
        groups.setdefault(_setup_key(case), []).append((outcome, result))
    replay: dict[str, list[float]] = {"ttft": [], "tpot": []}
    model: dict[str, list[float]] = {"ttft": [], "tpot": []}
    repeated = 0
    for members in groups.values():
        distinct = {result for _, result in members}
        if len(distinct) < 2:
            continue
        repeated += 1
        for outcome, result in members:
            others = [other for other in distinct if other != result]
            for index, metric in enumerate(("ttft", "tpot")):
                replayed = math.exp(statistics.fmean(math.log(other[index]) for other in others))
                replay[metric].append(abs(replayed - result[index]) / result[index])
            if outcome.ttft_ape is not None and outcome.tpot_ape is not None:
                model["ttft"].append(outcome.ttft_ape)
                model["tpot"].append(outcome.tpot_ape)

    def median(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return {
        "setups_measured_more_than_once": repeated,
        "rows": len(replay["ttft"]),
        "replay_median_ttft_ape": median(replay["ttft"]),
        "replay_median_tpot_ape": median(replay["tpot"]),
        "model_median_ttft_ape": median(model["ttft"]),
        "model_median_tpot_ape": median(model["tpot"]),
    }


def after_one_measured_load(outcomes: Sequence[Outcome], full: Calibration) -> dict[str, object]:
    """What the model is worth once a deployment has been measured at one load, as the operator's tuning loop has
    it after its first windows (tuning/calibration.py multiplies the model by the measured / predicted ratio).

    Each fully specified row whose deployment (architecture, GPU, deployment, lengths, campaign) was also measured
    at another concurrency is predicted by the model times that ratio at the nearest other concurrency (in log
    distance; geometric mean over ties and repeats) — never its own result, nor other runs at its concurrency.
    Against it: the model alone on the same rows, and a replay of the nearest measurement without the model.
    Per GPU family, the 90th percentile of log(measured / corrected) — what a corrected prediction at another
    load still under-predicts — next to what the planner's margin keeps of the cold held-out one at full
    calibration confidence (`covering_margin`).
    """
    measured: dict[str, Callable[[SiliconCase], float | None]] = {
        "ttft": lambda case: case.measured_ttft_ms,
        "tpot": lambda case: case.measured_tpot_ms,
    }
    signed: dict[str, Callable[[Outcome], float | None]] = {
        "ttft": lambda outcome: outcome.ttft_log_error,
        "tpot": lambda outcome: outcome.tpot_log_error,
    }
    deployments: dict[tuple[object, ...], list[tuple[SiliconCase, Outcome]]] = {}
    for outcome in outcomes:
        case = outcome.row.case
        if case is not None and case.fully_specified:
            deployments.setdefault(_deployment_key(case), []).append((case, outcome))
    view: dict[str, object] = {}
    for metric in ("ttft", "tpot"):
        model: list[float] = []
        corrected: list[float] = []
        replay: list[float] = []
        underprediction: dict[str, list[float]] = {}
        for members in deployments.values():
            points = [
                (case.concurrency, math.log(value), error, case.gpu.arch)
                for case, outcome in members
                if (value := measured[metric](case)) and (error := signed[metric](outcome)) is not None
            ]
            for concurrency, log_measured, log_error, family in points:
                others = [(abs(math.log(c / concurrency)), m, e) for c, m, e, _ in points if c != concurrency]
                if not others:
                    continue
                nearest = min(distance for distance, _, _ in others)
                ratio = statistics.fmean(e for distance, _, e in others if distance == nearest)
                replayed = statistics.fmean(m for distance, m, _ in others if distance == nearest)
                model.append(abs(math.exp(log_error) - 1.0))
                corrected.append(abs(math.exp(log_error - ratio) - 1.0))
                replay.append(abs(math.exp(replayed - log_measured) - 1.0))
                underprediction.setdefault(family, []).append(ratio - log_error)
        families: dict[str, dict[str, float | int | None]] = {}
        for family, values in sorted(underprediction.items()):
            cold = getattr(full.family(family), f"{metric}_underprediction_q90")
            families[family] = {
                "rows": len(values),
                "corrected_underprediction_q90": _quantile(values, 0.9),
                "margin_keeps_at_full_confidence": None if cold is None else math.log1p(covering_margin(cold, 1.0)),
            }
        view[metric] = {
            "rows": len(model),
            "model_median_ape": statistics.median(model) if model else None,
            "corrected_median_ape": statistics.median(corrected) if corrected else None,
            "corrected_p90_ape": _quantile(corrected, 0.9) if corrected else None,
            "replay_median_ape": statistics.median(replay) if replay else None,
            "per_family": families,
        }
    return view


def report(outcomes: Sequence[Outcome]) -> dict[str, object]:
    specified = [o for o in outcomes if o.row.case is not None and o.row.case.fully_specified]
    return {
        "overall": summarise(outcomes),
        # Rows whose deployment is fully known (every aggregated row; P/D rows with worker counts, given or completed).
        "overall_fully_specified": summarise(specified),
        "per_model": grouped(outcomes, "model"),
        "per_gpu": grouped(outcomes, "gpu"),
        "per_model_gpu": grouped(outcomes, "model_gpu"),
        "per_mode": grouped(outcomes, "mode"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="silicon measurements CSV")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="where to write the JSON results")
    parser.add_argument("--workers", type=int, default=2, help="processes fitting GPU families in parallel")
    parser.add_argument(
        "--warm",
        action="store_true",
        help="warm-start the refits from the full fit, one start (~2× faster, optimistic: a quick look only)",
    )
    args = parser.parse_args(argv)

    started = time.monotonic()
    data = Path(args.data)
    if not data.is_file():
        print(f"error: {data}: no such file", file=sys.stderr)
        return 2
    rows = load(data)
    usable = fittable([row.case for row in rows if row.case is not None])
    full, source = full_calibration(usable, data, args.workers)
    lomo, lomo_refits = held_out(rows, usable, full, model_key, workers=args.workers, cold=not args.warm)
    loao, _ = held_out(rows, usable, full, architecture_key, workers=args.workers, cold=not args.warm)
    in_sample = evaluate(PerformanceModel(full), rows)
    headline = summarise(lomo)
    measured_load = after_one_measured_load(lomo, full)
    result = {
        "benchmark": "accuracy",
        "method": (
            "leave-one-model-out over the SGLang rows; absolute percentage error of mean TTFT and TPOT, and of the "
            "mean end-to-end latency they imply (TTFT + (OSL - 1) x TPOT)"
        ),
        "data": str(data),
        "backend": BACKEND,
        "goals": GOALS,
        "goals_met": {
            "median_tpot_ape": (headline["median_tpot_ape"] or math.inf) <= GOALS["median_tpot_ape"],
            "median_ttft_ape": (headline["median_ttft_ape"] or math.inf) <= GOALS["median_ttft_ape"],
            "coverage": (headline["coverage"] or 0.0) >= GOALS["coverage"],
        },
        "leave_one_model_out": report(lomo),
        "leave_one_architecture_out": report(loao),
        "in_sample": report(in_sample),
        "repeatability": repeatability(lomo),
        "after_one_measured_load": measured_load,
        "unpredictable_reasons": _reasons(lomo),
        "held_out_margins": margin_data(usable, lomo_refits),
        "rows_leave_one_model_out": [_row_record(o) for o in lomo],
        "fitted_rows": len(usable),
        "full_fit": source,
        "refits": "warm-started from the full fit, one start" if args.warm else "cold (priors, every start)",
        "seconds": round(time.monotonic() - started, 1),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")

    def pct(value: float | int | None) -> str:
        return "n/a" if value is None else f"{100 * value:.1f}%"

    specified = summarise([o for o in lomo if o.row.case is not None and o.row.case.fully_specified])
    print(
        f"accuracy (leave-one-model-out, {headline['rows']} SGLang rows): "
        f"TPOT median {pct(headline['median_tpot_ape'])} p90 {pct(headline['p90_tpot_ape'])}, "
        f"TTFT median {pct(headline['median_ttft_ape'])} p90 {pct(headline['p90_ttft_ape'])}, "
        f"end-to-end median {pct(headline['median_e2e_ape'])}, coverage {pct(headline['coverage'])}; "
        "fully specified rows: TPOT median "
        f"{pct(specified['median_tpot_ape'])}, TTFT median {pct(specified['median_ttft_ape'])}; "
        "after one measured load of the deployment: TPOT median "
        f"{pct(_corrected_median(measured_load, 'tpot'))}, TTFT median {pct(_corrected_median(measured_load, 'ttft'))} "
        f"-> {out}"
    )
    return 0


def _corrected_median(view: dict[str, object], metric: str) -> float | None:
    figures = view[metric]
    assert isinstance(figures, dict)  # the view's shape: one dict per metric
    value = figures["corrected_median_ape"]
    return None if value is None else float(value)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _row_record(outcome: Outcome) -> dict[str, object]:
    """One row's outcome, keyed by its line in the CSV (header = line 1)."""
    case = outcome.row.case
    return {
        "line": outcome.row.index + 2,
        "model": outcome.row.model,
        "gpu": outcome.row.gpu,
        "mode": outcome.row.mode,
        "fully_specified": case.fully_specified if case is not None else None,
        "not_fitted": case.not_fitted if case is not None else None,
        "ttft_not_fitted": case.ttft_not_fitted if case is not None else None,
        "deployment": outcome.row.deployment or None,
        "ttft_ape": _rounded(outcome.ttft_ape),
        "tpot_ape": _rounded(outcome.tpot_ape),
        "e2e_ape": _rounded(outcome.e2e_ape),
        "ttft_log_error": _rounded(outcome.ttft_log_error),
        "tpot_log_error": _rounded(outcome.tpot_log_error),
        "error": outcome.error,
    }


def _reasons(outcomes: Sequence[Outcome]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for outcome in outcomes:
        if outcome.error is not None:
            key = re.sub(r"\d+(\.\d+)?", "#", outcome.error.split(" (")[0])
            counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


if __name__ == "__main__":
    sys.exit(main())
