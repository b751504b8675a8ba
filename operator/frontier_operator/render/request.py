"""What the renderer is given: the target, the chosen configuration, the pool it runs on, and the owner."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from frontier_operator.api import FrontierTarget
from frontier_operator.perf.types import ServingConfig


class Variant(StrEnum):
    """`frontier.dev/variant`: the revision serving normally, one under comparison, or one being measured."""

    STABLE = "stable"
    CANARY = "canary"
    # Benchmarked by a sweep Job and never routed to users.
    SWEEP = "sweep"


@dataclass(frozen=True)
class OwnerRef:
    """The FrontierTarget that owns every rendered object (garbage collection and `kubectl tree`)."""

    api_version: str
    kind: str
    name: str
    uid: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }


@dataclass(frozen=True)
class RenderRequest:
    target: FrontierTarget
    config: ServingConfig
    # Name of the `spec.hardware.pools[]` entry the configuration was planned for.
    pool_name: str
    # None for offline rendering (`frontier render` of a target not yet applied): no ownerReferences.
    owner: OwnerRef | None = None
    variant: Variant = Variant.STABLE


def owner_of(target: FrontierTarget) -> OwnerRef | None:
    """The owner reference for a target read back from the API server (it has a uid), else None."""
    uid = target.metadata.get("uid")
    name = target.metadata.get("name")
    if not isinstance(uid, str) or not uid or not isinstance(name, str):
        return None
    return OwnerRef(api_version=target.api_version, kind=target.kind, name=name, uid=uid)
