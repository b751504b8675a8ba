"""The three PATCH flavours of the API server as pure functions over JSON-like values.

* JSON merge patch (RFC 7386): maps merge, `null` deletes, lists are replaced whole.
* Strategic merge patch: like a merge patch, but some lists of built-in kinds merge item by item on
  a *merge key* (`containers` by `name`, container `ports` by `containerPort`, …) and a few
  directives (`$patch`, `$retainKeys`, `$deleteFromPrimitiveList/…`, `$setElementOrder/…`) apply.
  Only built-in kinds accept it; a real server answers 415 for custom resources, and so does the
  stand-in. The merge keys are the `patchMergeKey`s of the Kubernetes API types the operator and
  Kopf touch — see `MERGE_KEYS`; any other list is replaced whole, as a list without a merge key is.
* JSON patch (RFC 6902) through the `jsonpatch` library: a failed `test` or a path that does not
  exist is 422, a malformed patch is 400 — the codes Kopf's optimistic concurrency relies on.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import jsonpatch
import jsonpointer

from .errors import bad_request, unprocessable

# Field name → patchMergeKey, from the Go API types (k8s.io/api core/v1, apps/v1, meta/v1).
MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "readinessGates": "conditionType",
    "ownerReferences": "uid",
    "conditions": "type",
}
_CONTAINER_LISTS = frozenset({"containers", "initContainers", "ephemeralContainers"})
# Lists of scalars whose patchStrategy is `merge`: the patch's items are added, not substituted.
_PRIMITIVE_MERGE_LISTS = frozenset({("metadata", "finalizers")})


def merge_key(path: tuple[str, ...], *, builtin: bool) -> str | None:
    """The merge key of the list at `path` (map keys from the root, list indices skipped)."""
    if not path:
        return None
    field = path[-1]
    if path == ("metadata", "ownerReferences"):
        return "uid"  # object metadata is the same type for custom resources too
    if not builtin:
        return None
    if field == "env" and len(path) >= 2 and path[-2] in _CONTAINER_LISTS:
        return "name"
    if field == "ports":
        # Container ports merge on containerPort; a Service's ports on port.
        return "containerPort" if any(step in _CONTAINER_LISTS for step in path) else "port"
    return MERGE_KEYS.get(field)


def is_primitive_merge_list(path: tuple[str, ...]) -> bool:
    return path in _PRIMITIVE_MERGE_LISTS


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


_DELETE = object()  # a `$patch: delete` map: the caller removes the key


def strategic_merge_patch(target: Any, patch: Any, *, path: tuple[str, ...] = ()) -> Any:
    if not isinstance(patch, Mapping):
        return _strip_directives(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip_directives({key: value for key, value in patch.items() if key != "$patch"})
    if directive == "delete":
        return _DELETE
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue  # $setElementOrder only orders items; the stand-in keeps the merge order
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [item for item in result.get(field, []) if item not in value]
            continue
        child_path = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, child_path)
        elif isinstance(value, Mapping):
            merged = strategic_merge_patch(result.get(key), value, path=child_path)
            if merged is _DELETE:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    if "$retainKeys" in patch:
        retained = set(patch["$retainKeys"])
        result = {key: value for key, value in result.items() if key in retained}
    return result


def _merge_list(target: Any, patch: list[Any], path: tuple[str, ...]) -> list[Any]:
    replace_marker = {"$patch": "replace"}
    items_only = [item for item in patch if item != replace_marker]
    if replace_marker in patch or not isinstance(target, list):
        return [_strip_directives(item) for item in items_only if not _is_delete(item)]
    if is_primitive_merge_list(path):
        return list(target) + [item for item in items_only if item not in target]
    key = merge_key(path, builtin=True)
    if key is None:
        return [_strip_directives(item) for item in items_only]
    merged = copy.deepcopy(target)
    for item in items_only:
        if not isinstance(item, Mapping) or key not in item:
            raise bad_request(f"map: {item!r} does not contain declared merge key: {key}")
        index = next(
            (i for i, old in enumerate(merged) if isinstance(old, Mapping) and old.get(key) == item[key]), None
        )
        if _is_delete(item):
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(_strip_directives(item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item, path=path)
    return merged


def _is_delete(item: Any) -> bool:
    return isinstance(item, Mapping) and item.get("$patch") == "delete"


def _strip_directives(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _strip_directives(child) for key, child in value.items() if not str(key).startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(item) for item in value]
    return value


def json_patch(target: Mapping[str, Any], operations: Any) -> dict[str, Any]:
    """RFC 6902. A failed `test` or a missing path is 422 (as the API server answers), bad syntax 400."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    try:
        patch = jsonpatch.JsonPatch(operations)
    except (jsonpatch.InvalidJsonPatch, TypeError) as error:
        raise bad_request(str(error)) from error
    try:
        result = patch.apply(copy.deepcopy(dict(target)))
    except jsonpatch.InvalidJsonPatch as error:
        raise bad_request(str(error)) from error
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as error:
        raise unprocessable(f"the server rejected our request due to an error in our request: {error}") from error
    if not isinstance(result, dict):
        raise unprocessable("the patched object is not a JSON object")
    return result
