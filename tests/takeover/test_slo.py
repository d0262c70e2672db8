"""SLOs after the switch and the load probe, on the lab and a real Prometheus: readiness
refuses bad PromQL with Prometheus's own message; an SLO that recovers after the switch
holds (met); one that breaches during its hold, or cannot be verified, fails the drill,
which rolls back exactly; an incident only reports and announces; the load probe runs
through the name at the primary, then at DR."""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from drills.checks.checkup import check_context, select_checks
from drills.checks.runner import run_checks
from drills.notify.deliver import subscribe
from drills.notify.events import EventKind, Notice
from drills.plan import DrillPlan
from drills.store.history import HistoryStore
from drills.store.report import render_markdown, report_data
from drills.takeover.drill import Drill, DrillHooks, DrillRequest, DrillResult
from drills.targets.sites import Targets
from drills_lab.demand import PEAK_RPS
from drills_lab.load import PER_REPLICA_RPS
from drills_lab.runtime import LabInfo
from drills_lab.topology import INFERENCE_WORKLOADS
from tests.support.drill import drills_cli, lab_plan, snapshot
from tests.support.faultproxy import FaultProxy
from tests.support.prometheus_target import (
    METRIC,
    MetricTarget,
    prometheus_scraping,
    wait_for_value,
)
from tests.support.services import own_lab

GOOD, BAD = 0.1, 2.0
MAX_PROBE_RPS = 20  # the highest rate a load probe of these tests asks for


@pytest.fixture(scope="module")
def slo_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "slo-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(scope="module")
def target() -> Iterator[MetricTarget]:
    served = MetricTarget()
    yield served
    served.close()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory, target: MetricTarget) -> Iterator[str]:
    with prometheus_scraping(tmp_path_factory.mktemp("slo-prometheus"), target) as url:
        yield url


@pytest.fixture(autouse=True)
def _no_prometheus_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DRILLS_PROMETHEUS_URL", raising=False)


@pytest.fixture()
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


def set_value(target: MetricTarget, prometheus: str, value: float) -> None:
    target.value = value
    wait_for_value(prometheus, value)


def slo(name: str = "latency", hold: str = "3s", **extra: Any) -> dict[str, Any]:
    return {"name": name, "expr": f"max({METRIC})", "op": "<", "threshold": 1.0,
            "hold": hold, **extra}  # fmt: skip


def with_slos(
    prometheus: str, slos: list[dict[str, Any]], load: dict[str, Any] | None = None
) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data.setdefault("cost", {})["prometheus"] = prometheus
        # The lab's demand is recorded by the lab's own Prometheus, not this one: left in, the
        # takeover could not read it and the drill would miss its carry, whatever the SLOs.
        data.pop("demand", None)
        # Without it, DR is sized here for the lab's peak and a probe beside it: the users
        # (up to PEAK_RPS) follow the name to DR, and at dr_replicas alone a probe on top
        # of the peak would be shed (503s) by the lab's capacity model.
        for w in data["workloads"]:
            if f"{w['namespace']}/{w['name']}" in INFERENCE_WORKLOADS:
                w["dr_replicas"] = math.ceil((PEAK_RPS + MAX_PROBE_RPS) / PER_REPLICA_RPS)
        data["slo"] = slos
        if load is not None:
            data["load"] = load

    return change


def on_phase_end(name: str, action: Callable[[], None]) -> DrillHooks:
    def listener(event: str, phase: Any, _step: Any) -> None:
        if event == "phase-end" and phase.name == name:
            action()

    return DrillHooks(listener=listener)


def run(plan: DrillPlan, history: HistoryStore, hooks: DrillHooks | None = None,
        **kwargs: Any) -> DrillResult:  # fmt: skip
    request = DrillRequest(plan, operator="tests", reason="slo", tier_deadline_s=30, **kwargs)
    return Drill(request, history, hooks).run()


def test_bad_promql_fails_readiness_with_prometheus_message(
    slo_lab: LabInfo, prometheus: str, history: HistoryStore
) -> None:
    plan = lab_plan(slo_lab, with_slos(prometheus, [slo(), slo("broken", expr="sum(rate(x[5m])")]))
    with Targets(plan) as targets:
        report = run_checks(select_checks(["slo.valid"]), check_context(plan, targets, None))
    (result,) = report.results
    assert result.status == "fail" and result.blocking
    # Prometheus's own parser's words, and the SLO they are about.
    assert "'broken'" in result.summary
    assert "parse error: unclosed left parenthesis" in result.summary
    assert list(result.evidence["invalid"]) == ["broken"]
    # A drill of that plan stops before any change.
    before = snapshot(plan)
    outcome = run(plan, history)
    assert outcome.status == "aborted" and "slo.valid" in (outcome.error or "")
    assert snapshot(plan) == before


