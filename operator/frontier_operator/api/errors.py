"""Structured validation errors: a field path, what is wrong, and how to fix it.

Pydantic's errors are precise but speak Python; users write YAML. Each error becomes a
`FieldError` whose path is the one they typed (`spec.hardware.pools[0].gpu`), whose message
quotes what they wrote, and whose hint says what to write instead.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

# Errors quote what the user wrote; a hostile spec (a megabyte key or value) must not turn into a
# megabyte condition message, Event or log line. Each part is cut to this many characters.
MAX_PART_CHARS = 300


def _clipped(text: str) -> str:
    return text if len(text) <= MAX_PART_CHARS else text[: MAX_PART_CHARS - 1] + "…"


@dataclass(frozen=True)
class FieldError:
    path: str
    message: str
    hint: str

    def __post_init__(self) -> None:
        for name in ("path", "message", "hint"):
            object.__setattr__(self, name, _clipped(str(getattr(self, name))))

    def __str__(self) -> str:
        return f"{self.path}: {self.message}; {self.hint}"


class SpecInvalid(Exception):  # noqa: N818 - reads as "the spec is invalid"
    """The FrontierTarget cannot be accepted; `errors` says where and why."""

    def __init__(self, errors: Iterable[FieldError]) -> None:
        self.errors = tuple(errors)
        super().__init__("\n".join(str(error) for error in self.errors))


def format_path(location: Iterable[int | str]) -> str:
    path = ""
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part == "[key]":
            path += " (key)"
        else:
            path += f".{part}" if path else str(part)
    return path or "(document)"


def _shown(value: Any, limit: int = 60) -> str:
    text = value if isinstance(value, str) else repr(value)
    text = text if len(text) <= limit else text[: limit - 1] + "…"
    return f'"{text}"' if isinstance(value, str) else text


def _explain(error: ErrorDetails) -> tuple[str, str]:
    kind = error["type"]
    context = error.get("ctx") or {}
    value = error.get("input")
    if kind in ("human_unit", "spec_rule"):
        return str(context["message"]), str(context["hint"])
    if kind == "missing":
        return "is required", "add it (see `kubectl explain` for the field)"
    if kind == "extra_forbidden":
        return "is not a known field", "remove it or check its spelling"
    if kind in ("enum", "literal_error"):
        return f"{_shown(value)} is not allowed", f"use one of {context.get('expected', 'the listed values')}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{_shown(value)} is not a whole number", "write a whole number, e.g. 8"
    if kind in ("bool_type", "bool_parsing"):
        return f"{_shown(value)} is not a boolean", "write true or false"
    if kind in ("string_type",):
        return f"{_shown(value)} is not text", "write a string"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"{_shown(value)} is not an object", "write a mapping of fields"
    if kind == "list_type":
        return f"{_shown(value)} is not a list", "write a list"
    if kind == "string_pattern_mismatch":
        return f"{_shown(value)} has the wrong form", f"it must match {context.get('pattern')}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        return f"{_shown(value)} is out of range", error["msg"].lower().replace("input should", "it must")
    if kind in ("too_long", "too_short", "string_too_long", "string_too_short"):
        return "has the wrong length", error["msg"].lower().replace("value should", "it must")
    return error["msg"], "see `kubectl explain frontiertarget` for the field"


def field_errors(exc: ValidationError, prefix: tuple[str, ...] = ()) -> list[FieldError]:
    errors = []
    for error in exc.errors():
        message, hint = _explain(error)
        errors.append(FieldError(format_path((*prefix, *error["loc"])), message, hint))
    return errors
