"""One way to write a duration and a time: every view and report of a recorded history
(the dashboard's pages, `drills history`, `drills report`) prints no float with more than
three significant digits, no duration in a plan's compact syntax beside a spelled-out one,
and no 12-hour clock or bare ISO time."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from typer.testing import CliRunner

from drills import timefmt
from drills.cli.app import app
from tests.support.ui import Drilled, UiEnv, add_run, open_page, shown

# A decimal number standing alone: not part of an address (127.0.0.2), a version or an id.
FLOAT = re.compile(r"(?<![\w.:])(\d+\.\d+)(?![\w.]|\.\d)")
# A number glued to a unit, as a plan writes it (5m, 1h30m, 12.3s): not how a view writes one.
# Not a group of a UUID or a shortened digest either ("…-445d-…", "445d…"): CI once drew a
# flow run's id with such a group.
COMPACT = re.compile(r"(?<![\w.-])\d+(\.\d+)?(ms|s|m|h|d)(?![\w…-])")
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")
TWELVE_HOUR = re.compile(r"\d{1,2}:\d\d(:\d\d)?\s?[AP]M\b")


def _significant(number: str) -> int:
    return len(number.replace(".", "").lstrip("0").rstrip("0") or "0")


# A run's id (hex, shown whole or by its first 8 characters) is no duration, though one
# in a few hundred reads as one: "2365823d" in `drills history`.
RUN_ID = re.compile(r"(?<![\w.-])[0-9a-f]{8,}(?![\w-])")


def _problems(where: str, text: str) -> list[str]:
    text = RUN_ID.sub("<run id>", text)
    found = [f"{where}: {m} has {_significant(m)} significant digits"
             for m in FLOAT.findall(text) if _significant(m) > 3]  # fmt: skip
    found += [f"{where}: {m.group()} in a plan's compact syntax" for m in COMPACT.finditer(text)]
    found += [f"{where}: ISO time {m.group()}" for m in ISO_TIME.finditer(text)]
    found += [f"{where}: 12-hour clock {m.group()}" for m in TWELVE_HOUR.finditer(text)]
    return found


@pytest.mark.parametrize(
    ("seconds", "written"),
    [
        (None, "—"), (0, "0 s"), (0.0123456, "12.3 ms"), (0.757, "757 ms"), (1.5, "1.5 s"),
        (1.51079, "1.51 s"), (3.491, "3.49 s"), (37.1725, "37.2 s"), (59.96, "1 min"),
        (170, "2 min 50 s"), (300, "5 min"), (3599.7, "1 h"), (3725.4, "1 h 2 min"),
        (10800, "3 h"), (2 * 86400 + 3 * 3600, "2 d 3 h"), (-0.8, "-800 ms"),
    ],
)  # fmt: skip
def test_duration_digits_suit_the_size(seconds: float | None, written: str) -> None:
    assert timefmt.duration(seconds) == written


def test_offsets_before_t0_say_so() -> None:
    assert timefmt.offset(1.34) == "T0+1.34 s"
    assert timefmt.offset(-0.8) == "800 ms before T0"
    assert timefmt.offset(-1.5) == "1.5 s before T0"
    assert timefmt.offset(0.0001) == "T0"


def test_moments_are_24_hour_with_their_zone(monkeypatch: pytest.MonkeyPatch) -> None:
    at = dt.datetime(2026, 3, 1, 14, 5, 9, 123456, tzinfo=dt.UTC)
    assert timefmt.moment(at) == "2026-03-01 14:05:09 UTC"
    assert timefmt.moment(at.isoformat()) == "2026-03-01 14:05:09 UTC"
    assert timefmt.clock(at) == "14:05:09 UTC"
    monkeypatch.setenv(timefmt.ZONE_ENV, "Europe/Berlin")
    assert timefmt.moment(at) == "2026-03-01 15:05:09 CET"
    monkeypatch.setenv(timefmt.ZONE_ENV, "Nowhere/Atlantis")
    assert timefmt.moment(at) == "2026-03-01 14:05:09 UTC"  # an unknown zone is not guessed


def _page_text(page: str, run: str | None = None) -> str:
    at = open_page(page)
    if run is not None:
        at.query_params["run"] = run
        at.run()
    assert not at.exception, at.exception
    cells = []
    for frame in [*at.dataframe, *at.table]:
        cells += [str(v) for v in frame.value.astype(str).to_numpy().ravel()]
    return shown(at) + "\n" + "\n".join(cells)


def test_every_view_and_report_writes_time_one_way(populated: Drilled, ui_env: UiEnv) -> None:
    store = ui_env.store()
    now = dt.datetime.now(dt.UTC)
    odd = [
        add_run(store, rto_seconds=1.51079, started_at=now - dt.timedelta(hours=5)),
        add_run(store, rto_seconds=169.7421, started_at=now - dt.timedelta(days=3)),
        add_run(store, rto_seconds=3725.4, verdict="missed", started_at=now - dt.timedelta(days=9)),
        add_run(store, mode="failback", rto_seconds=None, started_at=now - dt.timedelta(hours=2)),
    ]
    problems: list[str] = []
    for page in ("fleet", "readiness", "history", "plans", "declare"):
        problems += _problems(page, _page_text(page))
    for run in (populated.run_id, odd[0]):
        problems += _problems(f"history?run={run}", _page_text("history", run))

    runner = CliRunner()
    listed = runner.invoke(app, ["history", "--db", ui_env.db_url], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "2 min 50 s" in listed.output and "1.51 s" in listed.output, listed.output
    problems += _problems("drills history", listed.output)
    for run in (populated.run_id, *odd):
        report = runner.invoke(app, ["report", run, "--format", "md", "--db", ui_env.db_url])
        assert report.exit_code == 0, report.output
        assert "UTC" in report.output
        problems += _problems(f"drills report {run}", report.output)
    assert not problems, "\n".join(problems)
