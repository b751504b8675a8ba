"""Human sentences for a plan: the choice, its margins, the runner-ups, and why the alternatives lost.

Every sentence is built from numbers the search produced; nothing here decides anything.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace

from frontier_operator.catalog.quantization import execution_mode
from frontier_operator.perf.types import Role, WorkerConfig
from frontier_operator.planner.choose import objective_key, worst_ratio
from frontier_operator.planner.describe import describe_config, describe_layout, describe_speculative, describe_worker
from frontier_operator.planner.types import (
    BatchKnee,
    Disaggregation,
    Evaluated,
    PlanRequest,
    Rejection,
    RejectionReason,
    RejectionSummary,
    RunnerUp,
    SloCheck,
    SpeculativeMode,
    Technique,
    TechniqueShift,
)


def ms(seconds: float) -> str:
    """18.3 ms, 1.5 s, 12 s: milliseconds below a second, seconds above."""
    if not math.isfinite(seconds):
        return "∞"
    return f"{seconds * 1e3:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def dollars(cost: float) -> str:
    return f"${cost:.3f}/Mtok" if cost < 10 else f"${cost:,.1f}/Mtok"


def percent(delta: float) -> str:
    return f"{abs(delta):.0f} % {'dearer' if delta >= 0 else 'cheaper'}"


def slo_sentence(check: SloCheck) -> str:
    verdict = "met" if check.met else "MISSED"
    return (
        f"{check.bound.label}: predicted {ms(check.predicted_s)} against {ms(check.bound.limit_s)} "
        f"({check.headroom_pct:.0f} % headroom, {check.margin * 100:.0f} % safety margin) — {verdict}"
    )


def knee_sentence(knee: BatchKnee) -> str:
    if knee.binding is None or knee.next_cap is None or knee.next_value_s is None:
        return f"batch cap {knee.cap}: as many requests as the KV cache holds at this context length"
    return (
        f"batch cap {knee.cap} sits at the {knee.binding.label} knee: at {knee.next_cap} it would reach "
        f"{ms(knee.next_value_s)}, over the {ms(knee.binding.limit_s)} limit once the margin is applied"
    )


def fleet_sentence(candidate: Evaluated) -> str:
    prediction = candidate.prediction
    return (
        f"{candidate.pool.name} ({candidate.pool.gpu.name}): {describe_config(candidate.config)} — "
        f"{candidate.config.total_gpus} GPUs, {dollars(prediction.cost_per_mtok)}, "
        f"{prediction.output_tokens_per_s_per_gpu:,.0f} tok/s/GPU, "
        f"{prediction.output_tokens_per_s_per_user:,.0f} tok/s/user"
    )


def runner_up_sentence(runner_up: RunnerUp) -> str:
    return (
        f"runner-up: {fleet_sentence(runner_up.candidate)} — {percent(runner_up.cost_delta_pct)}, "
        f"{runner_up.gpu_delta:+d} GPUs ({runner_up.difference})"
    )


def difference(chosen: Evaluated, other: Evaluated) -> str:
    """What sets `other` apart from the chosen fleet, in a few words."""
    a, b = _main_worker(chosen), _main_worker(other)
    parts = []
    if chosen.pool.name != other.pool.name:
        parts.append(f"pool {other.pool.name}")
    if chosen.config.disaggregated != other.config.disaggregated:
        parts.append("P/D" if other.config.disaggregated else "aggregated")
    if a.weight_format != b.weight_format:
        parts.append(b.weight_format)
    if a.kv_cache_format != b.kv_cache_format:
        parts.append(f"KV {b.kv_cache_format}")
    if describe_layout(a) != describe_layout(b):
        parts.append(describe_layout(b))
    if describe_speculative(a) != describe_speculative(b):
        parts.append(describe_speculative(b) or "no speculation")
    if a.max_running_requests != b.max_running_requests:
        parts.append(f"cap {b.max_running_requests}")
    prefill_a, prefill_b = chosen.config.role(Role.PREFILL), other.config.role(Role.PREFILL)
    if prefill_a is not None and prefill_b is not None:
        if describe_layout(prefill_a.worker) != describe_layout(prefill_b.worker):
            parts.append(f"prefill {describe_layout(prefill_b.worker)}")
        if prefill_a.replicas != prefill_b.replicas:
            parts.append(f"{prefill_b.replicas} prefill replicas")
    return ", ".join(parts) or "replica count"


def _main_worker(candidate: Evaluated) -> WorkerConfig:
    role = candidate.config.role(Role.DECODE) or candidate.config.roles[0]
    return role.worker


# ------------------------------------------------------------------------ why alternatives lost


# A decision and each candidate's side of it; None: the decision does not apply to that candidate.
_Dimension = tuple[str, Callable[[Evaluated], str | None]]


def _prefill_split(candidate: Evaluated) -> str | None:
    """Whether a P/D fleet's prefill servers split long prompts by context parallelism (None: aggregated)."""
    prefill = candidate.config.role(Role.PREFILL)
    if prefill is None:
        return None
    return "context-parallel prefill" if prefill.worker.attention_cp > 1 else "prefill without context parallelism"


