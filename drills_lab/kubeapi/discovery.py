"""Discovery documents (legacy, unaggregated), /version and the OpenAPI stubs.

Everything is generated from :mod:`resources`; nothing here lists a resource
by hand.
"""

from __future__ import annotations

from typing import Any

from drills_lab.kubeapi.resources import (
    RESOURCE_VERBS,
    SUBRESOURCE_VERBS,
    ResourceType,
    group_versions,
    in_group_version,
)

# kubectl asks for the OpenAPI v2 document as protobuf and parses the body
# with proto.Unmarshal. An empty body is a valid, empty Document: kubectl then
# finds no schema for any kind, skips client-side validation for it and falls
# back to its compiled-in types for strategic merge, which is what we want.
OPENAPI_V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def version_info(major: int, minor: int) -> dict[str, Any]:
    git_version = f"v{major}.{minor}.4"
    return {
        "major": str(major),
        "minor": str(minor),
        "gitVersion": git_version,
        "gitCommit": "0" * 40,
        "gitTreeState": "clean",
        "buildDate": "2024-08-14T00:00:00Z",
        "goVersion": "go1.22.5",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


def api_versions(server_address: str) -> dict[str, Any]:
    core = [v for g, v in group_versions() if g == ""]
    return {
        "kind": "APIVersions",
        "versions": core,
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group(name: str) -> dict[str, Any]:
    versions = [
        {"groupVersion": f"{g}/{v}", "version": v} for g, v in group_versions() if g == name
    ]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_group_list() -> dict[str, Any]:
    names: list[str] = []
    for g, _ in group_versions():
        if g and g not in names:
            names.append(g)
    groups = []
    for name in names:
        group = _group(name)
        del group["kind"], group["apiVersion"]
        groups.append(group)
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str) -> dict[str, Any] | None:
    if not any(g == name for g, _ in group_versions()):
        return None
    return _group(name)


def _entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(RESOURCE_VERBS),
    }
    if rt.short_names:
        main["shortNames"] = list(rt.short_names)
    if rt.categories:
        main["categories"] = list(rt.categories)
    entries = [main]
    for sub in rt.subresources:
        entry: dict[str, Any] = {
            "name": f"{rt.plural}/{sub}",
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": list(SUBRESOURCE_VERBS),
        }
        if sub == "scale":
            entry |= {"group": "autoscaling", "version": "v1", "kind": "Scale"}
        if sub == "log":  # a read of the container's output, as the real server lists it
            entry |= {"kind": "Pod", "verbs": ["get"]}
        entries.append(entry)
    return entries


def api_resource_list(group: str, version: str) -> dict[str, Any] | None:
    types = in_group_version(group, version)
    if not types:
        return None
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": [entry for rt in types for entry in _entries(rt)],
    }


def openapi_v2_json(git_version: str) -> dict[str, Any]:
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": git_version},
        "paths": {},
        "definitions": {},
    }


def openapi_v3_root() -> dict[str, Any]:
    # No per-group documents: kubectl then reports the fieldValidation query
    # parameter as unsupported and validates on its side against OpenAPI v2.
    return {"paths": {}}
