"""`frontier.dev/v1alpha1` `FrontierTarget`: the custom resource, its identity and printer columns."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from frontier_operator.api.base import ApiModel
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.status import FrontierTargetStatus

GROUP = "frontier.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "FrontierTarget"
PLURAL = "frontiertargets"
SINGULAR = "frontiertarget"
SHORT_NAMES = ("ft",)
CATEGORIES = ("all", "frontier")


class FrontierTarget(ApiModel):
    """Serve one model within a latency SLO at the cheapest point of the latency/throughput/cost frontier."""

    api_version: Literal["frontier.dev/v1alpha1"] = Field(default="frontier.dev/v1alpha1", alias="apiVersion")
    """frontier.dev/v1alpha1."""
    kind: Literal["FrontierTarget"] = "FrontierTarget"
    """FrontierTarget."""
    metadata: dict[str, Any] = {}
    """Standard object metadata."""
    spec: FrontierTargetSpec
    """Desired state."""
    status: FrontierTargetStatus | None = None
    """Observed state, written by the operator."""


# `kubectl get ft`: the first columns answer "is my SLO met, at what cost, with which config".
PRINTER_COLUMNS: list[dict[str, Any]] = [
    {
        "name": "SLO Met",
        "type": "string",
        "jsonPath": ".status.summary.sloMet",
        "description": "Whether every SLO bound is met (SLOMet condition).",
    },
    {
        "name": "TPOT",
        "type": "string",
        "jsonPath": ".status.summary.tpot",
        "description": "Observed (else predicted) TPOT against its bound.",
    },
    {
        "name": "TTFT",
        "type": "string",
        "jsonPath": ".status.summary.ttft",
        "description": "Observed (else predicted) TTFT against its bound.",
    },
    {
        "name": "$/Mtok",
        "type": "string",
        "jsonPath": ".status.summary.costPerMtok",
        "description": "Dollars per million tokens of the applied configuration.",
    },
    {
        "name": "Config",
        "type": "string",
        "jsonPath": ".status.summary.config",
        "description": "The applied configuration in a few words.",
    },
    {
        "name": "GPUs",
        "type": "integer",
        "jsonPath": ".status.summary.gpus",
        "priority": 1,
        "description": "GPUs in use.",
    },
    {
        "name": "Mode",
        "type": "string",
        "jsonPath": ".status.summary.mode",
        "priority": 1,
        "description": "Tuning mode.",
    },
    {
        "name": "Ready",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].status',
        "priority": 1,
        "description": "Ready condition.",
    },
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
