"""Configuration drift between a workload's pod template at the primary and at DR.

Only what must match for the standby to behave like the primary is compared:
container names, images (without the registry host: each site pulls from its
own registry), resources, env variable names (values may rightly differ per
site), ports, command and args. Differences come back as field paths.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from drills.targets.kube import canonical

# Values that may carry credentials (`--token=...`): a diff names the field, never shows it.
HIDDEN = frozenset({"command", "args"})


@dataclass(frozen=True)
class Drift:
    path: str
    primary: Any
    dr: Any

    def to_json(self) -> dict[str, Any]:
        if self.path.rsplit(".", 1)[-1] in HIDDEN:
            return {"path": self.path, "primary": "(differs; not shown)", "dr": "(differs)"}
        return {"path": self.path, "primary": self.primary, "dr": self.dr}


def strip_registry(image: str) -> str:
    """``host[:port]/repo:tag`` → ``repo:tag``; Docker Hub short names made explicit.

    A first path part with a dot or a colon, or ``localhost``, is a registry host.
    ``nginx`` and ``docker.io/library/nginx:latest`` both become ``library/nginx:latest``.
    """
    first, sep, rest = image.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        image = rest
    if "/" not in image.split("@", 1)[0]:
        image = "library/" + image
    last = image.rsplit("/", 1)[-1]
    if "@" not in last and ":" not in last:
        image += ":latest"
    return image


def _quantities(values: Mapping[str, Any] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in (values or {}).items():
        try:
            out[name] = canonical(value)
        except ValueError:
            out[name] = str(value)
    return out


# The name an image of the primary has at DR (the plan's images.remap), None when unmapped.
Remap = Callable[[str], str | None]


def _same_name(image: str) -> str | None:
    return None


def _container(c: Mapping[str, Any], remap: Remap = _same_name) -> dict[str, Any]:
    image = str(c.get("image") or "")
    resources = c.get("resources") or {}
    env_from = [
        ("configMap", (e.get("configMapRef") or {}).get("name"))
        if e.get("configMapRef")
        else ("secret", (e.get("secretRef") or {}).get("name"))
        for e in c.get("envFrom") or []
    ]
    return {
        "image": strip_registry(remap(image) or image),
        "resources.requests": _quantities(resources.get("requests")),
        "resources.limits": _quantities(resources.get("limits")),
        "env": sorted(str(e.get("name")) for e in c.get("env") or []),
        "envFrom": sorted(f"{kind}/{name}" for kind, name in env_from),
        "ports": sorted(
            (
                int(p.get("containerPort") or 0),
                str(p.get("protocol") or "TCP"),
                str(p.get("name") or ""),
            )
            for p in c.get("ports") or []
        ),
        "command": list(c.get("command") or []),
        "args": list(c.get("args") or []),
    }


def _containers(
    template: Mapping[str, Any], remap: Remap = _same_name
) -> dict[str, dict[str, Any]]:
    spec = template.get("spec") or {}
    out: dict[str, dict[str, Any]] = {}
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or []:
            out[f"{group}[{c.get('name')}]"] = _container(c, remap)
    return out


def _shown(field: str, value: Any) -> Any:
    if field == "ports":
        return [f"{port}/{proto}" + (f" ({name})" if name else "") for port, proto, name in value]
    return value


def template_drift(
    primary: Mapping[str, Any], dr: Mapping[str, Any], remap: Remap = _same_name
) -> list[Drift]:
    """Differences between two workloads' pod templates, as paths under ``spec.template.spec``;
    the primary's images read as ``remap`` names them at DR."""
    base = "spec.template.spec."
    left = _containers((primary.get("spec") or {}).get("template") or {}, remap)
    right = _containers((dr.get("spec") or {}).get("template") or {})
    drifts: list[Drift] = []
    for key in sorted(left.keys() | right.keys()):
        if key not in right:
            drifts.append(Drift(base + key, "present", "missing"))
            continue
        if key not in left:
            drifts.append(Drift(base + key, "missing", "present"))
            continue
        for field, value in left[key].items():
            if value != right[key][field]:
                drifts.append(
                    Drift(
                        f"{base}{key}.{field}",
                        _shown(field, value),
                        _shown(field, right[key][field]),
                    )
                )
    return drifts
