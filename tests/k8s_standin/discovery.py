"""Which resources the stand-in serves, and the discovery documents that describe them.

Built-in kinds come from kmock's bundled K3s discovery snapshot (`kmock.ResourcesArray.load_bundled`,
24 group/versions). Custom resources are added when a CustomResourceDefinition is created (see
`crds.py`). The documents follow the real API server: `/api` is an `APIVersions`, `/api/v1` an
`APIResourceList` whose groupVersion is `v1` (plain kmock says `/v1`), `/apis` an `APIGroupList`
with the preferred version chosen by Kubernetes version priority (kmock picks one at random), and
subresources are listed as `plural/sub` without the parent's short names (kmock repeats them, so
kubectl warns about ambiguous short names).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import kmock

# Kinds whose objects carry no `metadata.generation` on a real server.
_WITHOUT_GENERATION = frozenset(
    {
        ("", "configmaps"),
        ("", "secrets"),
        ("", "events"),
        ("events.k8s.io", "events"),
        ("", "namespaces"),
        ("", "serviceaccounts"),
        ("", "services"),
        ("", "endpoints"),
        ("coordination.k8s.io", "leases"),
        ("discovery.k8s.io", "endpointslices"),
    }
)


@dataclass(frozen=True)
class ResourceType:
    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    verbs: frozenset[str] = frozenset(
        {"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
    )
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    custom: bool = False  # served from a CRD: no strategic merge patch, schema pruning/validation
    schema: Mapping[str, Any] | None = field(default=None, compare=False, hash=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> tuple[str, str]:
        """Objects are stored once per group+plural, whichever version they were written with."""
        return (self.group, self.plural)

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def tracks_generation(self) -> bool:
        return self.group_resource not in _WITHOUT_GENERATION


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes' order: GA before beta before alpha, higher numbers first, then the rest by name."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (3, 0, 0, version)
    stability = {None: 0, "beta": 1, "alpha": 2}[found[2]]
    return (stability, -int(found[1]), -int(found[3] or 0), version)


class ResourceCatalog:
    """A thread-safe registry of served resource types, keyed by (group, version, plural)."""

    def __init__(self, types: Iterable[ResourceType] = ()) -> None:
        self._lock = threading.Lock()
        self._types: dict[tuple[str, str, str], ResourceType] = {}
        for resource_type in types:
            self.add(resource_type)

    def add(self, resource_type: ResourceType) -> None:
        with self._lock:
            key = (resource_type.group, resource_type.version, resource_type.plural)
            self._types[key] = resource_type

    def remove(self, group: str, plural: str) -> None:
        with self._lock:
            for key in [key for key in self._types if (key[0], key[2]) == (group, plural)]:
                del self._types[key]

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        with self._lock:
            return self._types.get((group, version, plural))

    def all(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    def preferred(self, group: str, plural: str) -> ResourceType | None:
        candidates = [t for t in self.all() if t.group_resource == (group, plural)]
        return min(candidates, key=lambda t: version_priority(t.version)) if candidates else None

    def find_kind(self, api_version: str, kind: str) -> ResourceType | None:
        return next((t for t in self.all() if t.api_version == api_version and t.kind == kind), None)

    def group_versions(self) -> dict[str, list[str]]:
        """Group → its versions, highest priority first (core group excluded)."""
        groups: dict[str, set[str]] = {}
        for resource_type in self.all():
            if resource_type.group:
                groups.setdefault(resource_type.group, set()).add(resource_type.version)
        return {group: sorted(versions, key=version_priority) for group, versions in sorted(groups.items())}


def builtin_types() -> list[ResourceType]:
    """Every built-in kind of kmock's bundled K3s discovery snapshot."""
    bundled = kmock.ResourcesArray()
    bundled.load_bundled()
    types = []
    for reference in bundled:
        info = bundled[reference]
        if reference.group is None or reference.version is None or reference.plural is None:
            continue
        types.append(
            ResourceType(
                group=reference.group,
                version=reference.version,
                plural=reference.plural,
                kind=info.kind or reference.plural.capitalize(),
                namespaced=bool(info.namespaced),
                singular=info.singular or "",
                verbs=frozenset(info.verbs),
                short_names=tuple(sorted(info.shortnames)),
                categories=tuple(sorted(info.categories)),
                subresources=frozenset(info.subresources),
            )
        )
    return types


def _group_version_entry(group: str, version: str) -> dict[str, str]:
    return {"groupVersion": f"{group}/{version}", "version": version}


def api_versions_document(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def api_group_document(group: str, versions: list[str]) -> dict[str, Any]:
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": [_group_version_entry(group, version) for version in versions],
        "preferredVersion": _group_version_entry(group, versions[0]),
    }


def api_group_list_document(catalog: ResourceCatalog) -> dict[str, Any]:
    groups = [
        {key: value for key, value in api_group_document(group, versions).items() if key not in ("kind", "apiVersion")}
        for group, versions in catalog.group_versions().items()
    ]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list_document(catalog: ResourceCatalog, group: str, version: str) -> dict[str, Any] | None:
    types = sorted((t for t in catalog.all() if (t.group, t.version) == (group, version)), key=lambda t: t.plural)
    if not types and group:
        return None
    resources: list[dict[str, Any]] = []
    for resource_type in types:
        entry: dict[str, Any] = {
            "name": resource_type.plural,
            "singularName": resource_type.singular or resource_type.kind.lower(),
            "namespaced": resource_type.namespaced,
            "kind": resource_type.kind,
            "verbs": sorted(resource_type.verbs),
        }
        if resource_type.short_names:
            entry["shortNames"] = list(resource_type.short_names)
        if resource_type.categories:
            entry["categories"] = list(resource_type.categories)
        resources.append(entry)
        for subresource in sorted(resource_type.subresources):
            resources.append(
                {
                    "name": f"{resource_type.plural}/{subresource}",
                    "singularName": "",
                    "namespaced": resource_type.namespaced,
                    "kind": "Scale" if subresource == "scale" else resource_type.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


SERVER_VERSION: Mapping[str, str] = {
    # The stand-in imitates the API of this Kubernetes minor (kmock's bundled snapshot is K3s-based).
    "major": "1",
    "minor": "32",
    "gitVersion": "v1.32.0-standin",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.23",
    "compiler": "gc",
    "platform": "linux/amd64",
}
