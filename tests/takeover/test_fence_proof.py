"""A fence is proven only by an endpoint seen serving and then seen to stop.

The primary's endpoint is pointed where nothing answers: a closed port, and a listener
that accepts and never answers. A drill must refuse before its first change (the fence
would "pass" on silence that proves nothing); an incident must refuse without
--force-unfenced, and with it go on and say in its report that the primary was not
fenced. The same holds when `drills recover` finishes the fence of such an incident.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from drills.store.history import HistoryStore
from drills.takeover.snapshot import Snapshot
from drills_lab.runtime import LabInfo
from tests.support.drill import back_to_normal, drills_cli, lab_plan, serving, snapshot
from tests.support.services import own_lab

CLOSED = "http://127.0.0.2:1/healthz"  # nothing listens on port 1: refused at once


@pytest.fixture(scope="module")
def fence_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: the forced incidents change it (and the tests put it back)."""
    with own_lab(tmp_path_factory, "fence-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(params=["closed port", "blackhole"])
def silent(request: pytest.FixtureRequest) -> str:
    """A URL for the primary's endpoint where no answer ever comes."""
    if request.param == "closed port":
        return CLOSED
    return f"http://{request.getfixturevalue('blackhole')}/healthz"


def plan_file(info: LabInfo, site: str, endpoint: str) -> str:
    """The lab's plan with one site's endpoint moved, written beside it."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    data["sites"][site]["endpoint"] = endpoint
    path = Path(info.state_dir) / f"fence-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def assert_refused_before_any_change(
    ran: subprocess.CompletedProcess[str], said: str, lab: LabInfo, before: Snapshot, db: str
) -> None:
    """Exit 1 saying why, an aborted run with an empty journal, and the lab as it was."""
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert said in ran.stdout
    assert "**Status:** aborted" in ran.stdout and "No change was made" in ran.stdout
    assert snapshot(lab_plan(lab)) == before
    (run,) = HistoryStore(db).list_runs()
    assert HistoryStore(db).journal(run.id) == []


@pytest.fixture()
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'history.db'}"


def test_a_drill_refuses_a_primary_it_never_saw_serve(
    fence_lab: LabInfo, silent: str, db: str
) -> None:
    before = snapshot(lab_plan(fence_lab))
    ran = drills_cli("run", plan_file(fence_lab, "primary", silent), "--yes", db=db)
    said = f"the primary endpoint {silent} does not serve (no answer"
    assert_refused_before_any_change(ran, said, fence_lab, before, db)


def test_a_drill_refuses_a_dr_endpoint_that_never_answers(fence_lab: LabInfo, db: str) -> None:
    """Failback verifies DR stopped serving from outside: silence there would prove nothing."""
    before = snapshot(lab_plan(fence_lab))
    ran = drills_cli(
        "run", plan_file(fence_lab, "dr", "http://127.0.0.3:1/healthz"), "--yes", db=db
    )
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "the DR endpoint http://127.0.0.3:1/healthz does not answer" in ran.stdout
    assert snapshot(lab_plan(fence_lab)) == before


@pytest.fixture()
def always_200() -> Iterator[str]:
    """A URL that always answers 200 "dr": a DR site already serving."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Serving(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"dr")

        def log_message(self, *_: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Serving)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/healthz"
    server.shutdown()
    server.server_close()


def test_a_drill_refuses_a_dr_endpoint_already_serving(
    fence_lab: LabInfo, always_200: str, db: str
) -> None:
    """Failback could never see DR stop serving: the drill would end in an outage."""
    before = snapshot(lab_plan(fence_lab))
    ran = drills_cli("run", plan_file(fence_lab, "dr", always_200), "--yes", db=db)
    said = f"the DR endpoint {always_200} already serves"
    assert_refused_before_any_change(ran, said, fence_lab, before, db)


def test_an_incident_with_a_silent_primary_needs_force_unfenced(
    fence_lab: LabInfo, silent: str, db: str
) -> None:
    real = lab_plan(fence_lab)
    before = snapshot(real)
    plan = plan_file(fence_lab, "primary", silent)

    refused = drills_cli("run", plan, "--mode", "incident", "--yes", db=db)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert f"the primary endpoint {silent} does not answer" in refused.stdout
    assert "--force-unfenced" in refused.stdout and "No change was made" in refused.stdout
    assert snapshot(real) == before

    forced = drills_cli("run", plan, "--mode", "incident", "--yes", "--force-unfenced", db=db)
    history = HistoryStore(db)
    run = history.list_runs()[0]
    try:
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "the primary was unreachable and was NOT fenced (forced)" in forced.stdout
        assert "UNVERIFIED" in forced.stdout
        assert run.details.unfenced is True
        assert serving(fence_lab.endpoints["dr"])
        assert not serving(fence_lab.endpoints["primary"])  # the fence was still made
    finally:
        back_to_normal(real, history, run.id)
    assert snapshot(real) == before


def test_a_forced_unfenced_incident_that_stops_part_way_keeps_its_warning(
    fence_lab: LabInfo, db: str
) -> None:
    """Smoke fails after the takeover: the run stops, and still says it was not fenced."""
    real = lab_plan(fence_lab)
    before = snapshot(real)
    data = yaml.safe_load(Path(plan_file(fence_lab, "primary", CLOSED)).read_text())
    data["smoke"][0]["expect_body"] = "a body the DR site never sends"
    data["smoke"][0]["timeout"] = "1s"
    plan = Path(fence_lab.state_dir) / f"fence-smoke-{time.monotonic_ns()}.yaml"
    plan.write_text(yaml.safe_dump(data, sort_keys=False))
    history = HistoryStore(db)
    try:
        ran = drills_cli(
            "run", str(plan), "--mode", "incident", "--yes", "--force-unfenced", db=db
        )  # fmt: skip
        assert ran.returncode == 1, ran.stdout + ran.stderr
        (run,) = history.list_runs()
        assert run.status == "failed" and run.finished_at is None, run.error
        assert run.details.unfenced is True
    finally:
        back_to_normal(real, history, history.list_runs()[0].id)
    assert snapshot(real) == before


def test_recover_finishing_the_fence_of_a_silent_primary_needs_force_unfenced(
    fence_lab: LabInfo, db: str
) -> None:
    """A resumed fence has no preflight sighting: it looks before it changes anything."""
    real = lab_plan(fence_lab)
    before = snapshot(real)
    plan = plan_file(fence_lab, "primary", CLOSED)
    died = drills_cli(
        "run", plan, "--mode", "incident", "--yes", "--force-unfenced", db=db,
        crash_at="phase:fence:start",
    )  # fmt: skip
    assert died.returncode != 0
    history = HistoryStore(db)
    run = history.list_runs()[0]

    held = drills_cli("recover", run.id, "--hold", "--plan-file", plan, "--deadline", "10", db=db)
    assert held.returncode == 1, held.stdout + held.stderr
    assert "does not answer" in held.stdout + held.stderr
    assert "--force-unfenced" in held.stdout + held.stderr
    assert snapshot(real) == before  # refused before any change

    try:
        forced = drills_cli(
            "recover", run.id, "--hold", "--force-unfenced", "--plan-file", plan,
            "--deadline", "10", db=db,
        )  # fmt: skip
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert not serving(fence_lab.endpoints["primary"])
    finally:
        back_to_normal(real, history, run.id)
    assert snapshot(real) == before
