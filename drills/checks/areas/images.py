"""images.synced: every image a workload runs is at DR, with the primary's manifest digest."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, Tier, check, tier_status
from drills.plan import DrillPlan, Workload
from drills.targets.registry import ImageName, Ref, Registry, parse_image
from drills.targets.sites import Targets

log = logging.getLogger("drills.checks.images")

_KUBE_READERS = 8
# Requests in flight per registry. Both sites are asked at once, so the check keeps 32
# in flight in all: more only adds thread contention in this process (measured on
# loopback: 16 per site beat 32 by a quarter in wall time and CPU).
_PER_SITE = 16
_TIER_ORDER: dict[str, int] = {"critical": 0, "normal": 1, "batch": 2}


@dataclass
class _Image:
    """One unique image (without its registry host), and every workload that runs it.

    ``dr_name`` is its name at DR: the same, or what the plan's images.remap maps it to
    (``remapped`` then holds both references as written, for the operator)."""

    name: ImageName
    dr_name: ImageName
    remapped: tuple[str, str] | None = None
    workloads: set[str] = field(default_factory=set)
    tiers: set[Tier] = field(default_factory=set)

    def example(self, primary: str | None, dr: str | None) -> dict[str, Any]:
        shown: dict[str, Any] = {"image": str(self.name)}
        if self.remapped:
            shown |= {"primary_image": self.remapped[0], "dr_image": self.remapped[1]}
        return shown | {
            "workloads": sorted(self.workloads),
            "tiers": sorted(self.tiers, key=_TIER_ORDER.__getitem__),
            "primary_digest": primary,
            "dr_digest": dr,
        }

    @property
    def key(self) -> tuple[Ref, Ref]:
        return (self.name.key, self.dr_name.key)


@dataclass(frozen=True)
class _Unresolved:
    workload: Workload
    reason: str

    def example(self) -> dict[str, Any]:
        return {"workload": self.workload.key, "tier": _tier(self.workload), "reason": self.reason}


@check(
    "images.synced",
    title="Images synced to DR",
    category="Images",
    timeout_s=20,
    reads=(
        "The images of each workload (from the plan, else its pod template at the primary), "
        "resolved to manifest digests in the primary's and DR's registries."
    ),
    blocks="An image of a critical workload is missing at DR or has another digest.",
    warns="The same for a normal or batch workload.",
    remediation=(
        "Copy the images to the DR registry by digest (for example with crane or skopeo) and "
        "keep the registry mirroring running."
    ),
)
def images_synced(ctx: CheckContext) -> Outcome:
    """Every container image that a workload of the plan runs exists in the DR site's
    registry with the same manifest digest as in the primary's.

    The images are the workload's `images` in the plan, or else those of its pod
    template (containers and init containers) on the primary cluster. The registry
    host is dropped from each reference, since each site pulls from its own
    registry, and `repository:tag` (or `@digest`) is resolved at both sites: a
    multi-arch image compares by its index digest. An image that the plan's
    `images.remap` covers is looked up at DR under its mapped name instead
    (`registry.primary/team/app:1` as `mirror/team/app:1` for a rule
    `registry.primary/team/*` → `registry.dr/mirror/team/*`), and a problem with it
    names both. An image missing at DR means the
    takeover's pods sit in ImagePullBackOff; a different digest means DR would run
    other code than the primary. A problem with an image of a critical workload
    fails and blocks the drill; one of normal or batch workloads only warns.
    """
    plan, targets = ctx.plan, ctx.targets
    images, unresolved = _images_in_use(plan, targets)
    p_refs = list(dict.fromkeys(image.name.key for image in images.values()))
    d_refs = list(dict.fromkeys(image.dr_name.key for image in images.values()))
    with ThreadPoolExecutor(2, thread_name_prefix="images") as pool:
        at_primary = pool.submit(targets.primary.registry.digests, p_refs, concurrency=_PER_SITE)
        at_dr = pool.submit(targets.dr.registry.digests, d_refs, concurrency=_PER_SITE)
        primary, dr = at_primary.result(), at_dr.result()

    problems: dict[str, list[_Image]] = {
        "missing_at_dr": [],
        "digest_mismatch": [],
        "missing_at_primary": [],
    }
    for image in images.values():
        p, d = primary.get(image.name.key), dr.get(image.dr_name.key)
        if d is None:
            problems["missing_at_dr"].append(image)
        elif p is None:
            problems["missing_at_primary"].append(image)
        elif p != d:
            problems["digest_mismatch"].append(image)

    failing: set[Tier] = {t for found in problems.values() for image in found for t in image.tiers}
    failing |= {_tier(u.workload) for u in unresolved}
    status, blocking = tier_status(failing)
    examples: dict[str, list[dict[str, Any]]] = {
        kind: [
            i.example(primary.get(i.name.key), dr.get(i.dr_name.key))
            for i in _ordered(found)[:EXAMPLES]
        ]
        for kind, found in problems.items()
    }
    examples["workloads_unresolved"] = [u.example() for u in unresolved[:EXAMPLES]]
    evidence = {
        "primary_registry": targets.primary.registry.target,
        "dr_registry": targets.dr.registry.target,
        "workloads": len(plan.workloads),
        "images_compared": len(images),
        "remapped": sum(1 for image in images.values() if image.remapped),
        **{kind: len(found) for kind, found in problems.items()},
        "workloads_unresolved": len(unresolved),
        "examples": examples,
    }
    return Outcome(
        status,
        _summary(status, len(images), len(plan.workloads), problems, unresolved),
        evidence,
        _remediation(targets.primary.registry, targets.dr.registry, problems, unresolved),
        blocking,
    )


# -- which images --------------------------------------------------------------------


def _images_in_use(
    plan: DrillPlan, targets: Targets
) -> tuple[dict[tuple[Ref, Ref], _Image], list[_Unresolved]]:
    from_plan = {w.key: list(w.images) for w in plan.workloads if w.images}
    to_read = [w for w in plan.workloads if not w.images]
    from_cluster: dict[str, list[str] | None] = {}
    if to_read:
        kube = targets.primary.kube
        with ThreadPoolExecutor(min(_KUBE_READERS, len(to_read))) as pool:
            objects = pool.map(lambda w: kube.workload(w.namespace, w.kind.value, w.name), to_read)
            from_cluster = {w.key: pod_images(obj) for w, obj in zip(to_read, objects, strict=True)}

    images: dict[tuple[Ref, Ref], _Image] = {}
    unresolved: list[_Unresolved] = []
    for workload in plan.workloads:
        texts = from_plan.get(workload.key) or from_cluster.get(workload.key)
        if texts is None:
            unresolved.append(_Unresolved(workload, "not found on the primary cluster"))
            continue
        if not texts:
            unresolved.append(_Unresolved(workload, "its pod template names no image"))
            continue
        for text in texts:
            try:
                found = _image(plan, text)
            except ValueError:
                unresolved.append(_Unresolved(workload, f"unreadable image reference {text!r}"))
                continue
            image = images.setdefault(found.key, found)
            image.workloads.add(workload.key)
            image.tiers.add(_tier(workload))
    return images, unresolved


def _image(plan: DrillPlan, text: str) -> _Image:
    """The image ``text`` names, and its name at DR (images.remap). ValueError if unreadable."""
    name = parse_image(text)
    mapped = plan.images.mapped(text)
    if mapped is None:
        return _Image(name, name)
    return _Image(name, parse_image(mapped), (text, mapped))


def _tier(workload: Workload) -> Tier:
    return workload.tier.value


def pod_images(obj: Mapping[str, Any] | None) -> list[str] | None:
    """The images of a Deployment's or StatefulSet's pod template; None for no object."""
    if obj is None:
        return None
    pod = (obj.get("spec") or {}).get("template", {}).get("spec") or {}
    containers = [*(pod.get("initContainers") or []), *(pod.get("containers") or [])]
    return list(dict.fromkeys(c["image"] for c in containers if c.get("image")))


def _ordered(images: Iterable[_Image]) -> list[_Image]:
    """Critical first, so the examples show what blocks."""
    return sorted(images, key=lambda i: (min(_TIER_ORDER[t] for t in i.tiers), str(i.name)))


# -- words for the operator --------------------------------------------------------------


def _summary(
    status: Status,
    compared: int,
    workloads: int,
    problems: Mapping[str, list[_Image]],
    unresolved: list[_Unresolved],
) -> str:
    if status is Status.PASS:
        return f"{compared} images of {workloads} workloads are at DR with the primary's digest"
    words = {
        "missing_at_dr": "missing at DR",
        "digest_mismatch": "with a different digest at DR",
        "missing_at_primary": "missing at the primary",
    }
    parts = [f"{len(found)} {words[kind]}" for kind, found in problems.items() if found]
    remapped = [i for i in _ordered(problems["missing_at_dr"]) if i.remapped]
    if remapped:
        at_primary, at_dr = remapped[0].remapped or ("", "")
        parts[0] += f" ({at_primary} as {at_dr}, by images.remap)"
    if unresolved:
        parts.append(f"{len(unresolved)} workloads whose images are unknown")
    blocked = sorted(
        {
            w
            for found in problems.values()
            for i in found
            if "critical" in i.tiers
            for w in i.workloads
        }
        | {u.workload.key for u in unresolved if u.workload.tier.value == "critical"}
    )
    tail = f"; critical: {', '.join(blocked)}" if blocked else "; no critical workload affected"
    return f"{', '.join(parts)} of {compared} images{tail}"


def _remediation(
    primary: Registry,
    dr: Registry,
    problems: Mapping[str, list[_Image]],
    unresolved: list[_Unresolved],
) -> str:
    hints: list[str] = []
    to_copy = _ordered(problems["missing_at_dr"] + problems["digest_mismatch"])
    if to_copy:
        ref, dr_ref = str(to_copy[0].name), str(to_copy[0].dr_name)
        flags = "".join(
            f" --{side}-tls-verify=false"
            for side, registry in (("src", primary), ("dest", dr))
            if registry.plain_http
        )
        hints.append(
            "Copy each image from the primary registry to DR, index and all, e.g. "
            f"`skopeo copy --all{flags} docker://{primary.host}/{ref} "
            f"docker://{dr.host}/{dr_ref}`, "
            "and make the registry replication cover its repository."
        )
    if problems["missing_at_primary"]:
        ref = str(_ordered(problems["missing_at_primary"])[0].name)
        hints.append(
            f"The primary registry {primary.host} lacks {ref}: check where the workload pulls "
            "from, or list the images in the plan (workloads[].images)."
        )
    if unresolved:
        hints.append(
            f"List the images of {unresolved[0].workload.key} in the plan (workloads[].images), "
            "or deploy it at the primary, so they can be compared."
        )
    return " ".join(hints)
