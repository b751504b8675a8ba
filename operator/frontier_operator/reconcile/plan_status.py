"""Plan / Infeasible → the status sections that explain the choice (`plan`, `frontier`, `rejected`, …)."""

from __future__ import annotations

from frontier_operator.api import status as api
from frontier_operator.perf.types import Percentiles, RoleDeployment, ServingConfig
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import (
    Evaluated,
    FrontierPoint,
    Infeasible,
    Plan,
    RejectionSummary,
    RunnerUp,
    TechniqueShift,
)

MAX_FRONTIER_POINTS = 10
MAX_REJECTIONS = 10


def _ms(percentiles: Percentiles) -> api.PercentilesMs:
    return api.PercentilesMs(
        p50=round(percentiles.p50 * 1e3, 2),
        p90=round(percentiles.p90 * 1e3, 2),
        p95=round(percentiles.p95 * 1e3, 2),
        p99=round(percentiles.p99 * 1e3, 2),
    )


def _role_status(deployment: RoleDeployment) -> api.RoleStatus:
    worker = deployment.worker
    speculative = (
        api.SpeculativeStatus(
            algorithm=worker.speculative.algorithm.value,
            num_steps=worker.speculative.num_steps,
            num_draft_tokens=worker.speculative.num_draft_tokens,
        )
        if worker.speculative
        else None
    )
    return api.RoleStatus(
        role=deployment.role.value,
        replicas=deployment.replicas,
        gpus_per_replica=worker.gpus,
        nodes_per_replica=worker.nnodes,
        tp=worker.tp,
        pp=worker.pp,
        attention_dp=worker.attention_dp,
        attention_cp=worker.attention_cp,
        ep=worker.ep,
        moe_a2a_backend=worker.moe_a2a_backend.value,
        weight_format=worker.weight_format,
        kv_cache_dtype=worker.kv_cache_format,
        max_running_requests=worker.max_running_requests,
        chunked_prefill_size=worker.chunked_prefill_size,
        speculative=speculative,
    )


def config_status(config: ServingConfig, pool: str, gpu: str) -> api.ConfigStatus:
    return api.ConfigStatus(
        pool=pool,
        gpu=gpu,
        disaggregated=config.disaggregated,
        total_gpus=config.total_gpus,
        summary=describe_config(config),
        roles=[_role_status(role) for role in config.roles],
    )


def _slo_checks(candidate: Evaluated) -> list[api.SloCheck]:
    return [
        api.SloCheck(
            metric=check.bound.metric.value,
            percentile=check.bound.percentile,
            limit_ms=round(check.bound.limit_s * 1e3, 3),
            value_ms=round(check.predicted_s * 1e3, 3),
            headroom_percent=round(check.headroom_pct, 1),
        )
        for check in candidate.checks
    ]


def plan_status(plan: Plan, revision: str) -> api.PlanStatus:
    chosen = plan.chosen
    prediction = chosen.prediction
    return api.PlanStatus(
        revision=revision,
        config=config_status(chosen.config, chosen.pool.name, chosen.pool.gpu.name),
        predicted_ttft_ms=_ms(prediction.ttft),
        predicted_tpot_ms=_ms(prediction.tpot),
        cost_per_mtok=round(prediction.cost_per_mtok, 4),
        output_tokens_per_second_per_gpu=round(prediction.output_tokens_per_s_per_gpu, 1),
        max_request_rate=round(prediction.max_request_rate_per_s, 3),
        slo=_slo_checks(chosen),
        reasons=list(plan.explanation[: api.MAX_LIST]),
    )


def frontier_points(points: tuple[FrontierPoint, ...], chosen_cost: float | None) -> list[api.FrontierPoint]:
    ranked = sorted(points, key=lambda point: (not point.meets_slo, point.cost_per_mtok))[:MAX_FRONTIER_POINTS]
    return [
        api.FrontierPoint(
            summary=point.summary,
            cost_per_mtok=round(point.cost_per_mtok, 4),
            output_tokens_per_second_per_user=round(point.tokens_per_s_per_user, 1),
            output_tokens_per_second_per_gpu=round(point.tokens_per_s_per_gpu, 1),
            gpus=point.gpus,
            meets_slo=point.meets_slo,
            delta_cost_percent=(round((point.cost_per_mtok / chosen_cost - 1) * 100, 1) if chosen_cost else None),
        )
        for point in ranked
    ]


def rejections(runner_ups: tuple[RunnerUp, ...], summaries: tuple[RejectionSummary, ...]) -> list[api.Rejection]:
    lost = [
        api.Rejection(alternative=describe_config(runner_up.candidate.config), reason=runner_up.difference)
        for runner_up in runner_ups
    ]
    refused = [
        api.Rejection(
            alternative=summary.example.candidate,
            reason=f"{summary.example.detail} ({summary.count} candidate{'s' if summary.count != 1 else ''})",
        )
        for summary in sorted(summaries, key=lambda s: -s.count)
    ]
    return (lost + refused)[:MAX_REJECTIONS]


def technique_status(shifts: tuple[TechniqueShift, ...]) -> list[api.TechniqueShift]:
    return [
        api.TechniqueShift(
            technique=shift.technique.value,
            cost_per_mtok_at_slo=round(shift.cost_per_mtok, 4) if shift.cost_per_mtok is not None else None,
            shift_percent=round(shift.cost_shift_pct, 1) if shift.cost_shift_pct is not None else None,
            note=shift.note,
        )
        for shift in shifts
    ]


def infeasibility(result: Infeasible) -> api.Infeasibility:
    nearest = describe_config(result.nearest.config) if result.nearest is not None else "no configuration fits"
    return api.Infeasibility(nearest=nearest, suggestions=[s.text for s in result.suggestions][:10])
