"""data.replicated beside its peer, `rclone check`, on one moto server and the same buckets.

Data: two buckets of 100,000 objects each, keys spread over 100 prefixes
(``shard-000/`` ... ``shard-099/``), 1% missing at DR and 1% with other content of
the same size. They are written into moto's backend in this process (seconds,
where the S3 API would take minutes); both tools then read them through the S3
API on the moto server this process runs.

Ours: the whole ``data.replicated`` check on a plan with that dataset, run in a
child process so its wall time and peak RSS are its own. Peer: Debian's
``rclone check`` with ``--checkers`` equal to our shard workers per side. Both
must count the same missing and different objects. Each runs twice, in the order
ours, rclone, floor, then floor, rclone, ours, and the best wall time of each is compared:
on a shared machine, load drifts during a run of minutes.

Floor: the object store's own listing cost, a bare paginated listing of both buckets at
once, made the only way a bucket of many prefixes can be listed concurrently: the root
with ``Delimiter="/"``, then each prefix page by page, with as many workers per side as
ours, through boto3 with its timestamps left unparsed, counting keys and nothing else. In
a child process too, each round. Goals: our wall time at most 0.7 of rclone's and 1.2 of
the floor, our peak RSS at most 150 MB.

All three make about the same 200 list requests, one per prefix and bucket, so moto's
CPU sets the pace: each request scans the whole bucket and serializes its 1,000 keys,
about 0.3 s of one core. Ours asks ListObjectsV2 (no Owner per key) where rclone asks
V1, which is about 15% less of moto's time per page. The printed ratio of rclone's time
to the floor says how far below rclone any client can get on this store.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import yaml

from bench import PLACEHOLDER_DNS
from drills.targets.objects import ListingLimits

OBJECTS = 100_000
SHARDS = 100
CONCURRENCY = ListingLimits().shards_ahead  # our shard workers per side; rclone's --checkers
ROUNDS = 2
RPO_TARGET = dt.timedelta(hours=1)
SRC, DST = "bench-primary", "bench-dr"
KEY_ID, SECRET = "benchkey", "benchsecret"
RSS_GOAL_MB = 150
RCLONE_GOAL = 0.7  # our wall time over rclone check's
FLOOR_GOAL = 1.2  # over a bare paginated listing of both sides at once
ROOT = Path(__file__).resolve().parents[1]


def _key(i: int) -> str:
    return f"shard-{i % SHARDS:03d}/part-{i // SHARDS:05d}.bin"


def fill(endpoint: str) -> tuple[int, int]:
    """Both buckets, made through the API, filled in moto's backend; (missing, different)."""
    from moto.s3.models import s3_backends

    from drills_lab.seed_aws import ACCOUNT

    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
    )
    for bucket in (SRC, DST):
        s3.create_bucket(Bucket=bucket)
    backend = s3_backends[ACCOUNT]["aws"]
    # Older than the dataset's RPO target: what DR lacks is missing, not still in flight.
    written = (dt.datetime.now(dt.UTC) - 2 * RPO_TARGET).replace(tzinfo=None)

    def store(bucket: str, key: str, body: bytes) -> None:
        stored = backend.put_object(bucket, key, body)
        stored.last_modified = written
        # moto computes an ETag on first read and caches it; S3 stores it at write. Do it
        # now, or whichever tool lists first pays for hashing 200,000 objects.
        _ = stored.etag

    missing = different = 0
    for i in range(OBJECTS):
        body = b"%012d" % i
        store(SRC, _key(i), body)
        if i % 100 == 0:
            missing += 1
            continue
        if i % 100 == 1:
            different += 1
            body = b"X%011d" % i  # same size, other content: only the ETag tells
        store(DST, _key(i), body)
    return missing, different


def _plan(endpoint: str) -> dict[str, Any]:
    def site(role: str, addr: str) -> dict[str, Any]:
        return {
            "kubernetes": {"kubeconfig": f"{role}.kubeconfig"},
            "registry": {"kind": "oci", "url": f"http://{addr}:5000"},
            "objects": {
                "endpoint_url": endpoint,
                "region": "us-east-1",
                "credentials": {
                    "access_key_id": "env:BENCH_S3_KEY_ID",
                    "secret_access_key": "env:BENCH_S3_SECRET",
                },
            },
            "ingress": {"mode": "controller", "deployment": {"namespace": "i", "name": "c"}},
            "endpoint": f"http://{addr}:18080/healthz",
        }

    return {
        "name": "bench-data",
        "sites": {"primary": site("primary", "127.0.0.2"), "dr": site("dr", "127.0.0.3")},
        "workloads": [
            {
                "name": "w",
                "namespace": "n",
                "kind": "Deployment",
                "tier": "critical",
                "dr_replicas": 1,
            }
        ],
        "datasets": [
            {
                "name": "bench",
                "kind": "data",
                "primary_bucket": SRC,
                "dr_bucket": DST,
                "rpo_target": RPO_TARGET.total_seconds(),
            }
        ],
        "dns": PLACEHOLDER_DNS,
        "objectives": {"rto": "15m", "rpo": "1h"},
    }


