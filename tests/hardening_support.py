"""Where a hostile FrontierTarget is refused: the CRD schema, its CEL rules, the API models, the catalog,
the planner or the renderer — and that each refusal is structured, bounded and quick.

`verdict(document)` runs every layer a target meets on its way in: the API server's admission (the
generated CRD's OpenAPI schema with kubectl's strict field validation, then the CEL rules, both as the
stand-in evaluates them) and the operator's own decision (`Controller.outcome`, the exact code the
Kopf handlers run, with no API server behind it). Any exception other than a refusal is a crash, and
the tests fail on it with the document that caused it.
"""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from frontier_operator.adapters import kube
from frontier_operator.api import SpecInvalid, parse_target
from frontier_operator.controller import Controller
from frontier_operator.planner.types import Infeasible
from frontier_operator.reconcile.core import InvalidSpec, Outcome, Planned, RenderFailed
from k8s_standin.crds import apply_defaults, cel_errors, schema_errors
from k8s_standin.fixtures import get_object, mark_deployment_ready, mark_leaderworkerset_ready, request_json
from schema_tools import openapi_schema

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {path.stem: path for path in sorted((ROOT / "examples").glob("*.yaml"))}
CORPUS = ROOT / "tests" / "hardening" / "corpus"
TARGET = "frontier.dev/target"

# A refusal quotes what the user wrote, but never more than this: a 1 MB string must not become a
# 1 MB condition message, Event or log line.
MAX_ERROR_CHARS = 600
# The operator's decision for one target (parse, catalog, plan, render) must come within this.
MAX_DECISION_SECONDS = 20.0

# Layers, in the order a target meets them. "yaml" is the CLI's file loading (kubectl's own YAML
# parser refuses the same files before anything reaches the API server).
LAYERS = ("yaml", "crd", "cel", "model", "catalog", "planner", "render")
# Where the path of an operator-side refusal may start.
ROOTS = ("spec", "apiVersion", "kind", "metadata", "(document)")


def example(name: str = "llama-70b-chat") -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(EXAMPLES[name].read_text(encoding="utf-8"))
    return document


# ----------------------------------------------------------------------------------- API server side


def unknown_fields(value: Any, schema: Mapping[str, Any], path: str = "") -> list[str]:
    """Fields the structural schema does not declare: kubectl's default strict field validation refuses them
    (without it the API server would silently prune them, and the operator would never see them)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    found: list[str] = []
    if isinstance(value, Mapping):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            where = f"{path}.{key}" if path else str(key)
            if key in properties:
                found += unknown_fields(child, properties[key], where)
            elif isinstance(additional, Mapping):
                found += unknown_fields(child, additional, where)
            elif "properties" in schema and not (path == "" and key in ("apiVersion", "kind", "metadata")):
                found.append(f'{where}: unknown field "{key}"')
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{index}]")
    return found


_INDEX = re.compile(r"\.(\d+)(?=\.|$)")


def without_nulls(value: Any, schema: Mapping[str, Any]) -> Any:
    """The API server drops `null` fields a structural schema does not declare `nullable` before it
    validates (the stand-in does not): `p90: null` means p90 unset, as it does to the models."""
    if isinstance(value, Mapping):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        kept = {}
        for key, child in value.items():
            child_schema = properties.get(key, additional if isinstance(additional, Mapping) else None)
            if child is None and child_schema is not None and not child_schema.get("nullable"):
                continue
            kept[key] = without_nulls(child, child_schema) if child_schema is not None else child
        return kept
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [without_nulls(item, schema["items"]) for item in value]
    return value


def _admitted(document: Mapping[str, Any]) -> dict[str, Any]:
    schema = openapi_schema()
    defaulted: dict[str, Any] = apply_defaults(without_nulls(dict(document), schema), schema)
    return defaulted


def crd_refusals(document: Mapping[str, Any]) -> list[str]:
    """What the API server's OpenAPI validation (plus strict field validation) says about the document."""
    schema = openapi_schema()
    defaulted = _admitted(document)
    problems = unknown_fields(document, schema)
    # jsonschema joins list indices with dots (pools.0.gpu); say them the way the models do (pools[0].gpu).
    for path, message in schema_errors(defaulted, schema):
        problems.append(_INDEX.sub(r"[\1]", path) + f": {message}")
    return problems


def cel_refusals(document: Mapping[str, Any]) -> list[str]:
    """The CRD's `x-kubernetes-validations` rules the document breaks (cel-python, as in the stand-in)."""
    return [f"{path}: {message}" for path, message in cel_errors(_admitted(document), openapi_schema())]


# ------------------------------------------------------------------------------------ operator side


class _NoConfigMaps:
    """Stands in for the API client: every referenced ConfigMap is missing (a refusal, not a crash)."""


def _missing_config_map(api: Any, namespace: str, name: str, key: str) -> str | None:
    return None


