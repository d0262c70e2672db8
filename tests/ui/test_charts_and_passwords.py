"""What the pages rely on without a server: chart specs that Vega-Lite accepts (the app
skips Altair's validation for speed), password hashes, and where plans come from."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from drills.cli import app as cli
from drills.passwords import PasswordHashError, hash_password, verify_password
from ui import charts
from ui.queries import RtoPoint
from ui.settings import plan_paths

T0 = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)


def _points() -> list[RtoPoint]:
    return [
        RtoPoint(
            "a", "lab", T0, "met", 42.0, 300.0, full_capacity_seconds=65.0, forecast_seconds=40.0
        ),
        RtoPoint("b", "lab", T0 + dt.timedelta(days=90), "missed", 420.0, 300.0),
        RtoPoint("c", "lab", T0 + dt.timedelta(days=180), "failed", None, None),
    ]


def test_rto_trend_is_valid_vega_lite_and_marks_failures() -> None:
    chart = charts.rto_trend(_points())
    spec = chart.to_dict(validate=True)  # raises on a spec Vega-Lite would refuse
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["line", "line", "line", "point", "point"]  # the last: what was forecast
    # One shape legend for every point, one dash legend for every line: no mark unexplained.
    shapes = spec["layer"][3]["encoding"]["shape"]["scale"]
    assert dict(zip(shapes["domain"], shapes["range"], strict=True))["forecast"] == "diamond"
    assert spec["layer"][4]["encoding"]["shape"]["field"] == "point"
    assert spec["layer"][1]["encoding"]["strokeDash"]["scale"]["domain"] == [
        "RTO target", "full capacity"
    ]  # fmt: skip
    fields = [e.get("field") for e in spec["layer"][3]["encoding"].values() if isinstance(e, dict)]
    assert "failed" not in fields  # no legend of "failed: false/true"
    frame = charts.rto_frame(_points()).set_index("run")
    assert frame.loc["a", "forecast_s"] == 40.0
    assert frame.loc["c", "failed"] and frame.loc["c", "rto_s"] == 0.0
    assert not frame.loc["c", "measured"] and frame.loc["b", "outcome"] == "missed"
    assert frame.loc["a", "full_s"] == 65.0 and frame["full_s"].isna().sum() == 2


def test_a_target_far_above_the_runs_is_written_not_drawn_and_failbacks_are_left_out() -> None:
    points = [
        RtoPoint("a", "lab", T0, "met", 1.5, 300.0),
        RtoPoint("b", "lab", T0 + dt.timedelta(hours=1), "met", 6.0, 300.0),
        RtoPoint("f", "lab", T0 + dt.timedelta(hours=2), "met", None, None, mode="failback"),
    ]
    spec = charts.rto_trend(points).to_dict(validate=True)
    assert [layer["mark"].get("color") for layer in spec["layer"]].count("#c62828") == 0
    assert charts.target_note(points) == (
        "RTO target 5 min is far above every run plotted (the highest 6 s): not drawn, so "
        "the runs keep their scale."
    )
    assert list(charts.rto_frame(points)["run"]) == ["a", "b"]  # no failback at RTO 0
    # Near the runs, the target is drawn.
    near = [RtoPoint("a", "lab", T0, "met", 150.0, 300.0)]
    assert charts.target_note(near) is None


def test_the_time_axis_is_24_hour_utc_and_one_run_gets_a_readable_span() -> None:
    spec = charts.rto_trend([RtoPoint("a", "lab", T0, "met", 1.5, 300.0)]).to_dict()
    x = (
        spec["encoding"]["x"]
        if "x" in spec.get("encoding", {})
        else spec["layer"][0]["encoding"]["x"]
    )
    assert x["axis"]["format"] == "%Y-%m-%d %H:%M"  # %H: 24-hour, never %I %p
    low, high = (dt.datetime.fromisoformat(v) for v in x["scale"]["domain"])
    assert high - low >= dt.timedelta(minutes=4)  # not an axis of milliseconds
    # Two runs 20 s apart keep a fair part of the width between them: not one vertical line.
    two = [RtoPoint("a", "lab", T0, "met", 1.5, 300.0),
           RtoPoint("b", "lab", T0 + dt.timedelta(seconds=20), "met", 13.0, 300.0)]  # fmt: skip
    low, high = (
        dt.datetime.fromisoformat(v)
        for v in charts.rto_trend(two).to_dict()["layer"][0]["encoding"]["x"]["scale"]["domain"]
    )
    assert high - low <= dt.timedelta(minutes=5)


def test_the_legends_list_only_what_the_chart_draws() -> None:
    """A target written above the chart, no full-capacity line and no forecast: their
    entries would explain nothing, and pushed the legend past the chart's edge."""
    points = [RtoPoint("a", "lab", T0, "met", 1.5, 300.0),
              RtoPoint("b", "lab", T0 + dt.timedelta(hours=1), "met", 6.0, 300.0)]  # fmt: skip
    spec = charts.rto_trend(points).to_dict(validate=True)
    assert [layer["mark"]["type"] for layer in spec["layer"]] == ["line", "point", "point"]
    dots = spec["layer"][1]["encoding"]
    assert dots["color"]["scale"]["domain"] == ["met"]
    assert dots["shape"]["scale"]["domain"] == ["RTO measured"]
    assert charts.rto_trend([]).to_dict(validate=True)["layer"]  # nothing to plot: no error


