"""images.remap at the clusters: cluster.standby_parity reads the primary's images under their
DR names, and a drill's preflight refuses DR workloads that do not run those names."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from drills.checks.base import Status
from drills.errors import RunRefused
from drills.plan import DrillPlan, ImageRemap, ImagesPolicy
from drills.takeover.steps.images import check_remapped_images, unmapped_images
from drills.takeover.timeline import Timeline
from drills.targets.sites import Targets
from tests.support.kube_sites import WORKLOADS, SiteSpec, plan_for, run, site_pair

PRIMARY, DR = "registry.primary:5000", "registry.dr:5000"
MIRRORED = tuple(replace(w, image=f"mirror/{w.image}") for w in WORKLOADS)


def remapped(plan: DrillPlan) -> DrillPlan:
    rule = ImageRemap(primary=f"{PRIMARY}/*", dr=f"{DR}/mirror/*")
    return plan.model_copy(update={"images": ImagesPolicy(remap=(rule,))})


def test_standby_parity_compares_across_the_remap(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(registry=PRIMARY), SiteSpec(registry=DR, workloads=MIRRORED)):
        plain = run(plan_for(tmp_path), "cluster.standby_parity")
        mapped = run(remapped(plan_for(tmp_path)), "cluster.standby_parity")
    # Without the remap, every standby's image path differs from the primary's.
    assert plain.status is Status.FAIL
    paths = {d["path"]: d for d in plain.evidence["drifted"][0]["diffs"]}
    image = next(d for p, d in paths.items() if p.endswith(".image"))
    assert image["dr"] == f"mirror/{image['primary']}"
    assert mapped.status is Status.PASS, mapped.summary


def test_a_drill_refuses_dr_workloads_that_do_not_run_the_mapped_names(tmp_path: Path) -> None:
    stale = tuple(
        replace(w, image="mirror/models/llm:0.5") if w.name == "llm" else w for w in MIRRORED
    )
    with site_pair(tmp_path, SiteSpec(registry=PRIMARY), SiteSpec(registry=DR, workloads=stale)):
        plan = remapped(plan_for(tmp_path))
        with Targets(plan) as targets:
            found, unread = unmapped_images(plan, targets)
            drill, incident = Timeline(), Timeline()
            with drill.phase("preflight"), pytest.raises(RunRefused) as refused:
                check_remapped_images(plan, targets, drill, incident=False)
            with incident.phase("preflight"):
                check_remapped_images(plan, targets, incident, incident=True)
        with Targets(plan_for(tmp_path)) as targets:
            untouched = Timeline()
            with untouched.phase("preflight"):
                check_remapped_images(plan_for(tmp_path), targets, untouched, incident=False)

    assert unread == []
    [wrong] = found
    assert (wrong.workload, wrong.primary_image, wrong.expected) == (
        "serving/llm",
        f"{PRIMARY}/models/llm:0.6",
        f"{DR}/mirror/models/llm:0.6",
    )
    assert wrong.dr_images == (f"{DR}/mirror/models/llm:0.5",)
    message = str(refused.value)
    assert f"{DR}/mirror/models/llm:0.5, not {DR}/mirror/models/llm:0.6" in message
    assert f"{PRIMARY}/models/llm:0.6" in message
    [step] = incident.phases[0].steps
    assert step.result.startswith("WARNING: serving/llm at DR runs")
    assert step.evidence["unmapped"][0]["expected_at_dr"] == f"{DR}/mirror/models/llm:0.6"
    # A plan without a remap adds no step at all: its preflight is as it was.
    assert untouched.phases[0].steps == []
