"""A plan as plain data (for `-o json|yaml` and the status) and as a readable text table. Pure."""

from __future__ import annotations

import math
from typing import Any

from frontier_operator.perf.codec import config_to_dict
from frontier_operator.perf.types import Percentiles
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.explain import dollars, ms
from frontier_operator.planner.types import (
    Evaluated,
    FrontierPoint,
    Infeasible,
    Plan,
    SearchStats,
    TechniqueCurve,
    TechniqueShift,
)


def _number(value: float | None, digits: int = 6) -> float | None:
    """JSON has no infinity: unbounded values (a saturated fleet's latency) become null."""
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _ms(percentiles: Percentiles) -> dict[str, float | None]:
    return {f"p{q}": _number(percentiles.at(q) * 1e3, 3) for q in (50, 90, 95, 99)}


def fleet_to_dict(candidate: Evaluated) -> dict[str, Any]:
    prediction = candidate.prediction
    knee = candidate.knee
    return {
        "pool": candidate.pool.name,
        "gpu": candidate.pool.gpu.name,
        "summary": describe_config(candidate.config),
        "totalGpus": candidate.config.total_gpus,
        "disaggregated": candidate.config.disaggregated,
        "techniques": sorted(t.value for t in candidate.techniques),
        "config": config_to_dict(candidate.config),
        "predicted": {
            "ttftMs": _ms(prediction.ttft),
            "tpotMs": _ms(prediction.tpot),
            "itlMs": _ms(prediction.itl),
            "e2eMs": _ms(prediction.e2e),
            "meanBatch": _number(prediction.mean_batch, 3),
            "maxRequestRate": _number(prediction.max_request_rate_per_s, 4),
            "outputTokensPerSecondPerGpu": _number(prediction.output_tokens_per_s_per_gpu, 2),
            "outputTokensPerSecondPerUser": _number(prediction.output_tokens_per_s_per_user, 2),
            "costPerMtok": _number(prediction.cost_per_mtok, 4),
            "uncertainty": _number(prediction.uncertainty, 4),
            "ttftUncertainty": _number(prediction.ttft_uncertainty, 4),
            "tpotUncertainty": _number(prediction.tpot_uncertainty, 4),
            "ttftUnderpredictionQ90": _number(prediction.ttft_underprediction_q90, 4),
            "tpotUnderpredictionQ90": _number(prediction.tpot_underprediction_q90, 4),
        },
        "safetyMarginPercent": _number(candidate.margin * 100, 2),
        "qualityLossPercent": _number(candidate.quality_loss_pct, 3),
        "slo": [
            {
                "metric": check.bound.metric.value,
                "percentile": check.bound.percentile,
                "limitMs": _number(check.bound.limit_s * 1e3, 3),
                "requiredMs": _number(check.required_s * 1e3, 3),
                "valueMs": _number(check.predicted_s * 1e3, 3),
                "headroomPercent": _number(check.headroom_pct, 2),
                "safetyMarginPercent": _number(check.margin * 100, 2),
                "met": check.met,
            }
            for check in candidate.checks
        ],
        "batchCap": None
        if knee is None
        else {
            "cap": knee.cap,
            "binding": knee.binding.label if knee.binding else None,
            "nextCap": knee.next_cap,
            "nextValueMs": _number(knee.next_value_s * 1e3, 3) if knee.next_value_s is not None else None,
        },
        "withinBudget": candidate.within_budget,
        "sustainsRate": candidate.sustains_rate,
    }


def _point(point: FrontierPoint) -> dict[str, Any]:
    return {
        "summary": point.summary,
        "pool": point.pool,
        "techniques": sorted(t.value for t in point.techniques),
        "tokensPerSecondPerUser": _number(point.tokens_per_s_per_user, 2),
        "tokensPerSecondPerGpu": _number(point.tokens_per_s_per_gpu, 2),
        "costPerMtok": _number(point.cost_per_mtok, 4),
        "gpus": point.gpus,
        "meetsSlo": point.meets_slo,
        "allowed": point.allowed,
    }


def _curve(curve: TechniqueCurve) -> dict[str, Any]:
    return {
        "label": curve.label,
        "techniques": sorted(t.value for t in curve.techniques),
        "points": [_point(p) for p in curve.points],
    }


def _shift(shift: TechniqueShift) -> dict[str, Any]:
    return {
        "technique": shift.technique.value,
        "effect": shift.effect.value,
        "baselineCostPerMtok": _number(shift.baseline_cost_per_mtok, 4),
        "costPerMtok": _number(shift.cost_per_mtok, 4),
        "shiftPercent": _number(shift.cost_shift_pct, 2),
        "baselineTokensPerSecondPerGpu": _number(shift.baseline_tokens_per_s_per_gpu, 2),
        "tokensPerSecondPerGpu": _number(shift.tokens_per_s_per_gpu, 2),
        "note": shift.note,
    }