def test_gantt_is_valid_vega_lite_and_keeps_phase_order() -> None:
    phases: list[dict[str, Any]] = [
        {"name": name, "started_at": (T0 + dt.timedelta(seconds=i)).isoformat(),
         "ended_at": (T0 + dt.timedelta(seconds=i + 1)).isoformat(), "seconds": 1.0,
         "status": "failed" if name == "dns" else "ok", "steps": []}
        for i, name in enumerate(["preflight", "fence", "dns"])
    ]  # fmt: skip
    charts.gantt(phases).to_dict(validate=True)
    frame = charts.gantt_frame(phases)
    assert list(frame["phase"]) == ["preflight", "fence", "dns"]
    assert list(frame["start_s"]) == [0.0, 1.0, 2.0] and list(frame["end_s"]) == [1.0, 2.0, 3.0]
    assert charts.gantt_frame([]).empty


def test_password_hashes_verify_and_never_repeat_the_secret() -> None:
    encoded = hash_password("a long operator password")
    assert encoded.startswith("scrypt$") and "a long operator password" not in encoded
    assert verify_password("a long operator password", encoded)
    assert not verify_password("a long operator passwore", encoded)
    assert hash_password("same") != hash_password("same")  # a fresh salt each time


def test_pbkdf2_hashes_are_accepted() -> None:
    import base64
    import hashlib

    salt = b"0123456789abcdef"
    digest = hashlib.pbkdf2_hmac("sha256", b"operator", salt, 200_000)
    b64 = lambda raw: base64.urlsafe_b64encode(raw).decode().rstrip("=")  # noqa: E731
    assert verify_password("operator", f"pbkdf2_sha256$200000${b64(salt)}${b64(digest)}")
    with pytest.raises(PasswordHashError, match="at least"):
        verify_password("operator", f"pbkdf2_sha256$1000${b64(salt)}${b64(digest)}")


@pytest.mark.parametrize("bad", ["", "plain-text-password", "scrypt$only-one-part", "md5$a$b"])
def test_malformed_hashes_are_refused_without_echoing_them(bad: str) -> None:
    with pytest.raises(PasswordHashError) as caught:
        verify_password("x", bad)
    assert bad == "" or bad not in str(caught.value)


def test_cli_hash_password_makes_a_usable_hash() -> None:
    result = CliRunner().invoke(cli, ["ui", "hash-password", "--stdin"], input="s3cret-enough-pw\n")
    assert result.exit_code == 0, result.output
    encoded = result.stdout.strip().splitlines()[0]
    assert verify_password("s3cret-enough-pw", encoded)
    assert "s3cret-enough-pw" not in result.output
    short = CliRunner().invoke(cli, ["ui", "hash-password", "--stdin"], input="short\n")
    assert short.exit_code == 2


def test_plan_paths_expand_globs_in_order_without_duplicates(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.yaml"):
        (tmp_path / name).write_text("name: x\n")
    spec = f"{tmp_path / 'b.yaml'},{tmp_path / '*.yaml'}:{tmp_path / 'missing.yaml'}"
    assert plan_paths(spec) == (
        str(tmp_path / "b.yaml"), str(tmp_path / "a.yaml"), str(tmp_path / "missing.yaml")
    )  # fmt: skip


def test_plan_paths_under_the_working_directory_stay_relative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "plans").mkdir()
    (tmp_path / "plans" / "a.yaml").write_text("name: x\n")
    monkeypatch.chdir(tmp_path)
    assert plan_paths("plans/*.yaml") == ("plans/a.yaml",)
    assert plan_paths(str(tmp_path / "plans" / "a.yaml")) == ("plans/a.yaml",)
