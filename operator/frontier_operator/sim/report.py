"""A simulation's result as data (`-o json`) and as text: the frontier, the timeline and the summary."""

from __future__ import annotations

import math
from typing import Any

from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.types import SloBound
from frontier_operator.sim.closed_loop import FrontierRow, SimulationResult, SloWindow, Summary, TimelineEntry
from frontier_operator.sim.oracle import OracleResult
from frontier_operator.tuning.actions import format_seconds


def _number(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return float(f"{value:.{digits}g}")


def clock(seconds: float) -> str:
    """Simulated time as h:mm."""
    minutes = round(seconds / 60)
    return f"{minutes // 60}:{minutes % 60:02d}"


def _slo(bound: SloBound) -> dict[str, Any]:
    return {"metric": bound.metric.value, "percentile": bound.percentile, "limit_s": bound.limit_s}


def describe_slos(slos: tuple[SloBound, ...]) -> str:
    return ", ".join(f"{b.label} ≤ {format_seconds(b.limit_s)}" for b in slos)


def summary_to_dict(summary: Summary, result: SimulationResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "converged_config": summary.converged_config,
        "converged_gpus": summary.converged_gpus,
        "cost_per_mtok": _number(summary.cost_per_mtok),
        "oracle_cost_per_mtok": _number(summary.oracle_cost_per_mtok),
        "oracle_config": summary.oracle_config,
        "cost_ratio_vs_oracle": _number(summary.cost_ratio_vs_oracle, 4),
        "slo_met_fraction": _number(summary.slo_met_fraction, 4),
        "slo_windows_counted": summary.slo_windows_counted,
        "settle_at_s": _number(summary.settle_at_s),
        "changes": summary.changes,
        "replans": summary.replans,
        "proposals": summary.proposals,
        "time_to_converge_s": _number(summary.time_to_converge_s),
        "cost_stretch_s": [_number(summary.cost_stretch_s[0]), _number(summary.cost_stretch_s[1])],
        "initial_config": summary.initial_config,
        "planned_cost_per_mtok": _number(summary.planned_cost_per_mtok),
    }
    if result.length_match is not None:
        match = result.length_match
        data["matched_lengths"] = {
            "requested": [_number(match.requested[0]), _number(match.requested[1])],
            "measured": list(match.measured),
            "text": match.describe(),
        }
    return data


def _entry(entry: TimelineEntry) -> dict[str, Any]:
    return {
        "at_s": entry.at,
        "kind": entry.kind,
        "outcome": entry.outcome or None,
        "action": entry.action,
        "reason": entry.reason,
        "note": entry.note or None,
        "config": entry.config,
        "gpus": entry.gpus,
        "canary": entry.canary,
        "ttft_p50_s": _number(entry.ttft_p50_s),
        "ttft_p99_s": _number(entry.ttft_p99_s),
        "tpot_p50_s": _number(entry.tpot_p50_s),
        "tpot_p99_s": _number(entry.tpot_p99_s),
        "cost_per_mtok": _number(entry.cost_per_mtok),
        "slo_met": entry.slo_met,
    }


def _window(window: SloWindow) -> dict[str, Any]:
    return {
        "start_s": window.start,
        "end_s": window.end,
        "met": window.met,
        "violations": list(window.violations),
        "samples": window.samples,
        "counted": window.counted,
    }


def _frontier(row: FrontierRow) -> dict[str, Any]:
    return {
        "summary": row.summary,
        "pool": row.pool,
        "gpus": row.gpus,
        "cost_per_mtok": _number(row.cost_per_mtok),
        "tokens_per_s_per_user": _number(row.tokens_per_s_per_user),
        "tokens_per_s_per_gpu": _number(row.tokens_per_s_per_gpu),
        "meets_slo": row.meets_slo,
    }


def _oracle(oracle: OracleResult | None) -> dict[str, Any] | None:
    if oracle is None:
        return None
    return {
        "config": describe_config(oracle.config) if oracle.config is not None else None,
        "cost_per_mtok_at_offered_rate": _number(oracle.cost_per_mtok),
        "exhausted": oracle.exhausted,
        "checks": [
            {
                "config": describe_config(c.config),
                "cost_per_mtok": _number(c.cost_per_mtok),
                "met": c.met,
                "reason": c.reason,
            }
            for c in oracle.checks
        ],
    }


def result_to_dict(result: SimulationResult) -> dict[str, Any]:
    chosen = result.plan.chosen
    workload = result.workload
    return {
        "target": result.target,
        "truth": result.truth,
        "traffic": result.traffic,
        "hours": result.hours,
        "seed": result.seed,
        "mode": result.mode,
        "slo": [_slo(b) for b in result.slos],
        "workload": {
            "request_rate_per_s": workload.request_rate_per_s,
            "input_tokens_mean": workload.input_tokens.mean,
            "output_tokens_mean": workload.output_tokens.mean,
            "prefix_cache_hit_rate": workload.prefix_cache_hit_rate,
        },
        "search_limits": list(result.search_notes),
        "plan": {
            "chosen": describe_config(chosen.config),
            "pool": chosen.pool.name,
            "gpus": chosen.config.total_gpus,
            "predicted_cost_per_mtok": _number(chosen.prediction.cost_per_mtok),
            "runner_ups": [describe_config(r.candidate.config) for r in result.plan.runner_ups],
            "frontier": [_frontier(row) for row in result.frontier],
        },
        "timeline": [_entry(e) for e in result.timeline],
        "windows": [_window(w) for w in result.windows],
        "oracle": _oracle(result.oracle),
        "summary": summary_to_dict(result.summary, result),
    }


# ------------------------------------------------------------------------------------------ text


def _dollars(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"${value:.3g}/Mtok"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else format_seconds(value)


def header_lines(result: SimulationResult) -> list[str]:
    """The frontier and the chosen configuration: what the run starts from."""
    return start_lines(
        target=result.target,
        truth=result.truth,
        traffic=result.traffic,
        hours=result.hours,
        seed=result.seed,
        mode=result.mode,
        slos=result.slos,
        frontier=result.frontier,
        chosen=describe_config(result.plan.chosen.config),
        pool=result.plan.chosen.pool.name,
        predicted=result.plan.chosen.prediction.cost_per_mtok,
        notes=result.search_notes,
    )


def start_lines(
    *,
    target: str,
    truth: str,
    traffic: str,
    hours: float,
    seed: int,
    mode: str,
    slos: tuple[SloBound, ...],
    frontier: tuple[FrontierRow, ...],
    chosen: str,
    pool: str,
    predicted: float,
    notes: tuple[str, ...],
) -> list[str]:
    lines = [
        f"frontier simulate {target}: truth {truth} (seed {seed}), {traffic} traffic, {hours:g} simulated hours, "
        f"tuning mode {mode}",
        f"SLO: {describe_slos(slos)}",
    ]
    if notes:
        lines.append("Measured truth table — the search is limited to what it answers:")
        lines += [f"  · {note}" for note in notes]
    lines.append("")
    lines.append("The planner's frontier (its own model):")
    width = max((len(r.summary) for r in frontier), default=10)
    heading = f"{'GPUs':>4}  {'$/Mtok':>11}  {'tok/s/user':>10}  {'tok/s/GPU':>9}  SLO"
    lines.append(f"  {'configuration':<{width}}  {heading}")
    for row in frontier:
        lines.append(
            f"  {row.summary:<{width}}  {row.gpus:>4}  {_dollars(row.cost_per_mtok):>11}  "
            f"{row.tokens_per_s_per_user:>10.3g}  {row.tokens_per_s_per_gpu:>9.3g}  {'met' if row.meets_slo else '—'}"
        )
    lines.append(f"Chosen: {chosen} on pool {pool}, predicted {_dollars(predicted)}")
    return lines


def status_line(entry: TimelineEntry) -> str:
    met = {True: "SLO met", False: "SLO MISSED", None: "no verdict"}[entry.slo_met]
    canary = f" + canary {entry.canary}" if entry.canary else ""
    return (
        f"  {clock(entry.at):>6}  {entry.config}{canary} ({entry.gpus} GPUs) · TTFT p50/p99 "
        f"{_ms(entry.ttft_p50_s)}/{_ms(entry.ttft_p99_s)} · TPOT p50/p99 {_ms(entry.tpot_p50_s)}/"
        f"{_ms(entry.tpot_p99_s)} · {_dollars(entry.cost_per_mtok)} · {met}"
    )


def event_line(entry: TimelineEntry) -> str:
    outcome = {"applied": "APPLIED", "proposed": "PROPOSED", "filtered": "FILTERED", "failed": "FAILED"}.get(
        entry.outcome, "noted"
    )
    text = f"  {clock(entry.at):>6}  {outcome:<8} {entry.action}: {entry.reason}"
    if entry.note:
        text += f" [{entry.note}]"
    return text


def summary_lines(result: SimulationResult) -> list[str]:
    s = result.summary
    lines = ["", "Summary:"]
    lines.append(f"  converged configuration  {s.converged_config} ({s.converged_gpus} GPUs)")
    lines.append(f"  initial plan             {s.initial_config}, predicted {_dollars(s.planned_cost_per_mtok)}")
    start, end = s.cost_stretch_s
    lines.append(f"  $/Mtok (twin)            {_dollars(s.cost_per_mtok)} measured over {clock(start)}–{clock(end)}")
    if s.oracle_config is not None:
        ratio = f"{s.cost_ratio_vs_oracle:.2f}×" if s.cost_ratio_vs_oracle is not None else "n/a"
        lines.append(
            f"  oracle                   {s.oracle_config}: {_dollars(s.oracle_cost_per_mtok)} for the same tokens "
            f"→ {ratio} the oracle"
        )
    elif result.oracle is not None:
        lines.append("  oracle                   none of the candidate layouts met the SLO on the truth")
    if s.slo_met_fraction is not None:
        met = round(s.slo_met_fraction * s.slo_windows_counted)
        lines.append(
            f"  SLO met                  {met}/{s.slo_windows_counted} windows ({s.slo_met_fraction:.1%}) after "
            f"settling at {clock(s.settle_at_s)}"
        )
    lines.append(
        f"  changes                  {s.changes} applied, {s.replans} re-plans, {s.proposals} proposals; "
        f"converged at {clock(s.time_to_converge_s)}"
    )
    if result.length_match is not None:
        lines.append(f"  lengths                  {result.length_match.describe()}")
    return lines


class RepeatFilter:
    """Which timeline entries deserve an event line: anything notable, except a proposal repeating the one
    before it (recommend and observe modes propose the same step at every tick until it is approved)."""

    def __init__(self) -> None:
        self._last_proposal: str | None = None

    def fresh(self, entry: TimelineEntry) -> bool:
        if entry.outcome != "proposed":
            if entry.notable:
                self._last_proposal = None
            return entry.notable
        repeated = entry.action == self._last_proposal
        self._last_proposal = entry.action
        return not repeated


def render_text(result: SimulationResult, *, every_s: float = 1800.0) -> str:
    """The whole report at once (the CLI prints the same lines progressively while the run goes)."""
    lines = header_lines(result)
    lines += ["", "Timeline (simulated h:mm):"]
    repeats = RepeatFilter()
    for entry in result.timeline:
        notable = repeats.fresh(entry)
        if notable:
            lines.append(event_line(entry))
        if notable or entry.at % every_s < 1e-9:
            lines.append(status_line(entry))
    lines += summary_lines(result)
    return "\n".join(lines)
