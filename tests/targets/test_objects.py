"""The object storage adapter against the session's moto server (S3 API, real HTTP)."""

from __future__ import annotations

import datetime as dt
import threading
import time
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drills.errors import PermanentError, TemporaryError
from drills.targets.objects import Location, compare_deletes, compare_objects
from drills.targets.objects.listing import BufferGauge, ListingLimits, OrderedListing, Page
from drills_lab.moto_server import MotoServer
from tests.support.s3_seed import (
    make_bucket,
    put,
    s3_client,
    small_limits,
    store,
    unique_bucket,
)

pytestmark = pytest.mark.usefixtures("aws_env")

# Direct keys around shard prefixes, a lone wrapper directory, a "directory" object:
# every way a key can sort next to a common prefix.
LAYOUT = [
    "a",
    "a.txt",
    "a/1",
    "a/2",
    "a/3",
    "a/4",
    "a0",
    "b/",
    "b/x/1",
    "b/x/2",
    "c/d/e/f",
    "z",
    *[f"m/{i:03d}" for i in range(10)],
]


@pytest.fixture()
def s3(moto_server: MotoServer) -> Any:
    return s3_client(moto_server)


def test_objects_are_listed_in_key_order_by_shards(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("order"))
    for key in LAYOUT:
        put(bucket, key, key.encode())
    objects = store(moto_server.url, limits=small_limits())
    gauge = BufferGauge()
    listed = list(objects.objects(bucket, gauge=gauge))
    assert [o.key for o in listed] == sorted(LAYOUT)
    assert {o.size for o in listed if o.key == "a.txt"} == {5}
    assert all(len(o.etag) == 32 and '"' not in o.etag for o in listed)
    assert gauge.pages > len(LAYOUT) // 3  # it paged, with 3 keys a page
    assert gauge.current == 0
    # Under a prefix (and through a lone wrapper directory), only that prefix.
    assert [o.key for o in objects.objects(bucket, "b/")] == ["b/", "b/x/1", "b/x/2"]
    assert [o.key for o in objects.objects(bucket, "c/")] == ["c/d/e/f"]
    assert list(objects.objects(bucket, "nothing/")) == []


def test_a_prefix_that_fits_one_page_is_one_request(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("onepage"))
    for key in LAYOUT:
        put(bucket, key, b"x")
    gauge = BufferGauge()
    listed = list(store(moto_server.url).objects(bucket, gauge=gauge))
    assert len(listed) == len(LAYOUT)
    assert gauge.pages == 1


def test_newest_object_by_last_modified(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("newest"))
    for hours, key in ((5, "old/a"), (1, "old/b"), (3, "new/c")):
        put(bucket, key, b"x", age=dt.timedelta(hours=hours))
    objects = store(moto_server.url, limits=small_limits(page=1))
    newest = objects.newest(bucket)
    assert newest is not None and newest.key == "old/b"
    age = dt.datetime.now(dt.UTC) - newest.last_modified
    assert dt.timedelta(minutes=59) < age < dt.timedelta(minutes=61)
    assert objects.newest(bucket, "new/") is not None
    assert objects.newest(bucket, "none/") is None


def test_versioning_status(s3: Any, moto_server: MotoServer) -> None:
    objects = store(moto_server.url, role="dr")
    plain = make_bucket(s3, unique_bucket("plain"))
    versioned = make_bucket(s3, unique_bucket("versioned"), versioned=True)
    assert objects.versioning(plain) == "Disabled"
    assert objects.versioning(versioned) == "Enabled"
    s3.put_bucket_versioning(Bucket=versioned, VersioningConfiguration={"Status": "Suspended"})
    assert objects.versioning(versioned) == "Suspended"


def test_lifecycle_rules(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("lifecycle"), versioned=True)
    objects = store(moto_server.url, role="dr")
    assert objects.lifecycle_rules(bucket) == ()
    rules = [
        {"ID": "tmp", "Status": "Enabled", "Filter": {"Prefix": "tmp/"}, "Expiration": {"Days": 3}},
        {
            "ID": "old",
            "Status": "Enabled",
            "Prefix": "",
            "NoncurrentVersionExpiration": {"NoncurrentDays": 7},
        },
        {
            "ID": "tagged",
            "Status": "Disabled",
            "Filter": {"And": {"Prefix": "x/", "Tags": [{"Key": "k", "Value": "v"}]}},
            "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1},
        },
    ]
    s3.put_bucket_lifecycle_configuration(Bucket=bucket, LifecycleConfiguration={"Rules": rules})
    tmp, old, tagged = objects.lifecycle_rules(bucket)
    assert (tmp.id, tmp.prefix, tmp.expires_current, tmp.noncurrent_days) == (
        "tmp",
        "tmp/",
        True,
        None,
    )
    assert tmp.covers("tmp/a/") and tmp.covers("") and not tmp.covers("data/")
    assert (old.prefix, old.expires_current, old.noncurrent_days) == ("", False, 7)
    assert old.covers("anything/")
    assert tagged.narrowed and not tagged.enabled and not tagged.covers("x/")


