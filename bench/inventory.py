"""data.replicated from S3 Inventory reports of 10,000,000 objects per side.

Data: two reports written locally by DuckDB with the lab's writer (keys over 100
prefixes, 0.1% of the primary's objects missing at DR, 0.1% with another ETag at the
same size), published into a moto server this process runs, as S3 lays them out.

Ours: the whole ``data.replicated`` check on a plan whose dataset names the two
reports: it finds the newest manifests, downloads the files through boto3, joins them
in DuckDB. It runs in a child process, so its wall time and peak RSS are its own: the
peak is the child's VmHWM, followed from /proc (``ru_maxrss`` would carry over the peak
of this process, which holds moto's copy of the reports, across the child's exec).
Goals: at most 60 s and 500 MB.

Peer: ``rclone check`` lists buckets, it cannot read a report. It runs on the
100,000 listed objects of bench/data_replicated, and its time is extrapolated per
object to 10,000,000, so the ratio to ours is visible.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import boto3
import duckdb
import yaml

from bench import data_replicated
from drills_lab.inventory import build_report, copy_rows, publish

OBJECTS = int(os.environ.get("BENCH_INVENTORY_OBJECTS", 10_000_000))
FILES = 10  # per side, as S3 splits a large report
FORMAT = os.environ.get("BENCH_INVENTORY_FORMAT", "Parquet")
SRC, DST, DEST = "inv-primary", "inv-dr", "inv-reports"
CONFIG = "bench-daily"
WALL_GOAL_S, RSS_GOAL_MB = 60.0, 500.0
ROOT = Path(__file__).resolve().parents[1]


def _rows(bucket: str, dr: bool, part: int) -> str:
    """One file's rows: keys shard-NNN/part-NNNNNNNN.bin; DR lacks i%1000==0, differs at ==1."""
    etag = "CASE WHEN i % 1000 = 1 THEN md5('x' || i) ELSE md5(i::VARCHAR) END" if dr else (
        "md5(i::VARCHAR)"
    )  # fmt: skip
    where = f"i % {FILES} = {part}" + (" AND i % 1000 <> 0" if dr else "")
    return (
        f"SELECT '{bucket}' AS bucket, printf('shard-%03d/part-%08d.bin', i % 100, i // 100) "
        f"AS key, 1000 + i % 5000 AS size, TIMESTAMPTZ '2026-01-01 00:00:00+00' "
        f"+ to_seconds(i % 86400) AS last_modified, {etag} AS etag "
        f"FROM range({OBJECTS}) t(i) WHERE {where}"
    )


def generate(s3: Any, tmp: Path) -> float:
    """Write both reports locally and publish them; the seconds it took."""
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute("SET memory_limit = '1GB'")
    created = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    s3.create_bucket(Bucket=DEST)
    for bucket, dr in ((SRC, False), (DST, True)):
        s3.create_bucket(Bucket=bucket)
        files = []
        for part in range(FILES):
            out = tmp / f"{bucket}-{part}{'.csv.gz' if FORMAT == 'CSV' else '.parquet'}"
            copy_rows(con, _rows(bucket, dr, part), out, FORMAT)
            files.append(out)
        report = build_report(
            files, source_bucket=bucket, dest_bucket=DEST, root=f"inventory/{bucket}/{CONFIG}/",
            file_format=FORMAT, created=created,
        )  # fmt: skip
        publish(s3, DEST, report)
        for path in files:
            path.unlink()
    con.close()
    return time.perf_counter() - started


def _plan(endpoint: str) -> dict[str, Any]:
    doc = data_replicated._plan(endpoint)
    dest = {"bucket": DEST, "prefix": "inventory/"}
    doc["datasets"] = [
        {
            "name": "bench",
            "kind": "data",
            "primary_bucket": SRC,
            "dr_bucket": DST,
            "rpo_target": "1h",
            "inventory": {"config_id": CONFIG, "primary": dest, "dr": dest},
        }
    ]
    return doc


def run_ours(endpoint: str, tmp: Path) -> tuple[float, float, dict[str, Any]]:
    """(wall seconds, peak RSS MB, evidence) of the check in a fresh child process."""
    plan = tmp / "plan.yaml"
    plan.write_text(yaml.safe_dump(_plan(endpoint)))
    env = data_replicated._clean_env() | {
        "BENCH_S3_KEY_ID": data_replicated.KEY_ID,
        "BENCH_S3_SECRET": data_replicated.SECRET,
        "TMPDIR": str(tmp),
    }
    argv = [sys.executable, "-m", "bench.data_replicated", "--child", str(plan)]
    run = data_replicated._run(argv, env, ROOT, tmp / "ours")
    if run.code != 0:
        raise SystemExit(f"our check failed to run (exit {run.code})")
    stages = (tmp / "ours.err").read_text().strip()
    if stages:
        print(f"  {stages}", flush=True)
    evidence = json.loads(run.out.strip().splitlines()[-1])
    return run.wall, run.rss_mb, evidence


def main() -> int:
    from drills_lab.moto_server import MotoServer

    with tempfile.TemporaryDirectory() as tmpdir, MotoServer() as moto:
        tmp = Path(tmpdir)
        s3 = boto3.client(
            "s3", endpoint_url=moto.url, region_name="us-east-1",
            aws_access_key_id=data_replicated.KEY_ID,
            aws_secret_access_key=data_replicated.SECRET,
        )  # fmt: skip
        took = generate(s3, tmp)
        print(f"wrote 2 x {OBJECTS:,} rows of {FORMAT} reports in {took:.1f} s", flush=True)
        wall, rss, evidence = run_ours(moto.url, tmp)
        print(f"  ours   {wall:6.1f} s  {rss:5.0f} MB  {evidence['summary']}", flush=True)
        data_replicated.fill(moto.url)
        peer, _ = data_replicated.run_rclone(moto.url, tmp)
    per_object = peer.wall / data_replicated.OBJECTS
    projected = per_object * OBJECTS
    expected = (OBJECTS // 1000, OBJECTS // 1000)
    found = (int(evidence["missing"]), int(evidence["mismatched"]))
    print(
        f"inventory: {OBJECTS:,} objects per side: ours {wall:.1f} s (goal <= {WALL_GOAL_S:.0f}), "
        f"peak RSS {rss:.0f} MB (goal <= {RSS_GOAL_MB:.0f}); rclone check "
        f"{peer.wall:.1f} s on {data_replicated.OBJECTS:,} listed objects = "
        f"{per_object * 1e6:.0f} us/object, {projected:.0f} s projected to {OBJECTS:,}: "
        f"ratio {wall / projected:.3f}; missing/mismatched {found} "
        f"({'as seeded' if found == expected else f'EXPECTED {expected}'})"
    )
    met = wall <= WALL_GOAL_S and rss <= RSS_GOAL_MB and found == expected
    if not met:
        print("inventory: GOAL MISSED")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
