"""No check passes, or fails, on an answer it cannot trust.

A misrouted proxy, a wrong path prefix or a stale ingress answers 404 to every path; a
target down refuses connections. A check that reads such a target could not read what
it judges: its status is ``error``, never ``pass`` (nothing in the way) and never ``fail``
(things "missing at DR"). Every registered check is run, one at a time and with its own
adapters, against the lab with one DR target replaced; each check that sent that target
anything must end in ``error``. The checks come from the registry: a new check is held
to this the day it is registered.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from drills.checks.base import CheckResult, CheckSpec, Status
from drills.checks.catalog import load_checks
from drills.checks.checkup import check_context, wayback_checks
from drills.checks.runner import run_one
from drills.plan import DrillPlan
from drills.plan.reverse import reversed_plan
from drills.targets.sites import Targets
from drills_lab.kubeapi import write_kubeconfig
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process
from tests.support.drill import lab_plan, lab_plan_file
from tests.support.faultproxy import FaultProxy, UdpFaultProxy
from tests.support.not_found import NotFoundServer

# Checks once seen passing (or reporting "missing") behind a 404-only DR API.
SEEN_PASSING = {"cluster.resource_quota", "cluster.priority_classes", "forecast.rto",
                "secrets.synced", "cluster.standby_parity"}  # fmt: skip


def run_each(
    plan: DrillPlan,
    sent: Callable[[], int],
    specs: Iterable[CheckSpec] | None = None,
    *,
    reverse: bool = False,
) -> dict[str, tuple[CheckResult, bool]]:
    """Every registered check alone, with fresh adapters (no answer shared from another
    check): its result, and whether it sent the replaced target anything."""
    results = {}
    for spec in load_checks().all() if specs is None else specs:
        with Targets(plan, reverse=reverse) as targets:
            before = sent()
            result = run_one(spec, check_context(plan, targets, None))
            results[spec.id] = (result, sent() > before)
    return results


def assert_readers_error(results: dict[str, tuple[CheckResult, bool]]) -> set[str]:
    readers = {check for check, (_, read) in results.items() if read}
    wrong = {
        check: f"{result.status}: {result.summary}"
        for check, (result, read) in results.items()
        if read and result.status is not Status.ERROR
    }
    assert readers, "no check read the replaced target: the test proves nothing"
    assert not wrong, wrong
    return readers


def kubeconfig(tmp_path: Path, role: str, address: str) -> str:
    path = tmp_path / f"{role}.kubeconfig"
    write_kubeconfig(path, server_url=f"http://{address}", context=role, token="t0ken")
    return str(path)


def dr_kubernetes_at(tmp_path: Path, address: str) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["sites"]["dr"]["kubernetes"]["kubeconfig"] = kubeconfig(tmp_path, "dr", address)

    return change


# -- Kubernetes ------------------------------------------------------------------------


@pytest.mark.parametrize("names_object", [False, True], ids=["no-object", "naming-the-path"])
def test_a_dr_api_answering_404_status_to_every_path_errors_every_check_that_reads_it(
    lab: LabInfo, tmp_path: Path, names_object: bool
) -> None:
    # Naming the path's last part as a missing object mimics an API server's own answer
    # for an object that is not there: only discovery tells the two apart.
    with NotFoundServer(names_object=names_object) as server:
        plan = lab_plan(lab, dr_kubernetes_at(tmp_path, server.address))
        results = run_each(plan, lambda: server.requests)
    readers = assert_readers_error(results)
    assert readers >= SEEN_PASSING
    # What could not be read is said so, never reported missing.
    for check in ("secrets.synced", "cluster.standby_parity"):
        summary = results[check][0].summary
        assert summary.startswith("cannot read kubernetes dr")
        assert "missing at DR" not in summary and "not the Kubernetes API asked" in summary
    forecast = results["forecast.rto"][0]
    assert forecast.summary.startswith("forecast unverified")
    assert forecast.evidence["verified"] is False and "rto_seconds" not in forecast.evidence


def test_a_proxy_answering_bare_404s_in_front_of_the_dr_api_errors_every_check_that_reads_it(
    lab: LabInfo, tmp_path: Path
) -> None:
    with FaultProxy(lab.kube["dr"].removeprefix("https://"), http=True) as proxy:
        proxy.answer_next(1_000_000, 404)  # an empty body: not even a Status
        plan = lab_plan(lab, dr_kubernetes_at(tmp_path, proxy.address))
        results = run_each(plan, lambda: proxy.counters.requests)
    assert assert_readers_error(results) >= SEEN_PASSING


def test_the_way_back_checks_error_on_a_primary_api_answering_404_to_every_path(
    lab: LabInfo, tmp_path: Path
) -> None:
    """The failback's own checks, asked of the reversed plan: the primary is where they look."""

    def change(data: dict[str, Any]) -> None:
        data["sites"]["primary"]["kubernetes"]["kubeconfig"] = kubeconfig(
            tmp_path, "primary", server.address
        )

    with NotFoundServer() as server:
        reverse = reversed_plan(lab_plan(lab, change))
        results = run_each(reverse, lambda: server.requests, wayback_checks(), reverse=True)
    # A fenced writer read from the proxy as "absent" would let a failback merge two writers.
    assert assert_readers_error(results) >= {"fence.writers_stopped", "cluster.reachable"}


