"""The dashboard in a real browser: system Chromium, through Playwright, against
`drills ui` on loopback. It opens each page, declares an incident on a lab of its own,
watches the real flow run to the end, and finds it in the history; then, held at DR, it
fails back from the incident page and finds the one closed incident record. Each page is
saved as a screenshot, for the test's output and for the README (docs/screenshots/), at
1280×800, the laptop screen a person on call reads it on."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills.store.incident_record import incident_record
from drills.store.report import render_markdown, report_data
from drills.takeover.drill import Drill, DrillRequest
from drills_lab.runtime import LabInfo
from tests.support.browser import CHROMIUM_ARGS, dashboard, serving_incident_flow
from tests.support.services import own_lab, require_system_binary
from tests.support.ui import DECLARE_BUTTON, FLOW_NAME, ROOT

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytestmark = pytest.mark.slow

SCREENSHOTS = ROOT / "docs" / "screenshots"
VIEWPORT = {"width": 1280, "height": 800}
FAILBACK = "ui-browser-failback"


@pytest.fixture(scope="module")
def incident_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own (its plan with SLOs and a load probe, as `lab up` writes it): an
    incident leaves it failed over to DR."""
    with own_lab(tmp_path_factory, "browser-lab", ready_delay=0.2, slo=True) as info:
        yield info


class Shots:
    def __init__(self, page: object, out: Path) -> None:
        self.page = page
        self.out = out
        self.taken: list[Path] = []

    def take(self, name: str) -> None:
        # Between two runs of the page's script: while one runs, Streamlit greys what it has
        # not redrawn yet and shows "Stop", and the picture would say the page is stale.
        self.page.wait_for_function(  # type: ignore[attr-defined]
            "!document.querySelector('[data-stale=\"true\"]')"
            " && !document.querySelector('[data-testid^=\"stStatusWidgetRunning\"]')",
            timeout=15_000, polling=100,
        )  # fmt: skip
        path = self.out / f"{name}.png"
        self.page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
        assert path.stat().st_size > 10_000
        self.taken.append(path)

    def publish(self) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        for path in self.taken:
            shutil.copyfile(path, SCREENSHOTS / path.name)


def test_dashboard_in_chromium(incident_lab: LabInfo, prefect_url: str, tmp_path: Path) -> None:
    chromium = require_system_binary("chromium", "chromium")
    from playwright.sync_api import expect, sync_playwright

    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    plan_path = str(Path(incident_lab.state_dir) / "plan.yaml")
    store = HistoryStore(db_url)
    drill = Drill(
        DrillRequest(load_plan(plan_path), operator="alice", reason="quarterly drill"), store
    ).run()
    assert drill.status == "succeeded", drill.error
    # The dashboard runs beside the lab, which it names as an operator would: relatively.
    where = Path(incident_lab.state_dir).parent
    shown = str(Path(plan_path).relative_to(where))
    with (
        serving_incident_flow(
            prefect_url,
            "ui-browser-declare-incident",
            {"DRILLS_DB_URL": db_url},
            tmp_path / "runner.log",
            also=(FAILBACK,),
        ) as deployment,
        dashboard(
            {
                "DRILLS_DB_URL": db_url,
                "DRILLS_PLANS": shown,
                "PREFECT_API_URL": prefect_url,
                "DRILLS_INCIDENT_DEPLOYMENT": deployment,
                "DRILLS_FAILBACK_DEPLOYMENT": f"{FLOW_NAME}/{FAILBACK}",
            },
            tmp_path / "ui.log",
            cwd=where,
        ) as base,
        sync_playwright() as pw,
    ):
        browser = pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.set_default_timeout(30_000)
        expect.set_options(timeout=30_000)  # the first render imports the whole app
        shots = Shots(page, tmp_path)
        _fleet_opens_first(page, base, shots)
        _readiness_by_category(page, base, shots)
        _plan_valid_and_last_drill_met(page, base, shown, shots)
        _declare_and_watch_the_incident(page, base, shots)
        _incident_in_the_history(page, store, tmp_path, shots)
        _fail_back_from_the_incident_page(page, base, shots)
        _one_closed_incident_record(page, store)
        browser.close()
    taken = sorted(p.name for p in shots.taken)
    pages = ("declare-incident", "failback", "fleet", "history", "plans", "readiness")
    assert taken == [f"{name}.png" for name in pages]
    # The README's pictures change only when asked for (`make screenshots`), not on every run.
    if os.environ.get("DRILLS_UPDATE_SCREENSHOTS") == "1":
        shots.publish()


