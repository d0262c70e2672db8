"""Readiness, history and plans pages on a store that holds a real drill of the lab."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any
from uuid import uuid4

import pandas as pd  # type: ignore[import-untyped]
from sqlalchemy import func, select
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from drills.checks import catalog
from drills.checks.base import Status
from drills.store.models import AuditEvent, ReadinessSnapshot
from drills_lab.runtime import LabInfo
from tests.support.ui import Drilled, UiEnv, add_run, button, open_page, shown
from ui.components import OVERALL_ICON, STATUS_BADGE

CATEGORIES = list(catalog.CATEGORIES)


def _snapshots(env: UiEnv) -> int:
    with env.store().session() as s:
        return int(s.scalar(select(func.count()).select_from(ReadinessSnapshot)) or 0)


def _charts(at: AppTest) -> list[tuple[dict[str, Any], pd.DataFrame]]:
    """Each Altair chart's Vega-Lite spec, and the data it plots."""
    charts = []
    for chart in at.get("vega_lite_chart"):
        proto: Any = chart.proto
        frames = [convert_arrow_bytes_to_pandas_df(d.data.data) for d in proto.datasets]
        charts.append((json.loads(proto.spec), pd.concat(frames) if frames else pd.DataFrame()))
    return charts


def test_readiness_shows_the_snapshot_of_the_drill_by_category(
    populated: Drilled, ui_env: UiEnv
) -> None:
    at = open_page("readiness")
    # Before its first drill the lab had never been drilled; the drill's end asked the
    # cadence again and stored the snapshot: the page agrees with the history.
    assert at.tabs[0].label == f"{OVERALL_ICON['ready']} lab — ready"
    headings = [h.value for h in at.subheader]
    assert [h.split(" ")[0] for h in headings] == CATEGORIES
    checks = [x.label for x in at.expander]
    assert len(checks) >= 10
    assert all("checked just now" in c or "min ago" in c for c in checks)
    assert all(STATUS_BADGE[Status.PASS] in c for c in checks), checks
    cadence = [c for c in checks if "Drilled within a quarter" in c]
    assert cadence and f"run {populated.run_id}" in cadence[0], cadence
    assert "BLOCKING" not in shown(at) and "never been drilled" not in shown(at)
    # The forecast of a takeover now, from the snapshot's forecast.rto, above the checklist.
    assert at.metric[0].label == "A takeover now" and at.metric[0].value.startswith("about ")
    assert any("a takeover now: about" in c.value and "(target 5 min)" in c.value
               for c in at.caption)  # fmt: skip


def test_rerun_checks_inline_stores_a_new_snapshot(populated: Drilled, ui_env: UiEnv) -> None:
    ui_env.set("DRILLS_UI_LAB", "1")  # anyone may act: audited as such
    before = _snapshots(ui_env)
    at = open_page("readiness")
    rerun = button(at, "Re-run checks")
    assert rerun is not None
    rerun.click().run()
    assert not at.exception
    assert _snapshots(ui_env) == before + 1
    with ui_env.store().session() as s:
        [event] = s.scalars(select(AuditEvent).where(AuditEvent.action == "run-readiness")).all()
        assert (event.who, event.plan, event.accepted) == ("anonymous (lab mode)", "lab", True)
    assert at.get("progress")[0].proto.text.startswith("Done:")
    assert "checked just now" in shown(at)


def test_blocking_failures_stand_out(ui_env: UiEnv, drift_lab: LabInfo) -> None:
    ui_env.set("DRILLS_PLANS", str(Path(drift_lab.state_dir) / "plan.yaml"))
    ui_env.set("DRILLS_UI_LAB", "1")
    at = open_page("readiness")
    assert "not checked yet" in at.tabs[0].label
    button(at, "Re-run checks").click().run()  # type: ignore[union-attr]
    assert not at.exception
    blocking = [e.value for e in at.error if "Blocking failures" in e.value]
    assert blocking and "Images" in shown(at)
    # The forecast is never the headline of a blocked plan: a line under the failures
    # that says what it assumes.
    assert not [m for m in at.metric if m.label == "A takeover now"]
    forecasts = [c.value for c in at.caption if "takeover would take" in c.value]
    assert forecasts and forecasts[0].startswith("Once the blocking checks are fixed"), forecasts
    flagged = [x.label for x in at.expander if "BLOCKING" in x.label]
    assert flagged and all(STATUS_BADGE[Status.FAIL] in m or "error" in m for m in flagged)
    # Warnings outside the critical tier are not flagged as blocking.
    warned = [x.label for x in at.expander if STATUS_BADGE[Status.WARN] in x.label]
    assert all("BLOCKING" not in m for m in warned)