def test_both_clusters_refusing_connections_errors_every_check_that_reads_them(
    lab: LabInfo, tmp_path: Path, closed_port: str
) -> None:
    # Each proxy finds its upstream closed and resets the connection: a cluster that is
    # down, with its connection attempts counted.
    with FaultProxy(closed_port) as primary, FaultProxy(closed_port) as dr:

        def change(data: dict[str, Any]) -> None:
            for role, proxy in (("primary", primary), ("dr", dr)):
                data["sites"][role]["kubernetes"]["kubeconfig"] = kubeconfig(
                    tmp_path, role, proxy.address
                )

        plan = lab_plan(lab, change)
        results = run_each(plan, lambda: primary.counters.connections + dr.counters.connections)
    assert assert_readers_error(results) >= SEEN_PASSING


def test_the_forecast_is_unverified_when_both_clusters_refuse_connections(
    lab: LabInfo, tmp_path: Path, closed_port: str
) -> None:
    def change(data: dict[str, Any]) -> None:
        for role in ("primary", "dr"):
            data["sites"][role]["kubernetes"]["kubeconfig"] = kubeconfig(
                tmp_path, role, closed_port
            )

    plan_file = lab_plan_file(lab, change)
    done = drills_process(["forecast", str(plan_file), "--json"], timeout=120)
    assert done.returncode == 1, done.stderr
    forecast = json.loads(done.stdout)
    assert forecast["verified"] is False
    assert any(closed_port in unread for unread in forecast["unreadable"])


def test_readiness_json_behind_a_404_proxy_reports_errors_not_passes(
    lab: LabInfo, tmp_path: Path
) -> None:
    """What a user behind such a proxy saw, through the command they ran."""
    with NotFoundServer() as server:
        plan_file = lab_plan_file(lab, dr_kubernetes_at(tmp_path, server.address))
        done = subprocess.run(
            [sys.executable, "-m", "drills", "readiness", str(plan_file), "--json",
             "--db", f"sqlite:///{tmp_path / 'h.db'}"],
            capture_output=True, text=True, timeout=180,
        )  # fmt: skip
    statuses = {r["id"]: r["status"] for r in json.loads(done.stdout)["results"]}
    assert {check: statuses[check] for check in SEEN_PASSING} == dict.fromkeys(
        SEEN_PASSING, "error"
    )
    assert done.returncode != 0


# -- registry, buckets, Secrets Manager ------------------------------------------------


@contextmanager
def dr_at_not_found(lab: LabInfo, where: Callable[[dict[str, Any], str], None]) -> Iterator[
    tuple[DrillPlan, NotFoundServer]
]:  # fmt: skip
    with NotFoundServer() as server:
        yield lab_plan(lab, lambda data: where(data["sites"]["dr"], server.url)), server


def _registry(dr: dict[str, Any], url: str) -> None:
    dr["registry"] = {"kind": "oci", "url": url}


def _objects(dr: dict[str, Any], url: str) -> None:
    dr["objects"]["endpoint_url"] = url


def _aws(dr: dict[str, Any], url: str) -> None:
    dr["aws"]["endpoint_url"] = url


@pytest.mark.parametrize(
    ("where", "known_readers"),
    [
        (_registry, {"images.synced"}),
        (_objects, {"data.replicated", "data.dr_writable", "data.delete_protection"}),
        (_aws, {"secrets.synced"}),
    ],
    ids=["registry", "bucket", "aws"],
)
def test_a_dr_endpoint_answering_404_to_every_path_errors_every_check_that_reads_it(
    lab: LabInfo, where: Callable[[dict[str, Any], str], None], known_readers: set[str]
) -> None:
    with dr_at_not_found(lab, where) as (plan, server):
        results = run_each(plan, lambda: server.requests)
    assert assert_readers_error(results) >= known_readers


# -- DNS ---------------------------------------------------------------------------------


def _zone_elsewhere(proxy: UdpFaultProxy) -> Callable[[dict[str, Any]], None]:
    """The plan's DNS at a server that does not serve its zone (a wrong server address)."""

    def change(data: dict[str, Any]) -> None:
        data["dns"] |= {"servers": [proxy.address], "zone": "elsewhere.test."}
        data["dns"]["record"]["name"] = "api.elsewhere.test."

    return change


def test_a_dns_server_that_does_not_serve_the_zone_errors_every_check_that_reads_it(
    lab: LabInfo,
) -> None:
    with UdpFaultProxy(lab.dns_server) as proxy:
        plan = lab_plan(lab, _zone_elsewhere(proxy))
        results = run_each(plan, lambda: proxy.datagrams)
    assert assert_readers_error(results) >= {"dns.ttl", "dns.control", "forecast.rto"}


def test_a_dns_server_that_does_not_answer_errors_every_check_that_reads_it(
    lab: LabInfo,
) -> None:
    with UdpFaultProxy(lab.dns_server) as proxy:
        proxy.set("blackhole")
        plan = lab_plan(lab, _servers_at(proxy))
        results = run_each(plan, lambda: proxy.datagrams)
    assert assert_readers_error(results) >= {"dns.ttl", "dns.control", "forecast.rto"}


def _servers_at(proxy: UdpFaultProxy) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["dns"]["servers"] = [proxy.address]

    return change
