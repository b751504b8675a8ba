"""CustomResourceDefinitions: registration, and what the API server does with a CRD's schema.

Creating a CRD makes its served versions appear in discovery and become servable, with the
`status`/`scale` subresources it declares; its `status` reports `Established` and
`NamesAccepted` like a real server's. On every write of a custom resource the stand-in then does,
in the real server's order: prune unknown fields (unless `x-kubernetes-preserve-unknown-fields`),
apply `default`s, validate the OpenAPI v3 schema (types, required, enums, ranges, patterns) and the
`x-kubernetes-validations` CEL rules (`self` and, on updates, `oldSelf`), answering 422 with one
cause per broken rule. That is what makes a status field the schema does not declare disappear,
and a schema-invalid spec bounce at `kubectl apply` — exactly as on a cluster.

Stock CRDs the tests need (Kopf's peering resources, LeaderWorkerSet, ServiceMonitor) are at the
bottom, minimal but with the real names, scopes and subresources.
"""

from __future__ import annotations

import copy
import functools
import json
import logging
from collections.abc import Mapping
from typing import Any

import jsonschema

from .discovery import ResourceType

logger = logging.getLogger(__name__)

CRD_GROUP = "apiextensions.k8s.io"


def resource_types_of(crd: Mapping[str, Any]) -> list[ResourceType]:
    spec = crd.get("spec", {})
    names = spec.get("names", {})
    types = []
    for version in spec.get("versions", []):
        if not version.get("served", True):
            continue
        subresources = frozenset(version.get("subresources", {}) or {})
        types.append(
            ResourceType(
                group=spec["group"],
                version=version["name"],
                plural=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope", "Namespaced") == "Namespaced",
                singular=names.get("singular", names["kind"].lower()),
                short_names=tuple(names.get("shortNames", [])),
                categories=tuple(names.get("categories", [])),
                subresources=subresources,
                custom=True,
                schema=(version.get("schema") or {}).get("openAPIV3Schema"),
            )
        )
    return types


