"""`frontier`: the command line of frontier-operator.

Each subcommand lives in the module of its layer and registers itself here; every command returns
an exit code (0 ok, 1 check failed, 2 invalid input, 3 infeasible target) and prints errors without
a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from frontier_operator import (
    __version__,
    cli_catalog,
    cli_operator,
    cli_perf,
    cli_plan,
    cli_render,
    cli_simulate,
    cli_sre,
    cli_sweep,
    crdgen,
)
from frontier_operator.api import SpecInvalid, load_target_file
from frontier_operator.validation import check_target


def _validate(args: argparse.Namespace) -> int:
    failed = 0
    for path in args.files:
        try:
            check_target(load_target_file(path))
        except SpecInvalid as invalid:
            failed += 1
            print(f"{path}: invalid", file=sys.stderr)
            for error in invalid.errors:
                print(f"  {error}", file=sys.stderr)
        else:
            print(f"{path}: valid")
    return 2 if failed else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="frontier", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"frontier-operator {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    validate = commands.add_parser("validate", help="check FrontierTarget files against the API and the catalog")
    validate.add_argument("files", nargs="+", metavar="FILE")
    validate.set_defaults(func=_validate)

    crds = commands.add_parser("crds", help="write the CRD generated from the API models (or --check it)")
    crdgen.add_arguments(crds)
    crds.set_defaults(func=crdgen.run)

    cli_catalog.register(commands)
    cli_plan.register(commands)
    cli_render.register(commands)
    cli_simulate.register(commands)
    cli_operator.register(commands)
    cli_sre.register(commands)
    cli_perf.register(commands)
    cli_sweep.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
