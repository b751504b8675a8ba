"""`frontier render`: the Kubernetes objects the operator would apply for a target, as YAML.

`frontier render -f target.yaml [--plan plan.json] [-o DIR|-]`. Without `--plan` the planner chooses
the configuration, exactly as the operator does; with it, the plan file decides (a JSON object with
`config`, as `perf.codec.config_to_dict` writes it, and `pool`, the name of the target's GPU pool).
The output is byte-identical from run to run, so it can be committed and diffed in a GitOps pipeline.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from frontier_operator.api import FrontierTarget, SpecInvalid, load_target_file
from frontier_operator.api.errors import FieldError
from frontier_operator.catalog.hf_config import HfConfigError
from frontier_operator.perf.codec import ConfigDecodeError, config_from_dict
from frontier_operator.perf.model import PerformanceModel
from frontier_operator.perf.types import ServingConfig
from frontier_operator.planner.from_spec import SpecResolutionError, plan_request_from_spec
from frontier_operator.planner.plan import make_plan
from frontier_operator.planner.types import Plan
from frontier_operator.render import RenderError, RenderErrorReason, RenderRequest, Variant, owner_of, render_fleet
from frontier_operator.render.yaml_dump import dump, dump_all
from frontier_operator.validation import check_target

EXIT_INVALID = 2
EXIT_INFEASIBLE = 3
PLAN_KEYS = frozenset({"config", "pool"})


class _Infeasible(Exception):  # noqa: N818 - reads as "the target is infeasible"
    pass


def read_plan_file(path: str | Path) -> tuple[ServingConfig, str]:
    """The configuration and pool name of a plan file; every problem is a RenderError(plan-file-invalid)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RenderError(RenderErrorReason.PLAN_FILE_INVALID, f"{path}: cannot be read as JSON ({exc})") from None
    return plan_from_dict(data, str(path))


def plan_from_dict(data: Any, where: str = "plan") -> tuple[ServingConfig, str]:
    if not isinstance(data, Mapping) or set(data) != PLAN_KEYS:
        raise RenderError(RenderErrorReason.PLAN_FILE_INVALID, f"{where}: expected an object with keys config and pool")
    pool = data["pool"]
    if not isinstance(pool, str) or not pool:
        raise RenderError(RenderErrorReason.PLAN_FILE_INVALID, f"{where}: pool must be a pool name")
    try:
        config = config_from_dict(data["config"])
    except ConfigDecodeError as exc:
        raise RenderError(RenderErrorReason.PLAN_FILE_INVALID, f"{where}: {exc}") from None
    return config, pool


def _planned(target: FrontierTarget) -> tuple[ServingConfig, str]:
    """What the operator would deploy: the planner's choice for this target."""
    source = target.spec.model.config
    inline = source.inline if source is not None else None
    try:
        request = plan_request_from_spec(target.spec, model_config=inline)
    except SpecResolutionError as unresolved:  # names the catalog cannot resolve, a ConfigMap the CLI cannot read
        raise SpecInvalid([FieldError(unresolved.path, str(unresolved), "fix the name or give config.json")]) from None
    except HfConfigError as bad:
        path = f"spec.model.config.inline.{bad.field}"
        raise SpecInvalid([FieldError(path, bad.message, bad.hint or "fix config.json")]) from None
    outcome = make_plan(request, PerformanceModel.default())
    if not isinstance(outcome, Plan):
        raise _Infeasible(outcome.summary)
    return outcome.chosen.config, outcome.chosen.pool.name


def _file_name(index: int, obj: Mapping[str, Any]) -> str:
    return f"{index:02d}-{str(obj['kind']).lower()}-{obj['metadata']['name']}.yaml"


def write_objects(objects: list[dict[str, Any]], output: str) -> None:
    if output == "-":
        sys.stdout.write(dump_all(objects))
        return
    directory = Path(output)
    directory.mkdir(parents=True, exist_ok=True)
    for index, obj in enumerate(objects):
        (directory / _file_name(index, obj)).write_text(dump(obj), encoding="utf-8")


def _run(args: argparse.Namespace) -> int:
    try:
        target = check_target(load_target_file(args.file))
        config, pool = read_plan_file(args.plan) if args.plan else _planned(target)
        request = RenderRequest(
            target=target, config=config, pool_name=pool, owner=owner_of(target), variant=Variant(args.variant)
        )
        objects = render_fleet(request, with_route=request.variant is Variant.STABLE)
    except SpecInvalid as invalid:
        print(f"{args.file}: invalid", file=sys.stderr)
        for error in invalid.errors:
            print(f"  {error}", file=sys.stderr)
        return EXIT_INVALID
    except RenderError as error:
        print(f"cannot render: {error}", file=sys.stderr)
        return EXIT_INVALID
    except _Infeasible as infeasible:
        print(f"{args.file}: no configuration meets the target: {infeasible}", file=sys.stderr)
        return EXIT_INFEASIBLE
    try:
        write_objects(objects, args.output)
    except OSError as exc:
        print(f"cannot write {args.output}: {exc}", file=sys.stderr)
        return EXIT_INVALID
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser(
        "render",
        help="write the Kubernetes objects (SGLang workloads, router, Services, budgets, monitors) for a target",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("-f", "--file", required=True, metavar="TARGET", help="FrontierTarget YAML file")
    parser.add_argument("--plan", metavar="PLAN", help="plan JSON ({config, pool}); default: run the planner")
    parser.add_argument(
        "-o", "--output", default="-", metavar="DIR|-", help="directory for one file per object, or - for a stream"
    )
    parser.add_argument(
        "--variant", choices=[v.value for v in Variant], default=Variant.STABLE.value, help="frontier.dev/variant"
    )
    parser.set_defaults(func=_run)
