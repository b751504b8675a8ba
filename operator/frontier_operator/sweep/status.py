"""Measured points as `status.sweep.points` (predicted against measured, the newest `MAX_POINTS`)."""

from __future__ import annotations

from collections.abc import Sequence

from frontier_operator.api.sweep import MAX_POINTS, SweepPointStatus
from frontier_operator.sweep.types import SweepMeasurement, SweepPlan


def _ms(seconds: float) -> float:
    return float(f"{seconds * 1e3:.4g}")


def status_points(measurements: Sequence[SweepMeasurement], plan: SweepPlan | None = None) -> list[SweepPointStatus]:
    """One status entry per measured point (with the reason it was measured when `plan` is the sweep's plan)."""
    reasons = {(p.key, p.concurrency): p.reason.value for p in plan.points} if plan is not None else {}
    return [
        SweepPointStatus(
            configuration=m.description[:256],
            concurrency=m.concurrency,
            reason=reasons.get((m.key, m.concurrency), ""),
            predicted_ttft_ms=_ms(m.predicted.ttft_p50_s),
            measured_ttft_ms=_ms(m.ttft.p50),
            predicted_tpot_ms=_ms(m.predicted.tpot_p50_s),
            measured_tpot_ms=_ms(m.tpot.p50),
            measured_output_tokens_per_s=float(f"{m.output_tokens_per_s:.4g}"),
        )
        for m in list(measurements)[-MAX_POINTS:]
    ]
