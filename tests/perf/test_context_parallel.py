"""Prefill context parallelism: what it buys a long DSA prompt, where the model refuses it, how it is searched."""

from __future__ import annotations

from dataclasses import replace

import pytest

from frontier_operator.api import load_target_file
from frontier_operator.perf.codec import worker_from_dict, worker_to_dict
from frontier_operator.perf.errors import UnpredictableConfig
from frontier_operator.perf.kernels import OpKind, prefill_work
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.steps import floor_seconds, prefill_cost
from frontier_operator.perf.types import Role
from frontier_operator.planner.enumerate import enumerate_shapes
from frontier_operator.planner.from_spec import plan_request_from_spec
from frontier_operator.planner.legality import legality_context
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan
from perf_support import gpu, model, unified, worker, workload
from planner_support import pool, search
from schema_tools import ROOT

GLM5 = model("GLM-5")
H200 = gpu("H200")
TP8 = worker("H200", tp=8, ep=8, max_running=16)
CP8 = replace(TP8, attention_cp=8)


def _indexer_flops(hw_worker_cp: int, prefix: float) -> float:
    hw = PerformanceModel.default().hardware(GLM5, H200, replace(TP8, attention_cp=hw_worker_cp))
    work = prefill_work(hw.layout, requests=1, new_tokens_per_request=8192, prefix_tokens=prefix, busy_ranks=1)
    # The indexer is the FP8 attention op (the core attention runs in BF16).
    return sum(op.flops for op in work.ops if op.kind is OpKind.ATTENTION and op.compute_format == "fp8")


def test_context_parallelism_splits_the_indexer_over_the_group() -> None:
    assert _indexer_flops(8, 100_000) == pytest.approx(_indexer_flops(1, 100_000) / 8)


# The cached 128k prompt keeps the bound it always had; 64k fresh tokens pay more per-layer fixed cost, which CP
# does not split (on the shipped sm90 fit CP8 takes 0.52 and 0.72 of TP8's time).
@pytest.mark.parametrize(("context", "cached", "at_most"), [(128_000, 0.85, 0.7), (64_000, 0.0, 0.75)])
def test_a_long_prompt_prefills_faster_with_cp_but_never_below_the_floor(
    context: int, cached: float, at_most: float
) -> None:
    model_ = PerformanceModel.default()
    new_tokens, prefix = context * (1 - cached), context * cached
    seconds = {}
    for name, candidate in (("tp", TP8), ("cp", CP8)):
        hw = model_.hardware(GLM5, H200, candidate)
        seconds[name] = prefill_cost(hw, new_tokens, prefix, candidate.chunked_prefill_size, 1.0).latency_s
    assert seconds["cp"] < at_most * seconds["tp"]
    hw = model_.hardware(GLM5, H200, CP8)
    floor = floor_seconds(
        GLM5, H200, hw.formats, hw.shape, requests=1, context=context, new_tokens_per_request=new_tokens
    )
    assert seconds["cp"] >= floor


def test_the_model_refuses_context_parallelism_on_a_decoding_worker() -> None:
    with pytest.raises(UnpredictableConfig, match="prefill workers only"):
        PerformanceModel.default().predict(GLM5, H200, unified("GLM-5", CP8), workload(1.0), 2.3)


def test_prefill_shapes_of_a_dsa_model_include_cp_over_the_whole_tp_group() -> None:
    context = legality_context(GLM5, pool("h200", "H200", max_gpus=64), search(("fp8",), ("bf16",)))
    prefill = enumerate_shapes(context, Role.PREFILL, ())
    decode = enumerate_shapes(context, Role.DECODE, ())
    assert {s.worker.attention_cp for s in prefill.shapes if s.worker.tp == 8} == {1, 8}
    assert all(s.worker.attention_cp in (1, s.worker.tp) for s in prefill.shapes)
    assert {s.worker.attention_cp for s in decode.shapes} == {1}
    switched_off = legality_context(
        GLM5, pool("h200", "H200", max_gpus=64), replace(search(("fp8",), ("bf16",)), prefill_context_parallel=False)
    )
    assert {s.worker.attention_cp for s in enumerate_shapes(switched_off, Role.PREFILL, ()).shapes} == {1}


def test_dense_attention_models_get_no_cp_shapes() -> None:
    context = legality_context(model("Qwen3-32B"), pool("h200", "H200", max_gpus=32), search(("fp8",), ("bf16",)))
    assert {s.worker.attention_cp for s in enumerate_shapes(context, Role.PREFILL, ()).shapes} == {1}


def test_the_codec_keeps_cp_and_reads_records_written_before_it() -> None:
    assert worker_from_dict(worker_to_dict(CP8)) == CP8
    older = {key: value for key, value in worker_to_dict(TP8).items() if key != "attentionCp"}
    assert worker_from_dict(older) == TP8


def test_glm5_plans_context_parallel_prefill_and_says_why() -> None:
    request = plan_request_from_spec(load_target_file(ROOT / "examples" / "glm5-agentic-coding.yaml").spec)
    plan = make_plan(request, PerformanceModel.default())
    assert isinstance(plan, Plan)
    prefill = plan.chosen.config.role(Role.PREFILL)
    assert prefill is not None and prefill.worker.attention_cp == prefill.worker.tp
    # The reason quoted is the plain prefill server's own: its unloaded TTFT as a prefill server.
    assert any(
        line.startswith("prefill without context parallelism") and "even unloaded as a prefill server" in line
        for line in plan.explanation
    )
