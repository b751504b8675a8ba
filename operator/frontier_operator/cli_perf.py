"""`frontier calibrate` and `frontier predict`: refit the performance model, and predict benchmark rows.

Both read CSVs in the schema of shared/data/silicon/silicon_measurements.csv. `calibrate` fits the
coefficients of every GPU family on the measured rows of one backend and writes the calibration file the
package ships; `predict` writes each row back with the model's TTFT and TPOT at the row's concurrency.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
from pathlib import Path
from typing import TextIO

import yaml

from frontier_operator.catalog import data_files
from frontier_operator.perf.calibration import CALIBRATION_FILE, Calibration, render_calibration_yaml
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.fitting import (
    MAX_ITERATIONS,
    FitOptions,
    coefficient_spread,
    file_digest,
    fit_calibration,
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

PREDICTION_COLUMNS = ("pred_ttft_ms", "pred_tpot_ms", "pred_error", "pred_deployment")


def shipped_calibration_path() -> Path:
    return Path(data_files.__file__).parent / "data" / CALIBRATION_FILE


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _read(path: Path) -> list[dict[str, str]] | str:
    """The rows, or an error message for the user."""
    if not path.is_file():
        return f"{path}: no such file"
    try:
        return read_rows(path)
    except (ValueError, UnicodeDecodeError, csv.Error) as error:
        return str(error)


def _calibrate(args: argparse.Namespace) -> int:
    data = Path(args.data)
    rows = _read(data)
    if isinstance(rows, str):
        return _fail(rows)
    rows = flag_runs_slower_than_weaker_gpus(complete_deployments(rows, read_deployment_supplement()))
    # A row with published alternatives is never fitted (`parse_row`: which one ran is not known, or it ran MTP),
    # nor one slower than its recipe on a weaker GPU (`flag_runs_slower_than_weaker_gpus`).
    published = read_deployment_alternatives()
    backend = args.backend.lower()
    cases = []
    skipped = 0
    for row in rows:
        if (row.get("backend") or "").strip().lower() != backend:
            continue
        try:
            cases.append(parse_row(row, alternatives_of(row, published)))
        except UnpredictableConfig:
            skipped += 1
    if not cases:
        return _fail(f"{data}: no usable {backend} rows")
    if args.max_iterations < 1 or args.starts < 1:
        return _fail("--max-iterations and --starts must be at least 1")
    provenance = {
        "data_file": data.name,
        "data_sha256": file_digest(data),
        "deployments_sha256": file_digest(DEPLOYMENT_SUPPLEMENT_PATH),
        "alternatives_sha256": file_digest(DEPLOYMENT_ALTERNATIVES_PATH),
        "backend": backend,
        "rows_of_backend": str(len(cases) + skipped),
        "rows_parsed": str(len(cases)),
    }

    def progress(message: str) -> None:
        print(message, file=sys.stderr)

    options = FitOptions(max_iterations=args.max_iterations, starts=args.starts)
    calibration = fit_calibration(
        cases, provenance, progress=progress, workers=args.workers, options=options, held_out=not args.in_sample_sigma
    )
    header = calibration_header(backend)
    out = Path(args.out) if args.out else shipped_calibration_path()
    try:
        out.write_text(render_calibration_yaml(calibration, header), encoding="utf-8")
    except OSError as error:
        return _fail(f"cannot write {out}: {error}")
    for arch, fit in calibration.families:
        kind = "in-sample" if args.in_sample_sigma else "held-out"
        print(f"{arch}: {fit.rows} rows, {kind} TTFT sigma {fit.ttft_sigma:.1%}, TPOT sigma {fit.tpot_sigma:.1%}")
    for arch, _ in calibration.families:
        print(spread_table(arch, cases, calibration))
    print(f"wrote {out}")
    return 0


def spread_table(arch: str, cases: list[SiliconCase], calibration: Calibration) -> str:
    """How tightly the family's rows pin each coefficient; a wide one is what the prior decided."""
    lines = [f"{arch}: coefficient, fitted value, known within ×/÷ (one sigma; 'prior only' = the rows say nothing)"]
    for spread in coefficient_spread(arch, cases, calibration):
        factor = math.exp(spread.log_sigma)
        note = " prior only" if spread.prior_only else ""
        note += " at a bound" if spread.at_bound else ""
        lines.append(f"  {spread.name:32s} {spread.value:10.4g}  ×/÷ {factor:.3g}{note}")
    return "\n".join(lines)


def calibration_header(backend: str) -> str:
    """The comment `frontier calibrate` writes above the coefficients."""
    return (
        "Performance-model calibration: coefficients per GPU family (compute architecture).\n"
        "Written by `frontier calibrate`; do not edit by hand. The coefficients are documented in\n"
        "docs/performance-model.md. ttft_sigma / tpot_sigma: robust one-sigma log errors, measured\n"
        "leave-one-model-out on the fully specified rows; *_underprediction_q90: the 90th percentile of\n"
        "log(measured / predicted) there (TTFT: on the prefill-dominated rows) — the planner's safety margins.\n"
        "Refit with:\n"
        f"  frontier calibrate --data <silicon_measurements.csv> --backend {backend}\n"
        "The fit is deterministic: the same CSV reproduces this file."
    )


