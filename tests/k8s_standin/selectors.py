"""Label selectors (equality- and set-based) and field selectors, parsed as the API server does.

Grammar (https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/):
`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas (AND).
Field selectors take `path=value`, `path==value`, `path!=value`; the real server accepts only a
few paths per kind (metadata.name and metadata.namespace everywhere), the stand-in accepts any
dotted path — a superset, documented in docs/testing.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .errors import ApiError, bad_request

Operator = Literal["=", "!=", "in", "notin", "exists", "!"]


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        match self.operator:
            case "=" | "in":
                return present and labels[self.key] in self.values
            case "!=" | "notin":
                # A missing label satisfies `!=` and `notin`, as in Kubernetes.
                return not present or labels[self.key] not in self.values
            case "exists":
                return present
            case "!":
                return not present


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        return all(requirement.matches(labels or {}) for requirement in self.requirements)


_SET_BASED = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s+(?P<op>in|notin)\s*\((?P<values>[^()]*)\)\s*$")
_EQUALITY = re.compile(r"^\s*(?P<key>[^\s!=(),]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(?P<bang>!?)\s*(?P<key>[^\s!=(),]+)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside `( … )` — set values contain commas."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [part for part in parts if part.strip()]


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parse `labelSelector`; an unparsable selector is a 400, as on a real server."""
    if not text:
        return LabelSelector()
    requirements = []
    for term in _split_top_level(text):
        if found := _SET_BASED.match(term):
            values = frozenset(value.strip() for value in found["values"].split(",") if value.strip())
            requirements.append(Requirement(found["key"], "in" if found["op"] == "in" else "notin", values))
        elif found := _EQUALITY.match(term):
            operator: Operator = "!=" if found["op"] == "!=" else "="
            requirements.append(Requirement(found["key"], operator, frozenset({found["value"]})))
        elif found := _EXISTS.match(term):
            requirements.append(Requirement(found["key"], "!" if found["bang"] else "exists"))
        else:
            raise bad_request(f"unable to parse requirement: {term.strip()!r}")
    return LabelSelector(tuple(requirements))


@dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        node: Any = obj
        for step in self.path:
            node = node.get(step) if isinstance(node, Mapping) else None
        # Field selectors compare string forms; an absent field reads as "".
        text = "" if node is None else str(node).lower() if isinstance(node, bool) else str(node)
        return (text != self.value) if self.negated else (text == self.value)


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)


_FIELD_TERM = re.compile(r"^\s*(?P<path>[A-Za-z0-9_.\-]+)\s*(?P<op>==|=|!=)\s*(?P<value>[^,]*?)\s*$")


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text:
        return FieldSelector()
    requirements = []
    for term in text.split(","):
        found = _FIELD_TERM.match(term)
        if found is None:
            raise bad_request(f"invalid field selector: {term.strip()!r}")
        requirements.append(FieldRequirement(tuple(found["path"].split(".")), found["value"], found["op"] == "!="))
    return FieldSelector(tuple(requirements))


def label_selector_from_match(selector: Mapping[str, Any]) -> LabelSelector:
    """A `metav1.LabelSelector` (matchLabels + matchExpressions), as Deployments carry it."""
    requirements = [Requirement(key, "=", frozenset({value})) for key, value in selector.get("matchLabels", {}).items()]
    operators: dict[str, Operator] = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for expression in selector.get("matchExpressions", []):
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            raise ApiError(422, "Invalid", f"invalid selector operator {expression.get('operator')!r}")
        requirements.append(Requirement(expression["key"], operator, frozenset(expression.get("values", []))))
    return LabelSelector(tuple(requirements))