def _dimensions() -> tuple[_Dimension, ...]:
    return (
        ("weights", lambda c: _main_worker(c).weight_format),
        ("KV cache", lambda c: _main_worker(c).kv_cache_format),
        ("serving", lambda c: "P/D" if c.config.disaggregated else "aggregated"),
        ("speculation", lambda c: describe_speculative(_main_worker(c)) or "no speculation"),
        ("experts", lambda c: "wide EP" if Technique.WIDE_EP in c.techniques else "narrow EP"),
        ("prefill", _prefill_split),
        ("pool", lambda c: c.pool.name),
    )


def alternatives(
    request: PlanRequest, chosen: Evaluated, candidates: Sequence[Evaluated], rejections: Sequence[Rejection]
) -> list[str]:
    """For each decision, the best candidate that decided otherwise and by how much it lost."""
    lines: list[str] = []
    allowed = [c for c in candidates if c.allowed]
    for dimension, value_of in _dimensions():
        mine = value_of(chosen)
        if mine is None:
            continue
        others = sorted({v for c in allowed if (v := value_of(c)) is not None} - {mine})
        for value in others:
            group = [c for c in allowed if value_of(c) == value]
            feasible = sorted((c for c in group if c.feasible), key=lambda c: objective_key(request.objective, c))
            label = f"{value} ({dimension})"
            if dimension == "serving":
                # Whether splitting prefill from decode pays depends on the prompt and answer lengths.
                workload = request.workload
                label += f" at {_tokens(workload.input_tokens.mean)}/{_tokens(workload.output_tokens.mean)} tokens"
            if feasible:
                best = feasible[0]
                note = _format_note(request, best) if dimension == "weights" else ""
                lines.append(f"{label}: {note}{_lost_by(chosen, best)}")
            else:
                lines.append(f"{label}: {_why_infeasible(group)}")
    lines.extend(_never_sized(request, chosen, candidates, rejections))
    return lines


def _tokens(count: float) -> str:
    return f"{count / 1000:.3g}k" if count >= 1000 else f"{count:.0f}"


def _lost_by(chosen: Evaluated, best: Evaluated) -> str:
    """How the best fleet of an alternative compares with the chosen one, and what decided a tie."""
    cost, chosen_cost = best.prediction.cost_per_mtok, chosen.prediction.cost_per_mtok
    delta = (cost / chosen_cost - 1) * 100
    tps = best.prediction.output_tokens_per_s_per_gpu / chosen.prediction.output_tokens_per_s_per_gpu - 1
    summary = f"({dollars(cost)}, {tps * 100:+.0f} % tok/s/GPU, {best.config.total_gpus} GPUs)"
    if abs(delta) >= 0.5:
        return f"best fleet is {percent(delta)} {summary}"
    if best.quality_loss_pct > chosen.quality_loss_pct:
        quality = f"{best.quality_loss_pct:.1f} % vs {chosen.quality_loss_pct:.1f} %"
        return f"costs the same {summary} but loses more accuracy ({quality})"
    if best.config.total_gpus > chosen.config.total_gpus:
        return f"costs the same {summary} on more GPUs"
    return f"costs the same {summary} with less latency headroom"


def _format_note(request: PlanRequest, candidate: Evaluated) -> str:
    worker = _main_worker(candidate)
    fmt = next((f for f in request.search.quantizations if f.name == worker.weight_format), None)
    if fmt is not None and execution_mode(fmt, candidate.pool.gpu) == "weight-only":
        return f"not native on {candidate.pool.gpu.name} — weight-only there (dequantized to BF16 in the kernel); "
    return ""


