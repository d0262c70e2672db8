"""images.synced beside its peer: 200 images in two distribution registries.

Ours: ``Registry.digests`` at both sites at once, 16 HEADs in flight on pooled
connections at each, as the check runs it; then the whole ``images.synced`` check
on a plan naming the 200 images. Peer: a loop of ``skopeo inspect --raw`` per
image and site, comparing the sha256 of each raw manifest. Both must find the same
mismatches. Goal: ≥10× faster.

Ours is the median of five runs (a one-second run is at the mercy of a shared
machine); the peer runs once, 400 processes being an average in themselves.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

from bench import PLACEHOLDER_DNS
from drills.checks.areas.images import images_synced  # noqa: F401 - registers the check
from drills.checks.base import REGISTRY, Status
from drills.checks.checkup import check_context
from drills.checks.runner import run_one
from drills.plan import DrillPlan, plan_from_text
from drills.targets.registry import OciDistribution, Ref
from drills.targets.sites import Targets
from drills_lab.images import Image, build_image, push_oci
from drills_lab.registry import RegistryServer

IMAGES = 200
MISMATCHED = frozenset({7, 42, 99, 150, 188})  # pushed in another generation at DR
MULTI_ARCH_EVERY = 10  # every tenth image is a multi-arch index
GOAL = 10.0
T = TypeVar("T")


def _images() -> list[tuple[Image, Image]]:
    """(primary, dr) builds of each image; equal except for the mismatched ones."""
    pairs = []
    for i in range(IMAGES):
        reference = f"bench/svc-{i:03d}:1.{i}"
        multi = i % MULTI_ARCH_EVERY == 0
        dr_generation = "2" if i in MISMATCHED else "1"
        pairs.append(
            (
                build_image(reference, multi_arch=multi),
                build_image(reference, multi_arch=multi, generation=dr_generation),
            )
        )
    return pairs


def _push(url: str, images: list[Image]) -> None:
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    with httpx.Client(timeout=30, limits=limits) as http, ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda image: push_oci(http, url, image), images))


def _fill(workdir: Path, pairs: list[tuple[Image, Image]]) -> tuple[RegistryServer, RegistryServer]:
    """Push everything to the primary, copy its storage for DR, then push DR's differences.

    Copying the storage gives DR byte-identical content in a fraction of the time
    200 more pushes would take.
    """
    primary = RegistryServer(workdir / "primary", name="primary")
    dr = RegistryServer(workdir / "dr", name="dr")
    primary.start()
    try:
        _push(primary.url, [p for p, _ in pairs])
        shutil.copytree(primary.storage_path, dr.storage_path)
        dr.start()
        _push(dr.url, [d for p, d in pairs if d.top.digest != p.top.digest])
    except BaseException:
        primary.stop()
        dr.stop()
        raise
    return primary, dr


def _timed(fn: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - started


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # client-side CPU seconds: this process for ours, the skopeo children for the peer


def _measured(fn: Callable[[], T], *, repeat: int = 1, children: bool = False) -> tuple[T, Run]:
    """The median of ``repeat`` runs: a one-second run on a shared machine is noisy."""
    runs: list[tuple[T, Run]] = []
    for _ in range(repeat):
        before = os.times()
        result, wall = _timed(fn)
        after = os.times()
        if children:
            cpu = after.children_user + after.children_system
            cpu -= before.children_user + before.children_system
        else:
            cpu = after.user + after.system - before.user - before.system
        runs.append((result, Run(wall, cpu)))
    runs.sort(key=lambda r: r[1].wall)
    return runs[len(runs) // 2]


def _ours(primary: RegistryServer, dr: RegistryServer, refs: list[Ref]) -> set[str]:
    sites = [OciDistribution(primary.url), OciDistribution(dr.url)]
    try:
        with ThreadPoolExecutor(2) as pool:
            at_primary, at_dr = pool.map(lambda r: r.digests(refs, concurrency=16), sites)
    finally:
        for site in sites:
            site.close()
    return {f"{repo}:{tag}" for repo, tag in refs if at_primary[(repo, tag)] != at_dr[(repo, tag)]}


def _check(plan: DrillPlan) -> set[str]:
    with Targets(plan) as targets:
        result = run_one(REGISTRY.get("images.synced"), check_context(plan, targets, None))
    if result.status is Status.ERROR:
        raise RuntimeError(result.summary)
    mismatches = result.evidence["digest_mismatch"]
    if mismatches != len(MISMATCHED):
        raise RuntimeError(f"check found {mismatches} mismatches: {result.summary}")
    return {e["image"] for e in result.evidence["examples"]["digest_mismatch"]}


def _skopeo_digest(skopeo: str, host: str, reference: str, env: dict[str, str]) -> str:
    raw = subprocess.run(
        [skopeo, "inspect", "--raw", "--tls-verify=false", f"docker://{host}/{reference}"],
        check=True,
        capture_output=True,
        env=env,
        timeout=30,
    ).stdout
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def _peer(skopeo: str, hosts: tuple[str, str], refs: list[Ref], env: dict[str, str]) -> set[str]:
    differ = set()
    for repo, tag in refs:
        reference = f"{repo}:{tag}"
        at_primary = _skopeo_digest(skopeo, hosts[0], reference, env)
        at_dr = _skopeo_digest(skopeo, hosts[1], reference, env)
        if at_primary != at_dr:
            differ.add(reference)
    return differ


def _plan(primary: RegistryServer, dr: RegistryServer, refs: list[Ref]) -> DrillPlan:
    def site(role: str, url: str, addr: str) -> dict[str, Any]:
        return {
            "kubernetes": {"kubeconfig": f"{role}.kubeconfig"},  # never read: images are listed
            "registry": {"kind": "oci", "url": url},
            "objects": {"endpoint_url": "http://127.0.0.1:9", "region": "us-east-1"},
            "ingress": {"mode": "controller", "deployment": {"namespace": "i", "name": "c"}},
            "endpoint": f"http://{addr}:18080/healthz",
        }

    workloads = [
        {
            "name": f"svc-{i:03d}",
            "namespace": "bench",
            "kind": "Deployment",
            "tier": "critical",
            "dr_replicas": 1,
            "images": [f"{primary.url.removeprefix('http://')}/{repo}:{tag}"],
        }
        for i, (repo, tag) in enumerate(refs)
    ]
    doc = {
        "name": "bench-images",
        "sites": {
            "primary": site("primary", primary.url, "127.0.0.2"),
            "dr": site("dr", dr.url, "127.0.0.3"),
        },
        "workloads": workloads,
        "dns": PLACEHOLDER_DNS,
        "objectives": {"rto": "15m", "rpo": "5m"},
    }
    return plan_from_text(yaml.safe_dump(doc))


def main() -> int:
    skopeo = shutil.which("skopeo")
    if skopeo is None:
        print("skopeo not installed (apt-get install skopeo); the peer cannot run")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-images-") as tmp:
        workdir = Path(tmp)
        pairs = _images()
        (primary, dr), filled = _timed(lambda: _fill(workdir, pairs))
        print(f"setup: 2 registries, {IMAGES} images each, in {filled:.2f}s")
        try:
            refs = [(p.repository, p.tag) for p, _ in pairs]
            expected = {pairs[i][0].reference for i in MISMATCHED}
            plan = _plan(primary, dr, refs)
            # The peer gets a clean HOME: no stray auth file or registries.conf to read.
            env = {**os.environ, "HOME": str(workdir)}
            hosts = (primary.url.removeprefix("http://"), dr.url.removeprefix("http://"))

            found_ours, ours = _measured(lambda: _ours(primary, dr, refs), repeat=5)
            found_check, check = _measured(lambda: _check(plan), repeat=5)
            found_peer, peer = _measured(lambda: _peer(skopeo, hosts, refs, env), children=True)
        finally:
            primary.stop()
            dr.stop()
    agree = found_ours == found_peer == expected and found_check == expected
    lookups = 2 * IMAGES
    print(f"images: {IMAGES} at each site, {len(MISMATCHED)} with a different digest at DR")
    print(f"  {'':<40}{'wall':>8}  {'per lookup':>11}  {'client CPU':>10}")
    for label, run in (
        ("ours  Registry.digests, both sites", ours),
        ("ours  images.synced check, end to end", check),
        ("peer  skopeo inspect --raw loop", peer),
    ):
        per_lookup = run.wall / lookups * 1e3
        print(f"  {label:<40}{run.wall:7.3f}s  {per_lookup:8.2f} ms  {run.cpu:9.2f}s")
    ratio, check_ratio = peer.wall / ours.wall, peer.wall / check.wall
    print(f"  ratio {ratio:.1f}× (adapter), {check_ratio:.1f}× (whole check); goal ≥{GOAL:.0f}×")
    print(f"  same mismatches found by both: {'yes' if agree else 'NO'} ({sorted(found_peer)})")
    load = os.getloadavg()[0]
    print(
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, load {load:.1f}"
    )
    return 0 if agree and min(ratio, check_ratio) >= GOAL else 1


if __name__ == "__main__":
    raise SystemExit(main())