def test_history_table_chart_and_run_detail(populated: Drilled, ui_env: UiEnv) -> None:
    store = ui_env.store()
    failed = add_run(store, mode="incident", verdict="failed", status="failed", error="boom")
    missed = add_run(
        store, verdict="missed", rto_seconds=400.0,
        started_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=2),
    )  # fmt: skip
    at = open_page("history")
    table = at.dataframe[0].value
    assert list(table.columns) == [
        "date", "plan", "mode", "operator", "verdict", "RTO / target", "client RTO",
        "full capacity", "RPO / target", "duration", "run",
    ]  # fmt: skip
    real = table[table["run"] == populated.run_id].iloc[0]
    assert real["verdict"] == "met" and real["operator"] == "alice"
    assert re.fullmatch(r"[\d.]+ m?s / 5 min", real["RTO / target"]), real["RTO / target"]
    assert table[table["run"] == missed].iloc[0]["RTO / target"] == "6 min 40 s / 5 min OVER"
    assert table[table["run"] == failed].iloc[0]["verdict"] == "failed"
    spec, points = _charts(at)[0]
    marks = [layer["mark"] for layer in spec["layer"]]
    assert {"type": "line", "color": "#c62828", "interpolate": "step-after"} in marks  # target
    assert set(points["run"]) == {populated.run_id, missed, failed}
    marked = points.set_index("run")
    assert marked.loc[failed, "failed"] and marked.loc[failed, "outcome"] == "failed"
    assert marked.loc[missed, "rto_s"] == 400.0 and not marked.loc[populated.run_id, "failed"]
    # The real drill's full capacity came after its RTO; the runs added by hand have none.
    assert marked.loc[populated.run_id, "full_s"] > marked.loc[populated.run_id, "rto_s"]
    assert points.set_index("run")["full_s"].isna().sum() == 2
    assert re.fullmatch(r"[\d.]+ m?s", real["full capacity"]), real["full capacity"]
    # The detail of the real drill, opened by its link (?run=...).
    at.query_params["run"] = populated.run_id
    at.run()
    text = shown(at)
    assert f"Run `{populated.run_id}` — lab, drill" in text
    metrics = {m.label: m.value for m in at.metric}
    assert re.fullmatch(r"[\d.]+ m?s", metrics["Full capacity"]) and "RTO" in metrics
    assert [t.label for t in at.tabs] == [
        "Phase timeline", "Steps and evidence", "Journal of changes", "Readiness at T0"
    ]  # fmt: skip
    detail = _charts(at)[1:]
    # The lab's plan measures demand: what DR carried, on the run's clock, then the phases.
    carried = [d for s, d in detail if "percent" in d.columns]
    assert carried and (carried[0]["percent"] > 0).any(), "no chart of the demand carried"
    spec, phases = next((s, d) for s, d in detail if s.get("mark", {}).get("type") == "bar")
    assert spec["encoding"]["x2"]["field"] == "end_s"
    assert list(phases["phase"])[:4] == ["preflight", "declare", "fence", "bring-up"]
    assert "failback" in set(phases["phase"]) and (phases["end_s"] > phases["start_s"]).all()
    journal = at.dataframe[1].value
    assert len(journal) > 0 and set(journal["state"]) == {"undone"}
    assert "readiness checks" in text and "Images" in text  # steps, and the snapshot at T0
    labels = [b.label for b in at.download_button]
    # A signed evidence pack is an export for the operator role; public read shows the report.
    assert labels == ["Download report (Markdown)", "Download report (JSON)"]
    assert "Its evidence pack (signed) is for the operator role: nobody may declare" in text


def test_history_filters_are_applied(populated: Drilled, ui_env: UiEnv) -> None:
    store = ui_env.store()
    others = [
        add_run(store, plan="other", mode="incident", verdict="failed", status="failed")
        for _ in range(3)
    ]
    at = open_page("history")
    assert len(at.dataframe[0].value) == 4
    at.selectbox(key="history.mode").select("incident").run()
    assert sorted(at.dataframe[0].value["run"]) == sorted(others)
    at.selectbox(key="history.mode").select("All").run()
    at.selectbox(key="history.verdict").select("met").run()
    assert list(at.dataframe[0].value["run"]) == [populated.run_id]
    at.selectbox(key="history.verdict").select("All").run()
    at.selectbox(key="history.plan").select("other").run()
    assert sorted(at.dataframe[0].value["run"]) == sorted(others)
    at.selectbox(key="history.verdict").select("met").run()
    assert "No run matches these filters" in shown(at)


def test_history_pages_in_sql(ui_env: UiEnv) -> None:
    store = ui_env.store()
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    ids = [
        add_run(store, plan="bulk", rto_seconds=60.0 + i, started_at=start + dt.timedelta(days=i))
        for i in range(30)
    ]
    at = open_page("history")
    first = list(at.dataframe[0].value["run"])
    assert first == ids[::-1][:25]
    assert button(at, "← Newer").disabled  # type: ignore[union-attr]
    button(at, "Older →").click().run()  # type: ignore[union-attr]
    assert list(at.dataframe[0].value["run"]) == ids[::-1][25:]
    assert button(at, "Older →").disabled  # type: ignore[union-attr]
    # Changing a filter starts again from the first page.
    at.selectbox(key="history.plan").select("bulk").run()
    assert list(at.dataframe[0].value["run"]) == first


def test_plans_page_shows_the_last_drill(populated: Drilled, ui_env: UiEnv) -> None:
    at = open_page("plans")
    text = shown(at)
    assert f"✓ {populated.plan_path} is valid: 12 workloads" in text
    assert "**met**, RTO" in text and populated.run_id in text
    assert "plan schedule `0 3 1 1,4,7,10 *` (UTC)" in text
    assert "stays paused" in text  # the batch tier, in the tiers table
    # The drill that is the last drill is no "never drilled" finding: the views agree.
    assert "never been drilled" not in text + "".join(x.label for x in at.expander), text
    assert not [x for x in at.expander if x.label.startswith("Open findings")]


def test_a_running_flow_run_without_prefect_says_what_cancelling_needs(
    populated: Drilled, ui_env: UiEnv
) -> None:
    run_id = add_run(ui_env.store(), status="running", finished=False, flow_run_id=str(uuid4()))
    at = open_page("history")
    at.selectbox(key="history.run").set_value(run_id).run()
    assert "Cancelling it from here needs its Prefect server, but no Prefect server" in shown(at)
    assert not [b for b in at.button if b.key == f"history.{run_id}.cancel"]
