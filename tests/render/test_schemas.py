"""Every rendered object is valid: core objects against Kubernetes' own schemas, offline, with
`kubernetes-validate` (strict: unknown fields fail), and the LeaderWorkerSet, PodMonitor and HTTPRoute against the
schemas in `schemas/`, written from their documented fields, with their pod templates checked as
Kubernetes PodTemplates. Runs over the golden cases and a sample of the sweep covering every shape.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from frontier_operator.render import render_fleet
from render_support import golden_cases, sweep_cases

kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the test extras")

KUBERNETES_VERSION = "1.32.0"
SCHEMAS = Path(__file__).parent / "schemas"
CUSTOM_SCHEMAS = {
    "LeaderWorkerSet": yaml.safe_load((SCHEMAS / "leaderworkerset-v1.yaml").read_text(encoding="utf-8")),
    "PodMonitor": yaml.safe_load((SCHEMAS / "podmonitor-v1.yaml").read_text(encoding="utf-8")),
    "HTTPRoute": yaml.safe_load((SCHEMAS / "httproute-v1.yaml").read_text(encoding="utf-8")),
}


def _objects() -> list[tuple[str, dict[str, Any]]]:
    objects = []
    for case in golden_cases():
        objects += [
            (f"{case.name}/{obj['kind']}/{obj['metadata']['name']}", obj)
            for obj in render_fleet(case.request(), with_route=True)
        ]
    # A sample of the sweep (the contract test parses all of it); every kind and shape is still in it.
    for sweep in sweep_cases()[::20]:
        objects += [(f"{sweep.label}/{obj['kind']}", obj) for obj in render_fleet(sweep.request)]
    return objects


OBJECTS = _objects()


def validate(obj: dict[str, Any]) -> None:
    kind = obj["kind"]
    if kind in CUSTOM_SCHEMAS:
        jsonschema.Draft7Validator(CUSTOM_SCHEMAS[kind]).validate(obj)
        if kind == "LeaderWorkerSet":
            template = obj["spec"]["leaderWorkerTemplate"]
            for role in ("leaderTemplate", "workerTemplate"):
                pod_template = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}}
                kubernetes_validate.validate({**pod_template, "template": template[role]}, KUBERNETES_VERSION, True)
        return
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_every_kind_is_covered() -> None:
    kinds = {obj["kind"] for _, obj in OBJECTS}
    assert kinds == {
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Service",
        "HTTPRoute",
        "Deployment",
        "LeaderWorkerSet",
        "PodDisruptionBudget",
        "PodMonitor",
    }


@pytest.mark.parametrize("obj", [obj for _, obj in OBJECTS], ids=[label for label, _ in OBJECTS])
def test_object_is_valid(obj: dict[str, Any]) -> None:
    validate(obj)


def _first(kind: str) -> dict[str, Any]:
    return copy.deepcopy(next(obj for _, obj in OBJECTS if obj["kind"] == kind))


@pytest.mark.parametrize(
    ("kind", "path", "bad"),
    [
        ("Deployment", ("spec", "replicas"), "two"),
        ("Deployment", ("spec", "template", "spec", "containerz"), []),
        ("LeaderWorkerSet", ("spec", "leaderWorkerTemplate", "restartPolicy"), "Always"),
        ("LeaderWorkerSet", ("spec", "leaderWorkerTemplate", "sise"), 2),
        ("LeaderWorkerSet", ("spec", "leaderWorkerTemplate", "workerTemplate", "spec", "containers"), "engine"),
        ("PodMonitor", ("spec", "podMetricsEndpoints"), [{"port": "http", "interval": "15 s"}]),
        ("PodMonitor", ("spec", "endpoints"), []),
        ("HTTPRoute", ("spec", "rules"), [{"backendRefs": [{"name": "x", "weight": -1}]}]),
        ("HTTPRoute", ("spec", "parentRefs"), [{"name": "g", "sectionName": "HTTPS"}]),
    ],
)
def test_validation_catches_mistakes(kind: str, path: tuple[str, ...], bad: Any) -> None:
    obj = _first(kind)
    node = obj
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = bad
    with pytest.raises((jsonschema.ValidationError, kubernetes_validate.ValidationError)):
        validate(obj)
