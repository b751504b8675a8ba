"""`frontier simulate -f target.yaml`: the planner and the closed loop against the digital twin, offline.

Plans the target, starts the chosen fleet on a simulated SGLang fleet whose ground truth is not the
planner's model (`--truth`: the model bent by hidden factors, the model itself, or a table of real
measurements), and runs the operator's tuning loop on a simulated clock for `--hours`. Text output shows the
planner's frontier and choice, then the timeline while it runs (every decision that did something, with its
reason, and the fleet's state every half hour), then the summary against the oracle. `-o json` prints one
object whose `summary` holds the figures. Exit codes: 0 done, 2 invalid input, 3 infeasible target.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.api.spec import TuningMode
from frontier_operator.api.units import GpuMinutes
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.planner.describe import describe_config
from frontier_operator.planner.from_spec import SpecResolutionError
from frontier_operator.planner.report import render_text as render_plan
from frontier_operator.planner.report import result_to_dict as plan_to_dict
from frontier_operator.sim.closed_loop import (
    InfeasibleTarget,
    PhaseNote,
    ProgressEvent,
    SimulationResult,
    frontier_rows,
    prepare,
    simulate_prepared,
    target_name,
)
from frontier_operator.sim.report import (
    RepeatFilter,
    event_line,
    result_to_dict,
    start_lines,
    status_line,
    summary_lines,
)
from frontier_operator.sim.sweep import sweep_before_serving, sweep_summary
from frontier_operator.sim.traffic import TrafficKind, source_from_spec
from frontier_operator.sweep.results import comparison_rows
from frontier_operator.validation import check_target

EXIT_INVALID = 2
EXIT_INFEASIBLE = 3
# A status line of the fleet this often in simulated time (and at every decision that did something).
STATUS_EVERY_S = 1800.0


def _invalid(path: str, *messages: str) -> int:
    print(f"{path}: invalid", file=sys.stderr)
    for message in messages:
        print(f"  {message}", file=sys.stderr)
    return EXIT_INVALID


def _check_traffic(traffic: str) -> str | None:
    if traffic.lower().endswith(".csv"):
        return None if Path(traffic).is_file() else f"--traffic {traffic}: no such trace file"
    known = {k.value for k in TrafficKind}
    if traffic not in known:
        return f"--traffic {traffic!r}: use {', '.join(sorted(known))} or a trace .csv"
    return None


def _printer(every_s: float) -> Any:
    repeats = RepeatFilter()

    def show(event: ProgressEvent) -> None:
        if isinstance(event, PhaseNote):
            print(f"  … {event.text}", flush=True)
            return
        notable = repeats.fresh(event)
        if notable:
            print(event_line(event), flush=True)
        if notable or event.at % every_s < 1e-9:
            print(status_line(event), flush=True)

    return show


def _plot(result: SimulationResult, path: str) -> None:
    """Latency against the SLO, GPUs and measured $/Mtok over simulated time, applied changes marked."""
    import matplotlib  # noqa: PLC0415 - optional dependency, only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    hours = [e.at / 3600 for e in result.timeline]
    figure, (latency, gpus, cost) = plt.subplots(3, 1, figsize=(11, 8), sharex=True)
    series = (("TTFT p99", "ttft_p99_s", "ttft", 99), ("TPOT p50", "tpot_p50_s", "tpot", 50))
    for label, attribute, metric, percentile in series:
        values = [getattr(e, attribute) for e in result.timeline]
        line = latency.plot(hours, [v * 1e3 if v is not None else None for v in values], label=label)[0]
        for bound in result.slos:
            if bound.metric.value == metric and bound.percentile == percentile:
                latency.axhline(bound.limit_s * 1e3, color=line.get_color(), linestyle=":", label=f"{label} SLO")
    latency.set_yscale("log")
    latency.set_ylabel("ms (stable pods)")
    latency.legend(fontsize=8)
    gpus.step(hours, [e.gpus for e in result.timeline], where="post")
    gpus.set_ylabel("GPUs (stable + canary)")
    cost.plot(hours, [e.cost_per_mtok for e in result.timeline], label="twin, per window")
    summary = result.summary
    if summary.oracle_cost_per_mtok is not None:
        cost.axhline(summary.oracle_cost_per_mtok, color="black", linestyle="--", label="oracle (last stretch)")
    cost.set_ylabel("$ / Mtok")
    cost.set_xlabel("simulated hours")
    cost.legend(fontsize=8)
    for entry in result.timeline:
        if entry.changed_fleet:
            for axis in (latency, gpus, cost):
                axis.axvline(entry.at / 3600, color="grey", alpha=0.4)
    for axis in (latency, gpus, cost):
        axis.grid(True, alpha=0.3)
    figure.suptitle(f"{result.target}: closed loop on truth {result.truth}, {result.traffic} traffic")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def _gpu_minutes(text: str) -> GpuMinutes:
    try:
        return GpuMinutes.parse(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run(args: argparse.Namespace) -> int:
    if not args.hours > 0:
        return _invalid(args.file, f"--hours {args.hours}: must be positive")
    problem = _check_traffic(args.traffic)
    if problem is not None:
        return _invalid(args.file, problem)
    try:
        target = check_target(load_target_file(args.file))
    except SpecInvalid as invalid:
        return _invalid(args.file, *(str(e) for e in invalid.errors))
    except OSError as error:
        return _invalid(args.file, str(error))
    text = args.output == "text"
    try:
        setup = prepare(target, truth_spec=args.truth, seed=args.seed)
        source_from_spec(args.traffic, setup.request.workload, seed=args.seed)
    except InfeasibleTarget as infeasible:
        if text:
            print(render_plan(infeasible.result))
            print(f"\nnothing to simulate: {target_name(target)} is infeasible for the planner", file=sys.stderr)
        else:
            print(json.dumps({"target": target_name(target), "infeasible": plan_to_dict(infeasible.result)}, indent=2))
        return EXIT_INFEASIBLE
    except (SpecResolutionError, HfConfigError) as unresolved:
        return _invalid(args.file, str(unresolved))
    except (ValueError, KeyError, OSError) as error:
        # An unknown truth, a table that cannot serve the target, an unreadable trace.
        return _invalid(args.file, str(error).strip("'\""))
    mode = TuningMode(args.mode) if args.mode else None
    swept = None
    if args.sweep:
        budget = float(args.sweep_budget) if args.sweep_budget else float(target.spec.sweep.budget)
        if text:
            print(f"sweeping on the twin before serving ({budget:.0f} GPU-min budget) …", flush=True)
        try:
            swept = sweep_before_serving(setup, budget_gpu_minutes=budget, seed=args.seed)
        except InfeasibleTarget as infeasible:
            print(f"{target_name(target)} is infeasible after the sweep: {infeasible.result.summary}", file=sys.stderr)
            return EXIT_INFEASIBLE
        setup = swept.setup
        if text:
            print("\n".join(swept.outcome.explanation))
            print("\n".join(row.describe() for row in comparison_rows(swept.outcome.measurements)))
    if text:
        chosen = setup.plan.chosen
        lines = start_lines(
            target=target_name(target),
            truth=args.truth,
            traffic=args.traffic,
            hours=args.hours,
            seed=args.seed,
            mode=(mode or target.spec.tuning.mode).value,
            slos=setup.request.slos,
            frontier=frontier_rows(setup.plan),
            chosen=describe_config(chosen.config),
            pool=chosen.pool.name,
            predicted=chosen.prediction.cost_per_mtok,
            notes=setup.search_notes,
        )
        print("\n".join(lines))
        print("\nTimeline (simulated h:mm; a status line every 30 min and at every decision that did something):")
    result = simulate_prepared(
        setup,
        hours=args.hours,
        traffic=args.traffic,
        seed=args.seed,
        mode=mode,
        oracle=not args.no_oracle,
        progress=_printer(STATUS_EVERY_S) if text else None,
    )
    if text:
        print("\n".join(summary_lines(result)))
        if swept is not None:
            print(f"sweep: {swept.outcome.swept_points} points, {swept.outcome.gpu_minutes:.1f} GPU-min")
    else:
        output = result_to_dict(result)
        if swept is not None:
            summary = sweep_summary(swept.outcome)
            output["summary"]["sweep_gpu_minutes"] = summary["sweep_gpu_minutes"]
            output["summary"]["swept_points"] = summary["swept_points"]
            output["sweep"] = summary
        print(json.dumps(output, indent=2))
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        _plot(result, args.plot)
        print(f"timeline plot written to {args.plot}", file=sys.stderr)
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "simulate",
        help="run the planner and the closed tuning loop against a digital twin of the fleet, offline",
    )
    parser.add_argument("-f", "--file", required=True, metavar="FILE", help="FrontierTarget YAML file")
    parser.add_argument(
        "--truth",
        default="model",
        metavar="TRUTH",
        help="the twin's ground truth: model (perturbed, seeded; default), model-exact, a table preset "
        "(deepseek-r1-h200, deepseek-r1-b200, deepseek-r1-gb200, qwen3-32b-h100) or a CSV in the silicon schema",
    )
    parser.add_argument("--hours", type=float, default=6.0, help="simulated hours (default 6)")
    parser.add_argument(
        "--traffic", default="steady", help="steady (default), diurnal, step, bursty, or a trace CSV of requests"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the truth's hidden factors and the traffic")
    parser.add_argument(
        "--mode",
        choices=[m.value for m in TuningMode],
        help="override spec.tuning.mode (default: the target's own, recommend when unset)",
    )
    parser.add_argument(
        "--no-oracle", action="store_true", help="skip sizing the oracle (faster; no cost ratio in the summary)"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="before serving, run a budgeted benchmark sweep on the twin and re-plan on its measurements",
    )
    parser.add_argument(
        "--sweep-budget", type=_gpu_minutes, metavar="GPU-TIME", help='e.g. "30 GPU-min" (default: spec.sweep.budget)'
    )
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text", help="output format")
    parser.add_argument("--plot", metavar="PNG", help="also draw the timeline to this PNG file")
    parser.set_defaults(func=run)