def test_versions_and_key_histories(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("versions"), versioned=True)
    for key in ("k/a", "k/b", "k/c"):
        s3.put_object(Bucket=bucket, Key=key, Body=b"1")
        s3.put_object(Bucket=bucket, Key=key, Body=b"2")
    s3.delete_object(Bucket=bucket, Key="k/b")
    objects = store(moto_server.url, limits=small_limits(page=2))
    versions = list(objects.versions(bucket, "k/"))
    assert len(versions) == 7
    assert [v.key for v in versions if v.delete_marker] == ["k/b"]
    assert sum(v.is_latest for v in versions) == 3
    histories = {h.key: h for h in objects.key_histories(bucket, "k/")}
    assert list(histories) == ["k/a", "k/b", "k/c"]
    assert [(h.deleted, h.object_versions) for h in histories.values()] == [
        (False, 2),
        (True, 2),
        (False, 2),
    ]


def test_checksums(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("sums"))
    s3.put_object(Bucket=bucket, Key="with", Body=b"abc", ChecksumAlgorithm="SHA256")
    put(bucket, "without", b"abc")
    objects = store(moto_server.url)
    assert objects.checksums(bucket, "with") == {
        "ChecksumSHA256": "ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0="
    }
    assert objects.checksums(bucket, "without") == {}


def test_missing_bucket_names_bucket_and_site(moto_server: MotoServer) -> None:
    objects = store(moto_server.url, role="dr")
    with pytest.raises(PermanentError) as listing:
        list(objects.objects("no-such-bucket-here"))
    assert "'no-such-bucket-here'" in str(listing.value) and "dr site" in str(listing.value)
    assert listing.value.target.startswith("s3 dr")
    with pytest.raises(PermanentError, match="no-such-bucket-here"):
        objects.versioning("no-such-bucket-here")
    with pytest.raises(PermanentError, match="no-such-bucket-here"):
        list(objects.key_histories("no-such-bucket-here"))


def test_unreachable_endpoint_is_a_temporary_error(closed_port: str) -> None:
    objects = store(f"http://{closed_port}", role="dr")
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="cannot connect"):
        list(objects.objects("bucket"))
    assert time.monotonic() - started < 8


def test_hung_endpoint_times_out(blackhole: str) -> None:
    objects = store(f"http://{blackhole}", role="dr", read_timeout=0.3)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="timed out"):
        objects.versioning("bucket")
    assert time.monotonic() - started < 6


def test_comparison_streams_in_bounded_memory(s3: Any, moto_server: MotoServer) -> None:
    """5,000 objects a side through 100-key pages: neither side ever buffers them all."""
    primary = make_bucket(s3, unique_bucket("stream-p"))
    dr = make_bucket(s3, unique_bucket("stream-d"))
    total = 5000
    for i in range(total):
        key = f"part-{i % 20:02d}/obj-{i:05d}"
        put(primary, key, b"%d" % i)
        if i % 500 != 7:
            put(dr, key, b"%d" % i if i % 1000 != 3 else b"changed")
    limits = ListingLimits(page_size=100, shards_ahead=2, pages_per_shard=1)
    assert limits.buffer_bound < total / 3
    diff = compare_objects(
        Location(store(moto_server.url, limits=limits), primary, ""),
        Location(store(moto_server.url, role="dr", limits=limits), dr, ""),
        examples=3,
    )
    assert diff.counts() == {
        "primary_objects": total,
        "dr_objects": total - 10,
        "matched": total - 15,
        "missing": 10,
        "mismatched": 5,
        "extra": 0,
        "unverified": 0,
        "pending": 0,
    }
    assert [e["key"] for e in diff.missing.examples] == [
        "part-07/obj-00007",
        "part-07/obj-00507",
        "part-07/obj-01007",
    ]
    for gauge in (diff.primary_gauge, diff.dr_gauge):
        assert 100 <= gauge.high_water <= limits.buffer_bound
        assert gauge.pages >= total // 100
        assert gauge.current == 0


