"""RFC 7386 JSON merge patches: the smallest patch that turns one document into another.

Status is written with a merge patch; fields that disappear must be sent as `null`, and nothing is
sent at all when nothing changed (so an idle timer tick costs no write).
"""

from __future__ import annotations

from typing import Any


def merge_patch(old: Any, new: Any) -> Any:
    """The patch from `old` to `new`; `{}` when they are equal (for two objects)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            patch[key] = (
                merge_patch(old[key], value) if isinstance(value, dict) and isinstance(old[key], dict) else value
            )
    return patch


def apply_merge_patch(document: Any, patch: Any) -> Any:
    """Apply a merge patch (as the API server would); used to check `merge_patch` round-trips."""
    if not isinstance(patch, dict):
        return patch
    result = dict(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = apply_merge_patch(result.get(key), value)
    return result
