"""Faults injected mid-run on a lab of its own: the DNS server stopped (SIGSTOP) and
released, the DR Kubernetes API stalled through the fault proxy. Inside a phase's deadline
a takeover waits them out, showing each wait; past it, a drill rolls back and an incident
is held as stuck, announced, retried by recover-orphans and completed with its RTO from T0.

The plan deadlines are short so the tests stay fast; the DR API's stall must outlast the
Kubernetes client's read timeout (10 s) to be a fault at all.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from drills.cli.live_view import LiveView
from drills.notify.deliver import subscribe
from drills.notify.events import EventKind, Notice
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.store.report import render_markdown, report_data
from drills.takeover.drill import Drill, DrillHooks, DrillRequest, DrillResult
from drills.takeover.orphans import orphans, recover_orphan
from drills.takeover.timeline import Listener, PhaseRecord, StepRecord, utc_now
from drills_lab import topology
from drills_lab.runtime import NAMED_DIR, LabInfo
from tests.support.drill import (
    back_to_normal,
    drills_cli,
    lab_plan_file,
    serving,
    snapshot,
)
from tests.support.faultproxy import FaultProxy
from tests.support.receivers import json_receiver
from tests.support.services import own_lab

# Faults held for seconds against deadlines of seconds: serial, so that the machine's load is
# not a fault too.
pytestmark = pytest.mark.serial

DR_API_STALL_S = 11.0  # past the client's 10 s read timeout: one request times out


@pytest.fixture(scope="module")
def fault_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab these tests change (each puts it back as it found it)."""
    with own_lab(tmp_path_factory, "transient-faults-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(scope="module")
def dr_api(fault_lab: LabInfo) -> Iterator[FaultProxy]:
    """The fault proxy in front of DR's Kubernetes API, on DR's own address (its TLS
    certificate names it), and the plan's DR kubeconfig pointed at it."""
    url = fault_lab.kube["dr"]
    address = url.split("://", 1)[1].rstrip("/")
    with FaultProxy(address, host=topology.DR_ADDR) as proxy:
        state = Path(fault_lab.state_dir)
        text = (state / "dr.kubeconfig").read_text().replace(url, f"https://{proxy.address}")
        assert proxy.address in text
        (state / "dr-via-proxy.kubeconfig").write_text(text)
        yield proxy


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'h.db'}"


@pytest.fixture
def store(db: str) -> Iterator[HistoryStore]:
    history = HistoryStore(db)
    yield history
    history.close()


def plan_via_proxy(info: LabInfo) -> Path:
    def through_proxy(data: dict[str, Any]) -> None:
        data["sites"]["dr"]["kubernetes"]["kubeconfig"] = "dr-via-proxy.kubeconfig"

    return lab_plan_file(info, through_proxy)


def named_pid(info: LabInfo) -> int:
    return int((Path(info.state_dir) / NAMED_DIR / "named.pid").read_text())


@contextmanager
def dns_released(info: LabInfo) -> Iterator[None]:
    """Whatever a test does to the lab's DNS server, it runs again afterwards."""
    try:
        yield
    finally:
        os.kill(named_pid(info), signal.SIGCONT)


def at_phase(
    name: str, fault: Callable[[], None], release: Callable[[], None], after_s: float
) -> Listener:
    """A listener that injects ``fault`` as phase ``name`` starts, and releases it
    ``after_s`` later from a timer."""

    def listener(event: str, phase: PhaseRecord, step: StepRecord | None) -> None:
        if event == "phase-start" and phase.name == name:
            fault()
            threading.Timer(after_s, release).start()

    return listener


def run(plan_path: Path, history: HistoryStore, listener: Listener, **kwargs: Any) -> DrillResult:
    request = DrillRequest(load_plan(plan_path), operator="tests", reason="faults",
                           plan_path=str(plan_path), **kwargs)  # fmt: skip
    return Drill(request, history, DrillHooks(listener=listener)).run()


def waits_of(result: DrillResult, phase: str) -> list[StepRecord]:
    return [s for p in result.timeline.phases if p.name == phase for s in p.steps if s.waits]


