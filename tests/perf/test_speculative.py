"""Speculative decoding pays off at low batch and stops paying at very high batch."""

from __future__ import annotations

import pytest

from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.speculative import accept_length, acceptance_probability
from frontier_operator.perf.types import Role, RoleDeployment, ServingConfig, Speculative, SpeculativeAlgorithm
from perf_support import gpu, model, worker, workload

MTP = Speculative(SpeculativeAlgorithm.NEXTN, num_steps=3, eagle_topk=1, num_draft_tokens=4)
EAGLE = Speculative(SpeculativeAlgorithm.EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4, draft_model="d")


def test_accept_length_by_workload_kind() -> None:
    code, chat, random = (accept_length(EAGLE, kind) for kind in ("agentic-coding", "chat", "random"))
    assert 1.0 < random < chat < code <= 4.0
    # Published Qwen3.5 figures at 3 steps: HumanEval 3.47, MT-Bench 3.03 (published-figures.md §4).
    assert abs(code - 3.47) < 0.1 and abs(chat - 3.03) < 0.1
    assert accept_length(MTP, "chat") > accept_length(EAGLE, "chat")
    assert acceptance_probability("unknown-kind", SpeculativeAlgorithm.EAGLE3) == 0.8


def test_one_step_mtp_matches_the_ant_group_accept_length() -> None:
    one_step = Speculative(SpeculativeAlgorithm.NEXTN, num_steps=1, eagle_topk=1, num_draft_tokens=2)
    assert 1.8 <= accept_length(one_step, "chat") <= 1.9


def test_a_tree_is_only_as_wide_as_its_verify_budget() -> None:
    def eagle(steps: int, topk: int, draft_tokens: int) -> float:
        return accept_length(Speculative(SpeculativeAlgorithm.EAGLE3, steps, topk, draft_tokens, "d"), "chat")

    chain = eagle(5, 1, 6)
    alpha = acceptance_probability("chat", SpeculativeAlgorithm.EAGLE3)
    assert chain == pytest.approx(sum(alpha**depth for depth in range(6)))
    # Five rounds of four candidates verified with 8 tokens: the 5-deep chain plus the two likeliest side
    # branches (second choices at depths 1 and 2), not five levels that are each almost surely accepted.
    side_branches = alpha * (1 - alpha) + alpha * alpha * (1 - alpha)
    assert eagle(5, 4, 8) == pytest.approx(chain + side_branches, rel=1e-9)
    assert eagle(5, 4, 8) < eagle(5, 4, 16) < eagle(5, 4, 32) <= 6.0


def test_a_wider_tree_gains_what_sglang_measured_over_the_chain(shipped: PerformanceModel) -> None:
    """gpt-oss-120b on 4×H200 at batch 1 (published-figures.md §4, SGLang): EAGLE-3 with 3 steps, top-1, 4 draft
    tokens is 1.39× faster than no speculation; 5 steps, top-4, 8 tokens 1.52×, i.e. 9 % more. Counting every
    level of the tree as accepted when any of its four candidates is (what the model did before it counted the
    verify budget) made the tree 48 % better than the chain."""
    arch, device = model("gpt-oss-120b"), gpu("H200")

    def token_time(spec: Speculative | None) -> float:
        serving = worker("H200", tp=4, weight_format="mxfp4", max_running=256, speculative=spec)
        return shipped.decode_token_time(arch, device, serving, 1, 1024, kind="chat")

    chain = Speculative(SpeculativeAlgorithm.EAGLE3, num_steps=3, eagle_topk=1, num_draft_tokens=4, draft_model="d")
    tree = Speculative(SpeculativeAlgorithm.EAGLE3, num_steps=5, eagle_topk=4, num_draft_tokens=8, draft_model="d")
    tree_over_chain = token_time(chain) / token_time(tree)
    assert 0.95 < tree_over_chain < 1.25


