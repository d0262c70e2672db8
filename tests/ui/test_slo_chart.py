"""A run's SLOs after the switch on the History page: each SLO's line, and a chart of its
values with its threshold and the RTO target drawn (a spec Vega-Lite accepts)."""

from __future__ import annotations

from typing import Any

from tests.support.ui import UiEnv, add_run, open_page, shown
from ui.slo_chart import slo_chart


def _slos() -> list[dict[str, Any]]:
    return [
        {"name": "p95-latency", "op": "<", "threshold": 0.25, "status": "held",
         "line": "SLO p95-latency: held (< 0.25) for 5 min",
         "values": [[1.0, 0.9], [2.5, 0.3], [4.0, 0.12], [6.0, 0.11]]},
        {"name": "error-ratio", "op": "<=", "threshold": 0.01, "status": "breached",
         "line": "SLO error-ratio: breached (<= 0.01): 0.05 at 7 s",
         "values": [[1.0, 0.0], [7.0, 0.05]]},
    ]  # fmt: skip


def test_the_slo_chart_is_valid_vega_lite_with_thresholds_and_the_rto_target() -> None:
    spec = slo_chart(_slos(), 300.0).to_dict(validate=True)
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["line", "rule", "rule"]
    assert spec["layer"][1]["mark"]["strokeDash"] == [6, 4]  # each SLO's threshold, dashed
    datasets = spec["datasets"].values()
    thresholds = next(d for d in datasets if d and "threshold" in d[0])
    assert {(t["slo"], t["threshold"]) for t in thresholds} == {
        ("p95-latency (held)", 0.25), ("error-ratio (breached)", 0.01)}  # fmt: skip
    assert any(d and d[0].get("seconds") == 300.0 and "what" in d[0] for d in datasets)
    assert [layer["mark"]["type"] for layer in slo_chart(_slos(), None).to_dict()["layer"]] == [
        "line", "rule"]  # fmt: skip


def test_the_history_page_shows_a_runs_slos_and_their_chart(ui_env: UiEnv) -> None:
    store = ui_env.store()
    run = add_run(store, rto_seconds=2.0)
    details = {"measurement": {"rto_target_seconds": 300.0}, "slo": _slos()}
    store.update_run(run, details=details)
    at = open_page("history")
    at.query_params["run"] = run
    at.run()
    assert not at.exception, at.exception
    text = shown(at)
    assert "SLOs after the switch" in text
    assert "error-ratio: breached" in text and "p95-latency: held" in text
    assert at.get("vega_lite_chart"), "no chart of the SLOs"
