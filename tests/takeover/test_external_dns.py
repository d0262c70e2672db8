"""A drill on the lab's `--dns external-dns` variant: the name is switched by writing the
DNSEndpoint at DR, and only the lab's external-dns controller changes BIND."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills.checks.base import Status
from drills.forecast.samples import recent_samples
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills.targets.sites import Targets
from drills_lab import externaldns, topology
from drills_lab.runtime import LabInfo
from tests.support.checks import run_check
from tests.support.drill import lab_plan, snapshot
from tests.support.services import own_lab

SYNC_INTERVAL_S = 2.0


@pytest.fixture(scope="module")
def extdns_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(
        tmp_path_factory, "extdns-lab", ready_delay=0.2, dns="external-dns",
        dns_sync_interval=SYNC_INTERVAL_S,
    ) as info:  # fmt: skip
        yield info


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


def _custom(info: LabInfo) -> k8s.CustomObjectsApi:
    api = k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / "dr.kubeconfig"), context="dr"
    )
    return k8s.CustomObjectsApi(api)


def _dns_endpoint(info: LabInfo) -> dict[str, Any]:
    ns, name = externaldns.NAMESPACE, externaldns.ENDPOINT_NAME
    api = _custom(info)
    return dict(
        api.get_namespaced_custom_object("externaldns.k8s.io", "v1alpha1", ns, "dnsendpoints", name)
    )


def _applied(info: LabInfo) -> list[dict[str, Any]]:
    path = Path(info.state_dir) / externaldns.JOURNAL_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _at(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(text)
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _step(phase: dict[str, Any], prefix: str) -> dict[str, Any]:
    (step,) = [s for s in phase["steps"] if s["name"].startswith(prefix)]
    return step


def test_the_lab_plan_selects_external_dns(extdns_lab: LabInfo) -> None:
    plan = lab_plan(extdns_lab)
    assert extdns_lab.dns_provider == "external-dns"
    assert plan.dns.provider == "external-dns"
    assert plan.dns.sync_interval == SYNC_INTERVAL_S  # type: ignore[union-attr]
    endpoint = _dns_endpoint(extdns_lab)
    (record,) = endpoint["spec"]["endpoints"]
    assert record["dnsName"] == topology.RECORD.rstrip(".")
    assert record["targets"] == [topology.PRIMARY_ADDR]


def test_a_drill_switches_through_external_dns_and_rolls_back_exactly(
    extdns_lab: LabInfo, history: HistoryStore
) -> None:
    plan = lab_plan(extdns_lab)
    endpoint_before = _dns_endpoint(extdns_lab)
    before = snapshot(plan)
    result = Drill(
        DrillRequest(plan, operator="tests", reason="ci", tier_deadline_s=20), history
    ).run()
    assert result.status == "succeeded", result.error
    assert result.drift == {}
    assert snapshot(plan) == before
    # The resource is back exactly, and external-dns has put the record back in BIND.
    assert _dns_endpoint(extdns_lab)["spec"] == endpoint_before["spec"]
    with Targets(plan) as targets:
        assert [a.values for a in targets.dns.read(topology.RECORD, "A")] == [
            (topology.PRIMARY_ADDR,)
        ]
    run = history.get_run(result.run_id)
    assert run is not None and run.t0 is not None
    phases = {p["name"]: p for p in run.timeline}
    switch = _step(phases["dns"], "switch ")
    confirmed = _step(phases["dns"], "confirm on every authoritative server")
    # The smoke probe reached DR through the name.
    assert _step(phases["smoke"], "smoke ")["evidence"]["address"].startswith(topology.DR_ADDR)
    # Only the controller changed BIND, on its own schedule: after the switch step wrote the
    # DNSEndpoint (a controller that wakes at once applies it before the step has recorded
    # its end) and before the switch was confirmed. The RTO includes that delay.
    applied = _applied(extdns_lab)
    to_dr = [a for a in applied if a["targets"] == [topology.DR_ADDR]]
    assert len(to_dr) == 1, applied
    applied_at = _at(to_dr[0]["at"])
    assert _at(switch["started_at"]) <= applied_at <= _at(confirmed["ended_at"]), (switch, applied)
    assert (applied_at - _at(switch["ended_at"])).total_seconds() <= SYNC_INTERVAL_S + 1.0
    t0 = run.t0 if run.t0.tzinfo else run.t0.replace(tzinfo=dt.UTC)
    m = result.measurement
    assert m is not None and m.rto_seconds >= (applied_at - t0).total_seconds()
    # The undo waited for the controller too: it switched the record back after that.
    back = [a for a in applied if a["targets"] == [topology.PRIMARY_ADDR]]
    assert back and _at(back[-1]["at"]) > applied_at
    # The forecast learns the DNS phase with the controller's delay in it.
    (sample,) = recent_samples(history, plan.name, dt.datetime.now(dt.UTC))
    assert sample.dns_done_s is not None
    assert sample.dns_done_s >= (applied_at - t0).total_seconds()


def test_dns_control_passes_for_the_owner_and_fails_naming_both_owners(
    extdns_lab: LabInfo,
) -> None:
    owned = run_check(lab_plan(extdns_lab), "dns.control")
    assert owned.status is Status.PASS, owned.summary

    def other_owner(data: dict[str, Any]) -> None:
        data["dns"]["owner_id"] = "primary-cluster"

    result = run_check(lab_plan(extdns_lab, other_owner), "dns.control")
    assert result.status is Status.FAIL and result.blocking
    assert "'drills-lab-dr'" in result.summary and "'primary-cluster'" in result.summary
    assert "fight" in result.summary


def test_dns_control_fails_when_another_resource_drives_the_name(extdns_lab: LabInfo) -> None:
    def elsewhere(data: dict[str, Any]) -> None:
        data["dns"]["resource"]["name"] = "other"

    result = run_check(lab_plan(extdns_lab, elsewhere), "dns.control")
    # The DNSEndpoint "other" does not exist: nothing could be patched.
    assert result.status in (Status.FAIL, Status.ERROR) and result.blocking
    assert "external-dns/other" in result.summary


def test_the_controller_leaves_a_record_another_owner_holds(extdns_lab: LabInfo) -> None:
    """Two controllers never fight: a DNSEndpoint for a name another owner's registry entry
    claims is not applied by this one."""
    import dns.message
    import dns.query
    import dns.tsig
    import dns.update

    host, port = extdns_lab.dns_server.rsplit(":", 1)
    secret = (Path(extdns_lab.state_dir) / "tsig.secret").read_text().strip()
    key = dns.tsig.Key("drills-key", secret, dns.tsig.HMAC_SHA256)
    name = "claimed.drills.test."
    update = dns.update.UpdateMessage("drills.test.", keyring=key)
    update.replace(name, 30, "A", "127.0.0.9")
    for txt in externaldns.registry_names(name, "A"):
        update.replace(txt, 30, "TXT", externaldns.registry_value("someone-else", "crd/x/y"))
    assert dns.query.tcp(update, host, port=int(port), timeout=5).rcode() == 0
    body = externaldns.dns_endpoint(
        externaldns.NAMESPACE, "claimed", name, "A", topology.DR_ADDR, 30
    )
    api = _custom(extdns_lab)
    api.create_namespaced_custom_object(
        "externaldns.k8s.io", "v1alpha1", externaldns.NAMESPACE, "dnsendpoints", body
    )
    try:
        # Two syncs later, BIND still answers the other owner's value.
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=2 * SYNC_INTERVAL_S + 1)
        while dt.datetime.now(dt.UTC) < deadline:
            reply = dns.query.udp(dns.message.make_query(name, "A"), host, port=int(port))
            assert [rd.to_text() for rrset in reply.answer for rd in rrset] == ["127.0.0.9"]
            time.sleep(0.2)
        assert not [a for a in _applied(extdns_lab) if a["name"] == name]
    finally:
        api.delete_namespaced_custom_object(
            "externaldns.k8s.io", "v1alpha1", externaldns.NAMESPACE, "dnsendpoints", "claimed"
        )


def test_a_service_annotation_is_switched_and_restored_exactly(extdns_lab: LabInfo) -> None:
    from drills.errors import PermanentError
    from drills.plan.models import EXTERNAL_DNS_TARGET
    from drills.targets.dns import TTL_ANNOTATION
    from drills_lab.externaldns import HOSTNAME_ANNOTATION

    name = "gw.drills.test."
    annotations = {
        HOSTNAME_ANNOTATION: name.rstrip("."),
        EXTERNAL_DNS_TARGET: topology.PRIMARY_ADDR,
    }
    core = k8s.CoreV1Api(_custom(extdns_lab).api_client)
    service = {"metadata": {"name": "gateway", "annotations": annotations},
               "spec": {"ports": [{"port": 80}]}}  # fmt: skip
    core.create_namespaced_service(externaldns.NAMESPACE, service)

    def through_service(data: dict[str, Any]) -> None:
        data["dns"]["resource"] = {"kind": "Service", "namespace": externaldns.NAMESPACE,
                                   "name": "gateway"}  # fmt: skip
        data["dns"]["record"]["name"] = name

    try:
        with Targets(lab_plan(extdns_lab, through_service)) as targets:
            dns_target: Any = targets.dns
            dns_target.confirm(name, "A", topology.PRIMARY_ADDR, deadline_s=3 * SYNC_INTERVAL_S)
            owned = dns_target.check_owner(name, "A")
            assert (owned.owner, owned.resource) == (
                externaldns.OWNER_ID,
                f"service/{externaldns.NAMESPACE}/gateway",
            )
            before = dns_target.snapshot(name, "A")
            assert before == {"annotations": {EXTERNAL_DNS_TARGET: topology.PRIMARY_ADDR,
                                              TTL_ANNOTATION: None}}  # fmt: skip
            dns_target.update(name, "A", topology.DR_ADDR, 30)
            dns_target.confirm(name, "A", topology.DR_ADDR, deadline_s=3 * SYNC_INTERVAL_S)
            with pytest.raises(PermanentError, match="switches only its own name"):
                dns_target.update("other.drills.test.", "A", topology.DR_ADDR, 30)
            dns_target.restore(name, "A", before)  # returns once BIND answers it again
            assert [a.values for a in dns_target.read(name, "A")] == [(topology.PRIMARY_ADDR,)]
        after = core.read_namespaced_service("gateway", externaldns.NAMESPACE)
        assert after.metadata.annotations == annotations  # no TTL annotation left behind
    finally:
        core.delete_namespaced_service("gateway", externaldns.NAMESPACE)