def test_an_incident_waits_out_a_stalled_dr_api_and_a_stopped_dns_server(
    fault_lab: LabInfo, dr_api: FaultProxy, store: HistoryStore
) -> None:
    """Both faults in one incident, each shorter than its phase's deadline: it reaches
    service, its RTO from the declared T0, and each wait was shown as it happened."""
    plan_path = plan_via_proxy(fault_lab)
    plan = load_plan(plan_path)
    pid = named_pid(fault_lab)
    stall = at_phase("bring-up", dr_api.stall, dr_api.pass_through, DR_API_STALL_S)
    stop = at_phase("dns", lambda: os.kill(pid, signal.SIGSTOP),
                    lambda: os.kill(pid, signal.SIGCONT), 5.0)  # fmt: skip
    seen_live: list[str] = []
    table = LiveView(plan.name, "incident")  # the table `drills run` shows on a terminal

    def listener(event: str, phase: PhaseRecord, step: StepRecord | None) -> None:
        stall(event, phase, step)
        stop(event, phase, step)
        table.on_event(event, phase, step)
        if event == "step-wait" and step is not None:
            screen = Console(width=400, record=True, file=io.StringIO())
            screen.print(table)
            seen_live.append(screen.export_text())

    declared = utc_now() - dt.timedelta(seconds=5)
    try:
        with dns_released(fault_lab):
            result = run(plan_path, store, listener, mode="incident", declared_at=declared,
                         tier_deadline_s=30, dns_deadline_s=30)  # fmt: skip
        assert result.status == "succeeded", result.error
        stored = store.get_run(result.run_id)
        assert stored is not None and stored.t0 is not None and stored.restored_at is not None
        assert stored.t0 == declared
        assert stored.rto_seconds == pytest.approx(
            (stored.restored_at - declared).total_seconds(), abs=0.01
        )
        assert stored.rto_seconds > 5 + DR_API_STALL_S  # the waits count: the outage lasted
        [bring_up] = waits_of(result, "bring-up")[:1]
        assert "timed out" in bring_up.waiting and "retrying until" in bring_up.waiting
        [dns] = waits_of(result, "dns")[:1]
        assert "rfc2136" in dns.waiting and "retrying until" in dns.waiting
        assert any("↻ kubernetes dr" in w and "retrying until" in w for w in seen_live)
        assert any("↻ dns rfc2136" in w for w in seen_live), seen_live[-1:]
        assert "waited" in render_markdown(report_data(stored, store))
        # The stored timeline keeps them: the dashboard's live view reads it.
        steps = [s for p in stored.timeline for s in p["steps"]]
        assert any(s.get("waits", 0) > 0 and "retrying until" in s["waiting"] for s in steps)
        assert serving(fault_lab.endpoints["dr"])
        assert snapshot(plan)["api.drills.test./A"]["values"] == [topology.DR_ADDR]
    finally:
        back_to_normal(plan, store, result.run_id)


def test_a_drill_completes_through_a_blip_and_rolls_back_past_its_deadline(
    fault_lab: LabInfo, dr_api: FaultProxy, store: HistoryStore
) -> None:
    """The DR API stalled inside the tier's deadline: the drill completes and fails back.
    The DNS server stopped past the DNS deadline: it rolls back, and only then (not at the
    first unanswered query); the rollback itself waits for what it needs."""
    plan_path = plan_via_proxy(fault_lab)
    plan = load_plan(plan_path)
    before = snapshot(plan)
    stall = at_phase("bring-up", dr_api.stall, dr_api.pass_through, DR_API_STALL_S)
    blip = run(plan_path, store, stall, tier_deadline_s=30)
    assert blip.status == "succeeded", blip.error
    assert waits_of(blip, "bring-up"), "the stall was never waited for"
    assert snapshot(plan) == before

    pid = named_pid(fault_lab)
    stop = at_phase("dns", lambda: os.kill(pid, signal.SIGSTOP),
                    lambda: os.kill(pid, signal.SIGCONT), 9.0)  # fmt: skip
    started = time.monotonic()
    with dns_released(fault_lab):
        long = run(plan_path, store, stop, tier_deadline_s=30, dns_deadline_s=4)
    assert long.status == "rolled-back", (long.error, long.drift)
    assert "retried" in (long.error or "") and "to the deadline" in (long.error or "")
    [dns_phase] = [p for p in long.timeline.phases if p.name == "dns"]
    assert dns_phase.seconds >= 4  # the deadline, not the first timeout (3 s)
    assert time.monotonic() - started < 60
    assert long.drift == {}
    assert snapshot(plan) == before


