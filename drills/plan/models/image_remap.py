"""``images.remap``: the name an image of the primary has at DR.

Velero users asked for years to remap image registries on restore; a DR site that
mirrors ``registry.primary/team/app`` as ``registry.dr/mirror/team/app`` has the same
need. Each rule maps a name (``HOST/PATH``) or a whole subtree (``HOST/PATH/*``) of the
primary's references to DR's; the tag or digest is kept. The first rule that matches
wins, in the plan's order. Without a rule, an image is compared under its own name,
registry host aside, as before.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, model_validator

from drills.plan.models.base import PlanModel
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.types import ImagePattern


class ImageRemap(PlanModel):
    """One rule: ``primary: registry.primary/team/*``, ``dr: registry.dr/mirror/team/*``."""

    primary: ImagePattern
    """A name as the primary's workloads write it (HOST/PATH), or a subtree (HOST/PATH/*)."""
    dr: ImagePattern
    """The same name at DR; a subtree maps to a subtree (both end in /*)."""

    @model_validator(mode="after")
    def _same_shape(self) -> ImageRemap:
        rules: list[Rule] = []
        if self.primary.endswith("/*") != self.dr.endswith("/*"):
            rules.append((("dr",), "must end in /* exactly when primary does"))
        raise_rules("remap", rules)
        return self

    def apply(self, name: str) -> str | None:
        """``name`` (no tag) at DR, or None when this rule does not cover it."""
        if not self.primary.endswith("/*"):
            return self.dr if name == self.primary else None
        stem = self.primary[:-1]
        return self.dr[:-1] + name[len(stem) :] if name.startswith(stem) else None


class ImagesPolicy(PlanModel):
    """How the primary's image names read at DR."""

    remap: Annotated[
        tuple[ImageRemap, ...],
        Field(max_length=200),
        unique_by("remap rule", key_of("primary"), "primary", "images.remap"),
    ] = ()
    """Rules from the primary's registry and path to DR's, first match wins. images.synced
    compares digests across them; a takeover checks DR's workloads run the mapped names."""

    def mapped(self, reference: str) -> str | None:
        """The DR name of ``reference`` (tag or digest kept), None when no rule covers it."""
        name, suffix = split_reference(reference)
        for rule in self.remap:
            at_dr = rule.apply(name)
            if at_dr is not None:
                return at_dr + suffix
        return None


def split_reference(reference: str) -> tuple[str, str]:
    """``host/path:tag@digest`` → (``host/path``, ``:tag@digest``)."""
    head, at, digest = reference.partition("@")
    slash = head.rfind("/")
    colon = head.rfind(":")
    if colon > slash:  # a tag: a ':' after the last '/' (before it, a registry port)
        return head[:colon], head[colon:] + at + digest
    return head, at + digest
