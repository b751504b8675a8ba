"""Server-side apply, approximated: field ownership per manager, create-or-merge, conflicts.

What a real server does (https://kubernetes.io/docs/reference/using-api/server-side-apply/) and
what the stand-in keeps of it:

* The applied configuration is merged into the live object; maps merge, lists of built-in kinds
  with a merge key merge item by item (the same `patching.merge_key` table), every other list —
  including every list inside a custom resource, where a real server would honour
  `x-kubernetes-list-type: map` — is atomic and replaced whole.
* Each apply manager's fields are recorded in `metadata.managedFields` in the real `FieldsV1`
  shape (`f:spec`, `k:{"name":"x"}`, `v:"finalizer"`, `.`). A field the same manager applied
  before and no longer applies is removed, unless another apply manager also owns it.
* Applying a different value to a field another *apply* manager owns is a 409 `Conflict`,
  unless `force=true`, which moves the ownership. Managers of plain updates (PUT/PATCH) are not
  tracked, so they never cause conflicts — the main gap to a real server.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping
from typing import Any

from .patching import is_primitive_merge_list, merge_key

FieldPath = tuple[str, ...]


def owned_fields(config: Mapping[str, Any], *, builtin: bool) -> set[FieldPath]:
    """The FieldsV1 leaf paths an applied configuration sets (apiVersion/kind/name are identity)."""
    paths: set[FieldPath] = set()
    body = {key: value for key, value in config.items() if key not in ("apiVersion", "kind")}
    metadata = dict(body.get("metadata") or {})
    for identity in ("name", "namespace", "resourceVersion", "uid", "managedFields"):
        metadata.pop(identity, None)
    if metadata:
        body["metadata"] = metadata
    else:
        body.pop("metadata", None)
    _collect(body, (), (), paths, builtin)
    return paths


def _collect(node: Any, tokens: FieldPath, keys: tuple[str, ...], into: set[FieldPath], builtin: bool) -> None:
    if isinstance(node, Mapping) and node:
        for key, value in node.items():
            _collect(value, (*tokens, f"f:{key}"), (*keys, key), into, builtin)
        return
    if isinstance(node, list) and node:
        key = merge_key(keys, builtin=builtin)
        if key is not None and all(isinstance(item, Mapping) and key in item for item in node):
            for item in node:
                item_token = f"k:{json.dumps({key: item[key]}, separators=(',', ':'))}"
                into.add((*tokens, item_token, "."))
                _collect(item, (*tokens, item_token), keys, into, builtin)
            return
        if is_primitive_merge_list(keys):
            for item in node:
                into.add((*tokens, f"v:{json.dumps(item)}"))
            return
    into.add(tokens)  # a scalar, an atomic list or an empty map is owned whole


def fields_v1(paths: Iterable[FieldPath]) -> dict[str, Any]:
    """Paths → the nested FieldsV1 map stored in managedFields."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for token in path:
            node = node.setdefault(token, {})
    return root


def paths_of(fields: Mapping[str, Any], prefix: FieldPath = ()) -> set[FieldPath]:
    """The inverse of `fields_v1`."""
    paths: set[FieldPath] = set()
    for token, child in fields.items():
        if isinstance(child, Mapping) and child:
            paths |= paths_of(child, (*prefix, token))
        else:
            paths.add((*prefix, token))
    return paths


def merge_applied(live: Any, applied: Any, *, builtin: bool, keys: tuple[str, ...] = ()) -> Any:
    """Merge an applied configuration into the live object (no removals: see `remove_fields`)."""
    if isinstance(applied, Mapping) and isinstance(live, Mapping):
        result = dict(live)
        for key, value in applied.items():
            result[key] = merge_applied(live.get(key), value, builtin=builtin, keys=(*keys, key))
        return result
    if isinstance(applied, list) and isinstance(live, list):
        key = merge_key(keys, builtin=builtin)
        if key is not None and all(isinstance(item, Mapping) and key in item for item in (*live, *applied)):
            merged = list(live)
            for item in applied:
                index = next((i for i, old in enumerate(merged) if old[key] == item[key]), None)
                if index is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[index] = merge_applied(merged[index], item, builtin=builtin, keys=keys)
            return merged
        if is_primitive_merge_list(keys):
            return list(live) + [item for item in applied if item not in live]
    return copy.deepcopy(applied)


def value_at(obj: Any, path: FieldPath) -> tuple[bool, Any]:
    """(found, value) of the field a FieldsV1 path names."""
    node = obj
    for token in path:
        if token == ".":
            continue
        kind, _, text = token.partition(":")
        if kind == "f" and isinstance(node, Mapping) and text in node:
            node = node[text]
        elif kind == "k" and isinstance(node, list):
            wanted = json.loads(text)
            node = next((item for item in node if all(item.get(k) == v for k, v in wanted.items())), None)
            if node is None:
                return False, None
        elif kind == "v" and isinstance(node, list):
            value = json.loads(text)
            return (value in node), value
        else:
            return False, None
    return True, node


def remove_fields(obj: dict[str, Any], paths: Iterable[FieldPath]) -> dict[str, Any]:
    """Remove each path's field; deepest first so an item's fields go before the item."""
    result = copy.deepcopy(obj)
    for path in sorted(paths, key=len, reverse=True):
        _remove(result, path)
    return result


def _remove(obj: Any, path: FieldPath) -> None:
    *parents, last = path
    if last == ".":  # the list item itself
        *parents, last = parents
    found, container = value_at(obj, tuple(parents))
    if not found:
        return
    kind, _, text = last.partition(":")
    if kind == "f" and isinstance(container, dict):
        container.pop(text, None)
    elif kind == "k" and isinstance(container, list):
        wanted = json.loads(text)
        container[:] = [item for item in container if not all(item.get(k) == v for k, v in wanted.items())]
    elif kind == "v" and isinstance(container, list):
        value = json.loads(text)
        container[:] = [item for item in container if item != value]
