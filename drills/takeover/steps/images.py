"""Preflight, with the plan's images.remap: DR's workloads run the mapped names.

A DR site that mirrors ``registry.primary/team/app`` as ``registry.dr/mirror/team/app``
must run the mirror's name: a standby still naming the primary's registry pulls from a
site that may be down (or fenced) in the takeover, and sits in ImagePullBackOff. This
is checked before the first change, from the image fields of each workload's pod
template at DR, against the primary's images (the plan's ``workloads[].images``, else
the primary's pod template) as the remap names them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drills.checks.areas.images import pod_images
from drills.errors import DrillError, RunRefused
from drills.plan import DrillPlan, Workload
from drills.takeover.timeline import Timeline
from drills.targets.sites import Role, Targets


@dataclass(frozen=True)
class Unmapped:
    """A workload whose DR pod template lacks the name images.remap gives one of its images."""

    workload: str
    primary_image: str
    expected: str
    dr_images: tuple[str, ...]

    def describe(self) -> str:
        runs = ", ".join(self.dr_images) or "no image"
        return (
            f"{self.workload} at DR runs {runs}, not {self.expected} "
            f"(images.remap's name for {self.primary_image})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "primary_image": self.primary_image,
            "expected_at_dr": self.expected,
            "dr_images": list(self.dr_images),
        }


def unmapped_images(plan: DrillPlan, targets: Targets) -> tuple[list[Unmapped], list[str]]:
    """(each remapped image DR's pod templates lack, the workloads that could not be read)."""
    found: list[Unmapped] = []
    unread: list[str] = []
    for workload in plan.workloads:
        primary = _primary_images(targets, workload)
        dr = pod_images(_read(targets, "dr", workload))
        if primary is None or dr is None:
            unread.append(workload.key)
            continue
        for image in primary:
            expected = plan.images.mapped(image)
            if expected is not None and expected not in dr:
                found.append(Unmapped(workload.key, image, expected, tuple(dr)))
    return found, unread


def _primary_images(targets: Targets, workload: Workload) -> list[str] | None:
    if workload.images:
        return list(workload.images)
    try:
        obj = _read(targets, "primary", workload)
    except DrillError:
        return None  # an incident's primary may be down: the plan then names no images to map
    return pod_images(obj)


def _read(targets: Targets, role: Role, workload: Workload) -> dict[str, Any] | None:
    return targets.site(role).kube.workload(workload.namespace, str(workload.kind), workload.name)


def check_remapped_images(
    plan: DrillPlan, targets: Targets, timeline: Timeline, *, incident: bool
) -> None:
    """Refuse a drill whose DR workloads do not run the mapped names; an incident goes on,
    the mismatch in its timeline (its takeover is what is left). Nothing without a remap."""
    if not plan.images.remap:
        return
    with timeline.step("DR workloads run the images.remap names") as step:
        found, unread = unmapped_images(plan, targets)
        step.evidence = {
            "unmapped": [u.to_json() for u in found],
            "not_read": unread,
        }
        if not found:
            step.result = "every remapped image is named at DR" + (
                f" (not read: {', '.join(unread)})" if unread else ""
            )
            return
        why = "; ".join(u.describe() for u in found[:3])
        more = f" and {len(found) - 3} more" if len(found) > 3 else ""
        if incident:
            step.result = f"WARNING: {why}{more}"
            return
        step.result = "refused"
        raise RunRefused(
            f"preflight: {why}{more}. Deploy DR's standbys with the mirror's image names, or "
            "fix images.remap."
        )
