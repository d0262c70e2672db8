"""The Route 53 adapter against moto's Route 53 (each test in a hosted zone of its own)."""

from __future__ import annotations

import secrets
import time
from typing import Any

import boto3
import pytest

from drills.errors import PermanentError, TemporaryError
from drills.plan import Route53Dns
from drills.targets.aws import AwsEndpoint
from drills.targets.dns import Route53Target
from drills_lab.moto_server import MotoServer


def route53(url: str) -> Any:
    return boto3.client("route53", endpoint_url=url, region_name="us-east-1")


@pytest.fixture()
def zone(moto_server: MotoServer, aws_env: dict[str, str]) -> tuple[str, str]:
    """A fresh hosted zone with api → 127.0.0.2 (TTL 30): (zone id, zone name)."""
    name = f"z{secrets.token_hex(4)}.test."
    r53 = route53(moto_server.url)
    created = r53.create_hosted_zone(Name=name, CallerReference=secrets.token_hex(8))
    zone_id = created["HostedZone"]["Id"].split("/")[-1]
    r53.change_resource_record_sets(
        HostedZoneId=zone_id,
        ChangeBatch={
            "Changes": [
                {
                    "Action": "UPSERT",
                    "ResourceRecordSet": {
                        "Name": f"api.{name}",
                        "Type": "A",
                        "TTL": 30,
                        "ResourceRecords": [{"Value": "127.0.0.2"}],
                    },
                }
            ]
        },
    )
    return zone_id, name


def target(
    zone_id: str, zone_name: str, endpoint_url: str, *, read_timeout_s: float = 2.0
) -> Route53Target:
    config = Route53Dns.model_validate(
        {
            "provider": "route53",
            "hosted_zone_id": zone_id,
            "aws": {"region": "us-east-1", "endpoint_url": endpoint_url},
            "record": {"name": f"api.{zone_name}", "type": "A"},
            "primary_value": "127.0.0.2",
            "dr_value": "127.0.0.3",
        }
    )
    return Route53Target(
        config, AwsEndpoint("us-east-1", endpoint_url), read_timeout_s=read_timeout_s
    )


def test_a_practice_name_is_created_then_removed_leaving_no_record(
    zone: tuple[str, str], moto_server: MotoServer
) -> None:
    zone_id, name = zone
    practice = f"practice.{name}"
    with target(zone_id, name, moto_server.url) as r53:
        [absent] = r53.read(practice, "A")
        assert (absent.values, absent.ttl) == ((), None)
        r53.update(practice, "A", "127.0.0.3", 60)
        assert r53.read(practice, "A")[0].values == ("127.0.0.3",)
        r53.delete(practice, "A")
        assert r53.read(practice, "A")[0] == absent
        r53.delete(practice, "A")  # already gone: nothing to do, no error
        assert r53.read(f"api.{name}", "A")[0].values == ("127.0.0.2",)  # its neighbour kept


def test_read_upsert_confirm_and_read_back(zone: tuple[str, str], moto_server: MotoServer) -> None:
    zone_id, name = zone
    record = f"api.{name}"
    with target(zone_id, name, moto_server.url) as r53:
        [before] = r53.read(record, "A")
        assert (before.server, before.values, before.ttl) == (
            f"route53 {zone_id}",
            ("127.0.0.2",),
            30,
        )

        change = r53.update(record, "A", "127.0.0.3", 20)
        assert change.change_id and change.sent_to == f"route53 {zone_id}"
        [confirmed] = r53.confirm(record, "A", "127.0.0.3", deadline_s=5)

    assert confirmed.values == ("127.0.0.3",) and confirmed.ttl == 20
    # Read back independently of the adapter: the upsert really replaced the record set.
    listed = route53(moto_server.url).list_resource_record_sets(
        HostedZoneId=zone_id, StartRecordName=record, StartRecordType="A", MaxItems="1"
    )["ResourceRecordSets"][0]
    assert listed["ResourceRecords"] == [{"Value": "127.0.0.3"}] and listed["TTL"] == 20


def test_confirm_times_out_while_the_record_differs(
    zone: tuple[str, str], moto_server: MotoServer
) -> None:
    zone_id, name = zone
    with target(zone_id, name, moto_server.url) as r53, pytest.raises(TemporaryError) as stale:
        r53.confirm(f"api.{name}", "A", "127.0.0.3", deadline_s=0.3)
    assert f"route53 {zone_id}: answers 127.0.0.2" in stale.value.cause


def test_missing_record_reads_empty(zone: tuple[str, str], moto_server: MotoServer) -> None:
    zone_id, name = zone
    with target(zone_id, name, moto_server.url) as r53:
        [answer] = r53.read(f"nothing.{name}", "A")
    assert answer.values == () and answer.ttl is None


def test_check_control_passes_and_changes_nothing(
    zone: tuple[str, str], moto_server: MotoServer
) -> None:
    zone_id, name = zone
    client = route53(moto_server.url)
    before = client.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    with target(zone_id, name, moto_server.url) as r53:
        r53.check_control(f"api.{name}", "A")
    after = client.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    assert after == before


def test_check_control_refuses_a_record_outside_the_zone(
    zone: tuple[str, str], moto_server: MotoServer
) -> None:
    zone_id, name = zone
    with (
        target(zone_id, name, moto_server.url) as r53,
        pytest.raises(PermanentError, match="not inside hosted zone"),
    ):
        r53.check_control("api.elsewhere.test.", "A")


def test_unknown_hosted_zone_is_permanent(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    with (
        target("ZNOSUCHZONE00", "none.test.", moto_server.url) as r53,
        pytest.raises(PermanentError, match="NoSuchHostedZone"),
    ):
        r53.check_control("api.none.test.", "A")


def test_unreachable_endpoint_is_temporary(closed_port: str, aws_env: dict[str, str]) -> None:
    started = time.monotonic()
    with (
        target("ZNOSUCHZONE00", "none.test.", f"http://{closed_port}") as r53,
        pytest.raises(TemporaryError, match="cannot connect"),
    ):
        r53.read("api.none.test.", "A")
    assert time.monotonic() - started < 5


def test_hung_endpoint_times_out(blackhole: str, aws_env: dict[str, str]) -> None:
    started = time.monotonic()
    hung = target("ZNOSUCHZONE00", "none.test.", f"http://{blackhole}", read_timeout_s=0.3)
    with hung as r53, pytest.raises(TemporaryError, match="timed out"):
        r53.read("api.none.test.", "A")
    assert time.monotonic() - started < 4  # three attempts of 0.3 s, with backoff
