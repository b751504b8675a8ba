"""Test helpers: the generated CRD's schema, and CEL rules evaluated the way the API server would."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import celpy
import yaml

ROOT = Path(__file__).resolve().parents[1]
CRD_PATH = ROOT / "crds" / "frontiertargets.frontier.dev.yaml"


@cache
def crd() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text(encoding="utf-8"))
    return loaded


def openapi_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def walk_schema(node: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every node with its path; list items end in `[]`, map values in `{}`."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk_schema(child, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from walk_schema(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk_schema(node["additionalProperties"], f"{path}{{}}")


_CEL = celpy.Environment()


@cache
def _program(rule: str) -> Any:
    return _CEL.program(_CEL.compile(rule))


def cel_failures(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Messages of every `x-kubernetes-validations` rule that `value` breaks, with their paths."""
    failures = []
    for check in schema.get("x-kubernetes-validations", []):
        try:
            result = _program(check["rule"]).evaluate({"self": celpy.json_to_cel(value)})
        except celpy.CELEvalError:
            result = None  # the API server refuses an object whose rule cannot be evaluated
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            failures.append(f"{path or '.'}: {check['message']}")
    if isinstance(value, dict):
        for name, child in value.items():
            if name in schema.get("properties", {}):
                failures += cel_failures(schema["properties"][name], child, f"{path}.{name}")
            elif isinstance(schema.get("additionalProperties"), dict):
                failures += cel_failures(schema["additionalProperties"], child, f"{path}.{name}")
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            failures += cel_failures(schema["items"], item, f"{path}[{index}]")
    return failures
