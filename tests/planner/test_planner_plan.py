"""End to end with a deterministic stand-in model: the choice, its margins, the knee, the frontier shifts,
the explanation and the infeasible answers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.perf.types import Role
from frontier_operator.planner import search as search_module
from frontier_operator.planner.choose import check_slos, slo_margin
from frontier_operator.planner.explain import alternatives
from frontier_operator.planner.legality import check_fleet, check_worker, legality_context
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.search import CAP_LADDER, PredictionCache
from frontier_operator.planner.types import (
    Disaggregation,
    Infeasible,
    InfeasibleReason,
    Objective,
    Plan,
    PlanRequest,
    RejectionReason,
    ShiftEffect,
    SloMetric,
    SuggestionKind,
    Technique,
)
from planner_support import FakePredictor, chat_workload, pool, request, search

DEEPSEEK_SPACE = search(("fp8-block", "nvfp4"), ("bf16", "fp8_e4m3"), max_quality_loss_pct=1.0)
REQUESTS = {
    "llama chat": request(),
    "llama, 8 GPUs, strict TPOT": request(tpot_ms=15, pools=(pool(max_gpus=8),)),
    "deepseek on H200": request("DeepSeek-R1", tpot_ms=25, pools=(pool(max_gpus=32),), space=DEEPSEEK_SPACE),
    "qwen fewest GPUs": request("Qwen3-32B", objective=Objective.MINIMIZE_GPUS, pools=(pool(max_gpus=16),)),
}


def plan_of(planning: PlanRequest, predictor: FakePredictor | None = None) -> Plan:
    result = make_plan(planning, predictor or FakePredictor())
    assert isinstance(result, Plan), result.explanation
    return result


@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_choice_meets_every_slo_with_the_margin(name: str) -> None:
    planning = REQUESTS[name]
    chosen = plan_of(planning).chosen
    margins = [slo_margin(chosen.prediction, check.bound, planning.calibration_confidence) for check in chosen.checks]
    assert [check.margin for check in chosen.checks] == margins
    assert chosen.margin == max(margins) > 0
    for check, margin in zip(chosen.checks, margins, strict=True):
        assert check.predicted_s <= check.bound.limit_s / (1 + margin)
    assert chosen.within_budget and chosen.sustains_rate and chosen.allowed
    assert chosen.prediction.max_request_rate_per_s >= planning.workload.request_rate_per_s


@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_chosen_configuration_is_legal(name: str) -> None:
    planning = REQUESTS[name]
    chosen = plan_of(planning).chosen
    ctx = legality_context(planning.arch, chosen.pool, planning.search)
    for deployment in chosen.config.roles:
        assert check_worker(ctx, deployment.worker, deployment.role) is None
    assert check_fleet(chosen.config, planning.pools) is None


@pytest.mark.parametrize("name", list(REQUESTS))
def test_pruning_does_not_change_the_choice(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    planning = REQUESTS[name]
    pruned = plan_of(planning)
    monkeypatch.setattr(search_module._Incumbents, "beaten", lambda self, job: False)
    exhaustive = plan_of(planning)
    assert exhaustive.stats.pruned == 0
    assert pruned.chosen.config == exhaustive.chosen.config
    assert pruned.stats.predictions <= exhaustive.stats.predictions


def test_the_batch_cap_sits_at_the_slo_knee() -> None:
    planning = REQUESTS["llama chat"]
    fake = FakePredictor()
    chosen = plan_of(planning, fake).chosen
    knee = chosen.knee
    assert knee is not None and knee.binding is not None and knee.binding.metric is SloMetric.TPOT
    assert knee.next_cap is not None and knee.next_value_s is not None
    required = next(check.required_s for check in chosen.checks if check.bound == knee.binding)
    assert knee.next_value_s > required  # one CUDA-graph size more would break the bound
    worker = chosen.config.roles[0].worker
    context = planning.workload.input_tokens.mean + planning.workload.output_tokens.mean / 2
    prediction = chosen.prediction

    def scaled(batch: int) -> float:
        base = fake.decode_token_time(planning.arch, chosen.pool.gpu, worker, round(prediction.mean_batch), context)
        return (
            knee.binding.predicted(prediction)
            * fake.decode_token_time(  # type: ignore[union-attr]
                planning.arch, chosen.pool.gpu, worker, batch, context
            )
            / base
        )

    assert scaled(knee.cap) <= required < scaled(knee.next_cap)
    assert knee.cap in CAP_LADDER and knee.next_cap == CAP_LADDER[CAP_LADDER.index(knee.cap) + 1]
    assert worker.max_running_requests == knee.cap  # enforced, not left loose


def test_runner_ups_come_with_their_deltas() -> None:
    result = plan_of(REQUESTS["llama chat"])
    assert result.runner_ups
    for runner_up in result.runner_ups:
        assert runner_up.cost_delta_pct >= -1e-9 and runner_up.difference
        assert runner_up.candidate.feasible


def test_predictions_are_cached_across_plans() -> None:
    fake = FakePredictor()
    cache = PredictionCache(fake)
    first = make_plan(REQUESTS["llama chat"], cache)
    calls = fake.predict_calls
    assert calls == first.stats.predictions > 0
    second = make_plan(REQUESTS["llama chat"], cache)
    assert fake.predict_calls == calls and second.stats.predictions == 0


def test_unpredictable_layouts_are_rejections_not_failures() -> None:
    result = plan_of(REQUESTS["llama chat"], FakePredictor(fail_tp=2))
    assert result.chosen.config.roles[0].worker.tp != 2
    assert any(summary.reason is RejectionReason.UNPREDICTABLE for summary in result.rejections)


def test_disaggregation_always_gives_a_consistent_pd_fleet() -> None:
    planning = replace(REQUESTS["llama chat"], search=search(disaggregation=Disaggregation.ALWAYS))
    chosen = plan_of(planning).chosen
    prefill, decode = chosen.config.role(Role.PREFILL), chosen.config.role(Role.DECODE)
    assert prefill is not None and decode is not None and chosen.config.transfer_backend == "mooncake"
    assert prefill.worker.kv_cache_format == decode.worker.kv_cache_format
    assert Technique.DISAGGREGATION in chosen.techniques


def test_speculative_decoding_is_searched_for_mtp_models() -> None:
    result = plan_of(REQUESTS["deepseek on H200"])
    assert any(Technique.SPECULATIVE_DECODING in point.techniques for point in result.frontier)
    shift = next(s for s in result.technique_shifts if s.technique is Technique.SPECULATIVE_DECODING)
    assert shift.effect is not ShiftEffect.NOT_APPLICABLE


# ------------------------------------------------------------------------------------ technique shifts


def test_quantization_pushes_the_frontier_out() -> None:
    result = plan_of(REQUESTS["llama chat"])
    shift = next(s for s in result.technique_shifts if s.technique is Technique.QUANTIZATION)
    assert shift.effect is ShiftEffect.PUSHES_OUT
    assert shift.cost_shift_pct is not None and shift.cost_shift_pct < 0
    assert shift.tokens_per_s_per_gpu is not None and shift.baseline_tokens_per_s_per_gpu is not None
    assert shift.tokens_per_s_per_gpu > shift.baseline_tokens_per_s_per_gpu


def test_switched_off_and_impossible_techniques_say_so() -> None:
    planning = replace(REQUESTS["llama chat"], search=search(disaggregation=Disaggregation.NEVER))
    shifts = {s.technique: s for s in plan_of(planning).technique_shifts}
    assert shifts[Technique.DISAGGREGATION].effect is ShiftEffect.NOT_ALLOWED
    assert shifts[Technique.SPECULATIVE_DECODING].effect is ShiftEffect.NOT_APPLICABLE  # no MTP, no draft
    assert shifts[Technique.WIDE_EP].effect is ShiftEffect.NOT_APPLICABLE  # dense


def test_the_bf16_baseline_is_drawn_even_when_not_allowed() -> None:
    planning = replace(REQUESTS["llama chat"], search=search(("fp8",), ("bf16",)))
    result = plan_of(planning)
    assert result.chosen.config.roles[0].worker.weight_format == "fp8"
    baseline = next(curve for curve in result.curves if curve.label == "baseline")
    assert baseline.points and all(not point.allowed for point in baseline.points)
    shift = next(s for s in result.technique_shifts if s.technique is Technique.QUANTIZATION)
    assert shift.baseline_cost_per_mtok is not None  # the BF16 reference was sized


def test_curves_only_hold_their_techniques() -> None:
    result = plan_of(REQUESTS["deepseek on H200"])
    for curve in result.curves:
        if curve.label != "all allowed":
            assert all(point.techniques <= curve.techniques for point in curve.points)


# ------------------------------------------------------------------------------------------ explanation


def test_explanation_names_the_choice_margins_and_rejected_alternatives() -> None:
    planning = replace(REQUESTS["llama chat"], search=search(disaggregation=Disaggregation.NEVER))
    text = "\n".join(plan_of(planning).explanation)
    assert "chosen (minimize-cost)" in text
    assert "p50 TPOT: predicted" in text and "safety margin" in text
    assert "batch cap" in text and "knee" in text
    assert "bf16 (weights): best fleet is" in text and "dearer" in text
    assert "P/D (serving): not searched" in text


def test_a_weight_only_format_says_so_when_it_loses() -> None:
    planning = REQUESTS["deepseek on H200"]
    result = plan_of(planning)
    chosen = result.chosen
    nvfp4 = replace(
        chosen,
        config=replace(
            chosen.config,
            roles=tuple(replace(r, worker=replace(r.worker, weight_format="nvfp4")) for r in chosen.config.roles),
        ),
        prediction=replace(chosen.prediction, cost_per_mtok=chosen.prediction.cost_per_mtok * 1.09),
    )
    block = replace(
        chosen,
        config=replace(
            chosen.config,
            roles=tuple(replace(r, worker=replace(r.worker, weight_format="fp8-block")) for r in chosen.config.roles),
        ),
    )
    lines = alternatives(planning, block, [block, nvfp4], [])
    line = next(line for line in lines if line.startswith("nvfp4 (weights)"))
    assert "not native on H200" in line and "weight-only" in line and "9 % dearer" in line


# -------------------------------------------------------------------------------------------- infeasible


def infeasible_of(planning: PlanRequest) -> Infeasible:
    result = make_plan(planning, FakePredictor())
    assert isinstance(result, Infeasible), result.explanation
    return result


def test_a_bound_below_the_physical_floor_is_infeasible_with_the_floor() -> None:
    result = infeasible_of(request(tpot_ms=0.2))
    assert result.reason is InfeasibleReason.BELOW_PHYSICAL_FLOOR and result.nearest is None
    assert any("p50 TPOT ≥" in s.text for s in result.suggestions)
    assert any(s.reason is RejectionReason.BELOW_PHYSICAL_FLOOR for s in result.rejections)


def test_an_unreachable_bound_names_the_nearest_point_and_the_bound_it_needs() -> None:
    result = infeasible_of(request(tpot_ms=2.0))
    assert result.reason is InfeasibleReason.SLO_UNREACHABLE
    assert result.nearest is not None and not result.nearest.meets_slo
    relax = [s for s in result.suggestions if s.kind is SuggestionKind.RELAX_SLO]
    assert relax and "p50 TPOT ≥" in relax[0].text
    assert any(line.startswith("nearest:") for line in result.explanation)


def test_a_budget_too_small_for_the_rate_suggests_more_gpus() -> None:
    planning = request(pools=(pool(max_gpus=4),), workload=chat_workload(rate=60.0))
    result = infeasible_of(planning)
    more = [s for s in result.suggestions if s.kind is SuggestionKind.MORE_GPUS]
    assert more and "GPUs in pool h200" in more[0].text
    assert result.nearest is not None


def test_a_format_the_spec_left_out_is_suggested() -> None:
    planning = request(tpot_ms=12.0, pools=(pool(max_gpus=4),), space=search(("bf16",), ("bf16",)))
    result = infeasible_of(planning)
    assert any(s.kind is SuggestionKind.ALLOW_FORMAT and "fp8" in s.text for s in result.suggestions)


def test_requests_longer_than_the_context_window() -> None:
    planning = request(workload=chat_workload(input_mean=100_000, output_mean=1000))
    result = infeasible_of(planning)
    assert result.reason is InfeasibleReason.CONTEXT_BEYOND_MODEL
    assert result.suggestions[0].kind is SuggestionKind.SHORTEN_REQUESTS


def test_the_infeasible_nearest_point_reports_its_misses() -> None:
    result = infeasible_of(request(tpot_ms=2.0))
    assert result.nearest is not None
    misses = [check for check in result.nearest.checks if not check.met]
    assert misses and all(check.bound.metric is SloMetric.TPOT for check in misses)
    recheck = check_slos([c.bound for c in result.nearest.checks], result.nearest.prediction)
    assert recheck == result.nearest.checks