def _load_calibration(path: str | None) -> Calibration | str:
    if path is None:
        return PerformanceModel.default().calibration
    try:
        return Calibration.from_data(yaml.safe_load(Path(path).read_text(encoding="utf-8")))
    except (OSError, ValueError, yaml.YAMLError) as error:
        return f"cannot read calibration {path}: {error}"


def predict_rows(model: PerformanceModel, rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """Each row with pred_ttft_ms / pred_tpot_ms, or empty predictions and a pred_error reason.

    A P/D row without worker counts is predicted as completed by `complete_deployments`, else over the
    deployments published for it (`predict_case`); pred_deployment says where its deployment came from
    (empty when the row gave it).
    """
    out = []
    published = read_deployment_alternatives()
    for row, completed in zip(rows, complete_deployments(rows, read_deployment_supplement()), strict=True):
        result = {k: v for k, v in row.items() if k not in PREDICTION_COLUMNS}
        alternatives = alternatives_of(completed, published)
        result["pred_deployment"] = describe_deployment(completed, alternatives)
        try:
            ttft_s, tpot_s = predict_case(model, parse_row(completed, alternatives))
        except UnpredictableConfig as error:
            result.update(pred_ttft_ms="", pred_tpot_ms="", pred_error=error.reason)
        else:
            result.update(pred_ttft_ms=f"{ttft_s * 1e3:.3f}", pred_tpot_ms=f"{tpot_s * 1e3:.3f}", pred_error="")
        out.append(result)
    return out


def _write_csv(rows: list[dict[str, str]], fieldnames: list[str], handle: TextIO) -> None:
    writer = csv.DictWriter(handle, fieldnames=fieldnames, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)


def _predict(args: argparse.Namespace) -> int:
    path = Path(args.csv)
    rows = _read(path)
    if isinstance(rows, str):
        return _fail(rows)
    calibration = _load_calibration(args.calibration)
    if isinstance(calibration, str):
        return _fail(calibration)
    predicted = predict_rows(PerformanceModel(calibration), rows)
    with path.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    fieldnames = [name for name in header if name not in PREDICTION_COLUMNS] + list(PREDICTION_COLUMNS)
    if args.output in (None, "-"):
        buffer = io.StringIO()
        _write_csv(predicted, fieldnames, buffer)
        sys.stdout.write(buffer.getvalue())
    else:
        try:
            with Path(args.output).open("w", newline="", encoding="utf-8") as handle:
                _write_csv(predicted, fieldnames, handle)
        except OSError as error:
            return _fail(f"cannot write {args.output}: {error}")
        failed = sum(1 for row in predicted if row["pred_error"])
        print(f"predicted {len(predicted) - failed} of {len(predicted)} rows; wrote {args.output}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    calibrate = subparsers.add_parser(
        "calibrate", help="refit the performance model's coefficients on measured rows and write the calibration file"
    )
    calibrate.add_argument("--data", required=True, metavar="CSV", help="rows in the silicon-measurements schema")
    calibrate.add_argument(
        "--out", metavar="PATH", help="where to write the calibration (default: the file the package ships)"
    )
    calibrate.add_argument("--backend", default="sglang", help="fit on the rows of this backend (default: sglang)")
    calibrate.add_argument("--workers", type=int, default=1, help="processes fitting GPU families in parallel")
    calibrate.add_argument(
        "--max-iterations",
        type=int,
        default=MAX_ITERATIONS,
        help=f"Levenberg-Marquardt iterations per start (default {MAX_ITERATIONS}; fewer for a quick look)",
    )
    calibrate.add_argument("--starts", type=int, default=3, help="deterministic starting points per family (1-3)")
    calibrate.add_argument(
        "--in-sample-sigma",
        action="store_true",
        help="measure each family's TTFT/TPOT sigma on the fit's own residuals instead of leave-one-model-out "
        "(quick looks; the shipped file uses held-out sigmas, which size the planner's safety margin)",
    )
    calibrate.set_defaults(func=_calibrate)

    predict = subparsers.add_parser(
        "predict", help="predict TTFT and TPOT for rows in the silicon-measurements schema at their concurrency"
    )
    predict.add_argument("--csv", required=True, metavar="CSV", help="rows to predict")
    predict.add_argument("-o", "--output", metavar="PATH", help="output CSV (default: standard output)")
    predict.add_argument("--calibration", metavar="PATH", help="calibration YAML (default: the shipped one)")
    predict.set_defaults(func=_predict)