def _why_infeasible(group: Sequence[Evaluated]) -> str:
    within = [c for c in group if c.within_budget]
    if not within:
        fewest = min(group, key=lambda c: c.config.total_gpus)
        return f"needs {fewest.config.total_gpus} GPUs, more than the pool allows"
    # The fleet closest to meeting every SLO says what is missing; the commonest miss across all of them
    # could name a bound the best fleets meet (P/D fleets of Qwen3-32B mostly miss TPOT, the closest TTFT).
    closest = min(within, key=lambda c: worst_ratio(c.checks))
    missed = [check for check in closest.checks if not check.met]
    if missed:
        what = ", ".join(
            f"{check.bound.label} ({ms(check.predicted_s)} against {ms(check.required_s)} with the margin)"
            for check in missed
        )
        return f"no configuration meets every SLO within the budget; the closest misses {what}"
    return "cannot sustain the request rate within the budget"


def _never_sized(
    request: PlanRequest, chosen: Evaluated, candidates: Sequence[Evaluated], rejections: Sequence[Rejection]
) -> list[str]:
    """Allowed formats and techniques that never produced a candidate, with the commonest reason."""
    lines = []
    sized_formats = {_main_worker(c).weight_format for c in candidates}
    for fmt in request.search.quantizations:
        if fmt.name in sized_formats:
            continue
        reasons = Counter(r.reason for r in rejections if r.worker is not None and r.worker.weight_format == fmt.name)
        if reasons:
            reason, count = reasons.most_common(1)[0]
            example = next(r for r in rejections if r.reason is reason and r.worker is not None)
            lines.append(f"{fmt.name} (weights): every layout rejected — {example.detail} ({count}×)")
    if request.search.disaggregation is Disaggregation.NEVER and not chosen.config.disaggregated:
        lines.append("P/D (serving): not searched (search.disaggregation is never)")
    elif not any(c.config.disaggregated for c in candidates):
        pd = [r for r in rejections if r.reason in _PD_REASONS]
        if pd:
            lines.append(f"P/D (serving): {pd[0].detail}")
    if request.search.speculative is SpeculativeMode.OFF:
        lines.append("speculative decoding: not searched (search.speculative is off)")
    lines.extend(_prefill_without_cp(chosen, candidates, rejections))
    return lines


def _prefill_without_cp(
    chosen: Evaluated, candidates: Sequence[Evaluated], rejections: Sequence[Rejection]
) -> list[str]:
    """Why the chosen prefill servers split prompts by context parallelism, when no fleet without it was sized:
    the same prefill server without CP, and the reason it was left out."""
    prefill = chosen.config.role(Role.PREFILL)
    if prefill is None or prefill.worker.attention_cp == 1:
        return []
    if any(_prefill_split(c) == "prefill without context parallelism" for c in candidates):
        return []
    plain = replace(prefill.worker, attention_cp=1)
    # The prefill screening names its servers without the draft the chosen P/D configuration gives both roles.
    screened = {describe_worker(plain), describe_worker(replace(plain, speculative=None))}
    found = next((r for r in rejections if r.worker is not None and describe_worker(r.worker) in screened), None)
    if found is None:
        return []
    return [f"prefill without context parallelism (prefill): {describe_worker(plain)} {found.detail}"]


_PD_REASONS = frozenset(
    {
        RejectionReason.PD_NEEDS_RDMA,
        RejectionReason.PD_KV_DTYPE_MISMATCH,
        RejectionReason.PD_PAGE_SIZE_MISMATCH,
        RejectionReason.PD_SPEC_MISMATCH,
    }
)


def shift_sentence(shift: TechniqueShift) -> str:
    return f"{shift.technique.value}: {shift.effect.value} — {shift.note}"


def rejection_sentence(summaries: Sequence[RejectionSummary]) -> str | None:
    total = sum(s.count for s in summaries)
    if not total:
        return None
    top = ", ".join(f"{s.count} {s.reason.value}" for s in summaries[:4])
    return f"{total} candidates left out before or during sizing: {top}"


def explain_plan(
    *,
    request: PlanRequest,
    chosen: Evaluated,
    runner_ups: Sequence[RunnerUp],
    candidates: Sequence[Evaluated],
    shifts: Sequence[TechniqueShift],
    rejections: Sequence[Rejection],
    summaries: Sequence[RejectionSummary],
) -> tuple[str, ...]:
    lines = [f"chosen ({request.objective.value}): {fleet_sentence(chosen)}"]
    lines += [slo_sentence(check) for check in chosen.checks]
    if chosen.knee is not None:
        lines.append(knee_sentence(chosen.knee))
    lines += [runner_up_sentence(r) for r in runner_ups]
    lines += alternatives(request, chosen, candidates, rejections)
    lines += [shift_sentence(s) for s in shifts]
    summary = rejection_sentence(summaries)
    if summary:
        lines.append(summary)
    return tuple(lines)
