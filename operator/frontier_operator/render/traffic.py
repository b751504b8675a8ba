"""How user traffic divides between the revisions that serve it: through the target's Service.

The Service selects the entry pods of every serving revision (`workloads.target_service`): the router pods of
a revision that runs the SGLang router, else its one engine leader. kube-proxy spreads connections evenly over
a Service's endpoints, so a canary receives its entry pods' share of all entry pods — one of two when both
revisions have one router or one replica — whatever share was asked for. No weight can be set on a plain
Service; an exact share needs weighted routing in front of per-revision Services (`route`, with
`spec.serving.traffic.splitting: http-route`).
"""

from __future__ import annotations

from frontier_operator.perf.types import ServingConfig


def routed(config: ServingConfig) -> bool:
    """A revision runs the SGLang router in front of its engines when it has P/D roles or several replicas."""
    return config.disaggregated or config.roles[0].replicas > 1


def entry_pods(config: ServingConfig, router_replicas: int) -> int:
    """The endpoints a revision of `config` adds to the target's Service."""
    return router_replicas if routed(config) else 1


def service_share(stable: ServingConfig, canary: ServingConfig, router_replicas: int) -> float:
    """The share of user traffic the Service sends to a canary revision deployed as `canary`."""
    return _share(entry_pods(canary, router_replicas), stable, router_replicas)


def lightest_service_share(stable: ServingConfig, router_replicas: int) -> float:
    """The least share the Service can give any canary beside `stable`: that of a single entry pod."""
    return _share(1, stable, router_replicas)


def _share(mine: int, stable: ServingConfig, router_replicas: int) -> float:
    return mine / (mine + entry_pods(stable, router_replicas))
