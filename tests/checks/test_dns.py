"""dns.ttl and dns.control against the lab, the drifted lab, and BIND servers of this module.

The shared labs are only read: every variant that needs other records or keys points
a copy of the plan at this module's own servers, or at a wrong secret file.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

import drills.checks.areas.dns  # noqa: F401 - registers the checks
from drills.checks.base import Status
from drills.plan import DrillPlan, load_plan
from drills_lab.moto_server import MotoServer
from drills_lab.named import LabDnsRecord, NamedServer
from drills_lab.runtime import LabInfo
from tests.support.checks import run_check
from tests.support.drill import offline_lab_plan_data
from tests.support.services import require_system_binary

ZONE = "drills.test."
KEY = "drills-key"


def write_plan(tmp_path: Path, data: dict[str, Any]) -> DrillPlan:
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return load_plan(path)


def lab_variant(info: LabInfo, tmp_path: Path, *, tsig_secret: str) -> DrillPlan:
    """The lab's plan, copied beside a TSIG secret file of our choosing."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    (tmp_path / "variant.secret").write_text(tsig_secret + "\n")
    data["dns"]["tsig"]["secret"] = "file:variant.secret"
    return write_plan(tmp_path, data)


@pytest.fixture(scope="module")
def named_pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[NamedServer, NamedServer]]:
    """Two masters sharing a key. ``split`` differs between them; the rest is the same."""
    require_system_binary("named", "bind9")
    common = [
        LabDnsRecord("api", "A", 30, "127.0.0.2"),
        LabDnsRecord("slow", "A", 120, "127.0.0.2"),  # over max_ttl 60, under the RTO of 5m
        LabDnsRecord("atdr", "A", 30, "127.0.0.3"),
        LabDnsRecord("elsewhere", "A", 30, "127.0.0.9"),
    ]
    secret = base64.b64encode(secrets.token_bytes(32)).decode()
    one = NamedServer(
        tmp_path_factory.mktemp("named-one"),
        zone=ZONE,
        records=[*common, LabDnsRecord("split", "A", 30, "127.0.0.2")],
        tsig_secret=secret,
    )
    two = NamedServer(
        tmp_path_factory.mktemp("named-two"),
        zone=ZONE,
        records=[*common, LabDnsRecord("split", "A", 30, "127.0.0.3")],
        tsig_secret=secret,
    )
    with one, two:
        yield one, two


def plan_on(tmp_path: Path, servers: list[str], secret: str, *, record: str = "api") -> DrillPlan:
    """A lab-shaped plan whose DNS is ``servers``; nothing else in it is contacted."""
    data = offline_lab_plan_data(named=servers[0], tsig_name=KEY)
    data["dns"]["servers"] = servers
    data["dns"]["record"]["name"] = f"{record}.{ZONE}"
    (tmp_path / "tsig.secret").write_text(secret + "\n")
    return write_plan(tmp_path, data)


def addr(server: NamedServer) -> str:
    return f"{server.host}:{server.port}"


# -- the lab ------------------------------------------------------------------------


def test_clean_lab_passes_both(lab: LabInfo) -> None:
    plan = load_plan(Path(lab.state_dir) / "plan.yaml")

    ttl = run_check(plan, "dns.ttl")
    control = run_check(plan, "dns.control")

    assert ttl.status is Status.PASS, ttl.summary
    assert ttl.evidence["longest_ttl_s"] == 30 and ttl.evidence["points_at"] == ["primary"]
    assert [s["values"] for s in ttl.evidence["servers"]] == [["127.0.0.2"]]
    assert control.status is Status.PASS, control.summary
    assert control.evidence["provider"] == "rfc2136" and not control.blocking


def test_drifted_ttl_fails_and_blocks_control_still_passes(drift_lab: LabInfo) -> None:
    plan = load_plan(Path(drift_lab.state_dir) / "plan.yaml")

    ttl = run_check(plan, "dns.ttl")
    control = run_check(plan, "dns.control")

    assert ttl.status is Status.FAIL and ttl.blocking
    assert "TTL 1 h alone breaks the RTO of 5 min" in ttl.summary
    assert ttl.evidence["longest_ttl_s"] == 3600
    assert "1 min" in ttl.remediation
    assert control.status is Status.PASS, control.summary


def test_wrong_tsig_secret_fails_control_without_echo(lab: LabInfo, tmp_path: Path) -> None:
    wrong = base64.b64encode(secrets.token_bytes(32)).decode()
    plan = lab_variant(lab, tmp_path, tsig_secret=wrong)

    control = run_check(plan, "dns.control")

    assert control.status is Status.FAIL and control.blocking
    assert "TSIG key rejected (BADSIG)" in control.summary
    assert "drills-key" in control.remediation and "file:variant.secret" in control.remediation
    assert wrong not in json.dumps(control.to_json())
    assert run_check(plan, "dns.ttl").status is Status.PASS  # reading needs no key


