"""`frontier sweep`: plan a benchmark sweep offline, and export measured points as silicon-schema CSV.

* `frontier sweep plan -f target.yaml [--budget "30 GPU-min"] [-o text|yaml]`: the points the operator would
  measure for the target (with the performance model alone), why, and their GPU-minutes; `-o yaml` prints every
  object of the sweep (deployments variant `sweep`, their Services and benchmark Jobs).
* `frontier sweep start NAME [-n NAMESPACE]` (kubeconfig): ask the operator to sweep the target now — sets the
  `frontier.dev/sweep-start` annotation to the time, to the microsecond; in recommend and observe mode this
  approves the proposed sweep. Obeyed once per value, held while the target is paused.
* `frontier sweep export FILE [-o out.csv]`: measured points stored by the operator (the `sweep.json` document,
  or a dump of its ConfigMap in YAML or JSON) as rows in the schema of
  `shared/data/silicon/silicon_measurements.csv`, which `frontier calibrate --data` fits on.

Exit codes: 0 done, 2 invalid input, 3 infeasible target.
"""

from __future__ import annotations

import argparse
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from frontier_operator.adapters import kube
from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.api.annotations import SWEEP_START, request_token
from frontier_operator.api.units import GpuMinutes
from frontier_operator.catalog.gpus import find_gpu
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.catalog.models import find_model
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.planner.from_spec import SpecResolutionError, plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan
from frontier_operator.render.errors import RenderError
from frontier_operator.render.yaml_dump import dump_all
from frontier_operator.sim.tables import write_rows
from frontier_operator.sweep.choose import plan_sweep
from frontier_operator.sweep.jobs import render_deployment, sweep_deployments
from frontier_operator.sweep.loop import search_candidates
from frontier_operator.sweep.results import silicon_rows
from frontier_operator.sweep.store import CONFIGMAP_KEY, decode_points
from frontier_operator.sweep.types import SweepMeasurement, SweepSettings
from frontier_operator.validation import check_target

EXIT_INVALID = 2
EXIT_INFEASIBLE = 3


def _fail(message: str) -> int:
    print(message, file=sys.stderr)
    return EXIT_INVALID


def _plan(args: argparse.Namespace) -> int:
    try:
        target = check_target(load_target_file(args.file))
        request = plan_request_from_spec(target.spec)
    except SpecInvalid as invalid:
        return _fail("\n".join([f"{args.file}: invalid", *(f"  {e}" for e in invalid.errors)]))
    except (OSError, SpecResolutionError, HfConfigError) as error:
        return _fail(f"{args.file}: {error}")
    sweep_spec = target.spec.sweep
    try:
        budget = float(GpuMinutes.parse(args.budget)) if args.budget else float(sweep_spec.budget)
    except ValueError as error:
        return _fail(f"--budget {args.budget!r}: {error}")
    settings = SweepSettings(levels=tuple(sweep_spec.concurrency)) if sweep_spec.concurrency else SweepSettings()
    model = PerformanceModel.default()
    plan = make_plan(request, model)
    if not isinstance(plan, Plan):
        print(f"{args.file}: infeasible, nothing to sweep: {plan.summary}", file=sys.stderr)
        return EXIT_INFEASIBLE
    sweep = plan_sweep(plan, search_candidates(request, model), request, model, budget, settings=settings)
    if args.output == "yaml":
        name = str(target.metadata.get("name") or "target")
        objects: list[dict[str, Any]] = []
        try:
            for deployment in sweep_deployments(sweep, request.workload, target_name=name, started_at=time.time()):
                objects += render_deployment(target, deployment)
        except RenderError as error:
            return _fail(f"{args.file}: {error}")
        sys.stdout.write(dump_all(objects))
        return 0
    print("\n".join(sweep.explanation))
    for point in sweep.points:
        print(
            f"  {point.reason.value:>16}  c={point.concurrency:<4} {point.num_prompts} prompts, "
            f"{point.run_s / 60:.1f} min run, {point.run_gpu_minutes:.1f} GPU-min: "
            f"predicted TTFT p50 {point.predicted.ttft_p50_s * 1e3:.4g} ms, TPOT p50 "
            f"{point.predicted.tpot_p50_s * 1e3:.4g} ms"
        )
    for name, why in sweep.skipped:
        print(f"  not measured: {name}: {why}")
    return 0


def read_points(path: Path) -> list[SweepMeasurement]:
    """Points from a `sweep.json` document or from a ConfigMap dump (YAML or JSON) holding one."""
    text = path.read_text(encoding="utf-8")
    try:
        return decode_points(text)
    except ValueError:
        pass
    document = yaml.safe_load(text)
    if isinstance(document, dict) and isinstance(document.get("data"), dict):
        stored = document["data"].get(CONFIGMAP_KEY)
        if isinstance(stored, str):
            return decode_points(stored)
    raise ValueError(f"neither a sweep document nor a ConfigMap with data.{CONFIGMAP_KEY}")


def _export(args: argparse.Namespace) -> int:
    path = Path(args.file)
    try:
        points = read_points(path)
    except (OSError, ValueError, yaml.YAMLError) as error:
        return _fail(f"{path}: {error}")
    if not points:
        return _fail(f"{path}: no measured points")
    rows = []
    for model_name in sorted({p.model for p in points}):
        arch = find_model(model_name)
        for gpu_name in sorted({p.gpu for p in points if p.model == model_name}):
            gpu = find_gpu(gpu_name)
            rows += silicon_rows(
                [p for p in points if p.model == model_name and p.gpu == gpu_name],
                model_path=arch.hf_id if arch is not None else model_name,
                system=gpu.aliases[0] if gpu is not None and gpu.aliases else gpu_name,
                source=f"frontier-sweep; file={path.name}",
            )
    out = Path("/dev/stdout") if args.output == "-" else Path(args.output)
    write_rows(rows, out)
    if args.output != "-":
        print(f"{len(rows)} rows written to {out}", file=sys.stderr)
    return 0


def _start(args: argparse.Namespace) -> int:
    now = request_token(datetime.now(UTC))
    try:
        api = kube.api_client()
        kube.annotate_target(api, args.namespace, args.name, {SWEEP_START: now})
    except kube.KubeError as error:
        print(f"frontier sweep start: {error}", file=sys.stderr)
        return 1 if error.status != 404 else EXIT_INVALID
    where = f"{args.namespace}/{args.name}"
    print(f"{where}: sweep requested ({SWEEP_START}={now}); `frontier explain {args.name}` follows it")
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser("sweep", help="plan a benchmark sweep, or export measured points as CSV")
    sub = parser.add_subparsers(dest="sweep_command", required=True)
    plan = sub.add_parser("plan", help="the points a sweep of the target would measure, and why")
    plan.add_argument("-f", "--file", required=True, metavar="TARGET", help="FrontierTarget YAML file")
    plan.add_argument("--budget", help='GPU time, e.g. "30 GPU-min" (default: spec.sweep.budget)')
    plan.add_argument("-o", "--output", choices=("text", "yaml"), default="text")
    plan.set_defaults(func=_plan)
    start = sub.add_parser("start", help="sweep a FrontierTarget now (in recommend/observe mode: approve)")
    start.add_argument("name", help="FrontierTarget name")
    start.add_argument("-n", "--namespace", default="default")
    start.set_defaults(func=_start)
    export = sub.add_parser("export", help="measured points as rows of the silicon-measurements CSV schema")
    export.add_argument("file", metavar="FILE", help="sweep.json document or a dump of its ConfigMap")
    export.add_argument("-o", "--output", default="-", metavar="CSV", help="output CSV (default: standard output)")
    export.set_defaults(func=_export)