def established_status(crd: Mapping[str, Any], now: str) -> dict[str, Any]:
    spec = crd.get("spec", {})
    names = dict(spec.get("names", {}))
    names.setdefault("singular", names.get("kind", "").lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    conditions = [
        {"type": kind, "status": "True", "reason": reason, "message": message, "lastTransitionTime": now}
        for kind, reason, message in (
            ("NamesAccepted", "NoConflicts", "no conflicts found"),
            ("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        )
    ]
    stored = [version["name"] for version in spec.get("versions", []) if version.get("storage")]
    return {"conditions": conditions, "acceptedNames": names, "storedVersions": stored}


def validate_crd(crd: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The checks whose failure would make a real server refuse the CRD itself."""
    spec, problems = crd.get("spec", {}), []
    names = spec.get("names", {})
    for key in ("plural", "kind"):
        if not names.get(key):
            problems.append((f"spec.names.{key}", "Required value"))
    if not spec.get("group"):
        problems.append(("spec.group", "Required value"))
    expected = f"{names.get('plural')}.{spec.get('group')}"
    if crd.get("metadata", {}).get("name") != expected:
        problems.append(("metadata.name", f'Invalid value: must be spec.names.plural+"."+spec.group: {expected!r}'))
    versions = spec.get("versions", [])
    if sum(1 for version in versions if version.get("storage")) != 1:
        problems.append(("spec.versions", "Invalid value: must have exactly one version marked as storage version"))
    for index, version in enumerate(versions):
        if not (version.get("schema") or {}).get("openAPIV3Schema"):
            problems.append((f"spec.versions[{index}].schema.openAPIV3Schema", "Required value: schemas are required"))
    return problems


# ---------------------------------------------------------------------------- schema semantics


def prune(value: Any, schema: Mapping[str, Any] | None, *, root: bool = False) -> Any:
    """Drop fields the structural schema does not declare (the API server's pruning)."""
    if schema is None:
        return value
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        additional = schema.get("additionalProperties")
        preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        pruned = {}
        for key, child in value.items():
            if root and key in ("apiVersion", "kind", "metadata"):
                pruned[key] = child  # never pruned: the server owns their schema
            elif key in properties:
                pruned[key] = prune(child, properties[key])
            elif isinstance(additional, Mapping):
                pruned[key] = prune(child, additional)
            elif preserve or additional is True:
                pruned[key] = child
        return pruned
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [prune(item, schema["items"]) for item in value]
    return value


def apply_defaults(value: Any, schema: Mapping[str, Any] | None) -> Any:
    """Fill `default`s of absent properties, recursively inside present objects and list items."""
    if schema is None:
        return value
    if isinstance(value, dict):
        result = dict(value)
        for key, child_schema in schema.get("properties", {}).items():
            if key not in result and "default" in child_schema:
                result[key] = copy.deepcopy(child_schema["default"])
            if key in result:
                result[key] = apply_defaults(result[key], child_schema)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for key, child in result.items():
                if key not in schema.get("properties", {}):
                    result[key] = apply_defaults(child, additional)
        return result
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [apply_defaults(item, schema["items"]) for item in value]
    return value


def _to_json_schema(schema: Any) -> Any:
    """OpenAPI v3 (Kubernetes dialect) → JSON Schema draft 4, which has the same keywords mostly."""
    if isinstance(schema, list):
        return [_to_json_schema(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    converted: dict[str, Any] = {}
    for key, value in schema.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "format", "default", "example"):
            continue
        converted[key] = _to_json_schema(value) if key != "enum" else value
    if schema.get("x-kubernetes-int-or-string"):
        converted.pop("type", None)
        converted = {"anyOf": [{"type": "integer"}, {"type": "string"}], **converted}
    if schema.get("nullable") and "type" in converted:
        converted["type"] = [converted["type"], "null"]
        if "enum" in converted:
            converted["enum"] = [*converted["enum"], None]
    return converted


@functools.lru_cache(maxsize=64)
def _validator(schema_json: str) -> jsonschema.Draft4Validator:
    return jsonschema.Draft4Validator(_to_json_schema(json.loads(schema_json)))


def schema_errors(obj: Mapping[str, Any], schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    body = {key: value for key, value in obj.items() if key != "metadata"}
    schema_body = {**schema, "properties": {k: v for k, v in schema.get("properties", {}).items() if k != "metadata"}}
    validator = _validator(json.dumps(schema_body, sort_keys=True))
    problems = []
    for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(step) for step in error.absolute_path)
        problems.append((path, f"Invalid value: {error.message}"))
    return problems


try:  # CEL rules need cel-python (in the project's `test` extra); without it they are skipped.
    import celpy
    import celpy.adapter

    _CEL: Any = celpy.Environment()
except ImportError:  # pragma: no cover - the extra is installed in CI
    _CEL = None


@functools.lru_cache(maxsize=512)
def _cel_program(rule: str) -> Any:
    try:
        return _CEL.program(_CEL.compile(rule))
    except Exception:  # a rule cel-python cannot compile (a Kubernetes-only CEL library function)
        logger.warning("CEL rule not supported by cel-python, not enforced by the stand-in: %s", rule)
        return None


def cel_errors(value: Any, schema: Mapping[str, Any], old: Any = None, path: str = "") -> list[tuple[str, str]]:
    """Every broken `x-kubernetes-validations` rule at or below this node, with its field path."""
    if _CEL is None or value is None:
        return []
    problems: list[tuple[str, str]] = []
    for check in schema.get("x-kubernetes-validations", []):
        rule = check["rule"]
        if "oldSelf" in rule and old is None:
            continue  # transition rules only run on updates
        program = _cel_program(rule)
        if program is None:
            continue
        activation = {"self": celpy.adapter.json_to_cel(value)}
        if old is not None:
            activation["oldSelf"] = celpy.adapter.json_to_cel(old)
        try:
            result = program.evaluate(activation)
            passed = isinstance(result, celpy.celtypes.BoolType) and bool(result)
        except Exception:  # an evaluation error rejects the object on a real server too
            passed = False
        if not passed:
            problems.append((path or "<root>", check.get("message") or f"failed rule: {rule}"))
    if isinstance(value, Mapping):
        for key, child in value.items():
            child_schema = schema.get("properties", {}).get(key)
            if child_schema is None and isinstance(schema.get("additionalProperties"), Mapping):
                child_schema = schema["additionalProperties"]
            if child_schema is not None and key != "metadata":
                old_child = old.get(key) if isinstance(old, Mapping) else None
                problems += cel_errors(child, child_schema, old_child, f"{path}.{key}" if path else key)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            problems += cel_errors(item, schema["items"], None, f"{path}[{index}]")
    return problems


def admit_custom_object(
    obj: dict[str, Any], schema: Mapping[str, Any] | None, old: Mapping[str, Any] | None
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Prune, default and validate; returns the object to store and the validation problems."""
    if schema is None:
        return obj, []
    admitted = apply_defaults(prune(obj, schema, root=True), schema)
    problems = schema_errors(admitted, schema) + cel_errors(admitted, schema, old)
    return admitted, problems


# ---------------------------------------------------------------------------- stock CRDs


def minimal_crd(
    group: str,
    kind: str,
    plural: str,
    *,
    version: str = "v1",
    namespaced: bool = True,
    subresources: Mapping[str, Any] | None = None,
    short_names: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A CRD whose schema keeps every field (preserve-unknown-fields at the root)."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "shortNames": list(short_names)},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": dict(subresources or {}),
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def kopf_peering_crds() -> list[dict[str, Any]]:
    """Kopf's peering resources (kopf docs: peering.yaml); they have no status subresource."""
    return [
        minimal_crd("kopf.dev", "ClusterKopfPeering", "clusterkopfpeerings", namespaced=False),
        minimal_crd("kopf.dev", "KopfPeering", "kopfpeerings", namespaced=True),
    ]


def leaderworkerset_crd() -> dict[str, Any]:
    """LeaderWorkerSet (sigs.k8s.io/lws, leaderworkerset.x-k8s.io/v1) with status and scale."""
    scale = {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.hpaPodSelector",
    }
    return minimal_crd(
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        "leaderworkersets",
        subresources={"status": {}, "scale": scale},
        short_names=("lws",),
    )


def servicemonitor_crd() -> dict[str, Any]:
    """prometheus-operator's ServiceMonitor (monitoring.coreos.com/v1); no status subresource."""
    return minimal_crd("monitoring.coreos.com", "ServiceMonitor", "servicemonitors", short_names=("smon",))