def _fleet_opens_first(page: Page, base: str, shots: Shots) -> None:
    """The dashboard opens on the Fleet page: the plan's row and the drill calendar."""
    from playwright.sync_api import expect

    page.goto(base)
    expect(page.get_by_role("heading", name="Fleet", exact=True)).to_be_visible()
    expect(page.get_by_text(re.compile(r"^1 plan\(s\), \d+ with problems"))).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile("^Scheduled drills"))).to_be_visible()
    table = page.get_by_test_id("stDataFrame")
    expect(table).to_be_visible()
    # The table fits the window: it scrolls inside itself, the plan and problems pinned.
    box = table.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    expect(page.get_by_role("link", name="Readiness of lab")).to_be_visible()
    expect(
        page.get_by_test_id("stVegaLiteChart").or_(page.get_by_text("No plan schedules"))
    ).to_be_visible()
    shots.take("fleet")


def _readiness_by_category(page: Page, base: str, shots: Shots) -> None:
    """Readiness: the snapshot the drill's preflight took, by category."""
    from playwright.sync_api import expect

    page.goto(f"{base}/readiness")
    expect(page.get_by_role("heading", name="Readiness", exact=True)).to_be_visible()
    expect(page.get_by_text("Lab mode")).to_be_visible()
    expect(page.get_by_role("tab", name=re.compile(r"lab — ready"))).to_be_visible()
    for category in ("Images", "Data", "Secrets", "Cluster", "DNS", "Cadence"):
        expect(page.get_by_role("heading", name=re.compile(f"^{category}"))).to_be_visible()
    expect(page.get_by_text("Images synced to DR", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Re-run checks")).to_be_visible()
    shots.take("readiness")


def _plan_valid_and_last_drill_met(page: Page, base: str, shown: str, shots: Shots) -> None:
    """Plans: valid, summarized, last drill met."""
    from playwright.sync_api import expect

    page.goto(f"{base}/plans")
    expect(page.get_by_text(f"{shown} is valid")).to_be_visible()
    expect(page.locator("p", has_text="Last drill:")).to_contain_text("met")
    expect(page.get_by_role("tab", name="Tiers")).to_be_visible()
    shots.take("plans")


def _declare_and_watch_the_incident(page: Page, base: str, shots: Shots) -> None:
    """Declare an incident, and watch the real flow run take over to DR."""
    from playwright.sync_api import expect

    page.goto(f"{base}/declare")
    page.get_by_label("Reason").fill("primary region lost power (browser test)")
    page.get_by_label("Reason").press("Tab")
    confirm = page.get_by_label(re.compile("Type the plan name"))
    confirm.fill("lab")
    confirm.press("Tab")
    page.get_by_role("button", name=DECLARE_BUTTON).click()
    expect(page.get_by_text(re.compile(r"^Incident run "))).to_be_visible()
    # While it runs, the form says why it is off, with its button disabled.
    expect(page.get_by_text(re.compile("^Declaring is off while"))).to_be_visible()
    expect(page.get_by_role("button", name=DECLARE_BUTTON)).to_be_disabled()
    link = page.get_by_role("link", name="Open this run in the Prefect UI")
    expect(link).to_have_attribute("href", re.compile(r"/runs/flow-run/[0-9a-f-]{36}$"))
    expect(page.get_by_text("The takeover finished")).to_be_visible(timeout=120_000)
    expect(page.get_by_text("RTO clock", exact=True)).to_be_visible()
    expect(page.get_by_text("measured", exact=True)).to_be_visible()  # the clock stopped
    expect(page.get_by_text("and counting")).to_have_count(0)
    for phase in ("preflight", "declare", "fence", "bring-up", "dns", "smoke", "measure"):
        expect(page.get_by_text(phase, exact=True).first).to_be_visible()
    # The picture shows the run's clocks and outcome, not wherever the page was scrolled.
    page.get_by_role("heading", name=re.compile(r"^Incident run ")).first.evaluate(
        "e => e.scrollIntoView({block: 'start'})"
    )
    shots.take("declare-incident")


def _incident_in_the_history(page: Page, store: HistoryStore, tmp_path: Path, shots: Shots) -> None:
    """The incident is in the history, with its timeline and the same report as the CLI."""
    from playwright.sync_api import expect

    page.get_by_role("link", name="See this run in the drill history").click()
    expect(page.get_by_role("heading", name="Drill history")).to_be_visible()
    expect(page.get_by_role("heading", name=re.compile(r"Run .* — lab, incident"))).to_be_visible()
    expect(page.locator("[data-testid='stDataFrame']").first).to_be_visible()
    expect(page.locator(".vega-embed").first).to_be_visible()  # the RTO trend
    # and the demand DR carried, the SLOs after the switch, and the Gantt chart
    expect(page.locator(".vega-embed")).to_have_count(4)
    expect(page.get_by_text("Demand carried at DR")).to_be_visible()
    expect(page.get_by_text("SLOs after the switch")).to_be_visible()
    incident = store.list_runs(mode="incident")[0]
    assert incident.status == "succeeded" and incident.flow_run_id
    with page.expect_download() as download:
        page.get_by_role("button", name="Download report (Markdown)").click()
    saved = tmp_path / "report.md"
    download.value.save_as(saved)
    # The same report, but for the open incident's time at DR, which grows as it is read.
    assert _timeless(saved.read_text()) == _timeless(render_markdown(report_data(incident, store)))
    page.get_by_role("heading", name="Drill history").evaluate(
        "e => e.scrollIntoView({block: 'start'})"
    )
    shots.take("history")


def _timeless(report: str) -> str:
    return re.sub(r"(\*\*Served from DR:\*\*) [^\n]*", r"\1 …", report)


def _fail_back_from_the_incident_page(page: Page, base: str, shots: Shots) -> None:
    """Held at DR: the banner on every page, the way back checked on the incident page, and
    Fail back, followed live until the primary serves again."""
    from playwright.sync_api import expect

    page.goto(f"{base}/declare")
    expect(page.get_by_text(re.compile(r"^lab serves from DR since "))).to_be_visible()
    expect(page.get_by_role("heading", name="lab: serving from DR")).to_be_visible()
    expect(page.get_by_text(re.compile(r"Readiness for the way back"))).to_be_visible()
    expect(page.get_by_text("Every image in the primary registry", exact=True)).to_be_visible()
    shots.take("failback")
    page.get_by_label("Reason for failing back").fill("primary power restored (browser test)")
    page.get_by_label("Reason for failing back").press("Tab")
    confirm = page.get_by_label(re.compile("to confirm the failback"))
    confirm.fill("lab")
    confirm.press("Tab")
    page.get_by_role("button", name="Fail back", exact=True).click()
    expect(page.get_by_text(re.compile(r"^Failback run "))).to_be_visible()
    expect(page.get_by_text("The failback finished")).to_be_visible(timeout=180_000)
    for phase in ("stop DR writers", "final sync", "dns back"):
        expect(page.get_by_text(phase, exact=True).first).to_be_visible()
    expect(page.get_by_text("Downtime", exact=True).first).to_be_visible()
    expect(page.get_by_text("measured", exact=True).first).to_be_visible()  # stopped
    expect(page.get_by_text(re.compile(r"serves from DR since"))).to_have_count(0)


def _one_closed_incident_record(page: Page, store: HistoryStore) -> None:
    """The history holds one incident, closed by its failback, linked both ways."""
    from playwright.sync_api import expect

    [incident] = store.list_runs(mode="incident")
    [failback] = store.list_runs(mode="failback")
    record = incident_record(incident, store)
    assert record is not None and not record["open"], record
    assert record["failback_run"] == failback.id and record["closed_by"] == "failback"
    page.get_by_role("link", name="See this run in the drill history").click()
    expect(page.get_by_text("Incident record — closed")).to_be_visible()
    link = page.get_by_role("link", name=re.compile(f"Its incident: run {incident.id}"))
    expect(link).to_be_visible()
