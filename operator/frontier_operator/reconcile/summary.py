"""The short strings `kubectl get ft` shows: SLO met, TPOT and TTFT against their bounds, cost, config."""

from __future__ import annotations

from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import Condition, ConditionType, PercentilesMs, PlanStatus, Summary
from frontier_operator.api.units import format_duration
from frontier_operator.reconcile.conditions import find_condition


def _bound_text(spec: FrontierTargetSpec, metric: str, values: PercentilesMs | None, source: str) -> str | None:
    """`17ms/20ms p50` for the tightest bound of the metric (observed, else predicted with `(pred)`)."""
    bounds = [(percentile, bound) for name, percentile, bound in spec.slo.objectives() if name == metric]
    if not bounds:
        return None
    percentile, bound = bounds[0]
    value = getattr(values, f"p{percentile}") if values is not None else None
    shown = format_duration(value / 1e3) if value is not None else "?"
    suffix = " (pred)" if source == "predicted" and value is not None else ""
    return f"{shown}/{bound} p{percentile}{suffix}"


def build_summary(
    spec: FrontierTargetSpec,
    conditions: list[Condition],
    plan: PlanStatus | None,
    observed_ttft: PercentilesMs | None = None,
    observed_tpot: PercentilesMs | None = None,
) -> Summary:
    slo = find_condition(conditions, ConditionType.SLO_MET)

    def shown(metric: str, observed: PercentilesMs | None, predicted: PercentilesMs | None) -> str | None:
        if observed is not None:
            return _bound_text(spec, metric, observed, "observed")
        return _bound_text(spec, metric, predicted, "predicted")

    return Summary(
        slo_met=slo.status.value if slo else None,
        ttft=shown("ttft", observed_ttft, plan.predicted_ttft_ms if plan else None),
        tpot=shown("tpot", observed_tpot, plan.predicted_tpot_ms if plan else None),
        cost_per_mtok=f"${plan.cost_per_mtok:.3f}" if plan else None,
        config=plan.config.summary if plan else None,
        gpus=plan.config.total_gpus if plan else None,
        mode=spec.tuning.mode.value,
    )