def test_valid_promql_passes_readiness(slo_lab: LabInfo, prometheus: str) -> None:
    plan = lab_plan(slo_lab, with_slos(prometheus, [slo(), slo("errors", expr="vector(0)")]))
    with Targets(plan) as targets:
        report = run_checks(select_checks(["slo.valid"]), check_context(plan, targets, None))
    assert report.results[0].status == "pass", report.results[0].summary
    assert report.results[0].evidence["checked"] == 2


def test_slo_recovering_after_the_switch_holds_and_load_probe_compares_sites(
    slo_lab: LabInfo, prometheus: str, target: MetricTarget, history: HistoryStore,
    db_url: str,
) -> None:  # fmt: skip
    set_value(target, prometheus, BAD)  # the primary is "slow" until DR serves
    load = {"url": f"http://{_service_host(slo_lab)}/healthz", "rate": MAX_PROBE_RPS,
            "duration": "2s", "p95": "2s", "error_rate": 0.0}  # fmt: skip
    plan = lab_plan(slo_lab, with_slos(prometheus, [slo()], load))
    before = snapshot(plan)
    # DR turns good shortly after the watch starts (at the smoke), so the watch's first
    # reads see it bad whatever the scrape's timing.
    hooks = on_phase_end("smoke", lambda: _later(1.5, lambda: setattr(target, "value", GOOD)))
    result = run(plan, history, hooks)
    assert result.status == "succeeded", result.error
    assert result.verdict == "met"
    assert snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None
    (held,) = stored.details.slo
    assert held["status"] == "held" and held["breaches"] == []
    # First OK after the switch, not before: the value the watch read first was BAD.
    assert held["values"][0][1] == BAD and held["last_value"] == GOOD
    assert result.measurement is not None
    switched = (result.measurement.dns_switched - result.measurement.t0).total_seconds()
    assert switched < held["first_ok_seconds"] < 300
    assert held["held_seconds"] >= 3
    # The load probe: the same load through the name, at the primary then at DR.
    load_record = stored.details.load
    assert load_record is not None
    primary, dr = load_record["primary"], load_record["dr"]
    assert primary["address"] != dr["address"]
    assert primary["address"] == slo_lab.endpoints["primary"].split("//")[1].split(":")[0]
    assert dr["address"] == slo_lab.endpoints["dr"].split("//")[1].split(":")[0]
    # DR is sized for the peak and the probe; the primary is the lab's own (40 req/s for
    # users of up to 36), so near the lab's noon it sheds part of the probe: counted, as 503s.
    assert dr["errors"] == 0 and dr["codes"] == {"200": 40}
    shed = primary["codes"].get("503", 0)
    assert primary["errors"] == shed and set(primary["codes"]) <= {"200", "503"}
    for site in (primary, dr):
        assert site["sent"] == 40 and sum(site["codes"].values()) == 40
        assert 0 < site["p50_seconds"] <= site["p95_seconds"] <= site["p99_seconds"] < 2
        assert site["throughput"] > 10
    assert load_record["overhead_seconds"] > 0
    # The report: JSON keys and Markdown sections; the history's JSON.
    data = report_data(stored, history)
    assert data["slo"][0]["status"] == "held" and data["load"]["dr"]["sent"] == 40
    markdown = render_markdown(data)
    assert "## SLOs after the switch" in markdown and "## Load probe through the name" in markdown
    listed = drills_cli("history", "--json", db=history.url)
    row = next(r for r in json.loads(listed.stdout) if r["id"] == result.run_id)
    assert row["slo"] == [{"name": "latency", "status": "held", "required": True,
                           "first_ok_seconds": held["first_ok_seconds"],
                           "last_value": GOOD}]  # fmt: skip
    assert set(row["load"]) == {"primary", "dr"}


def test_slo_breaching_during_its_hold_rolls_the_drill_back_exactly(
    slo_lab: LabInfo, prometheus: str, target: MetricTarget, history: HistoryStore
) -> None:
    set_value(target, prometheus, GOOD)
    plan = lab_plan(slo_lab, with_slos(prometheus, [slo(hold="60s")]))
    before = snapshot(plan)
    hooks = on_phase_end("smoke", lambda: _later(1.5, lambda: setattr(target, "value", BAD)))
    result = run(plan, history, hooks)
    assert result.status == "rolled-back", result.error
    assert result.verdict == "not met"
    assert "SLO latency: breached" in (result.error or "")
    assert result.drift == {} and snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None
    (breached,) = stored.details.slo
    assert breached["status"] == "breached"
    assert breached["breaches"] and breached["breaches"][0]["value"] == BAD
    assert breached["held_seconds"] < 60  # stopped at the breach, not after the hold