def test_speculation_helps_at_low_batch(shipped: PerformanceModel) -> None:
    for name, gpu_name, fmt, spec in (
        ("DeepSeek-R1", "H200", "fp8-block", MTP),
        ("Llama-3.1-70B-Instruct", "H100", "fp8", EAGLE),
    ):
        arch, device = model(name), gpu(gpu_name)
        plain = worker(gpu_name, tp=8, weight_format=fmt, max_running=4096)
        spec_worker = worker(gpu_name, tp=8, weight_format=fmt, max_running=4096, speculative=spec)
        low_plain = shipped.decode_token_time(arch, device, plain, 1, 4096, kind="chat")
        low_spec = shipped.decode_token_time(arch, device, spec_worker, 1, 4096, kind="chat")
        assert low_spec < 0.75 * low_plain, name


def test_speculation_stops_paying_once_decode_is_compute_bound(shipped: PerformanceModel) -> None:
    """Verify passes multiply the FLOPs by the draft length; once the batch is compute-bound the rejected
    drafts eat the gain. (A KV-bound batch, long MLA contexts, keeps gaining: the KV is read once per verify
    pass whatever the draft length.) What is left at very high batch is the per-iteration overhead spread over
    the accepted tokens: at most a few per cent. At batch 1 every draft step pays the family's step overhead
    (1.7 ms on sm90), which holds EAGLE-3's gain at TP8 to 1.5× on Qwen3-32B (1.8× on Llama-3.1-70B)."""
    for name, gpu_name, fmt in (("Llama-3.1-70B-Instruct", "H100", "fp8"), ("Qwen3-32B", "H100", "fp8")):
        arch, device = model(name), gpu(gpu_name)
        plain = worker(gpu_name, tp=8, weight_format=fmt, max_running=8192)
        spec_worker = worker(gpu_name, tp=8, weight_format=fmt, max_running=8192, speculative=EAGLE)
        low = shipped.decode_token_time(arch, device, spec_worker, 1, 512) / shipped.decode_token_time(
            arch, device, plain, 1, 512
        )
        high = shipped.decode_token_time(arch, device, spec_worker, 4096, 512) / shipped.decode_token_time(
            arch, device, plain, 4096, 512
        )
        assert low < 0.7, name
        assert high > 0.9, name


def test_a_drafted_prefill_also_runs_the_draft_over_the_prompt(shipped: PerformanceModel) -> None:
    """SGLang prefills the draft over every prompt token after the target (its hidden states seed the first
    drafts); a draft is one layer's worth of the target, so DeepSeek-R1's 61 layers prefill as 62."""
    arch, device = model("DeepSeek-R1"), gpu("H200")
    plain = worker("H200", tp=8, weight_format="fp8-block", max_running=256)
    drafted = worker("H200", tp=8, weight_format="fp8-block", max_running=256, speculative=MTP)
    for tokens in (1024, 8192):
        ratio = shipped.prefill_time(arch, device, drafted, tokens) / shipped.prefill_time(arch, device, plain, tokens)
        assert ratio == pytest.approx(62 / 61)
    forward_ratio = shipped.prefill_forward_time(
        arch, device, drafted, sequences=4, new_tokens=1024
    ) / shipped.prefill_forward_time(arch, device, plain, sequences=4, new_tokens=1024)
    assert forward_ratio == pytest.approx(62 / 61)


def test_a_drafted_prefill_worker_delays_the_first_token_by_the_drafts_pass(shipped: PerformanceModel) -> None:
    """Through the whole P/D prediction: at a trickle of 8k-token prompts the first token comes at least the
    draft's share of a prefill later on workers that draft (the decode workers' pace does not enter TTFT)."""
    arch, device = model("DeepSeek-R1"), gpu("H200")

    def pd(spec: Speculative | None) -> ServingConfig:
        role = worker("H200", tp=8, weight_format="fp8-block", max_running=256, speculative=spec)
        return ServingConfig(
            arch.name, (RoleDeployment(Role.PREFILL, role, 1), RoleDeployment(Role.DECODE, role, 1)), "nixl"
        )

    trickle = workload(rate=0.01, input_mean=8000, output_mean=500)
    plain = shipped.predict(arch, device, pd(None), trickle, 1.0).ttft.p50
    drafted = shipped.predict(arch, device, pd(MTP), trickle, 1.0).ttft.p50
    prefill = shipped.prefill_time(arch, device, worker("H200", tp=8, weight_format="fp8-block", max_running=256), 8000)
    assert drafted - plain >= prefill / 61