def operator_outcome(document: Any, namespace: str = "hostile") -> tuple[Outcome, float]:
    """The operator's decision for a target body and how long it took; raises whatever the operator raises."""
    controller = Controller(_NoConfigMaps())  # type: ignore[arg-type]
    original = kube.read_config_map_key
    kube.read_config_map_key = _missing_config_map
    started = time.perf_counter()
    try:
        _, outcome = controller.outcome(document, namespace)
    finally:
        kube.read_config_map_key = original
    return outcome, time.perf_counter() - started


def layer_of(document: Any, outcome: Outcome) -> str | None:
    """Which operator layer refused (None: a plan was rendered)."""
    if isinstance(outcome, InvalidSpec):
        # The API models judge shape and units; names and config.json contents only the catalog can.
        try:
            parse_target(document)
        except SpecInvalid:
            return "model"
        return "catalog"
    if isinstance(outcome, Infeasible):
        return "planner"
    if isinstance(outcome, RenderFailed):
        return "render"
    assert isinstance(outcome, Planned)
    return None


def structural_problems(outcome: Outcome) -> list[str]:
    """Why a refusal is not the structured, bounded answer users need (empty when it is)."""
    problems = []
    if isinstance(outcome, InvalidSpec):
        if not outcome.errors:
            problems.append("InvalidSpec without errors")
        for error in outcome.errors:
            if not (error.path and error.message and error.hint):
                problems.append(f"incomplete error {error!r}")
            if not error.path.startswith(ROOTS):
                problems.append(f"error path {error.path[:80]!r} does not name a field")
            if len(str(error)) > MAX_ERROR_CHARS:
                problems.append(f"error of {len(str(error))} characters: {str(error)[:120]}…")
    elif isinstance(outcome, Infeasible):
        if not outcome.summary:
            problems.append("Infeasible without a summary")
        if len(outcome.summary) > MAX_ERROR_CHARS:
            problems.append(f"infeasibility summary of {len(outcome.summary)} characters")
    elif isinstance(outcome, RenderFailed) and not (outcome.reason and outcome.detail):
        problems.append("RenderFailed without reason or detail")
    return problems


@dataclass(frozen=True)
class Verdict:
    """Every layer that refused the document, and what they said."""

    layers: frozenset[str]
    messages: dict[str, list[str]] = field(default_factory=dict)
    outcome: Outcome | None = None
    seconds: float = 0.0

    def describe(self) -> str:
        return json.dumps({layer: msgs[:3] for layer, msgs in self.messages.items()}, default=str)[:2000]


def verdict(document: Any) -> Verdict:
    """Run the document through admission and the operator; refusals are collected, crashes propagate."""
    messages: dict[str, list[str]] = {}
    if isinstance(document, Mapping):
        # CEL rules are only meaningful on an object of the schema's shape (on a shape error they fail
        # too, evaluating fields of the wrong type): "cel" counts the documents only CEL refuses.
        if refused := crd_refusals(document):
            messages["crd"] = refused
        elif refused := cel_refusals(document):
            messages["cel"] = refused
    else:
        messages["crd"] = ["the body is not an object"]
    outcome, seconds = operator_outcome(document)
    layer = layer_of(document, outcome)
    if layer is not None:
        messages[layer] = _outcome_messages(outcome)
    return Verdict(frozenset(messages), messages, outcome, seconds)


def _outcome_messages(outcome: Outcome) -> list[str]:
    if isinstance(outcome, InvalidSpec):
        return [str(error) for error in outcome.errors]
    if isinstance(outcome, Infeasible):
        return [outcome.summary]
    if isinstance(outcome, RenderFailed):
        return [f"{outcome.reason}: {outcome.detail}"]
    return []


# ------------------------------------------------------------------------------------ tree surgery


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every node below the root with its path (mappings and lists included)."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            yield (*path, key), child
            yield from leaves(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield (*path, index), child
            yield from leaves(child, (*path, index))


def replaced(document: Any, path: tuple[str | int, ...], value: Any) -> Any:
    """A copy of the document with the node at `path` replaced."""
    changed = copy.deepcopy(document)
    node = changed
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return changed


def dotted(path: tuple[str | int, ...]) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else str(step))
    return text


# ------------------------------------------------------------------------------------ the operator


def ready_when_marked(api: Any, namespace: str, name: str) -> bool:
    """Play the workload controllers: mark every Deployment and LeaderWorkerSet of the target ready; True
    once the target says Ready. Call it in a `wait_for` (workloads appear over a few reconciles)."""
    for plural, mark in (("deployments", mark_deployment_ready), ("leaderworkersets", mark_leaderworkerset_ready)):
        group = "apps/v1" if plural == "deployments" else "leaderworkerset.x-k8s.io/v1"
        status, body = request_json(
            api, "GET", f"/apis/{group}/namespaces/{namespace}/{plural}", query=[("labelSelector", f"{TARGET}={name}")]
        )
        for item in body.get("items", []) if status == 200 else []:
            if (item.get("status") or {}).get("readyReplicas") != item["spec"].get("replicas", 1):
                mark(api, namespace, item["metadata"]["name"])
    target = get_object(api, "frontier.dev/v1alpha1", "frontiertargets", namespace, name) or {}
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in (target.get("status") or {}).get("conditions", [])
    )