def test_prometheus_down_leaves_slo_unverified_and_the_drill_not_met(
    slo_lab: LabInfo, prometheus: str, target: MetricTarget, history: HistoryStore
) -> None:
    set_value(target, prometheus, GOOD)
    with FaultProxy(prometheus.removeprefix("http://")) as proxy:
        plan = lab_plan(slo_lab, with_slos(f"http://{proxy.address}", [slo()]))
        before = snapshot(plan)
        # Prometheus answers the preflight (slo.valid passes), then stops answering.
        result = run(plan, history, on_phase_end("dns", lambda: proxy.reset_next(10**6)))
    assert (result.status, result.verdict) == ("rolled-back", "not met"), result.error
    assert "SLO latency: unverified: Prometheus:" in (result.error or "")
    assert result.drift == {} and snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.details.slo[0]["status"] == "unverified"


def test_prometheus_down_with_slo_not_required_is_met_and_reported(
    slo_lab: LabInfo, prometheus: str, target: MetricTarget, history: HistoryStore
) -> None:
    set_value(target, prometheus, GOOD)
    with FaultProxy(prometheus.removeprefix("http://")) as proxy:
        plan = lab_plan(slo_lab, with_slos(f"http://{proxy.address}", [slo(required=False)]))
        result = run(plan, history, on_phase_end("dns", lambda: proxy.reset_next(10**6)))
    assert result.status == "succeeded", result.error
    assert result.verdict == "met"
    stored = history.get_run(result.run_id)
    assert stored is not None
    (unverified,) = stored.details.slo
    assert unverified["status"] == "unverified" and unverified["required"] is False
    assert unverified["line"].startswith("SLO latency: unverified (required: false")


def test_load_probe_over_its_limits_rolls_the_drill_back(
    slo_lab: LabInfo, history: HistoryStore
) -> None:
    # DR's endpoint behind a proxy that holds every request 300 ms: over a 100 ms p95.
    dr_endpoint = slo_lab.endpoints["dr"].removeprefix("http://").split("/")[0]
    with FaultProxy(dr_endpoint) as proxy:
        proxy.latency(0.3)
        load = {"url": f"http://{proxy.address}/healthz", "rate": 10, "duration": "1s",
                "p95": "100ms", "error_rate": 0.0}  # fmt: skip
        plan = lab_plan(slo_lab, lambda data: data.update(load=load))
        before = snapshot(plan)
        result = run(plan, history)
    assert result.status == "rolled-back", result.error
    assert result.verdict == "not met"
    assert "load probe at DR: p95 " in (result.error or "")
    assert "over 100 ms" in (result.error or "")
    assert snapshot(plan) == before
    stored = history.get_run(result.run_id)
    assert stored is not None and stored.details.load is not None
    # The baseline (DR not serving yet: 503s) is only reported; DR's load failed the drill.
    assert stored.details.load["primary"]["codes"] == {"503": 10}
    assert stored.details.load["dr"]["codes"] == {"200": 10}
    assert stored.details.load["dr"]["p95_seconds"] >= 0.3


def test_incident_reports_and_announces_a_breach_and_never_rolls_back(
    tmp_path_factory: pytest.TempPathFactory, prometheus: str, target: MetricTarget,
    history: HistoryStore,
) -> None:  # fmt: skip
    set_value(target, prometheus, GOOD)
    notices: list[Notice] = []
    unsubscribe = subscribe(notices.append)
    try:
        with own_lab(tmp_path_factory, "slo-incident-lab", ready_delay=0.2) as info:
            load = {"url": f"http://{_service_host(info)}/healthz", "rate": 5, "p95": "1s"}
            plan = lab_plan(info, with_slos(prometheus, [slo(hold="60s")], load))
            hooks = on_phase_end(
                "smoke", lambda: _later(1.5, lambda: setattr(target, "value", BAD))
            )
            result = run(plan, history, hooks, mode="incident")
            assert result.status == "succeeded", result.error
            stored = history.get_run(result.run_id)
            assert stored is not None
            assert stored.details.slo[0]["status"] == "breached"
            assert stored.details.load is None  # never a load on a DR serving for real
            # No rollback: DR still serves the name.
            phases = [p.name for p in result.timeline.phases]
            assert "rollback" not in phases and "failback" not in phases
    finally:
        unsubscribe()
    breach = [n for n in notices if n.kind == EventKind.INCIDENT_SLO_BREACH]
    assert len(breach) == 1 and breach[0].payload["run_id"] == result.run_id
    assert "latency" in breach[0].title


def _service_host(info: LabInfo) -> str:
    plan = lab_plan(info)
    smoke = str(plan.smoke[0].url)
    return smoke.split("//")[1].split("/")[0]


def _later(seconds: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
