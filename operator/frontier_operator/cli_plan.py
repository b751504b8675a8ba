"""`frontier plan -f target.yaml`: the planner's answer for a FrontierTarget, without a cluster.

Prints the chosen configuration with its SLO margins, the runner-ups, each technique's shift of the
frontier and the reasons alternatives lost (`-o table`, the default), or the same as data (`-o json`,
`-o yaml`). `--plot frontier.png` draws the frontier per technique set with the SLO and the choice.
Exit codes: 0 a plan, 2 an invalid target, 3 an infeasible target (the answer says what would help).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.from_spec import SpecResolutionError, plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.report import render_text, result_to_dict
from frontier_operator.planner.techniques import slo_speed
from frontier_operator.planner.types import Infeasible, Plan, PlanRequest
from frontier_operator.validation import check_target

EXIT_INVALID = 2
EXIT_INFEASIBLE = 3


def _plot(result: Plan | Infeasible, request: PlanRequest, path: str) -> None:
    """Frontier curves per technique set (tok/s/user against tok/s/GPU and $/Mtok), the SLO, the choice."""
    import matplotlib  # noqa: PLC0415 - optional dependency, only for --plot

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    figure, (throughput_axis, cost_axis) = plt.subplots(1, 2, figsize=(13, 5.5))
    for curve in result.curves:
        points = sorted(
            (p for p in curve.points if p.tokens_per_s_per_user > 0 and p.tokens_per_s_per_gpu > 0),
            key=lambda p: p.tokens_per_s_per_user,
        )
        if not points:
            continue
        speeds = [p.tokens_per_s_per_user for p in points]
        # The envelope of everything allowed is drawn wide and pale so that the curves it covers stay visible.
        style: dict[str, Any] = {
            "marker": ".",
            "label": curve.label,
            "linestyle": "--" if curve.label == "baseline" else "-",
        }
        if curve.label == "all allowed":
            style |= {"linewidth": 5, "alpha": 0.3, "color": "grey"}
        throughput_axis.plot(speeds, [p.tokens_per_s_per_gpu for p in points], **style)
        cost_axis.plot(speeds, [p.cost_per_mtok for p in points], **style)
    speed = slo_speed(request)
    marked = result.chosen if isinstance(result, Plan) else result.nearest
    for axis, ylabel in ((throughput_axis, "output tokens/s per GPU"), (cost_axis, "$ per million output tokens")):
        if speed > 0:
            axis.axvline(speed, color="red", linestyle=":", label="SLO (per-token bound)")
        if marked is not None:
            prediction = marked.prediction
            value = prediction.output_tokens_per_s_per_gpu if axis is throughput_axis else prediction.cost_per_mtok
            label = "chosen" if isinstance(result, Plan) else "nearest (infeasible)"
            axis.plot(
                [prediction.output_tokens_per_s_per_user], [value], "*", markersize=16, color="black", label=label
            )
        axis.set_xlabel("output tokens/s per user")
        axis.set_ylabel(ylabel)
        axis.grid(True, alpha=0.3)
    cost_axis.set_yscale("log")
    throughput_axis.legend(fontsize=8)
    figure.suptitle(f"{request.arch.name}: frontier per technique set ({request.objective.value})")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def _dump(data: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2)
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def run(args: argparse.Namespace) -> int:
    try:
        target = check_target(load_target_file(args.file))
        request = plan_request_from_spec(target.spec)
    except SpecInvalid as invalid:
        print(f"{args.file}: invalid", file=sys.stderr)
        for error in invalid.errors:
            print(f"  {error}", file=sys.stderr)
        return EXIT_INVALID
    except (SpecResolutionError, HfConfigError) as unresolved:
        print(f"{args.file}: invalid\n  {unresolved}", file=sys.stderr)
        return EXIT_INVALID
    result = make_plan(request, PerformanceModel.default())
    if args.output == "table":
        print(render_text(result))
    else:
        print(_dump(result_to_dict(result), args.output))
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        _plot(result, request, args.plot)
        print(f"frontier plot written to {args.plot}", file=sys.stderr)
    return 0 if isinstance(result, Plan) else EXIT_INFEASIBLE


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "plan", help="plan a FrontierTarget offline: chosen configuration, frontier, technique shifts, reasons"
    )
    parser.add_argument("-f", "--file", required=True, metavar="FILE", help="FrontierTarget YAML file")
    parser.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table", help="output format")
    parser.add_argument("--plot", metavar="PNG", help="also draw the frontier per technique set to this PNG file")
    parser.set_defaults(func=run)
