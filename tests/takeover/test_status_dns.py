"""`drills status` with its DNS server stopped, killed, or answering a third address.

Unknown is not agreement: with no answer from the DNS server, `agrees` is null, the
status names why, and the command exits 5, never 0. The server is a BIND of this module,
stopped with SIGSTOP (a hung server: packets in, nothing out) and killed outright.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drills.cli.status_cmd import EXIT_DISAGREES, EXIT_UNCONFIRMED
from drills_lab import topology
from drills_lab.named import LabDnsRecord, NamedServer
from tests.support.drill import drills_cli, offline_lab_plan_data
from tests.support.services import require_system_binary


@pytest.fixture
def named(tmp_path: Path) -> Iterator[NamedServer]:
    require_system_binary("named", "bind9")
    record = LabDnsRecord("api", "A", 30, topology.PRIMARY_ADDR)
    with NamedServer(tmp_path / "named", zone=topology.ZONE, records=[record]) as server:
        yield server


def plan_on(named: NamedServer, tmp_path: Path) -> str:
    data = offline_lab_plan_data(named=f"{named.host}:{named.port}", tsig_name=named.tsig_name)
    named.write_tsig_secret(tmp_path / "tsig.secret")
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def status(plan: str, tmp_path: Path) -> tuple[int, dict[str, object], str]:
    done = drills_cli("status", plan, "--json", db=f"sqlite:///{tmp_path / 'h.db'}")
    return done.returncode, json.loads(done.stdout), done.stderr


def named_pid(named: NamedServer) -> int:
    return int((named.workdir / "named.pid").read_text())


def test_a_stopped_dns_server_is_not_agreement(named: NamedServer, tmp_path: Path) -> None:
    plan = plan_on(named, tmp_path)
    pid = named_pid(named)
    os.kill(pid, signal.SIGSTOP)
    try:
        code, data, _ = status(plan, tmp_path)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert code == EXIT_UNCONFIRMED, data
    assert data["agrees"] is None and data["disagreement"] is None
    live = data["live"]
    assert isinstance(live, dict) and live["dns"] == "unknown"
    assert str(data["unconfirmed"]).startswith("could not confirm where DNS points: ")
    code, data, _ = status(plan, tmp_path)  # released, it answers again: agreement
    assert (code, data["agrees"], data["unconfirmed"]) == (0, True, None), data


def test_a_killed_dns_server_is_not_agreement(named: NamedServer, tmp_path: Path) -> None:
    plan = plan_on(named, tmp_path)
    named.stop()
    table = drills_cli("status", plan, db=f"sqlite:///{tmp_path / 'h.db'}")
    assert table.returncode == EXIT_UNCONFIRMED
    assert "✗ could not confirm where DNS points" in table.stderr


def test_a_third_address_still_disagrees(named: NamedServer, tmp_path: Path) -> None:
    plan = plan_on(named, tmp_path)
    from drills.plan import load_plan
    from drills.targets.dns import dns_for

    target = dns_for(load_plan(Path(plan)))
    try:
        target.update(topology.RECORD, "A", "127.0.0.9", 30)
    finally:
        target.close()
    code, data, _ = status(plan, tmp_path)
    assert code == EXIT_DISAGREES and data["agrees"] is False, data
    assert "127.0.0.9" in str(data["disagreement"]) and data["unconfirmed"] is None


def test_without_a_live_look_agreement_is_not_claimed(named: NamedServer, tmp_path: Path) -> None:
    plan = plan_on(named, tmp_path)
    done = drills_cli("status", plan, "--json", "--no-live", db=f"sqlite:///{tmp_path / 'h.db'}")
    data = json.loads(done.stdout)
    assert done.returncode == 0 and data["live"] is None and data["agrees"] is None