def child(plan_path: str) -> int:
    """Run data.replicated on the plan; print its evidence as JSON. Runs in the child."""
    from drills.checks.areas import data  # noqa: F401 - registers the checks
    from drills.checks.base import REGISTRY
    from drills.checks.checkup import check_context
    from drills.checks.runner import run_one
    from drills.plan import load_plan
    from drills.targets.sites import Targets

    logging.basicConfig(level=logging.WARNING, format="%(name)s: %(message)s")
    logging.getLogger("drills.checks.data").setLevel(logging.INFO)  # the inventory's stages
    plan = load_plan(Path(plan_path))
    with Targets(plan) as targets:
        result = run_one(REGISTRY.get("data.replicated"), check_context(plan, targets, None))
    out = {"status": result.status.value, "summary": result.summary, **result.evidence}
    out["duration_s"] = result.duration_s
    print(json.dumps(out, default=str))
    return 0


@dataclass(frozen=True)
class Run:
    wall: float
    rss_mb: float
    code: int
    out: str


def _peak_rss_mb(pid: int, stop: threading.Event, peak: list[float]) -> None:
    """Follow a child's VmHWM: its own peak RSS since exec.

    ``ru_maxrss`` would count this process's pages too: the child is forked from a
    process holding moto's 200,000 objects, and Linux keeps that peak across exec.
    """
    status = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            for line in status.read_text().splitlines():
                if line.startswith("VmHWM:"):
                    peak[0] = max(peak[0], int(line.split()[1]) / 1024)
        except OSError:
            return
        stop.wait(0.05)


