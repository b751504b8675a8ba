"""Render: a chosen configuration and its FrontierTarget → SGLang argv and Kubernetes objects (pure)."""

from __future__ import annotations

from frontier_operator.render.errors import RenderError, RenderErrorReason
from frontier_operator.render.fleet import render_fleet
from frontier_operator.render.layout import FleetLayout, resolve_layout
from frontier_operator.render.request import OwnerRef, RenderRequest, Variant, owner_of

__all__ = [
    "FleetLayout",
    "OwnerRef",
    "RenderError",
    "RenderErrorReason",
    "RenderRequest",
    "Variant",
    "owner_of",
    "render_fleet",
    "resolve_layout",
]
