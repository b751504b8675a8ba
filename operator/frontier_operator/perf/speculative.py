"""Speculative decoding (EAGLE-3, MTP/NEXTN): how many tokens one verify pass yields, by workload kind.

Each draft token is accepted with probability α if the one before it was (a chain), so a chain of `steps`
draft tokens yields 1 + α + … + α^steps tokens per target forward (the final "bonus" token is free). With
`eagle_topk` > 1 the draft proposes a tree, built as SGLang builds it (EAGLE-2's dynamic tree): each of
`steps` rounds expands the `topk` best partial paths by their `topk` best next tokens, and the verify pass
scores only the `num_draft_tokens − 1` best nodes of everything proposed. The target's token is the draft's
r-th choice with probability α(1 − α)^(r − 1) (so a chain's α is the top-1 rate, and a level with `topk`
candidates is accepted with 1 − (1 − α)^topk); a node is accepted with the product of its path's
probabilities, and a pass yields 1 + the sum over the verified nodes. The budget matters: a 5-step, top-4
tree verified with 8 tokens is mostly a chain with two side branches, not five levels of four candidates.

α per workload kind is backed out of published accept lengths (published-figures.md §4):
* DeepSeek-R1 MTP on Ant Group's production traffic (H20 rows): accept length 1.8–1.9 with 1 step
  (num_draft_tokens 2), 2.4–2.7 with 2 steps, 2.9–3.3 with 3 steps → α ≈ 0.85 for chat-like traffic;
* Qwen3.5-397B-A17B EAGLE-3 vs MTP at batch 1: HumanEval 3.47 / 3.62 (code), GSM8K 3.40 / 3.54 (math),
  MT-Bench 3.03 / 3.28 (chat) with 3 steps → α ≈ 0.90 code, 0.88 math, 0.82 chat for EAGLE-3, MTP
  about 0.02 higher;
* DeepSeek-V3 MTP on a synthetic 65k-token random workload: accept length 2.18 with 2 steps, 2.44 with
  3 → α ≈ 0.63 for random text (benchmarks with random prompts).
"""

from __future__ import annotations

from frontier_operator.perf.types import Speculative, SpeculativeAlgorithm

# Per-token acceptance of EAGLE-3 drafts by workload kind; see the module docstring for the derivation.
EAGLE3_ACCEPTANCE = {
    "agentic-coding": 0.90,
    "code": 0.90,
    "coding": 0.90,
    "math": 0.88,
    "reasoning": 0.86,
    "chat": 0.82,
    "summarization": 0.80,
    "batch": 0.80,
    "random": 0.63,
    "synthetic": 0.63,
}
DEFAULT_ACCEPTANCE = 0.80
# MTP heads were trained with the target model itself; Qwen3.5 shows them about 0.02 more accurate per token.
MTP_BONUS = 0.02


def acceptance_probability(kind: str, algorithm: SpeculativeAlgorithm) -> float:
    base = EAGLE3_ACCEPTANCE.get(kind.strip().lower(), DEFAULT_ACCEPTANCE)
    if algorithm is SpeculativeAlgorithm.NEXTN:
        base += MTP_BONUS
    return min(base, 0.97)


def accept_length(speculative: Speculative, kind: str) -> float:
    """Expected tokens produced per verify pass (≥ 1, ≤ num_steps + 1 and ≤ num_draft_tokens)."""
    alpha = acceptance_probability(kind, speculative.algorithm)
    topk = max(1, speculative.eagle_topk)
    by_rank = [alpha * (1.0 - alpha) ** rank for rank in range(topk)]
    proposed: list[float] = []
    beams = [1.0]
    for _ in range(max(0, speculative.num_steps)):
        children = sorted((beam * p for beam in beams for p in by_rank), reverse=True)
        proposed += children
        beams = children[:topk]
    # A node is never likelier than its parent, so the best nodes form a tree: the one SGLang verifies.
    verified = sorted(proposed, reverse=True)[: max(0, speculative.num_draft_tokens - 1)]
    return 1.0 + sum(verified)