def _run(argv: list[str], env: dict[str, str], cwd: Path, logs: Path) -> Run:
    """Run a child, timing it and following its peak RSS."""
    out, err = logs.with_suffix(".out"), logs.with_suffix(".err")
    peak = [0.0]
    stop = threading.Event()
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=stdout, stderr=stderr)
        follower = threading.Thread(target=_peak_rss_mb, args=(proc.pid, stop, peak))
        follower.start()
        code = proc.wait()
        wall = time.perf_counter() - started
    stop.set()
    follower.join()
    if code not in (0, 1):
        sys.stderr.write(err.read_text()[-4000:])
    return Run(wall, peak[0], code, out.read_text())


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "RCLONE_"))}
    env["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
    return env


COUNTED = ("missing", "mismatched", "extra")


def run_ours(endpoint: str, tmp: Path) -> tuple[Run, dict[str, int]]:
    plan = tmp / "plan.yaml"
    plan.write_text(yaml.safe_dump(_plan(endpoint)))
    env = _clean_env() | {
        "BENCH_S3_KEY_ID": KEY_ID,
        "BENCH_S3_SECRET": SECRET,
        "BENCH_TSIG": "unused",
    }
    argv = [sys.executable, "-m", "bench.data_replicated", "--child", str(plan)]
    run = _run(argv, env, ROOT, tmp / "ours")
    if run.code != 0:
        raise SystemExit(f"our check failed to run (exit {run.code})")
    evidence = json.loads(run.out.strip().splitlines()[-1])
    if evidence["status"] == "error":
        raise SystemExit(f"our check could not compare: {evidence['summary']}")
    return run, {name: int(evidence[name]) for name in COUNTED}


def run_rclone(endpoint: str, tmp: Path) -> tuple[Run, dict[str, int]]:
    rclone = shutil.which("rclone")
    if rclone is None:
        raise SystemExit("rclone not installed: apt-get install rclone")
    # rclone refuses to start with AWS_CA_BUNDLE set, so the environment carries no AWS_*.
    env = _clean_env() | {
        "RCLONE_CONFIG_BENCH_TYPE": "s3",
        "RCLONE_CONFIG_BENCH_PROVIDER": "Other",
        "RCLONE_CONFIG_BENCH_ENDPOINT": endpoint,
        "RCLONE_CONFIG_BENCH_REGION": "us-east-1",
        "RCLONE_CONFIG_BENCH_ACCESS_KEY_ID": KEY_ID,
        "RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY": SECRET,
    }
    lists = {name: tmp / f"rclone-{name}.txt" for name in COUNTED}
    argv = [
        rclone, "check", f"bench:{SRC}", f"bench:{DST}",
        "--checkers", str(CONCURRENCY),
        "--missing-on-dst", str(lists["missing"]),
        "--differ", str(lists["mismatched"]),
        "--missing-on-src", str(lists["extra"]),
        "--log-level", "NOTICE",
    ]  # fmt: skip
    run = _run(argv, env, tmp, tmp / "rclone")
    if run.code not in (0, 1):  # 1: differences found, as expected
        raise SystemExit(f"rclone check failed (exit {run.code})")
    return run, {name: len(lists[name].read_text().splitlines()) for name in COUNTED}


def floor_child(endpoint: str) -> int:
    """List both buckets at once, prefix by prefix, counting keys: the requests any
    concurrent listing must make, and no work beyond them. Runs in a child."""
    s3 = boto3.client(
        "s3", endpoint_url=endpoint, region_name="us-east-1",
        aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET,
    )  # fmt: skip
    s3._endpoint._response_parser_factory.set_parser_defaults(timestamp_parser=str)
    pages = s3.get_paginator("list_objects_v2")

    def count(bucket: str, prefix: str) -> int:
        return sum(p.get("KeyCount", 0) for p in pages.paginate(Bucket=bucket, Prefix=prefix))

    def side(bucket: str) -> int:
        top = list(pages.paginate(Bucket=bucket, Delimiter="/"))
        found = sum(len(p.get("Contents", [])) for p in top)
        prefixes = [c["Prefix"] for p in top for c in p.get("CommonPrefixes", [])]
        with ThreadPoolExecutor(CONCURRENCY) as workers:
            return found + sum(workers.map(lambda prefix: count(bucket, prefix), prefixes))

    with ThreadPoolExecutor(2) as sides:
        counts = dict(zip((SRC, DST), sides.map(side, (SRC, DST)), strict=True))
    print(json.dumps(counts))
    return 0


def run_floor(endpoint: str, tmp: Path) -> tuple[Run, dict[str, int]]:
    argv = [sys.executable, "-m", "bench.data_replicated", "--floor", endpoint]
    run = _run(argv, _clean_env(), ROOT, tmp / "floor")
    if run.code != 0:
        raise SystemExit(f"the bare listing failed (exit {run.code})")
    return run, json.loads(run.out.strip().splitlines()[-1])


Runner = Callable[[str, Path], tuple[Run, dict[str, int]]]


def compare(
    endpoint: str, tmp: Path
) -> tuple[list[Run], list[Run], list[Run], list[dict[str, int]]]:
    """Each tool ROUNDS times, in the order A B B A: drifting load on a shared machine
    then weighs on both alike."""
    tools: dict[str, Runner] = {"ours": run_ours, "rclone": run_rclone, "floor": run_floor}
    runs: dict[str, list[Run]] = {name: [] for name in tools}
    counts: list[dict[str, int]] = []
    order = [("ours", "rclone", "floor"), ("floor", "rclone", "ours")]
    for round_ in range(ROUNDS):
        for name in order[round_ % 2]:
            run, found = tools[name](endpoint, tmp)
            runs[name].append(run)
            if name != "floor":
                counts.append(found)
            print(f"  {name:6} {run.wall:6.1f} s  {run.rss_mb:5.0f} MB  {found}", flush=True)
    return runs["ours"], runs["rclone"], runs["floor"], counts


def main() -> int:
    from drills_lab.moto_server import MotoServer

    with tempfile.TemporaryDirectory() as tmpdir, MotoServer() as moto:
        tmp = Path(tmpdir)
        started = time.perf_counter()
        missing, different = fill(moto.url)
        print(
            f"filled 2 x {OBJECTS:,} objects over {SHARDS} prefixes in "
            f"{time.perf_counter() - started:.1f} s ({missing} missing at DR, {different} "
            f"different); {CONCURRENCY} shard workers per side, rclone --checkers {CONCURRENCY}",
            flush=True,
        )
        ours, peer, floor, counts = compare(moto.url, tmp)
    expected = {"missing": missing, "mismatched": different, "extra": 0}
    agree = all(found == expected for found in counts)
    best_ours, best_peer = min(r.wall for r in ours), min(r.wall for r in peer)
    best_floor = min(r.wall for r in floor)
    rss = max(r.rss_mb for r in ours)
    ratio, over_floor = best_ours / best_peer, best_ours / best_floor
    print(
        f"data.replicated: best of {ROUNDS}: ours {best_ours:.1f} s, rclone check "
        f"{best_peer:.1f} s, bare listing of both sides at once {best_floor:.1f} s: "
        f"ratio to rclone {ratio:.2f} (goal <= {RCLONE_GOAL}), to the bare listing "
        f"{over_floor:.2f} (goal <= {FLOOR_GOAL}); rclone to the bare listing "
        f"{best_peer / best_floor:.2f}; our peak RSS {rss:.0f} MB "
        f"(goal <= {RSS_GOAL_MB}); counts {'agree' if agree else 'DIFFER'} ({expected})"
    )
    met = agree and ratio <= RCLONE_GOAL and over_floor <= FLOOR_GOAL and rss <= RSS_GOAL_MB
    if not met:
        print("data.replicated: GOAL MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        sys.exit(child(sys.argv[2]))
    if len(sys.argv) == 3 and sys.argv[1] == "--floor":
        sys.exit(floor_child(sys.argv[2]))
    sys.exit(main())
