"""Kubeconfig files that a plan names: read safely, and checked for the shape a client needs.

The official Kubernetes client walks a kubeconfig with no type checks: a
``contexts: 5`` ends as a TypeError deep inside it. `drills plan validate
--resolve` and the Kubernetes target both call :func:`load_kubeconfig` first,
so a malformed file is one clear sentence, the same in both places. Messages
name files, entries and keys, never a value (a kubeconfig holds tokens).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from drills.plan.files import FileRefusedError, read_regular_file
from drills.plan.refs import describe
from drills.plan.yamlfile import parse_yaml

__all__ = ["MAX_KUBECONFIG_BYTES", "KubeconfigError", "check_kubeconfig", "load_kubeconfig"]

# Merged kubeconfigs with embedded certificates run to hundreds of kilobytes.
MAX_KUBECONFIG_BYTES = 8 * 1024 * 1024

# Section -> the key that holds each entry's body.
_SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}
_STRING_FIELDS = {
    "cluster": ("server", "certificate-authority", "certificate-authority-data", "proxy-url"),
    "user": ("token", "tokenFile", "client-certificate", "client-key", "username", "password"),
    "context": ("cluster", "user", "namespace"),
}


class KubeconfigError(ValueError):
    """A kubeconfig that cannot be used; the message says why, without any value in it."""


def load_kubeconfig(path: Path, context: str | None) -> dict[str, Any]:
    """Read and check the kubeconfig at ``path`` for ``context`` (None: its current-context).

    Raises :class:`KubeconfigError`, and FileNotFoundError/PermissionError as open does.
    """
    try:
        raw = read_regular_file(path, MAX_KUBECONFIG_BYTES)
    except FileRefusedError as exc:
        raise KubeconfigError(f"{path} {exc.reason}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise KubeconfigError(f"{path} is not UTF-8 text") from None
    doc = parse_yaml(text, str(path), max_bytes=MAX_KUBECONFIG_BYTES)
    if doc.problems:
        first = doc.problems[0]
        at = f" (line {first.line})" if first.line else ""
        raise KubeconfigError(f"{path} is not a usable kubeconfig{at}: {first.message}")
    check_kubeconfig(doc.data, context, str(path))
    assert isinstance(doc.data, dict)  # check_kubeconfig refuses anything else
    _check_named_files(doc.data, context, path)
    return doc.data


# Files a kubeconfig entry names, which the client reads itself: each is read here first,
# bounded, so a FIFO or /proc/kmsg behind one is refused instead of hanging the client.
_FILE_FIELDS = {
    "cluster": ("certificate-authority",),
    "user": ("client-certificate", "client-key", "tokenFile"),
}


def _check_named_files(config: dict[str, Any], context: str | None, path: Path) -> None:
    body = _entry_named(config, "contexts", "context", context or config.get("current-context"))
    for kind, fields in _FILE_FIELDS.items():
        entry = _entry_named(config, f"{kind}s", kind, body.get(kind))
        for field in fields:
            named = entry.get(field)
            if not isinstance(named, str) or not named:
                continue
            file = Path(named).expanduser()
            file = file if file.is_absolute() else path.parent / file  # as the client resolves it
            try:
                read_regular_file(file, MAX_KUBECONFIG_BYTES)
            except FileRefusedError as exc:
                raise KubeconfigError(f"{path}: {kind} {field} {file} {exc.reason}") from None
            except (OSError, ValueError):
                continue  # missing or unreadable: the client says so in its own words


def _entry_named(config: dict[str, Any], section: str, key: str, name: Any) -> dict[str, Any]:
    for item in config.get(section) or ():
        if isinstance(item, dict) and item.get("name") == name and isinstance(item.get(key), dict):
            return dict(item[key])
    return {}


def check_kubeconfig(config: Any, context: str | None, where: str = "kubeconfig") -> None:
    """Raise :class:`KubeconfigError` unless ``config`` has what a client reads for ``context``."""
    if not isinstance(config, dict):
        raise KubeconfigError(f"{where} must be a mapping (clusters, users, contexts...)")
    entries = {section: _entries(config, section, where) for section in _SECTIONS}
    current = config.get("current-context")
    if current is not None and not isinstance(current, str):
        raise KubeconfigError(f"{where}: current-context must be a name, got {describe(current)}")
    chosen = context or current
    if not chosen:
        raise KubeconfigError(f"{where} has no current-context; name a context in the plan")
    if chosen not in entries["contexts"]:
        raise KubeconfigError(f"{where} has no context named {chosen!r}")
    body = entries["contexts"][chosen]
    cluster = body.get("cluster")
    if not isinstance(cluster, str) or cluster not in entries["clusters"]:
        raise KubeconfigError(f"{where}: context {chosen!r} names no cluster that the file defines")
    if not isinstance(entries["clusters"][cluster].get("server"), str):
        raise KubeconfigError(f"{where}: cluster {cluster!r} has no server URL")
    user = body.get("user")
    if user is not None and user not in entries["users"]:
        raise KubeconfigError(f"{where}: context {chosen!r} names a user the file does not define")


def _entries(config: dict[str, Any], section: str, where: str) -> dict[str, dict[str, Any]]:
    """``{name: body}`` of one section (``clusters``...), every entry checked for shape."""
    items = config.get(section)
    if items is None:
        return {}
    if not isinstance(items, list):
        raise KubeconfigError(
            f"{where}: {section} must be a list of {{name, {_SECTIONS[section]}}} entries, "
            f"got {describe(items)}"
        )
    found: dict[str, dict[str, Any]] = {}
    for index, item in enumerate(items):
        name, body = _entry(item, section, index, where)
        found.setdefault(name, body)  # the client takes the first of a repeated name
    return found


def _entry(item: Any, section: str, index: int, where: str) -> tuple[str, dict[str, Any]]:
    key = _SECTIONS[section]
    at = f"{where}: {section}[{index}]"
    if not isinstance(item, dict):
        raise KubeconfigError(f"{at} must be a mapping with name and {key}, got {describe(item)}")
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise KubeconfigError(f"{at} needs a name (a string)")
    body = item.get(key)
    if body is None and key == "user":
        body = {}  # a user with no credentials: anonymous access, which the client allows
    if not isinstance(body, dict):
        raise KubeconfigError(f"{at} ({name!r}) needs a {key} mapping, got {describe(body)}")
    for field in _STRING_FIELDS[key]:
        if field in body and not isinstance(body[field], str):
            raise KubeconfigError(
                f"{at} ({name!r}): {field} must be a string, got {describe(body[field])}"
            )
    return name, body
