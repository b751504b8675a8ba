"""Kubernetes `Status` failures, spelled the way a real API server spells them.

Clients branch on `code` and `reason` (Kopf treats 422 from a JSON-patch `test` as a normal
conflict, the kubernetes client raises `ApiException(status=…)`), so every error the stand-in
answers carries the real code, reason and message shape.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ApiError(Exception):
    """A failure answered as a `v1 Status` body with this HTTP code."""

    code: int
    reason: str
    message: str
    details: Mapping[str, Any] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def status_body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = dict(self.details)
        return body


def _details(kind: str, name: str, group: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": kind}
    if group:
        details["group"] = group
    return details


def _qualified(plural: str, group: str) -> str:
    # The API server names a resource `plural.group` in messages, `plural` for the core group.
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', _details(plural, name, group))


def resource_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource")


def already_exists(plural: str, group: str, name: str) -> ApiError:
    message = f'{_qualified(plural, group)} "{name}" already exists'
    return ApiError(409, "AlreadyExists", message, _details(plural, name, group))


def conflict(plural: str, group: str, name: str, why: str) -> ApiError:
    message = f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}'
    return ApiError(409, "Conflict", message, _details(plural, name, group))


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one `cause` per (field, message), as admission and schema validation answer."""
    summary = "; ".join(f"{path}: {text}" if path else text for path, text in causes)
    details = _details(kind, name, group) | {
        "causes": [{"reason": "FieldValueInvalid", "message": text, "field": path} for path, text in causes]
    }
    return ApiError(422, "Invalid", f'{kind} "{name}" is invalid: {summary}', details)


def unprocessable(message: str) -> ApiError:
    """422 without a kind: what a JSON patch that cannot be applied (a failed `test`) answers."""
    return ApiError(422, "Invalid", message)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, "Forbidden", message)


def method_not_allowed(verb: str) -> ApiError:
    return ApiError(
        405, "MethodNotAllowed", f"the server does not allow this method on the requested resource ({verb})"
    )


def unsupported_media_type(content_type: str, accepted: list[str]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format ({content_type}) - "
        f"accepted media types include: {', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message)


def expired(requested: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {requested} ({oldest})")