def test_unreachable_server_is_an_error(tmp_path: Path, closed_port: str) -> None:
    plan = plan_on(tmp_path, [closed_port], base64.b64encode(b"k" * 32).decode())
    for check_id in ("dns.ttl", "dns.control"):
        result = run_check(plan, check_id)
        assert result.status is Status.ERROR and result.blocking
        assert f"dns rfc2136 {closed_port} zone {ZONE}: connection refused" in result.summary


# -- variants on this module's servers ----------------------------------------------


def test_ttl_over_max_but_under_rto_fails_without_blocking(
    named_pair: tuple[NamedServer, NamedServer], tmp_path: Path
) -> None:
    one, _ = named_pair
    result = run_check(plan_on(tmp_path, [addr(one)], one.tsig_secret, record="slow"), "dns.ttl")
    assert result.status is Status.FAIL and not result.blocking
    assert "TTL 2 min is over the plan's maximum of 1 min" in result.summary


def test_record_at_the_dr_value_warns(
    named_pair: tuple[NamedServer, NamedServer], tmp_path: Path
) -> None:
    one, _ = named_pair
    result = run_check(plan_on(tmp_path, [addr(one)], one.tsig_secret, record="atdr"), "dns.ttl")
    assert result.status is Status.WARN and not result.blocking
    assert "already points at the DR value 127.0.0.3" in result.summary
    assert result.evidence["points_at"] == ["dr"]


def test_record_at_neither_site_warns(
    named_pair: tuple[NamedServer, NamedServer], tmp_path: Path
) -> None:
    one, _ = named_pair
    plan = plan_on(tmp_path, [addr(one)], one.tsig_secret, record="elsewhere")
    result = run_check(plan, "dns.ttl")
    assert result.status is Status.WARN
    assert "points at neither 127.0.0.2 nor 127.0.0.3" in result.summary


def test_missing_record_fails_and_blocks(
    named_pair: tuple[NamedServer, NamedServer], tmp_path: Path
) -> None:
    one, _ = named_pair
    plan = plan_on(tmp_path, [addr(one)], one.tsig_secret, record="absent")
    result = run_check(plan, "dns.ttl")
    assert result.status is Status.FAIL and result.blocking
    assert f"no A record absent.{ZONE} on {addr(one)}" in result.summary
    # Control still passes: the key may create the record ("does not exist" holds).
    assert run_check(plan, "dns.control").status is Status.PASS


def test_servers_that_disagree_warn(
    named_pair: tuple[NamedServer, NamedServer], tmp_path: Path
) -> None:
    one, two = named_pair
    plan = plan_on(tmp_path, [addr(one), addr(two)], one.tsig_secret, record="split")
    result = run_check(plan, "dns.ttl")
    assert result.status is Status.WARN
    assert "servers disagree" in result.summary
    assert [s["values"] for s in result.evidence["servers"]] == [["127.0.0.2"], ["127.0.0.3"]]


def test_every_server_is_asked(named_pair: tuple[NamedServer, NamedServer], tmp_path: Path) -> None:
    one, two = named_pair
    result = run_check(plan_on(tmp_path, [addr(one), addr(two)], one.tsig_secret), "dns.ttl")
    assert result.status is Status.PASS
    assert [s["server"] for s in result.evidence["servers"]] == [addr(one), addr(two)]


# -- Route 53 -----------------------------------------------------------------------


def test_route53_plan_passes_both_on_moto(
    moto_server: MotoServer, aws_env: dict[str, str], tmp_path: Path
) -> None:
    r53 = boto3.client("route53", endpoint_url=moto_server.url, region_name="us-east-1")
    zone_name = f"z{secrets.token_hex(4)}.test."
    created = r53.create_hosted_zone(Name=zone_name, CallerReference=secrets.token_hex(8))
    zone_id = created["HostedZone"]["Id"].split("/")[-1]
    record = {"Name": f"api.{zone_name}", "Type": "A", "TTL": 600}
    r53.change_resource_record_sets(
        HostedZoneId=zone_id,
        ChangeBatch={
            "Changes": [
                {
                    "Action": "UPSERT",
                    "ResourceRecordSet": record | {"ResourceRecords": [{"Value": "127.0.0.2"}]},
                }
            ]
        },
    )
    (tmp_path / "aws").mkdir()
    for name in ("access_key_id", "secret_access_key"):
        (tmp_path / "aws" / name).write_text("testing\n")
    data = offline_lab_plan_data(
        registries={}, moto=moto_server.url, named=None, tsig_name=None, route53_zone_id=zone_id
    )
    data["dns"]["record"]["name"] = f"api.{zone_name}"
    plan = write_plan(tmp_path, data)

    ttl = run_check(plan, "dns.ttl")
    control = run_check(plan, "dns.control")

    assert ttl.status is Status.FAIL and ttl.blocking  # 600s ≥ the RTO of 300s
    assert ttl.evidence["servers"] == [
        {"server": f"route53 {zone_id}", "values": ["127.0.0.2"], "ttl": 600, "serial": None}
    ]
    assert control.status is Status.PASS, control.summary
    assert control.evidence["provider"] == "route53"
    listed = r53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    assert [r["Name"] for r in listed if r["Type"] == "A"] == [f"api.{zone_name}"]
