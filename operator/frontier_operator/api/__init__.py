"""The FrontierTarget API: pydantic models (the single source of the CRD), parsing and structured errors."""

from __future__ import annotations

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
    try:
        return FrontierTarget.model_validate(document)
    except ValidationError as exc:
        raise SpecInvalid(field_errors(exc)) from None


def load_target_file(path: str | Path) -> FrontierTarget:
    """Read one FrontierTarget from a YAML file; every problem, YAML syntax included, is a SpecInvalid."""
    where = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecInvalid([FieldError(where, f"cannot be read ({exc.__class__.__name__})", "check the path")]) from None
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecInvalid([FieldError(where, f"is not valid YAML{line}", "fix the YAML syntax")]) from None
    if len(documents) != 1:
        raise SpecInvalid(
            [FieldError(where, f"holds {len(documents)} documents", "put exactly one FrontierTarget in it")]
        )
    return parse_target(documents[0])


def dump_spec(spec: FrontierTargetSpec) -> dict[str, Any]:
    """The spec as the user would write it (camelCase, human units, defaults left out)."""
    return spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)
