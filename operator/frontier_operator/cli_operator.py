"""`frontier operator run`: the operator, as `kopf run -m frontier_operator.main` would start it."""

from __future__ import annotations

import argparse
from typing import Any


def _run(args: argparse.Namespace) -> int:
    import kopf  # noqa: PLC0415 - only this command needs Kopf; importing it is slow

    import frontier_operator.main  # noqa: F401, PLC0415 - importing registers the handlers

    kopf.run(
        clusterwide=not args.namespace,
        namespaces=args.namespace or (),
        standalone=args.standalone,
        peering_name=None if args.standalone else args.peering,
        priority=args.priority,
        liveness_endpoint=args.liveness,
    )
    return 0


def register(commands: Any) -> None:
    parser = commands.add_parser("operator", help="run the operator")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    run = actions.add_parser("run", help="reconcile FrontierTargets (Ctrl+C stops)")
    run.add_argument("-n", "--namespace", action="append", help="serve only these namespaces (repeatable)")
    run.add_argument("--standalone", action="store_true", help="no peering with other replicas")
    run.add_argument("--peering", default="frontier-operator", help="peering object name (default frontier-operator)")
    run.add_argument("--priority", type=int, default=0, help="peering priority; the highest replica is active")
    run.add_argument("--liveness", default=None, help="liveness endpoint, e.g. http://0.0.0.0:8081/healthz")
    run.set_defaults(func=_run)
