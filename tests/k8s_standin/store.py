"""The stand-in's state: objects, resource versions, the watch-event history, and API semantics.

What it does that plain kmock's emulator does not (each gap is listed in docs/testing.md):

* server-assigned metadata on create — `uid`, `creationTimestamp`, `resourceVersion` (one global,
  monotonically increasing counter, like etcd's revision), `generation` where the kind has one,
  `namespace` from the URL, names from `generateName`; names and labels validated as the API
  server validates them (422);
* `generation` bumps only when something outside `metadata` (and outside `status` when the kind has
  a status subresource) changed; a write that changes nothing keeps the resourceVersion and emits
  no watch event, as on a real server;
* status-subresource semantics: writes to the main resource keep the stored `status`, writes to
  `/status` change only `status`;
* optimistic concurrency: a stale `metadata.resourceVersion` in a PUT or patch is 409 `Conflict`,
  a PUT of a custom resource without one is 422;
* deletion honours finalizers (`deletionTimestamp`, then removal when the last finalizer goes);
  deleting a Namespace terminates it and everything in it; `ownerReferences` are only recorded —
  `collect_garbage()` is the garbage collector, called by tests;
* namespaced objects can only be created in an existing, non-terminating namespace;
* CRDs register their resources (see `crds.py`); custom objects are pruned, defaulted and
  validated against the CRD's schema;
* every write is appended to a per-resource event history that resourceVersion-aware watches
  replay; history older than `compact()` answers 410 Gone.

Thread-safety: one re-entrant lock guards everything; stored objects are never mutated in place
(every write stores a new dict), so a reader may serialise what it got after releasing the lock.
"""

from __future__ import annotations

import base64
import copy
import datetime
import itertools
import json
import random
import re
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from . import applying, crds, errors
from .discovery import ResourceCatalog, ResourceType
from .patching import json_patch, merge_patch, strategic_merge_patch
from .selectors import FieldSelector, LabelSelector

GroupResource = tuple[str, str]
ObjectKey = tuple[str, str]  # (namespace or "", name)

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

NAMESPACES: GroupResource = ("", "namespaces")
CRDS: GroupResource = (crds.CRD_GROUP, "customresourcedefinitions")


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class WatchEvent:
    resource_version: int
    type: str  # ADDED, MODIFIED, DELETED
    object: Mapping[str, Any]
    previous: Mapping[str, Any] | None  # the object before this write (for selector transitions)


