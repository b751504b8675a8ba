"""The FrontierTarget API: pydantic models (the single source of the CRD), parsing and structured errors."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from frontier_operator.api.errors import FieldError, SpecInvalid, field_errors
from frontier_operator.api.spec import FrontierTargetSpec
from frontier_operator.api.v1alpha1 import API_VERSION, KIND, FrontierTarget

__all__ = [
    "FieldError",
    "FrontierTarget",
    "FrontierTargetSpec",
    "SpecInvalid",
    "dump_spec",
    "load_target_file",
    "parse_spec",
    "parse_target",
]


def parse_spec(spec: Any) -> FrontierTargetSpec:
    """Validate a `spec` mapping (as Kopf hands it over); errors carry `spec.`-rooted paths."""
    try:
        return FrontierTargetSpec.model_validate(spec)
    except ValidationError as exc:
        raise SpecInvalid(field_errors(exc, ("spec",))) from None


def parse_target(document: Any) -> FrontierTarget:
    """Validate a whole FrontierTarget document (apiVersion, kind, metadata.name, spec)."""
    if not isinstance(document, Mapping):
        raise SpecInvalid([FieldError("(document)", "is not a mapping", f"write a {KIND} object in YAML")])
    problems = []
    if document.get("apiVersion") != API_VERSION:
        problems.append(
            FieldError("apiVersion", f"{document.get('apiVersion')!r} is not served", f"write {API_VERSION}")
        )
    if document.get("kind") != KIND:
        problems.append(FieldError("kind", f"{document.get('kind')!r} is not {KIND}", f"write {KIND}"))
    metadata = document.get("metadata")
    if not isinstance(metadata, Mapping) or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        problems.append(FieldError("metadata.name", "is required", "give the target a name"))
    if problems:
        raise SpecInvalid(problems)
    # The status is the operator's own record, read tolerantly elsewhere; only what users write is judged.
    written = {key: value for key, value in document.items() if key != "status"}
    odd = _first_non_json(written, "")
    if odd is not None:
        path, value = odd
        problem = FieldError(path, f"{type(value).__name__} is not a JSON value", "write a string, number or boolean")
        raise SpecInvalid([problem])
    # Strict, as the API server's schema is: "8" is not an integer and "yes" is not a boolean. Through JSON,
    # so that strictness still reads enums and unit strings the way the wire spells them.
    text = json.dumps(written)
    try:
        return FrontierTarget.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise SpecInvalid(field_errors(exc)) from None


def _first_non_json(value: Any, path: str) -> tuple[str, Any] | None:
    """The first value YAML can hold but JSON cannot (bytes, a date, NaN, a non-string key), with its path."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return path or "(document)", key
            found = _first_non_json(item, f"{path}.{key}" if path else key)
            if found is not None:
                return found
        return None
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _first_non_json(item, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float) and math.isfinite(value):
        return None
    return path, value


# A FrontierTarget is a few hundred values; an inline config.json a few thousand. A document expanding
# to more is an alias bomb (a few lines of anchors that unfold into billions of values).
MAX_DOCUMENT_VALUES = 100_000


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: str, first_line: int, second_line: int) -> None:
        self.key, self.first_line, self.second_line = key, first_line, second_line
        super().__init__(f"duplicate key {key!r}")


# libyaml's parser where installed (a megabyte string parses in milliseconds rather than a second).
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeLoader):  # type: ignore[valid-type,misc]
    """PyYAML keeps the last of two equal keys; kubectl's parser refuses them, and so do we: with
    `p50` written twice, which bound did the user mean?"""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[str, int] = {}
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                line = key_node.start_mark.line + 1
                if key_node.value in seen:
                    raise _DuplicateKey(key_node.value, seen[key_node.value], line)
                seen[key_node.value] = line
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        return mapping


def _expanded_size(document: Any, limit: int) -> int:
    """Values in the document as JSON would spell it (aliases counted at every use), up to `limit`."""
    count, stack = 0, [document]
    while stack and count <= limit:
        value = stack.pop()
        count += 1
        if isinstance(value, dict):
            stack += [*value.keys(), *value.values()]
        elif isinstance(value, list):
            stack += value
    return count


def load_target_file(path: str | Path) -> FrontierTarget:
    """Read one FrontierTarget from a YAML file; every problem, YAML syntax included, is a SpecInvalid."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecInvalid([FieldError(where, f"cannot be read ({exc.__class__.__name__})", "check the path")]) from None
    try:
        documents = [doc for doc in yaml.load_all(text, Loader=_StrictLoader) if doc is not None]
    except _DuplicateKey as duplicate:
        raise SpecInvalid(
            [
                FieldError(
                    where,
                    f"key {duplicate.key[:60]!r} appears twice"
                    f" (lines {duplicate.first_line} and {duplicate.second_line})",
                    "keep one of the two",
                )
            ]
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None)
        why = f" ({problem})" if problem else ""
        raise SpecInvalid([FieldError(where, f"is not valid YAML{line}{why}", "fix the YAML syntax")]) from None
    except RecursionError:
        raise SpecInvalid([FieldError(where, "nests too deeply", "a FrontierTarget is a few levels deep")]) from None
    if len(documents) != 1:
        raise SpecInvalid(
            [FieldError(where, f"holds {len(documents)} documents", "put exactly one FrontierTarget in it")]
        )
    if _expanded_size(documents[0], MAX_DOCUMENT_VALUES) > MAX_DOCUMENT_VALUES:
        raise SpecInvalid(
            [
                FieldError(
                    where,
                    f"expands to more than {MAX_DOCUMENT_VALUES:,} values",
                    "write the target without YAML aliases that multiply",
                )
            ]
        )
    return parse_target(documents[0])


def dump_spec(spec: FrontierTargetSpec) -> dict[str, Any]:
    """The spec as the user would write it (camelCase, human units, defaults left out)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
