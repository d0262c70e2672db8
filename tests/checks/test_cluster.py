"""The "Cluster" checks against the lab, the drifted lab, and server pairs seeded per failure."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

import drills.checks.areas.cluster  # noqa: F401 - registers the checks
from drills.checks.areas.cluster_resources import pack_gpus
from drills.checks.areas.template_diff import strip_registry
from drills.checks.base import Status
from drills.plan import load_plan
from drills_lab.kubeapi import write_kubeconfig
from drills_lab.runtime import LabInfo
from drills_lab.topology import NodePool
from tests.support.kube_sites import (
    CPU_POOL,
    GPU_POOL,
    WORKLOADS,
    SiteSpec,
    plan_for,
    point_at,
    run,
    site_pair,
)

CLUSTER_CHECKS = (
    "cluster.reachable",
    "cluster.version_skew",
    "cluster.nodes_ready",
    "cluster.gpu_capacity",
    "cluster.gpu_driver_parity",
    "cluster.standby_parity",
)


@pytest.mark.parametrize("fixture", ["lab", "drift_lab"])
def test_every_cluster_check_passes_on_the_lab_and_the_drifted_lab(
    fixture: str, request: pytest.FixtureRequest
) -> None:
    # The drift lab's never-ready fault is a metadata annotation, not template drift.
    info: LabInfo = request.getfixturevalue(fixture)
    plan = load_plan(Path(info.state_dir) / "plan.yaml")
    results = {check: run(plan, check) for check in CLUSTER_CHECKS}
    assert {c: r.status for c, r in results.items()} == dict.fromkeys(CLUSTER_CHECKS, Status.PASS)
    assert results["cluster.gpu_capacity"].evidence["critical"]["gpu"] == 3
    assert results["cluster.standby_parity"].evidence["compared"] == 12


def test_healthy_pair_passes_everything(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()):
        plan = plan_for(tmp_path)
        results = {check: run(plan, check) for check in CLUSTER_CHECKS}
    assert all(r.status is Status.PASS for r in results.values()), {
        c: r.summary for c, r in results.items()
    }
    nodes = results["cluster.nodes_ready"].evidence
    assert (nodes["ready"], nodes["total"], nodes["gpu_nodes"]["used_by_critical"]) == (3, 3, 1)


# -- reachability and version --------------------------------------------------------


def test_unreachable_dr_errors_and_blocks_fast(tmp_path: Path, closed_port: str) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()):
        point_at(tmp_path, "dr", closed_port)
        plan = plan_for(tmp_path)
        started = time.monotonic()
        result = run(plan, "cluster.reachable")
        skew = run(plan, "cluster.version_skew")
    assert time.monotonic() - started < 2
    # Nothing answered: an unknown state, which blocks as a failure would.
    assert (result.status, result.blocking) == (Status.ERROR, True)
    assert "refused" in result.summary
    assert result.evidence["sites"]["primary"]["reachable"] is True
    # A check that needs the DR API and cannot reach it is an error, not a verdict.
    assert skew.status is Status.ERROR and closed_port in skew.summary


def test_a_dr_api_refusing_our_token_fails_and_blocks(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:
        write_kubeconfig(tmp_path / "dr.kubeconfig", server_url=pair.dr.url, context="dr",
                         token="not-the-token", ca_pem=pair.dr.ca_pem)  # fmt: skip
        result = run(plan_for(tmp_path), "cluster.reachable")
    # The DR API answered, and refused: that is a verdict.
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert "HTTP 401" in result.summary


def test_unreachable_primary_is_only_informational(tmp_path: Path, closed_port: str) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()):
        point_at(tmp_path, "primary", closed_port)
        plan = plan_for(tmp_path, plan_gpu=False)
        reachable = run(plan, "cluster.reachable")
        capacity = run(plan, "cluster.gpu_capacity")
    assert reachable.status is Status.PASS and "primary API unreachable" in reachable.summary
    # In an incident the requests come from the DR standbys' templates instead.
    assert capacity.status is Status.PASS
    assert "primary unreadable" in capacity.evidence["requests_from"]
    assert capacity.evidence["critical"]["gpu"] == 2


@pytest.mark.parametrize(("dr_minor", "status"), [(28, Status.FAIL), (29, Status.PASS)])
def test_version_skew(tmp_path: Path, dr_minor: int, status: Status) -> None:
    with site_pair(tmp_path, SiteSpec(version=(1, 30)), SiteSpec(version=(1, dr_minor))):
        result = run(plan_for(tmp_path), "cluster.version_skew")
    assert result.status is status
    assert result.blocking is (status is Status.FAIL)
    assert result.evidence["primary"] == "v1.30.4"
    assert result.evidence["dr"] == f"v1.{dr_minor}.4"


# -- nodes and capacity --------------------------------------------------------------


def test_not_ready_and_cordoned_nodes_leave_too_few(tmp_path: Path) -> None:
    # One 8-GPU node can hold both 1-GPU critical replicas; take both GPU nodes away.
    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:

        def not_ready(obj: dict) -> dict:
            obj["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            return obj

        def cordon(obj: dict) -> dict:
            obj["spec"]["unschedulable"] = True
            return obj

        pair.dr.store.patch("nodes", None, "gpu-0", not_ready, subresource="status")
        pair.dr.store.patch("nodes", None, "gpu-1", cordon)
        plan = plan_for(tmp_path)
        ready = run(plan, "cluster.nodes_ready")
        capacity = run(plan, "cluster.gpu_capacity")
    assert (ready.status, ready.blocking) == (Status.FAIL, True)
    assert ready.evidence["not_ready"] == ["gpu-0"] and ready.evidence["cordoned"] == ["gpu-1"]
    assert ready.evidence["unplaced_gpu_replicas"] == 2
    assert "2/3 nodes Ready" in ready.summary
    assert (capacity.status, capacity.blocking) == (Status.FAIL, True)
    assert capacity.evidence["allocatable"]["gpu"] == 0


def test_too_few_gpus_for_the_critical_tier(tmp_path: Path) -> None:
    small = SiteSpec(pools=(NodePool("gpu", 1, 1, "96", "1024Gi"), CPU_POOL))
    with site_pair(tmp_path, SiteSpec(), small):
        plan = plan_for(tmp_path)
        capacity = run(plan, "cluster.gpu_capacity")
        ready = run(plan, "cluster.nodes_ready")
    assert (capacity.status, capacity.blocking) == (Status.FAIL, True)
    assert capacity.evidence["short_for_critical"] == ["nvidia.com/gpu"]
    assert capacity.evidence["critical"] == {"gpu": 2, "cpu": "20", "memory": "140Gi"}
    assert "2 GPUs needed by the critical tier, 1 allocatable" in capacity.summary
    assert (ready.status, ready.evidence["unplaced_gpu_replicas"]) == (Status.FAIL, 1)


def test_gpus_short_only_for_the_normal_tier_warn(tmp_path: Path) -> None:
    # 4 GPUs: the critical tier's 2 fit, not the trainer's 4 on top.
    dr = SiteSpec(pools=(NodePool("gpu", 1, 4, "96", "1024Gi"), CPU_POOL))
    with site_pair(tmp_path, SiteSpec(), dr):
        result = run(plan_for(tmp_path), "cluster.gpu_capacity")
    assert (result.status, result.blocking) == (Status.WARN, False)
    assert result.evidence["short_for_normal"] == ["nvidia.com/gpu"]
    assert result.evidence["critical_and_normal"]["gpu"] == 6


def test_requests_come_from_the_primary_templates_when_the_plan_gives_no_gpu(
    tmp_path: Path,
) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()):
        result = run(plan_for(tmp_path, plan_gpu=False), "cluster.gpu_capacity")
    assert result.status is Status.PASS
    assert result.evidence["critical"] == {"gpu": 2, "cpu": "20", "memory": "140Gi"}
    assert "requests_from" not in result.evidence


def test_no_usable_cpu_node_fails(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec(pools=(GPU_POOL,))):
        result = run(plan_for(tmp_path), "cluster.nodes_ready")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert "no Ready, schedulable non-GPU node" in result.summary


def test_gpu_packing_respects_node_boundaries() -> None:
    assert pack_gpus([4, 3, 1], [8]) == (1, 0)
    assert pack_gpus([4, 4, 1], [8]) == (1, 1)
    assert pack_gpus([6, 6], [8, 4, 4]) == (1, 1)  # 12 GPUs free in all, no node with 6 twice
    assert pack_gpus([0, 0], []) == (0, 0)


# -- GPU driver parity ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "cuda", "status"),
    [
        ("535.161.08", "12.4", Status.FAIL),  # another major
        ("550.90.07", "12.4", Status.WARN),  # same major, another minor
        ("550.54.15", "12.2", Status.WARN),  # CUDA minor
        ("550.54.15", "11.8", Status.FAIL),  # CUDA major
    ],
)
def test_driver_parity(tmp_path: Path, driver: str, cuda: str, status: Status) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec(driver=driver, cuda=cuda)):
        result = run(plan_for(tmp_path), "cluster.gpu_driver_parity")
    assert result.status is status
    assert result.blocking is (status is Status.FAIL)
    assert result.evidence["dr"] == {"driver": {driver: 2}, "cuda": {cuda: 2}}
    assert result.evidence["primary"] == {"driver": {"550.54.15": 2}, "cuda": {"12.4": 2}}


def test_unlabelled_dr_gpu_nodes_fail_parity(tmp_path: Path) -> None:
    def unlabel(obj: dict) -> dict:
        labels = obj["metadata"]["labels"]
        obj["metadata"]["labels"] = {k: v for k, v in labels.items() if "cuda" not in k}
        return obj

    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:
        for name in ("gpu-0", "gpu-1"):
            pair.dr.store.patch("nodes", None, name, unlabel)
        result = run(plan_for(tmp_path), "cluster.gpu_driver_parity")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert result.summary == "2 DR GPU node(s) carry no driver version label"


# -- standby parity ------------------------------------------------------------------


def _replace(name: str, **changes: object) -> tuple:
    return tuple(dataclasses.replace(w, **changes) if w.name == name else w for w in WORKLOADS)  # type: ignore[arg-type]


@pytest.mark.parametrize(("missing", "status"), [("llm", Status.FAIL), ("trainer", Status.WARN)])
def test_a_missing_standby_follows_the_tier_rule(
    tmp_path: Path, missing: str, status: Status
) -> None:
    dr = SiteSpec(workloads=tuple(w for w in WORKLOADS if w.name != missing))
    with site_pair(tmp_path, SiteSpec(), dr):
        result = run(plan_for(tmp_path), "cluster.standby_parity")
    assert result.status is status and result.blocking is (status is Status.FAIL)
    assert [m["workload"] for m in result.evidence["missing_at_dr"]] == [
        f"{'serving' if missing == 'llm' else 'training'}/{missing}"
    ]


def test_drifted_image_tag_and_resources_are_reported_as_field_paths(tmp_path: Path) -> None:
    # The registry host differs between sites by design; the tag and memory do not.
    dr = SiteSpec(
        registry="dr-registry.internal",
        workloads=_replace("llm", image="models/llm:0.7", memory="32Gi"),
    )
    with site_pair(tmp_path, SiteSpec(), dr):
        result = run(plan_for(tmp_path), "cluster.standby_parity")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    [drift] = result.evidence["drifted"]
    assert drift["workload"] == "serving/llm"
    paths = {d["path"]: d for d in drift["diffs"]}
    image = paths["spec.template.spec.containers[llm].image"]
    assert (image["primary"], image["dr"]) == ("models/llm:0.6", "models/llm:0.7")
    requests = paths["spec.template.spec.containers[llm].resources.requests"]
    assert requests["dr"]["memory"] == str(32 * 1024**3)


def test_drifted_env_and_args_name_the_field_without_showing_args(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:

        def drift(obj: dict) -> dict:
            container = obj["spec"]["template"]["spec"]["containers"][0]
            container["env"] = [{"name": "EXTRA_FLAG", "value": "1"}]
            container["args"] = ["--token=do-not-show-me"]
            return obj

        pair.dr.store.patch("deployments", "training", "trainer", drift)
        result = run(plan_for(tmp_path), "cluster.standby_parity")
    assert (result.status, result.blocking) == (Status.WARN, False)  # trainer is normal tier
    diffs = {d["path"]: d for d in result.evidence["drifted"][0]["diffs"]}
    env = diffs["spec.template.spec.containers[trainer].env"]
    assert (env["primary"], env["dr"]) == ([], ["EXTRA_FLAG"])
    assert "spec.template.spec.containers[trainer].args" in diffs
    assert "do-not-show-me" not in str(result.to_json())


def test_strip_registry_normalises_hosts_and_short_names() -> None:
    assert strip_registry("127.0.0.3:5000/models/llm:0.6") == "models/llm:0.6"
    assert strip_registry("docker.io/library/nginx") == "library/nginx:latest"
    assert strip_registry("nginx:1.27") == "library/nginx:1.27"
    assert strip_registry("localhost/a/b@sha256:ab") == "a/b@sha256:ab"