@dataclass(frozen=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str


class ExpiredError(Exception):
    """The requested resourceVersion is older than the kept watch history (410 Gone)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"{requested} < {oldest}")
        self.requested, self.oldest = requested, oldest


# ---------------------------------------------------------------------------- validation

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_LABEL_KINDS = frozenset({("", "namespaces"), ("", "services")})
_GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand
_GENERATE_NAME_ATTEMPTS = 8  # the first draw and seven retries (KEP-4420, RetryGenerateName)


def _random_suffix() -> str:
    return "".join(random.choices(_GENERATE_NAME_ALPHABET, k=5))


def _name_problems(resource_type: ResourceType, name: str) -> list[tuple[str, str]]:
    if resource_type.group == "rbac.authorization.k8s.io":
        # RBAC names are path segments (`system:controller:x` is legal).
        bad = name in (".", "..") or "/" in name or "%" in name
        return [("metadata.name", f'Invalid value: "{name}": may not contain "/" or "%"')] if bad else []
    if resource_type.group_resource in _DNS_LABEL_KINDS:
        if len(name) > 63 or not _DNS_LABEL.match(name):
            return [
                ("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 label must be at most 63 characters')
            ]
        return []
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        message = (
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric '
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
        return [("metadata.name", message)]
    return []


def _label_problems(labels: Any) -> list[tuple[str, str]]:
    if labels is None:
        return []
    if not isinstance(labels, Mapping):
        return [("metadata.labels", "Invalid value: must be a map of strings")]
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        key_ok = bool(_LABEL_NAME.match(name)) and len(name) <= 63
        key_ok = key_ok and (not prefix or (len(prefix) <= 253 and bool(_DNS_SUBDOMAIN.match(prefix))))
        if not key_ok:
            problems.append(("metadata.labels", f'Invalid value: "{key}": name part must be a valid label key'))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            problems.append(
                (
                    f"metadata.labels.{key}",
                    f'Invalid value: "{value}": a valid label value must be 63 characters or less',
                )
            )
    return problems


def _without(obj: Mapping[str, Any], *keys: str) -> dict[str, Any]:
    return {key: value for key, value in obj.items() if key not in keys}


def _spec_like(resource_type: ResourceType, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What `generation` tracks: everything but metadata (and status, when it is a subresource)."""
    return _without(obj, "metadata", "status") if resource_type.has_status else _without(obj, "metadata")


def _comparable(obj: Mapping[str, Any]) -> dict[str, Any]:
    metadata = _without(obj.get("metadata", {}), "resourceVersion", "managedFields")
    return {**obj, "metadata": metadata}


class Store:
    def __init__(self, catalog: ResourceCatalog, *, history_per_resource: int = 20_000) -> None:
        self.catalog = catalog
        self._lock = threading.RLock()
        self._objects: dict[GroupResource, dict[ObjectKey, dict[str, Any]]] = defaultdict(dict)
        self._revision = itertools.count(1)
        self._current = 0
        self._history_limit = history_per_resource
        self._events: dict[GroupResource, list[WatchEvent]] = defaultdict(list)
        self._compacted: dict[GroupResource, int] = defaultdict(int)
        self._listeners: dict[GroupResource, set[Callable[[], None]]] = defaultdict(set)
        self._cluster_ips = itertools.count(10)

    # ------------------------------------------------------------------------ reading

    @property
    def resource_version(self) -> int:
        with self._lock:
            return self._current

    def get(self, resource_type: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        with self._lock:
            stored = self._objects[resource_type.group_resource].get((namespace or "", name))
        if stored is None:
            raise errors.not_found(resource_type.plural, resource_type.group, name)
        return self.present(resource_type, stored)

    def list_objects(
        self,
        resource_type: ResourceType,
        namespace: str | None,
        labels: LabelSelector,
        fields: FieldSelector,
        *,
        limit: int | None = None,
        continue_token: str | None = None,
    ) -> tuple[list[dict[str, Any]], int, str | None]:
        """(items, list resourceVersion, continue token); items in (namespace, name) order like etcd."""
        after: tuple[str, str] | None = None
        with self._lock:
            list_version = self._current
            if continue_token:
                decoded = json.loads(base64.urlsafe_b64decode(continue_token.encode()))
                list_version, after = int(decoded["rv"]), (decoded["after"][0], decoded["after"][1])
            candidates = sorted(self._objects[resource_type.group_resource].items())
        matching = [
            obj
            for (obj_namespace, obj_name), obj in candidates
            if (namespace is None or obj_namespace == namespace)
            and (after is None or (obj_namespace, obj_name) > after)
            and labels.matches(obj.get("metadata", {}).get("labels"))
            and fields.matches(obj)
        ]
        token = None
        if limit and len(matching) > limit:
            matching = matching[:limit]
            last = matching[-1]["metadata"]
            payload = {"rv": list_version, "after": [last.get("namespace", ""), last["name"]]}
            token = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode()
        return [self.present(resource_type, obj, in_list=True) for obj in matching], list_version, token

    def present(self, resource_type: ResourceType, obj: Mapping[str, Any], *, in_list: bool = False) -> dict[str, Any]:
        """The object as served at this version. Lists of built-in kinds omit kind/apiVersion per item."""
        shown = dict(obj)
        if in_list and not resource_type.custom:
            shown.pop("apiVersion", None)
            shown.pop("kind", None)
        else:
            shown["apiVersion"] = resource_type.api_version
            shown["kind"] = resource_type.kind
        return shown

    def objects(self, group: str, plural: str) -> list[dict[str, Any]]:
        """A deep copy of every stored object of a resource (for test assertions)."""
        with self._lock:
            return copy.deepcopy(list(self._objects[(group, plural)].values()))

    # ------------------------------------------------------------------------ watch support

    def events_since(self, group_resource: GroupResource, resource_version: int) -> list[WatchEvent]:
        with self._lock:
            if resource_version < self._compacted[group_resource]:
                raise ExpiredError(resource_version, self._compacted[group_resource])
            history = self._events[group_resource]
            start = len(history)
            while start > 0 and history[start - 1].resource_version > resource_version:
                start -= 1
            return history[start:]

    def events_and_version(self, group_resource: GroupResource, resource_version: int) -> tuple[list[WatchEvent], int]:
        """The changes after `resource_version` and the store's version they are complete up to."""
        with self._lock:
            return self.events_since(group_resource, resource_version), self._current

    def snapshot(self, resource_type: ResourceType) -> tuple[list[Mapping[str, Any]], int]:
        """Every object now, with the resourceVersion the snapshot is consistent with."""
        with self._lock:
            return list(self._objects[resource_type.group_resource].values()), self._current

    def add_listener(self, group_resource: GroupResource, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners[group_resource].add(listener)

    def remove_listener(self, group_resource: GroupResource, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners[group_resource].discard(listener)

    def compact(self) -> int:
        """Forget the whole watch history: every resourceVersion handed out so far is now too old.

        The revision moves on by one, so a client that re-lists gets a version it can watch from
        (otherwise it would be sent 410 Gone forever).
        """
        with self._lock:
            self._current = next(self._revision)
            for group_resource in list(self._events) + list(self._objects):
                self._compacted[group_resource] = self._current
                self._events[group_resource] = []
            return self._current

    # ------------------------------------------------------------------------ writing

    def _generated_name(self, resource_type: ResourceType, namespace: str | None, prefix: str) -> str:
        """A free name from `generateName`: five random characters, drawn again while the name is taken (up to
        eight draws, as kube-apiserver does since 1.32, KEP-4420): 27^5 names collide by the birthday bound
        (about 0.1 % at 500 names, the KEP's figure), and a 409 there would lose a client's Event."""
        taken = self._objects[resource_type.group_resource]
        for _ in range(_GENERATE_NAME_ATTEMPTS):
            name = prefix + _random_suffix()
            if (namespace or "", name) not in taken:
                break
        return name

    def create(
        self,
        resource_type: ResourceType,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        managed_fields: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise errors.bad_request("the request body must be a JSON object")
        self._check_type_identity(resource_type, body)
        obj = copy.deepcopy(dict(body))
        metadata = obj.setdefault("metadata", {})
        if not isinstance(metadata, dict):
            raise errors.bad_request("metadata must be an object")
        with self._lock:
            namespace = self._creation_namespace(resource_type, namespace, metadata)
            if not metadata.get("name"):
                if not metadata.get("generateName"):
                    raise errors.invalid(
                        resource_type.kind,
                        resource_type.group,
                        "",
                        [("metadata.name", "Required value: name or generateName is required")],
                    )
                metadata["name"] = self._generated_name(resource_type, namespace, metadata["generateName"])
            name = metadata["name"]
            key = (namespace or "", name)
            if key in self._objects[resource_type.group_resource]:
                raise errors.already_exists(resource_type.plural, resource_type.group, name)
            for server_field in (
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
            ):
                metadata.pop(server_field, None)
            if namespace:
                metadata["namespace"] = namespace
            metadata["uid"] = str(uuid.uuid4())
            metadata["creationTimestamp"] = now_rfc3339()
            if resource_type.tracks_generation:
                metadata["generation"] = 1
            if managed_fields:
                metadata["managedFields"] = managed_fields
            if resource_type.has_status:
                obj.pop("status", None)  # status is not settable on create when it is a subresource
            obj = self._admit(resource_type, obj, None)
            return self._commit(resource_type, key, obj, "ADDED", None, dry_run=dry_run)

    def replace(
        self,
        resource_type: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise errors.bad_request("the request body must be a JSON object")
        self._check_type_identity(resource_type, body)
        if body.get("metadata", {}).get("name") not in (None, name):
            raise errors.bad_request("the name of the object does not match the name on the URL")
        with self._lock:
            old = self._existing(resource_type, namespace, name)
            requested_version = body.get("metadata", {}).get("resourceVersion")
            if requested_version is None and resource_type.custom:
                problem = ("metadata.resourceVersion", "Invalid value: 0x0: must be specified for an update")
                raise errors.invalid(resource_type.kind, resource_type.group, name, [problem])
            return self._update(resource_type, old, copy.deepcopy(dict(body)), subresource, dry_run=dry_run)

    def patch(
        self,
        resource_type: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        content_type: str,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """(the patched object, whether it was created — server-side apply creates)."""
        if content_type == APPLY_PATCH:
            return self._apply(resource_type, namespace, name, body, subresource, field_manager, force, dry_run)
        with self._lock:
            old = self._existing(resource_type, namespace, name)
            if content_type == MERGE_PATCH:
                if not isinstance(body, Mapping):
                    raise errors.bad_request("a merge patch must be a JSON object")
                candidate = merge_patch(old, body)
            elif content_type == STRATEGIC_MERGE_PATCH:
                if resource_type.custom:
                    accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
                    raise errors.unsupported_media_type(content_type, accepted)
                if not isinstance(body, Mapping):
                    raise errors.bad_request("a strategic merge patch must be a JSON object")
                candidate = strategic_merge_patch(old, body)
            elif content_type == JSON_PATCH:
                candidate = json_patch(old, body)
            else:
                accepted = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH] + (
                    [] if resource_type.custom else [STRATEGIC_MERGE_PATCH]
                )
                raise errors.unsupported_media_type(content_type, accepted)
            return self._update(resource_type, old, candidate, subresource, dry_run=dry_run), False

    def delete(
        self,
        resource_type: ResourceType,
        namespace: str | None,
        name: str,
        *,
        preconditions: Mapping[str, Any] | None = None,
        dry_run: bool = False,
    ) -> tuple[dict[str, Any], bool]:
        """(the object as last stored, whether it is gone now — False while finalizers hold it)."""
        with self._lock:
            old = self._existing(resource_type, namespace, name)
            for field in ("uid", "resourceVersion"):
                wanted = (preconditions or {}).get(field)
                if wanted is not None and old["metadata"].get(field) != wanted:
                    actual = old["metadata"].get(field)
                    why = f"Precondition failed: {field} in precondition: {wanted}, {field} in object meta: {actual}"
                    raise errors.conflict(resource_type.plural, resource_type.group, name, why)
            if dry_run:
                return self.present(resource_type, old), not old["metadata"].get("finalizers")
            return self._delete(resource_type, old)

    def delete_collection(
        self, resource_type: ResourceType, namespace: str | None, labels: LabelSelector, fields: FieldSelector
    ) -> list[dict[str, Any]]:
        with self._lock:
            items, _, _ = self.list_objects(resource_type, namespace, labels, fields)
            return [
                self._delete(resource_type, self._existing(resource_type, namespace, item["metadata"]["name"]))[0]
                for item in items
            ]

    def collect_garbage(self) -> list[ObjectRef]:
        """Play the garbage collector (background propagation) until nothing more goes.

        An object is deleted when none of its ownerReferences points at an existing object — an
        owner counts only if it is cluster-scoped or in the dependent's namespace, as the real
        collector requires. Finalizers are honoured (the dependent gets a deletionTimestamp).
        """
        collected: list[ObjectRef] = []
        with self._lock:
            changed = True
            while changed:
                changed = False
                owners = {
                    obj["metadata"]["uid"]: namespace
                    for objects in self._objects.values()
                    for (namespace, _), obj in objects.items()
                }
                for group_resource, objects in list(self._objects.items()):
                    resource_type = self.catalog.preferred(*group_resource)
                    if resource_type is None:
                        continue
                    for (namespace, _), obj in list(objects.items()):
                        references = obj["metadata"].get("ownerReferences") or []
                        if not references or obj["metadata"].get("deletionTimestamp"):
                            continue
                        alive = [
                            ref
                            for ref in references
                            if ref.get("uid") in owners and owners[ref["uid"]] in ("", namespace)
                        ]
                        if not alive:
                            self._delete(resource_type, obj)
                            collected.append(
                                ObjectRef(
                                    resource_type.api_version, resource_type.kind, namespace, obj["metadata"]["name"]
                                )
                            )
                            changed = True
        return collected

    def uids(self) -> set[str]:
        with self._lock:
            return {obj["metadata"]["uid"] for objects in self._objects.values() for obj in objects.values()}

    def reset(self, keep: Callable[[Mapping[str, Any]], bool]) -> None:
        """Drop every object `keep` rejects (no watch events: watchers should be disconnected first)."""
        with self._lock:
            for group_resource, objects in self._objects.items():
                for key, obj in list(objects.items()):
                    if not keep(obj):
                        del objects[key]
                        if group_resource == CRDS:
                            for resource_type in crds.resource_types_of(obj):
                                self.catalog.remove(resource_type.group, resource_type.plural)

    # ------------------------------------------------------------------------ internals

    def _check_type_identity(self, resource_type: ResourceType, body: Mapping[str, Any]) -> None:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        # A different version of the same group is fine: the stand-in stores one shape per group.
        if api_version is not None and api_version.rpartition("/")[0] != resource_type.group:
            expected = resource_type.api_version
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )
        if kind is not None and kind != resource_type.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({resource_type.kind})"
            )

    def _creation_namespace(
        self, resource_type: ResourceType, namespace: str | None, metadata: dict[str, Any]
    ) -> str | None:
        if not resource_type.namespaced:
            metadata.pop("namespace", None)
            return None
        if namespace is None:
            raise errors.resource_not_found()
        if metadata.get("namespace") not in (None, "", namespace):
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        namespace_object = self._objects[NAMESPACES].get(("", namespace))
        if namespace_object is None:
            raise errors.not_found("namespaces", "", namespace)
        if namespace_object["metadata"].get("deletionTimestamp"):
            message = (
                f'{resource_type.plural} "{metadata.get("name", "")}" is forbidden: '
                f"unable to create new content in namespace {namespace} because it is being terminated"
            )
            raise errors.forbidden(message)
        return namespace

    def _existing(self, resource_type: ResourceType, namespace: str | None, name: str) -> dict[str, Any]:
        key = ((namespace or "") if resource_type.namespaced else "", name)
        stored = self._objects[resource_type.group_resource].get(key)
        if stored is None:
            raise errors.not_found(resource_type.plural, resource_type.group, name)
        return stored

    def _update(
        self,
        resource_type: ResourceType,
        old: dict[str, Any],
        candidate: dict[str, Any],
        subresource: str | None,
        *,
        dry_run: bool,
        managed_fields: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        name = old["metadata"]["name"]
        requested_version = (candidate.get("metadata") or {}).get("resourceVersion")
        if requested_version is not None and str(requested_version) != old["metadata"]["resourceVersion"]:
            raise errors.conflict(resource_type.plural, resource_type.group, name, errors.STALE_OBJECT)
        if subresource == "status":
            if not resource_type.has_status:
                raise errors.resource_not_found()
            new = copy.deepcopy(_without(old, "status"))
            if "status" in candidate:
                new["status"] = copy.deepcopy(candidate["status"])
        elif subresource is not None:
            raise errors.resource_not_found()
        else:
            new = copy.deepcopy(candidate)
            if resource_type.has_status:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = copy.deepcopy(old["status"])
        new["apiVersion"], new["kind"] = old["apiVersion"], old["kind"]
        metadata = new.get("metadata")
        if not isinstance(metadata, dict):
            new["metadata"] = metadata = {}
        for server_field in (
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
            "managedFields",
        ):
            metadata.pop(server_field, None)
            if server_field in old["metadata"]:
                metadata[server_field] = old["metadata"][server_field]
        if managed_fields is not None:
            metadata["managedFields"] = managed_fields
        if metadata.get("deletionTimestamp"):
            added = set(metadata.get("finalizers") or []) - set(old["metadata"].get("finalizers") or [])
            if added:
                problem = (
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers {sorted(added)}",
                )
                raise errors.invalid(resource_type.kind, resource_type.group, name, [problem])
        new = self._admit(resource_type, new, old)
        # Admission (pruning, defaulting) returns a copy: bump the generation on the object that is stored.
        metadata = new["metadata"]
        if _comparable(new) == _comparable(old):
            return self.present(resource_type, old)  # a no-op write: same resourceVersion, no event
        if resource_type.tracks_generation and _spec_like(resource_type, new) != _spec_like(resource_type, old):
            metadata["generation"] = int(old["metadata"].get("generation", 1)) + 1
        key = (old["metadata"].get("namespace", ""), name)
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            if dry_run:
                return self.present(resource_type, new)
            self._commit(resource_type, key, new, "MODIFIED", old, dry_run=False)
            return self._remove(resource_type, key)
        return self._commit(resource_type, key, new, "MODIFIED", old, dry_run=dry_run)

    def _apply(  # noqa: PLR0917 - the PATCH request's parameters, one by one
        self,
        resource_type: ResourceType,
        namespace: str | None,
        name: str,
        body: Any,
        subresource: str | None,
        field_manager: str | None,
        force: bool,
        dry_run: bool,
    ) -> tuple[dict[str, Any], bool]:
        if not field_manager:
            raise errors.bad_request("PATCH, application/apply-patch+yaml: fieldManager is required for apply requests")
        if not isinstance(body, Mapping):
            raise errors.bad_request("an apply patch must be an object")
        for identity in ("apiVersion", "kind"):
            if not body.get(identity):
                raise errors.bad_request(f"invalid object: {identity} must be set")
        if body.get("metadata", {}).get("name") not in (None, name):
            raise errors.bad_request("the name of the object does not match the name on the URL")
        applied = copy.deepcopy(dict(body))
        if subresource == "status":
            applied = {key: value for key, value in applied.items() if key in ("apiVersion", "kind", "status")}
            applied["metadata"] = {"name": name}
        elif resource_type.has_status:
            applied.pop("status", None)
        builtin = not resource_type.custom
        owned = applying.owned_fields(applied, builtin=builtin)
        entry = {
            "manager": field_manager,
            "operation": "Apply",
            "apiVersion": resource_type.api_version,
            "time": now_rfc3339(),
            "fieldsType": "FieldsV1",
            "fieldsV1": applying.fields_v1(owned),
            **({"subresource": subresource} if subresource else {}),
        }
        with self._lock:
            key = ((namespace or "") if resource_type.namespaced else "", name)
            old = self._objects[resource_type.group_resource].get(key)
            if old is None:
                if subresource is not None:
                    raise errors.not_found(resource_type.plural, resource_type.group, name)
                created = self.create(
                    resource_type,
                    namespace,
                    {**applied, "metadata": {**applied.get("metadata", {}), "name": name}},
                    dry_run=dry_run,
                    managed_fields=[entry],
                )
                return created, True
            entries = [dict(e) for e in old["metadata"].get("managedFields", [])]
            mine = next(
                (
                    e
                    for e in entries
                    if (e["manager"], e.get("subresource")) == (field_manager, subresource)
                    and e["operation"] == "Apply"
                ),
                None,
            )
            others = [e for e in entries if e is not mine and e["operation"] == "Apply"]
            conflicts = []
            for other in others:
                their_paths = applying.paths_of(other["fieldsV1"])
                for path in sorted(owned & their_paths):
                    if path[-1] == ".":
                        continue
                    if applying.value_at(old, path) != applying.value_at(applied, path):
                        conflicts.append((other, path))
            if conflicts and not force:
                described = "; ".join(
                    f'conflict with "{other["manager"]}": .{".".join(t[2:] for t in path)}' for other, path in conflicts
                )
                message = f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: {described}"
                raise errors.ApiError(
                    409,
                    "Conflict",
                    message,
                    {
                        "name": name,
                        "kind": resource_type.plural,
                        "causes": [{"reason": "FieldManagerConflict", "message": described}],
                    },
                )
            for other, path in conflicts:  # force: the ownership moves to this manager
                other["fieldsV1"] = applying.fields_v1(applying.paths_of(other["fieldsV1"]) - {path})
            previously = applying.paths_of(mine["fieldsV1"]) if mine else set()
            still_owned = (
                set().union(*(applying.paths_of(e["fieldsV1"]) for e in entries if e is not mine)) if entries else set()
            )
            pruned = applying.remove_fields(old, previously - owned - still_owned)
            candidate = applying.merge_applied(pruned, _without(applied, "apiVersion", "kind"), builtin=builtin)
            candidate["metadata"] = {
                **candidate.get("metadata", {}),
                "resourceVersion": old["metadata"]["resourceVersion"],
            }
            new_entries = [e for e in entries if e is not mine and e.get("fieldsV1")] + [entry]
            return self._update(
                resource_type, old, candidate, subresource, dry_run=dry_run, managed_fields=new_entries
            ), False

    def _admit(self, resource_type: ResourceType, obj: dict[str, Any], old: dict[str, Any] | None) -> dict[str, Any]:
        """Validation and the built-in admission/defaulting the tests rely on."""
        metadata = obj["metadata"]
        name = metadata["name"]
        problems = _name_problems(resource_type, name) if old is None else []
        problems += _label_problems(metadata.get("labels"))
        annotations = metadata.get("annotations")
        if annotations is not None and (
            not isinstance(annotations, Mapping) or not all(isinstance(v, str) for v in annotations.values())
        ):
            problems.append(("metadata.annotations", "Invalid value: must be a map of strings"))
        if resource_type.custom:
            obj, schema_problems = crds.admit_custom_object(obj, resource_type.schema, old)
            problems += schema_problems
        if resource_type.group_resource == CRDS:
            problems += crds.validate_crd(obj)
        if problems:
            raise errors.invalid(resource_type.kind, resource_type.group, name, problems)
        if resource_type.group_resource == NAMESPACES and old is None:
            obj.setdefault("spec", {"finalizers": ["kubernetes"]})
            obj["status"] = {"phase": "Active"}
        if resource_type.group_resource == ("", "services") and old is None:
            spec = obj.setdefault("spec", {})
            if spec.get("type") != "ExternalName" and not spec.get("clusterIP"):
                address = next(self._cluster_ips)
                spec["clusterIP"] = f"10.96.{address // 250}.{address % 250 + 1}"
                spec["clusterIPs"] = [spec["clusterIP"]]
            spec.setdefault("type", "ClusterIP")
            for port in spec.get("ports", []):
                port.setdefault("protocol", "TCP")
                port.setdefault("targetPort", port.get("port"))
        if resource_type.group_resource == CRDS:
            obj["status"] = crds.established_status(obj, now_rfc3339())
        return obj

    def _delete(self, resource_type: ResourceType, old: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        key = (old["metadata"].get("namespace", ""), old["metadata"]["name"])
        if old["metadata"].get("deletionTimestamp"):
            return self.present(resource_type, old), False
        if resource_type.group_resource == NAMESPACES:
            return self._terminate_namespace(resource_type, old), False
        if old["metadata"].get("finalizers"):
            marked = copy.deepcopy(old)
            marked["metadata"]["deletionTimestamp"] = now_rfc3339()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            return self._commit(resource_type, key, marked, "MODIFIED", old, dry_run=False), False
        return self._remove(resource_type, key), True

    def _terminate_namespace(self, resource_type: ResourceType, old: dict[str, Any]) -> dict[str, Any]:
        name = old["metadata"]["name"]
        marked = copy.deepcopy(old)
        marked["metadata"]["deletionTimestamp"] = now_rfc3339()
        marked["status"] = {"phase": "Terminating"}
        shown = self._commit(resource_type, ("", name), marked, "MODIFIED", old, dry_run=False)
        for group_resource, objects in list(self._objects.items()):
            contained = self.catalog.preferred(*group_resource)
            if contained is None or not contained.namespaced:
                continue
            for (namespace, _), obj in list(objects.items()):
                if namespace == name:
                    self._delete(contained, obj)
        self._finish_namespaces()
        return shown

    def _finish_namespaces(self) -> None:
        """Remove terminating namespaces that have become empty (the namespace controller's job)."""
        for (_, name), namespace in list(self._objects[NAMESPACES].items()):
            if not namespace["metadata"].get("deletionTimestamp"):
                continue
            occupied = any(
                ns == name for gr, objects in self._objects.items() if gr != NAMESPACES for (ns, _) in objects
            )
            if not occupied:
                namespaces_type = self.catalog.preferred(*NAMESPACES)
                if namespaces_type is not None:
                    self._remove(namespaces_type, ("", name))

    def _remove(self, resource_type: ResourceType, key: ObjectKey) -> dict[str, Any]:
        old = self._objects[resource_type.group_resource][key]
        final = copy.deepcopy(old)
        version = next(self._revision)
        self._current = version
        final["metadata"]["resourceVersion"] = str(version)
        del self._objects[resource_type.group_resource][key]
        self._record(resource_type.group_resource, WatchEvent(version, "DELETED", final, old))
        if resource_type.group_resource == CRDS:
            self._unregister_crd(final)
        if key[0] and resource_type.group_resource != NAMESPACES:
            self._finish_namespaces()
        return self.present(resource_type, final)

    def _commit(
        self,
        resource_type: ResourceType,
        key: ObjectKey,
        new: dict[str, Any],
        event_type: str,
        old: dict[str, Any] | None,
        *,
        dry_run: bool,
    ) -> dict[str, Any]:
        if dry_run:
            return self.present(resource_type, new)
        version = next(self._revision)
        self._current = version
        new["metadata"]["resourceVersion"] = str(version)
        new.setdefault("apiVersion", resource_type.api_version)
        new.setdefault("kind", resource_type.kind)
        self._objects[resource_type.group_resource][key] = new
        self._record(resource_type.group_resource, WatchEvent(version, event_type, new, old))
        if resource_type.group_resource == CRDS:
            self._register_crd(new, old)
        return self.present(resource_type, new)

    def _record(self, group_resource: GroupResource, event: WatchEvent) -> None:
        history = self._events[group_resource]
        history.append(event)
        if len(history) > self._history_limit * 1.25:
            dropped = len(history) - self._history_limit
            self._compacted[group_resource] = history[dropped - 1].resource_version
            del history[:dropped]
        for listener in list(self._listeners[group_resource]):
            listener()

    def _register_crd(self, crd: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        if old is not None:
            for resource_type in crds.resource_types_of(old):
                self.catalog.remove(resource_type.group, resource_type.plural)
        for resource_type in crds.resource_types_of(crd):
            self.catalog.add(resource_type)

    def _unregister_crd(self, crd: Mapping[str, Any]) -> None:
        for resource_type in crds.resource_types_of(crd):
            # The CRD's objects go with it (a real server deletes them before the CRD disappears).
            for key in list(self._objects[resource_type.group_resource]):
                self._remove(resource_type, key)
            self.catalog.remove(resource_type.group, resource_type.plural)


def seed_namespaces(store: Store, catalog: ResourceCatalog, names: Iterable[str]) -> None:
    namespaces = catalog.preferred(*NAMESPACES)
    assert namespaces is not None
    for name in names:
        store.create(namespaces, None, {"metadata": {"name": name}})
