"""A Kubernetes API stand-in for tests: kmock 0.8 extended until Kopf and the kubernetes client
behave against it as against a real API server. See docs/testing.md for what it does and does not do.
"""

from .crds import kopf_peering_crds, leaderworkerset_crd, minimal_crd, servicemonitor_crd
from .discovery import ResourceType
from .errors import ApiError
from .faults import FaultInjector, FaultRule
from .requestlog import RequestInfo, RequestLog, RequestMatch, RequestRecord
from .server import StandIn
from .store import ObjectRef

__all__ = [
    "ApiError",
    "FaultInjector",
    "FaultRule",
    "ObjectRef",
    "RequestInfo",
    "RequestLog",
    "RequestMatch",
    "RequestRecord",
    "ResourceType",
    "StandIn",
    "kopf_peering_crds",
    "leaderworkerset_crd",
    "minimal_crd",
    "servicemonitor_crd",
]
