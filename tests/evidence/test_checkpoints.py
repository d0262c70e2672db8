"""Checkpoints kept outside the store: signed with the evidence key, written to a directory
or to an S3 bucket (Object Lock where it has it), read back and held against the chain;
one edited, or signed by another key, is named; the plan says where they go."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from drills.evidence.checkpoints import (
    configured_sign,
    object_name,
    read_checkpoints,
    write_checkpoints,
)
from drills.evidence.keys import SIGNING_KEY_ENV, keygen
from drills.plan.types import check_checkpoint_place
from drills.store.chain_verify import verify_store
from drills.store.history import HistoryStore
from drills.store.prune import prune_readiness
from drills_lab.moto_server import MotoServer
from tests.evidence.packs import drills
from tests.store.test_chain import db, record_drill
from tests.support.ui import EXAMPLE_PLAN


@pytest.fixture()
def signed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[HistoryStore, Path, str]:
    """A store whose checkpoints the evidence key signs, with two drills; the public key."""
    private, public, keyid = keygen(tmp_path / "keys")
    monkeypatch.setenv(SIGNING_KEY_ENV, f"file:{private}")
    store = HistoryStore(f"sqlite:///{tmp_path / 'history.db'}", sign=configured_sign())
    record_drill(store, "run-a")
    record_drill(store, "run-b")
    return store, public, keyid


def test_each_runs_end_is_a_signed_checkpoint_and_the_cli_keeps_them(
    signed: tuple[HistoryStore, Path, str], tmp_path: Path
) -> None:
    store, public, keyid = signed
    outside = tmp_path / "outside"
    code, out = drills("evidence", "checkpoint", "--out", str(outside), "--db", store.url)
    assert code == 0, out
    assert f"signed by key {keyid}" in out and "1 checkpoint(s) written" in out
    found = read_checkpoints(str(outside))
    [(_, cp)] = found.checkpoints
    assert cp.keyid == keyid and cp.plan == "lab"
    with db(store) as conn:
        rows = conn.execute("SELECT reason, keyid FROM evidence_checkpoints ORDER BY id").fetchall()
    assert [r for r, _ in rows] == ["run", "run", "export"] and {k for _, k in rows} == {keyid}
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside),
                       "--public-key", str(public))  # fmt: skip
    assert code == 0, out
    # The same head again: the one already there is kept, not overwritten; a new head, added.
    code, out = drills("evidence", "checkpoint", "--out", str(outside), "--db", store.url)
    assert code == 0 and "0 checkpoint(s) written" in out, out
    record_drill(store, "run-c")
    code, out = drills("evidence", "checkpoint", "--out", str(outside), "--db", store.url)
    assert code == 0 and len(read_checkpoints(str(outside)).checkpoints) == 2


def test_an_edited_or_foreign_checkpoint_is_named(
    signed: tuple[HistoryStore, Path, str], tmp_path: Path
) -> None:
    store, public, _ = signed
    outside = tmp_path / "outside"
    [cp] = store.take_checkpoints()
    write_checkpoints(str(outside), [cp])
    path = outside / object_name(cp)
    data = json.loads(path.read_text())
    path.chmod(0o644)
    # Someone who cut the chain short edits the checkpoint to match: the signature breaks.
    path.write_text(json.dumps(data | {"length": cp.length - 1}))
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside),
                       "--public-key", str(public))  # fmt: skip
    assert code == 1 and "signature does not hold" in out, out
    _, other, _ = keygen(tmp_path / "other")
    path.write_text(json.dumps(data))
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside),
                       "--public-key", str(other))  # fmt: skip
    assert code == 1 and "signature does not hold" in out, out
    (outside / "lab" / "junk.json").write_text("{")
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", str(outside))
    assert code == 1 and "junk.json" in out, out
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints",
                       str(tmp_path / "nowhere"))  # fmt: skip
    assert code == 2 and "is not a directory" in out, out


@pytest.fixture()
def s3(moto_server: MotoServer, aws_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ENDPOINT_URL", moto_server.url)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    return boto3.client("s3", endpoint_url=moto_server.url, region_name="us-east-1")


def test_checkpoints_in_a_bucket_with_object_lock_are_locked_and_catch_a_truncation(
    signed: tuple[HistoryStore, Path, str], s3: Any
) -> None:
    store, public, _ = signed
    s3.create_bucket(Bucket="drills-locked", ObjectLockEnabledForBucket=True)
    place = "s3://drills-locked/checkpoints/prod"
    code, out = drills("evidence", "checkpoint", "--out", place, "--db", store.url)
    assert code == 0, out
    [key] = [o["Key"] for o in s3.list_objects_v2(Bucket="drills-locked")["Contents"]]
    assert key.startswith("checkpoints/prod/lab/")
    head = s3.head_object(Bucket="drills-locked", Key=key)
    assert head["ObjectLockMode"] == "COMPLIANCE"
    assert head["ObjectLockRetainUntilDate"] > dt.datetime.now(dt.UTC) + dt.timedelta(days=300)
    with db(store) as conn:
        conn.execute("DELETE FROM journal WHERE run_id = 'run-b'")
        conn.execute("DELETE FROM drill_runs WHERE id = 'run-b'")
        conn.execute("DELETE FROM evidence_chain WHERE run_id = 'run-b'")
        conn.execute("DELETE FROM evidence_checkpoints")
    assert verify_store(store).ok
    code, out = drills("evidence", "verify", "--db", store.url, "--checkpoints", place,
                       "--public-key", str(public))  # fmt: skip
    assert code == 1 and "lab: the chain has" in out and place.removeprefix("s3://") in out, out


def test_a_bucket_without_object_lock_takes_plain_objects(
    signed: tuple[HistoryStore, Path, str], s3: Any
) -> None:
    store, _, _ = signed
    s3.create_bucket(Bucket="drills-plain")
    assert write_checkpoints("s3://drills-plain", store.take_checkpoints()) == 1
    found = read_checkpoints("s3://drills-plain")
    assert not found.problems and [cp.plan for _, cp in found.checkpoints] == ["lab"]
    assert verify_store(store, found.checkpoints).ok


@pytest.mark.parametrize(
    ("place", "ok"),
    [
        ("/var/lib/drills/checkpoints", True),
        ("s3://audit-bucket/drills/prod", True),
        ("s3://Not_A_Bucket/x", False),
        ("https://example.com/x", False),
        ("", False),
    ],
)
def test_the_plan_names_a_directory_or_a_bucket(place: str, ok: bool) -> None:
    if ok:
        assert check_checkpoint_place(place) == place
    else:
        with pytest.raises(ValueError):
            check_checkpoint_place(place)


def test_a_readiness_batch_and_a_prune_each_keep_a_checkpoint_per_plan(
    history: HistoryStore,
) -> None:
    old = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    rows = [
        (plan, old + dt.timedelta(hours=hour), True, 0, {"results": [], "hour": hour})
        for hour in range(4)
        for plan in ("east", "west")
    ]
    history.save_readiness_many(rows)
    removed = prune_readiness(history, dt.timedelta(days=30), dry_run=False)
    assert removed.removed == {"east": 2, "west": 2}
    with db(history) as conn:
        kept = conn.execute(
            "SELECT plan, reason, length FROM evidence_checkpoints ORDER BY id"
        ).fetchall()
    assert [(p, r) for p, r, _ in kept[:2]] == [("east", "readiness"), ("west", "readiness")]
    pruned = {p: n for p, r, n in kept if r == "prune"}
    assert pruned == {"east": 4 + 1, "west": 4 + 1}  # the 4 snapshots' links, then the prune
    assert verify_store(history).ok


def test_checkpoint_goes_where_the_plan_says(
    signed: tuple[HistoryStore, Path, str], tmp_path: Path
) -> None:
    store, _, _ = signed
    data = yaml.safe_load(EXAMPLE_PLAN.read_text())
    kept = tmp_path / "kept"
    plan = tmp_path / "plan.yaml"
    plan.write_text(yaml.safe_dump({**data, "name": "lab", "evidence": {"checkpoints": str(kept)}}))
    code, out = drills("evidence", "checkpoint", "--plan", str(plan), "--db", store.url)
    assert code == 0, out
    assert [p.parent.name for p in kept.glob("*/*.json")] == ["lab"]
