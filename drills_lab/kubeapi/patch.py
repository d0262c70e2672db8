"""JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic merge patch.

Strategic merge is approximated without the OpenAPI schema: lists of known
fields merge by their merge key (containers by name, container ports by
containerPort, ...), every other list is replaced, and the ``$patch``,
``$setElementOrder``, ``$retainKeys`` and ``$deleteFromPrimitiveList``
directives that kubectl sends are honoured or dropped.
"""

from __future__ import annotations

import json
from typing import Any

from drills_lab.kubeapi.objects import clone
from drills_lab.kubeapi.status import ApiError, bad_request, unsupported_media_type

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
SUPPORTED = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH)

# Field name -> merge key, as the Kubernetes API types declare them.
_MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
}
# Lists of scalars that strategic merge unions rather than replaces.
_MERGED_SCALAR_LISTS = frozenset({"finalizers"})


def decode(body: bytes) -> Any:
    try:
        return json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise bad_request(f"couldn't get version/kind; json parse error: {exc}") from None


def apply_patch(content_type: str, target: dict[str, Any], body: bytes) -> dict[str, Any]:
    """``target`` with the patch applied; ``target`` itself may be changed."""
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in SUPPORTED:
        raise unsupported_media_type(media, SUPPORTED)
    patch = decode(body)
    if media == JSON_PATCH:
        if not isinstance(patch, list):
            raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
        return json_patch(target, patch)
    if not isinstance(patch, dict):
        raise bad_request("the patch must be a JSON object")
    merge = merge_patch if media == MERGE_PATCH else strategic_merge
    result = merge(target, patch)
    assert isinstance(result, dict)
    return result


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return clone(patch)
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = target if isinstance(target, dict) else {}
    for key, value in patch.items():
        _merge_field(result, key, value)
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        for key in [k for k in result if k not in retain]:
            del result[key]
    return result


def _merge_field(result: dict[str, Any], key: str, value: Any) -> None:
    """One key of a strategic merge patch into ``result``, its directives included."""
    if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
        return  # order and retained keys: the object's own order is kept, retain is applied last
    if key.startswith("$deleteFromPrimitiveList/"):
        name = key.split("/", 1)[1]
        current = result.get(name)
        if isinstance(current, list) and isinstance(value, list):
            result[name] = [v for v in current if v not in value]
        return
    if value is None:
        result.pop(key, None)
        return
    if isinstance(value, list):
        result[key] = _merge_list(key, result.get(key), value)
        return
    merged = strategic_merge(result.get(key), value)
    if merged is None:
        result.pop(key, None)
    else:
        result[key] = merged


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        # Container ports merge on containerPort, service ports on port.
        dicts = [i for i in items if isinstance(i, dict)]
        return "containerPort" if any("containerPort" in i for i in dicts) else "port"
    return _MERGE_KEYS.get(field)


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if field in _MERGED_SCALAR_LISTS and isinstance(current, list):
        return current + [clone(v) for v in patch if v not in current]
    key = _merge_key(field, patch)
    if key is None or not isinstance(current, list):
        return [
            clone({k: v for k, v in item.items() if k != "$patch"})
            if isinstance(item, dict)
            else item
            for item in patch
            if not (isinstance(item, dict) and item.get("$patch") == "delete")
        ]
    result = list(current)
    for item in patch:
        if not isinstance(item, dict):
            result.append(clone(item))
            continue
        if item.get("$patch") == "replace" and len(item) == 1:
            # "$patch: replace" as a list element replaces the whole list.
            return [clone(i) for i in patch if i is not item]
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(key) == item.get(key)
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del result[index]
        elif index is None:
            result.append(strategic_merge({}, item))
        else:
            result[index] = strategic_merge(result[index], item)
    return result


def json_patch(target: Any, ops: list[Any]) -> Any:
    """RFC 6902, with RFC 6901 pointers; any failed operation fails the whole patch."""
    doc = target
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _patch_error(f"invalid operation {op!r}")
        kind, path = op["op"], op["path"]
        if kind == "add":
            doc = _add(doc, path, clone(_value(op)))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, clone(_value(op)))
        elif kind == "move":
            doc, moved = _remove(doc, _from(op))
            doc = _add(doc, path, moved)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, _from(op))))
        elif kind == "test":
            if _get(doc, path) != _value(op):
                raise _patch_error(f"testing value {path} failed")
        else:
            raise _patch_error(f"unexpected kind: {kind}")
    return doc


def _patch_error(message: str) -> ApiError:
    return ApiError(
        422, "Invalid", f"the server rejected our request due to an error in our request: {message}"
    )


def _value(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise _patch_error(f"missing value for {op['op']} operation")
    return op["value"]


def _from(op: dict[str, Any]) -> str:
    if "from" not in op:
        raise _patch_error(f"missing from for {op['op']} operation")
    return str(op["from"])


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _patch_error(f"invalid JSON pointer {path!r}")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _index(container: list[Any], token: str, *, for_add: bool) -> int:
    if for_add and token == "-":
        return len(container)
    if not token.isdigit():
        raise _patch_error(f"invalid array index {token!r}")
    index = int(token)
    if index > len(container) or (not for_add and index == len(container)):
        raise _patch_error(f"array index {index} out of bounds")
    return index


def _parent(doc: Any, path: str) -> tuple[Any, str]:
    tokens = _tokens(path)
    if not tokens:
        raise _patch_error("operation on the document root")
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, for_add=False)]
        else:
            raise _patch_error(f"path {path} does not exist")
    return node, tokens[-1]


def _get(doc: Any, path: str) -> Any:
    if path == "":
        return doc
    parent, last = _parent(doc, path)
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, for_add=False)]
    raise _patch_error(f"path {path} does not exist")


def _add(doc: Any, path: str, value: Any) -> Any:
    if path == "":
        return value
    parent, last = _parent(doc, path)
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, for_add=True), value)
    else:
        raise _patch_error(f"path {path} does not exist")
    return doc


def _remove(doc: Any, path: str) -> tuple[Any, Any]:
    parent, last = _parent(doc, path)
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, for_add=False))
    raise _patch_error(f"path {path} does not exist")