def _stats(stats: SearchStats) -> dict[str, int]:
    return {
        "shapesConsidered": stats.shapes_considered,
        "candidatesEvaluated": stats.candidates_evaluated,
        "predictions": stats.predictions,
        "rejected": stats.rejected,
        "pruned": stats.pruned,
        "unexplored": stats.unexplored,
    }


def result_to_dict(result: Plan | Infeasible) -> dict[str, Any]:
    """Everything the planner found, as JSON-ready data with camelCase keys."""
    common = {
        "frontier": [_point(p) for p in result.frontier],
        "curves": [_curve(c) for c in result.curves],
        "techniques": [_shift(s) for s in result.technique_shifts],
        "rejections": [
            {"reason": s.reason.value, "count": s.count, "example": s.example.candidate, "detail": s.example.detail}
            for s in result.rejections
        ],
        "explanation": list(result.explanation),
        "stats": _stats(result.stats),
    }
    if isinstance(result, Plan):
        return {
            "feasible": True,
            "chosen": fleet_to_dict(result.chosen),
            "runnerUps": [
                {
                    **fleet_to_dict(r.candidate),
                    "costDeltaPercent": _number(r.cost_delta_pct, 2),
                    "gpuDelta": r.gpu_delta,
                    "difference": r.difference,
                }
                for r in result.runner_ups
            ],
            **common,
        }
    return {
        "feasible": False,
        "reason": result.reason.value,
        "summary": result.summary,
        "nearest": fleet_to_dict(result.nearest) if result.nearest is not None else None,
        "suggestions": [{"kind": s.kind.value, "text": s.text} for s in result.suggestions],
        **common,
    }


# ------------------------------------------------------------------------------------------------ text


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    lines = [headers, ["-" * width for width in widths], *rows]
    return "\n".join(
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def _fleet_row(label: str, candidate: Evaluated) -> list[str]:
    prediction = candidate.prediction
    return [
        label,
        candidate.pool.name,
        describe_config(candidate.config),
        str(candidate.config.total_gpus),
        dollars(prediction.cost_per_mtok),
        f"{prediction.output_tokens_per_s_per_gpu:,.0f}",
        f"{prediction.output_tokens_per_s_per_user:,.0f}",
    ]


_FLEET_HEADERS = ["", "pool", "configuration", "GPUs", "$/Mtok", "tok/s/GPU", "tok/s/user"]


def _slo_table(candidate: Evaluated) -> str:
    rows = [
        [
            check.bound.label,
            ms(check.predicted_s),
            ms(check.bound.limit_s),
            ms(check.required_s),
            f"{check.headroom_pct:.0f} %" if math.isfinite(check.headroom_pct) else "-",
            "met" if check.met else "MISSED",
        ]
        for check in candidate.checks
    ]
    return _table(["SLO", "predicted", "limit", "with margin", "headroom", ""], rows)


def _shift_table(shifts: tuple[TechniqueShift, ...]) -> str:
    rows = [
        [
            shift.technique.value,
            shift.effect.value,
            dollars(shift.baseline_cost_per_mtok) if shift.baseline_cost_per_mtok is not None else "-",
            dollars(shift.cost_per_mtok) if shift.cost_per_mtok is not None else "-",
            f"{shift.cost_shift_pct:+.0f} %" if shift.cost_shift_pct is not None else "-",
        ]
        for shift in shifts
    ]
    return _table(["technique", "effect", "baseline", "+ technique", "cost shift"], rows)


def render_text(result: Plan | Infeasible) -> str:
    """The plan as a person reads it: the choice and its SLO margins, the alternatives, the reasons."""
    sections: list[str] = []
    if isinstance(result, Plan):
        rows = [_fleet_row("chosen", result.chosen)]
        rows += [_fleet_row(f"{r.cost_delta_pct:+.0f} %", r.candidate) for r in result.runner_ups]
        sections.append(_table(_FLEET_HEADERS, rows))
        sections.append(_slo_table(result.chosen))
    else:
        sections.append(f"INFEASIBLE ({result.reason.value}): {result.summary}")
        if result.nearest is not None:
            sections.append(_table(_FLEET_HEADERS, [_fleet_row("nearest", result.nearest)]))
            sections.append(_slo_table(result.nearest))
        if result.suggestions:
            sections.append("To make it feasible:\n" + "\n".join(f"  - {s.text}" for s in result.suggestions))
    sections.append(_shift_table(result.technique_shifts))
    sections.append("Why:\n" + "\n".join(f"  - {line}" for line in result.explanation))
    stats = result.stats
    sections.append(
        f"searched {stats.shapes_considered} layouts, sized {stats.candidates_evaluated} fleets with "
        f"{stats.predictions} predictions ({stats.pruned} pruned by bound, {stats.rejected} rejected)"
    )
    return "\n\n".join(sections)
