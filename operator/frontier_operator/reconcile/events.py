"""Kubernetes Events the reconcile step asks the shell to post."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class EventNote:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str
