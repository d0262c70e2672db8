"""The Fleet page: a row per plan, problems first, filters, and links to a plan's pages."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]
import pytest
import yaml

from drills.store.models import DrillRun
from tests.support.drill import offline_lab_plan_data
from tests.support.ui import UiEnv, open_page, shown
from ui.fleet import fleet_style


@pytest.fixture()
def ui_env(ui_env: UiEnv, db_url: str) -> UiEnv:
    """The page over each store: SQLite and PostgreSQL (the db_url fixture)."""
    ui_env.set("DRILLS_DB_URL", db_url)
    return dataclasses.replace(ui_env, db_url=db_url)


def _plans(env: UiEnv, names: list[str], *, cron: str | None = None) -> str:
    for name in names:
        data = offline_lab_plan_data()
        data["name"] = name
        if cron:
            data["schedule"] = {"cron": cron, "timezone": "UTC"}
        (env.tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return str(env.tmp_path / "*.yaml")


def _history(env: UiEnv) -> None:
    store = env.store()
    now = dt.datetime.now(dt.UTC)
    ready = {"plan": "healthy", "checked_at": now.isoformat(), "results": []}
    store.save_readiness("healthy", now, True, 0, ready)
    store.save_readiness("blocked", now, False, 2, {**ready, "plan": "blocked"})
    store.create_run(
        DrillRun(id="okdrill1", plan="healthy", plan_digest="x", mode="drill", operator="t",
                 status="succeeded", verdict="met", started_at=now - dt.timedelta(days=3),
                 finished_at=now - dt.timedelta(days=3) + dt.timedelta(minutes=5),
                 rto_seconds=40.0)
    )  # fmt: skip


def test_fleet_rows_problems_first_filter_and_links(ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_PLANS", _plans(ui_env, ["healthy", "blocked", "never"], cron="0 3 * * 1"))
    _history(ui_env)
    at = open_page()
    assert [t.value for t in at.title] == ["Fleet"]  # the page the dashboard opens on
    table = at.dataframe[0].value
    assert list(table["plan"]) == ["blocked", "never", "healthy"]
    assert table["problems"][0].startswith("2 blocking")
    assert table["problems"][1] == "drill overdue, never checked"
    assert table["problems"][2] == "—" and table["verdict"][2] == "met"
    assert int(table["cadence limit in"][2].split(" d")[0]) > 80
    assert table["cadence limit in"][1] == "no success yet"
    assert table["readiness link"][0] == "/readiness?plan=blocked"
    assert set(table["DR cost / month"]) == {"—"}  # these plans have no cost section
    assert "3 plan(s), 2 with problems" in shown(at)

    at.text_input(key="fleet.name").input("heal").run()
    assert list(at.dataframe[0].value["plan"]) == ["healthy"]
    at.text_input(key="fleet.name").input("").run()
    at.toggle(key="fleet.problems").set_value(True).run()
    assert list(at.dataframe[0].value["plan"]) == ["blocked", "never"]

    links = {(link.proto.label, link.proto.page) for link in at.get("page_link")}
    assert any(label == "Readiness of blocked" for label, _ in links)
    assert any("history" in page for _, page in links)
    # Filters that match no plan say so; the page does not fail on an empty table.
    at.selectbox(key="fleet.serving").select("dr").run()
    assert not at.exception, [e.value for e in at.exception]
    assert "No plan matches these filters." in [i.value for i in at.info]
    assert not at.dataframe and not at.get("page_link")
    at.selectbox(key="fleet.serving").select("primary").run()
    assert list(at.dataframe[0].value["plan"]) == ["blocked", "never"]
    # The same plans over one cluster, each drilled Monday 03:00: their windows overlap.
    assert "overlap on a shared cluster" in shown(at)
    assert at.get("vega_lite_chart")


def test_fleet_colours_say_blocked_warn_dr_and_overdue() -> None:
    frame = pd.DataFrame(
        {"plan": ["a", "b", "c"], "problems": ["2 blocking", "readiness stale", "—"],
         "serving": ["primary", "dr", "primary"], "readiness": ["blocked", "warn", "ready"],
         "verdict": ["met", "failed", "met"],
         "cadence limit in": ["overdue 3 d", "no success yet", "80 d"],
         "DR can carry": ["no: 2 GPUs missing", "unknown: the check errored", "—"]}
    )  # fmt: skip
    styles = fleet_style(frame)._compute().ctx  # (row, col) -> [(property, value)]
    colour = {(frame.iat[r, c]): dict(v).get("background-color") for (r, c), v in styles.items()}
    assert colour["blocked"] == colour["overdue 3 d"] == colour["2 blocking"] == "#ffcdd2"
    assert colour["warn"] == colour["readiness stale"] == "#ffe0b2"
    assert colour["dr"] == "#bbdefb"
    assert colour["no: 2 GPUs missing"] == "#ffcdd2"  # DR cannot carry: red, as blocked
    assert colour["unknown: the check errored"] == "#ffe0b2"  # never green on doubt
    assert colour.get("ready") is None and colour.get("80 d") is None and colour.get("—") is None


def test_the_readiness_page_opened_for_one_plan_shows_that_plan(ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_PLANS", _plans(ui_env, ["healthy", "blocked"]))
    _history(ui_env)
    at = open_page("readiness")
    assert len(at.tabs) == 2
    at.query_params["plan"] = "blocked"
    at.run()
    assert len(at.tabs) == 1 and "blocked" in at.tabs[0].label
    at = open_page("history")
    at.query_params["plan"] = "healthy"
    at.run()
    assert at.selectbox(key="history.plan").value == "healthy"


def test_a_fleet_without_plans_says_how_to_add_them(ui_env: UiEnv, tmp_path: Path) -> None:
    ui_env.set("DRILLS_PLANS", str(tmp_path / "none-*.yaml"))
    assert "No plan is configured" in shown(open_page())


def _moved(env: UiEnv, plan: str, *modes: str) -> None:
    """Runs of ``plan`` that moved production, each succeeded, oldest first."""
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
    for i, mode in enumerate(modes):
        at = start + dt.timedelta(hours=i)
        env.store().create_run(
            DrillRun(id=f"{plan}{i}", plan=plan, plan_digest="x", mode=mode, operator="t",
                     status="succeeded", started_at=at, t0=at, restored_at=at,
                     finished_at=at + dt.timedelta(minutes=5))
        )  # fmt: skip


def test_the_fleet_says_where_a_plan_serves_as_drills_status_does(ui_env: UiEnv) -> None:
    from drills.store.serving import recorded_serving

    ui_env.set("DRILLS_PLANS", _plans(ui_env, ["back", "away"]))
    _moved(ui_env, "back", "incident", "failback")  # an incident, then a successful failback
    _moved(ui_env, "away", "incident")
    at = open_page()
    table = at.dataframe[0].value
    serving = dict(zip(table["plan"], table["serving"], strict=True))
    assert serving == {"back": "primary", "away": "dr"}
    assert recorded_serving(ui_env.store(), "back").site == "primary"
    assert recorded_serving(ui_env.store(), "away").site == "dr"


def test_the_fleet_calendar_draws_each_plans_blocked_windows(ui_env: UiEnv) -> None:
    tomorrow = (dt.datetime.now(dt.UTC) + dt.timedelta(days=1)).date()
    data = offline_lab_plan_data()
    data["name"] = "frozen"
    data["gates"] = {"blocked_windows": [
        {"name": "release *freeze*", "dates": [tomorrow.isoformat()]},
        {"name": "weekend", "cron": "0 18 * * 5", "duration": "64h"},
    ]}  # fmt: skip
    (ui_env.tmp_path / "frozen.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    ui_env.set("DRILLS_PLANS", str(ui_env.tmp_path / "*.yaml"))
    at = open_page()
    text = shown(at)
    assert "Blocked windows" in text and "release \\*freeze\\* (frozen)" in text
    assert "weekend (frozen)" in text
    [chart] = at.get("vega_lite_chart")
    assert '"blocked"' in chart.proto.spec  # drawn in a colour of its own
    drawn = str(chart.proto)  # the chart's rows travel beside the spec
    assert "blocked: release *freeze*" in drawn and "blocked: weekend" in drawn
