"""images.synced against the lab, the drifted lab, and registries this module fills itself."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
import yaml

import drills.checks.areas.images  # noqa: F401 - registers the check
from drills.checks.base import CheckResult, Status
from drills.plan import DrillPlan, load_plan, plan_from_text
from drills_lab import topology
from drills_lab.images import build_image, push_ecr, push_oci
from drills_lab.moto_server import MotoServer
from drills_lab.registry import RegistryPair
from drills_lab.runtime import LabInfo
from tests.support.checks import UNUSED_DNS, run_check

LAB_IMAGES = {w.image for w in topology.WORKLOADS}
PROBLEMS = ("missing_at_dr", "digest_mismatch", "missing_at_primary", "workloads_unresolved")


def counts(result: CheckResult) -> dict[str, int]:
    return {kind: result.evidence[kind] for kind in PROBLEMS}


def workload(name: str, tier: str, *images: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "serving",
        "kind": "Deployment",
        "tier": tier,
        "dr_replicas": 1,
        "images": list(images),
    }


def plan_over(
    primary: dict[str, Any],
    dr: dict[str, Any],
    workloads: list[dict[str, Any]],
    extra: dict[str, dict[str, Any]] | None = None,
    remap: list[dict[str, str]] | None = None,
) -> DrillPlan:
    """A small plan whose workloads name their images, so no cluster is read."""

    def one(role: str, registry: dict[str, Any], addr: str) -> dict[str, Any]:
        return {
            "kubernetes": {"kubeconfig": f"{role}.kubeconfig"},
            "registry": registry,
            "objects": {"endpoint_url": "http://127.0.0.1:9", "region": "us-east-1"},
            "ingress": {"mode": "controller", "deployment": {"namespace": "i", "name": "c"}},
            "endpoint": f"http://{addr}:18080/healthz",
            **(extra or {}).get(role, {}),
        }

    doc = {
        "name": "images-test",
        "sites": {
            "primary": one("primary", primary, "127.0.0.2"),
            "dr": one("dr", dr, "127.0.0.3"),
        },
        "workloads": workloads,
        "dns": UNUSED_DNS,
        "objectives": {"rto": "15m", "rpo": "5m"},
    }
    if remap:
        doc["images"] = {"remap": remap}
    return plan_from_text(yaml.safe_dump(doc))


# -- the lab ------------------------------------------------------------------------------


def test_lab_passes(lab: LabInfo) -> None:
    result = run_check(load_plan(Path(lab.state_dir) / "plan.yaml"), "images.synced")
    assert result.status is Status.PASS, result.summary
    assert not result.blocking
    assert result.evidence["images_compared"] == len(LAB_IMAGES)
    assert counts(result) == dict.fromkeys(PROBLEMS, 0)


def test_drift_lab_finds_exactly_the_image_never_synced(drift_lab: LabInfo) -> None:
    result = run_check(load_plan(Path(drift_lab.state_dir) / "plan.yaml"), "images.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "missing_at_dr": 1}
    [missing] = result.evidence["examples"]["missing_at_dr"]
    assert missing["image"] == topology.DRIFT_MISSING_IMAGE
    assert missing["workloads"] == ["serving/session-store"]
    assert missing["tiers"] == ["critical"]
    assert missing["primary_digest"].startswith("sha256:") and missing["dr_digest"] is None
    assert topology.DRIFT_MISSING_IMAGE in result.remediation
    assert "skopeo copy --all" in result.remediation
    assert "serving/session-store" in result.summary


def test_workload_absent_from_the_primary_cluster(lab: LabInfo, tmp_path: Path) -> None:
    """A plan workload that the primary does not run has unknown images: it cannot pass."""
    state = Path(lab.state_dir)
    doc = yaml.safe_load((state / "plan.yaml").read_text())
    for site in doc["sites"].values():
        site["kubernetes"]["kubeconfig"] = str(state / site["kubernetes"]["kubeconfig"])
    ghost = {"name": "ghost", "namespace": "batch", "kind": "StatefulSet", "tier": "batch"}
    doc["workloads"].append({**ghost, "dr_replicas": 1})
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump(doc))

    result = run_check(load_plan(tmp_path / "plan.yaml"), "images.synced")
    assert (result.status, result.blocking) == (Status.WARN, False)
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "workloads_unresolved": 1}
    [example] = result.evidence["examples"]["workloads_unresolved"]
    assert example == {
        "workload": "batch/ghost",
        "tier": "batch",
        "reason": "not found on the primary cluster",
    }


# -- registries of our own -------------------------------------------------------------------


@pytest.fixture(scope="module")
def oci(registries: RegistryPair) -> Iterator[tuple[dict[str, str], dict[str, str], str]]:
    """The two registries as plan entries, and a repository prefix for this module."""
    yield (
        {"kind": "oci", "url": registries.primary.url},
        {"kind": "oci", "url": registries.dr.url},
        f"img-{uuid.uuid4().hex[:8]}",
    )


def push(url: str, reference: str, *, generation: str = "1", multi_arch: bool = False) -> str:
    with httpx.Client(timeout=10) as http:
        return push_oci(
            http, url, build_image(reference, multi_arch=multi_arch, generation=generation)
        )


def test_different_digest_at_dr_fails(
    registries: RegistryPair, oci: tuple[dict[str, str], dict[str, str], str]
) -> None:
    primary, dr, prefix = oci
    same, drifted = f"{prefix}/gateway:1.0", f"{prefix}/model:3.1"
    for url in (registries.primary.url, registries.dr.url):
        push(url, same, multi_arch=True)
    at_primary = push(registries.primary.url, drifted, generation="1")
    at_dr = push(registries.dr.url, drifted, generation="2")
    workloads = [
        workload("gateway", "critical", f"{registries.primary.url[7:]}/{same}"),
        workload("model", "critical", f"{registries.primary.url[7:]}/{drifted}", same),
    ]
    result = run_check(plan_over(primary, dr, workloads), "images.synced")

    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert result.evidence["images_compared"] == 2  # the shared image once
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "digest_mismatch": 1}
    [mismatch] = result.evidence["examples"]["digest_mismatch"]
    assert mismatch == {
        "image": drifted,
        "workloads": ["serving/model"],
        "tiers": ["critical"],
        "primary_digest": at_primary,
        "dr_digest": at_dr,
    }
    primary_host, dr_host = registries.primary.url[7:], registries.dr.url[7:]
    assert (
        f"skopeo copy --all --src-tls-verify=false --dest-tls-verify=false "
        f"docker://{primary_host}/{drifted} docker://{dr_host}/{drifted}"
    ) in result.remediation


def test_problem_in_normal_tier_only_warns(
    registries: RegistryPair, oci: tuple[dict[str, str], dict[str, str], str]
) -> None:
    primary, dr, prefix = oci
    synced, unsynced = f"{prefix}/api:2.0", f"{prefix}/trainer:2024.12"
    for url in (registries.primary.url, registries.dr.url):
        push(url, synced)
    digest = push(registries.primary.url, unsynced)
    workloads = [
        workload("api", "critical", synced),
        workload("trainer", "normal", unsynced, f"{prefix}/sidecar@{digest}"),  # at neither site
    ]
    result = run_check(plan_over(primary, dr, workloads), "images.synced")

    assert (result.status, result.blocking) == (Status.WARN, False)
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "missing_at_dr": 2}
    assert {e["image"] for e in result.evidence["examples"]["missing_at_dr"]} == {
        unsynced,
        f"{prefix}/sidecar@{digest}",
    }
    assert "no critical workload affected" in result.summary


def test_remapped_images_compare_across_the_mapping(
    registries: RegistryPair, oci: tuple[dict[str, str], dict[str, str], str]
) -> None:
    """With images.remap, DR is asked for the mapped name: a copy there passes, and an image
    missing under its mapped name fails, naming both names, even when DR holds it under the
    primary's own name."""
    primary, dr, prefix = oci
    p_host, d_host = registries.primary.url[7:], registries.dr.url[7:]
    copied, forgotten = f"{prefix}/team/api:1.0", f"{prefix}/team/trainer:2.0"
    for reference in (copied, forgotten):
        image = build_image(reference)
        with httpx.Client(timeout=10) as http:
            push_oci(http, registries.primary.url, image)
            # DR holds both under the primary's name; only `api` also under the mirror's.
            push_oci(http, registries.dr.url, image)
            if reference == copied:
                push_oci(
                    http, registries.dr.url, replace(image, repository=f"mirror/{prefix}/team/api")
                )
    remap = [{"primary": f"{p_host}/{prefix}/team/*", "dr": f"{d_host}/mirror/{prefix}/team/*"}]

    passing = plan_over(
        primary, dr, [workload("api", "critical", f"{p_host}/{copied}")], remap=remap
    )
    result = run_check(passing, "images.synced")
    assert result.status is Status.PASS, result.summary
    assert result.evidence["remapped"] == 1

    workloads = [
        workload("api", "critical", f"{p_host}/{copied}"),
        workload("trainer", "critical", f"{p_host}/{forgotten}"),
    ]
    result = run_check(plan_over(primary, dr, workloads, remap=remap), "images.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "missing_at_dr": 1}
    mapped = f"{d_host}/mirror/{prefix}/team/trainer:2.0"
    assert f"{p_host}/{forgotten} as {mapped}" in result.summary
    [missing] = result.evidence["examples"]["missing_at_dr"]
    assert (missing["primary_image"], missing["dr_image"]) == (f"{p_host}/{forgotten}", mapped)
    assert missing["primary_digest"].startswith("sha256:") and missing["dr_digest"] is None
    assert f"docker://{d_host}/mirror/{prefix}/team/trainer:2.0" in result.remediation

    # Without the remap, the same registries pass: DR has every image under the primary's name.
    unmapped = run_check(plan_over(primary, dr, workloads), "images.synced")
    assert unmapped.status is Status.PASS, unmapped.summary


def test_unreachable_dr_registry_is_an_error(
    oci: tuple[dict[str, str], dict[str, str], str], closed_port: str
) -> None:
    primary, _, prefix = oci
    dr = {"kind": "oci", "url": f"http://{closed_port}"}
    result = run_check(
        plan_over(primary, dr, [workload("api", "critical", f"{prefix}/a:1")]), "images.synced"
    )
    assert result.status is Status.ERROR and result.blocking
    assert f"registry dr (http://{closed_port})" in result.summary
    assert "connection refused" in result.summary


# -- ECR ------------------------------------------------------------------------------------


def test_ecr_sites(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    prefix = f"ecr-{uuid.uuid4().hex[:8]}"
    clients = {
        region: boto3.client("ecr", endpoint_url=moto_server.url, region_name=region)
        for region in ("eu-west-1", "eu-central-1")
    }
    account = clients["eu-west-1"].describe_registry()["registryId"]
    synced, unsynced = build_image(f"{prefix}/api:1.0"), build_image(f"{prefix}/db:5.0")
    for ecr in clients.values():
        push_ecr(ecr, synced)
    push_ecr(clients["eu-west-1"], unsynced)

    def site(region: str) -> dict[str, Any]:
        credentials = {
            "access_key_id": "env:AWS_ACCESS_KEY_ID",
            "secret_access_key": "env:AWS_SECRET_ACCESS_KEY",
        }
        aws = {"region": region, "endpoint_url": moto_server.url, "credentials": credentials}
        return {"aws": aws}

    registry = {"kind": "ecr", "registry_id": account}
    workloads = [
        workload(
            "api", "critical", f"{account}.dkr.ecr.eu-west-1.amazonaws.com/{synced.reference}"
        ),
        workload("db", "critical", unsynced.reference),
    ]
    extra = {"primary": site("eu-west-1"), "dr": site("eu-central-1")}
    plan = plan_over(registry, registry, workloads, extra)
    result = run_check(plan, "images.synced")
    assert (result.status, result.blocking) == (Status.FAIL, True), result.summary
    assert counts(result) == {**dict.fromkeys(PROBLEMS, 0), "missing_at_dr": 1}
    assert result.evidence["examples"]["missing_at_dr"][0]["image"] == unsynced.reference
    assert f"docker://{account}.dkr.ecr.eu-central-1.amazonaws.com/" in result.remediation