def test_abandoned_listing_stops_its_threads(s3: Any, moto_server: MotoServer) -> None:
    bucket = make_bucket(s3, unique_bucket("abandon"))
    for i in range(60):
        put(bucket, f"s{i % 6}/k{i:03d}", b"x")
    before = threading.active_count()
    listing = store(moto_server.url, limits=small_limits(page=2)).objects(bucket)
    assert next(listing).key == "s0/k000"
    listing.close()
    deadline = time.monotonic() + 3
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert threading.active_count() <= before


def test_deletes_that_reached_dr(s3: Any, moto_server: MotoServer) -> None:
    primary = make_bucket(s3, unique_bucket("del-p"), versioned=True)
    dr = make_bucket(s3, unique_bucket("del-d"), versioned=True)
    for key in ("d/kept", "d/marker-at-dr", "d/deleted-both", "d/deleted-gone", "d/deleted-ok"):
        s3.put_object(Bucket=primary, Key=key, Body=b"1")
        if key != "d/deleted-gone":
            s3.put_object(Bucket=dr, Key=key, Body=b"1")
    for key in ("d/deleted-both", "d/deleted-gone", "d/deleted-ok"):
        s3.delete_object(Bucket=primary, Key=key)
    for key in ("d/marker-at-dr", "d/deleted-both"):
        s3.delete_object(Bucket=dr, Key=key)
    s3.put_object(Bucket=dr, Key="d/only-at-dr", Body=b"1")
    found = compare_deletes(
        Location(store(moto_server.url, limits=small_limits(page=2)), primary, "d/"),
        Location(store(moto_server.url, "dr", limits=small_limits(page=2)), dr, "d/"),
        examples=5,
    )
    assert [e["key"] for e in found.delete_marker_at_dr.examples] == ["d/marker-at-dr"]
    assert [(e["key"], e["dr"]) for e in found.delete_propagated.examples] == [
        ("d/deleted-both", "delete marker"),
        ("d/deleted-gone", "no version"),
    ]
    assert (found.primary_keys, found.dr_keys) == (5, 5)


# -- the listing engine on its own, over an in-memory page source ------------------------


class _Key(NamedTuple):
    key: str


def pages_of(keys: list[str], page_size: int, *, broken: str | None = None) -> Any:
    """ListObjectsV2's paging and delimiter rules over a sorted list of keys."""
    ordered = sorted(set(keys))

    def fetch(prefix: str, delimited: bool, token: object) -> Page[_Key]:
        if prefix == broken:
            raise TemporaryError("memory", f"shard {prefix} failed")
        items: list[tuple[bool, str]] = []  # (is a common prefix, name)
        for key in ordered:
            rest = key[len(prefix) :] if key.startswith(prefix) else None
            if rest is None:
                continue
            if delimited and "/" in rest:
                shard = prefix + rest.split("/")[0] + "/"
                if not items or items[-1] != (True, shard):
                    items.append((True, shard))
            else:
                items.append((False, key))
        start = int(token) if isinstance(token, int) else 0
        chunk = items[start : start + page_size]
        more = start + page_size < len(items)
        return Page(
            [_Key(name) for shard, name in chunk if not shard],
            [name for shard, name in chunk if shard],
            start + page_size if more else None,
        )

    return fetch


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.text(alphabet="ab/.", min_size=1, max_size=6), max_size=40),
    prefix=st.sampled_from(["", "a", "a/", "b/a/"]),
    page=st.integers(1, 4),
    shards=st.integers(1, 3),
)
def test_any_layout_is_listed_whole_and_in_order(
    keys: list[str], prefix: str, page: int, shards: int
) -> None:
    limits = ListingLimits(page_size=page, shards_ahead=shards, pages_per_shard=1)
    gauge = BufferGauge()
    listing = OrderedListing(pages_of(keys, page), prefix, limits=limits, gauge=gauge)
    expected = sorted({k for k in keys if k.startswith(prefix)})
    assert [e.key for e in listing] == expected
    assert gauge.high_water <= limits.buffer_bound
    assert gauge.current == 0


def test_a_failing_shard_fails_the_listing() -> None:
    keys = [f"s{i}/k{j}" for i in range(5) for j in range(4)]
    limits = ListingLimits(page_size=2, shards_ahead=2, pages_per_shard=1)
    listing = OrderedListing(pages_of(keys, 2, broken="s3/"), "", limits=limits)
    seen: list[str] = []
    with pytest.raises(TemporaryError, match="shard s3/ failed"):
        seen.extend(e.key for e in listing)
    assert seen == keys[:12]  # everything before the broken shard, in order