def test_an_incident_past_its_deadline_is_held_stuck_announced_and_completed_from_t0(
    fault_lab: LabInfo, store: HistoryStore, db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DNS server stopped past the DNS deadline of an incident: the primary fenced, DR
    up, DNS unanswered. It holds, tells every notifier `incident.stuck` with that state
    and the command that continues it; recover-orphans retries it (in vain while DNS is
    down, told once); then `drills recover --complete` finishes it, its RTO from T0."""
    plan_path = lab_plan_file(fault_lab, lambda _data: None)
    plan = load_plan(plan_path)
    pid = named_pid(fault_lab)
    told: list[Notice] = []
    unsubscribe = subscribe(told.append)
    declared = utc_now() - dt.timedelta(seconds=10)
    run_id = ""
    try:
        with dns_released(fault_lab), json_receiver() as hook:
            monkeypatch.setenv("DRILLS_NOTIFY", hook.url())
            stop = at_phase("dns", lambda: os.kill(pid, signal.SIGSTOP), lambda: None, 0.0)
            result = run(plan_path, store, stop, mode="incident", declared_at=declared,
                         tier_deadline_s=30, dns_deadline_s=3)  # fmt: skip
            run_id = result.run_id
            assert result.status == "failed"
            assert f"drills recover {run_id} --complete" in (result.error or "")
            stored = store.get_run(run_id)
            assert stored is not None and stored.finished_at is None and stored.rto_seconds is None
            stuck = stored.details.stuck
            assert stuck is not None and not stuck.serving and stuck.auto_retry
            assert not stuck.endpoints["primary"] and stuck.endpoints["dr"], stuck
            assert "NO SITE SERVING" in stuck.state and stuck.dns == "unknown"
            assert not stored.details.left_for_decision  # recover-orphans retries it

            _assert_told_stuck(told, hook.messages, run_id)
            _assert_retried_while_down(store, told, run_id)

        os.kill(pid, signal.SIGCONT)
        done = drills_cli("recover", run_id, "--complete", "--json", db=db)
        assert done.returncode == 0, done.stdout + done.stderr
        report = json.loads(done.stdout)
        stored = store.get_run(run_id)
        assert stored is not None and stored.finished_at is not None
        assert stored.t0 == declared and stored.restored_at is not None
        rto = (stored.restored_at - declared).total_seconds()
        assert stored.rto_seconds == pytest.approx(rto, abs=0.01)
        assert report["rto_seconds"] == pytest.approx(rto, abs=0.01)
        assert stored.rto_seconds > 10
        assert stored.details.stuck is not None and stored.details.stuck.completed_at
        assert stored.details.measurement is not None
        assert orphans(store) == []  # nothing left to retry
        assert serving(fault_lab.endpoints["dr"])
        assert snapshot(plan)["api.drills.test./A"]["values"] == [topology.DR_ADDR]
    finally:
        unsubscribe()
        if run_id:
            back_to_normal(plan, store, run_id)


def _assert_told_stuck(
    told: list[Notice], delivered: Callable[[], list[dict[str, Any]]], run_id: str
) -> None:
    """Told once, in-process and through a real notifier, with the state and the command."""
    command = f"drills recover {run_id} --complete"
    [notice] = [n for n in told if n.kind == EventKind.INCIDENT_STUCK]
    assert "no site serving" in notice.title and command in notice.title
    assert notice.payload["command"] == command and not notice.payload["serving"]
    message = _wait_for(delivered, lambda m: "stuck" in m["title"])
    assert command in message["title"]
    assert "the primary does not serve" in message["message"]
    assert "DR serves (HTTP 200)" in message["message"]


def _assert_retried_while_down(store: HistoryStore, told: list[Notice], run_id: str) -> None:
    """recover-orphans takes the stuck run up; while DNS is down it cannot complete it, and
    says so once, however many scans try."""
    [found] = orphans(store)
    assert found.id == run_id
    retried = recover_orphan(store, found)
    assert retried.action == "complete" and retried.status != "recovered"
    stuck = [n for n in told if n.kind == EventKind.INCIDENT_STUCK]
    assert len(stuck) == 2 and stuck[1].payload["retried"]
    [found] = orphans(store)
    recover_orphan(store, found)
    assert len([n for n in told if n.kind == EventKind.INCIDENT_STUCK]) == 2


def _wait_for(
    messages: Callable[[], list[dict[str, Any]]], match: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        found = [m for m in messages() if match(m)]
        if found:
            return found[0]
        time.sleep(0.1)
    raise AssertionError(f"no such message delivered: {messages()}")
