"""Outside text (check summaries, server names, exception messages) is shown as written:
never read as Rich markup, so `[/]` cannot crash a command and `[red]PASS` cannot
restyle a line."""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path
from typing import Any

import pytest
import typer

from drills.checks.base import CheckResult, Status
from drills.checks.runner import ReadinessReport
from drills.cli import lab_cmd, readiness_cmd, serve_cmd, serve_group
from drills.cli.console import SafeConsole
from drills.errors import LabError
from drills.orchestrator.rest import Deployment, WorkerStatus
from drills.orchestrator.serve import ServeInfo
from drills_lab import control as lab_control

MARKUP = "closes [/] and [red]PASS[/red] and [bold]"


def capture(monkeypatch: pytest.MonkeyPatch, module: object, *names: str) -> io.StringIO:
    out = io.StringIO()
    console = SafeConsole(file=out, width=400, color_system=None)
    for name in names:
        monkeypatch.setattr(module, name, console)
    return out


def result(**changes: Any) -> CheckResult:
    fields: dict[str, Any] = {
        "id": "dns.ttl",
        "title": "DNS TTL",
        "category": "dns",
        "status": Status.FAIL,
        "blocking": True,
        "summary": MARKUP,
        "evidence": {"note": MARKUP},
        "duration_s": 0.1,
        "remediation": f"fix {MARKUP}",
    }
    return CheckResult(**{**fields, **changes})


@pytest.mark.parametrize("verbose", [False, True])
def test_readiness_prints_summaries_and_remediations_literally(
    monkeypatch: pytest.MonkeyPatch, verbose: bool
) -> None:
    out = capture(monkeypatch, readiness_cmd, "console")
    report = ReadinessReport(
        plan="plan [/]", checked_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), results=(result(),)
    )
    readiness_cmd.print_report(report, verbose=verbose)
    printed = out.getvalue()
    assert MARKUP in printed and "plan [/]" in printed
    if verbose:
        assert f"fix {MARKUP}" in printed
        assert "[red]PASS[/red]" in printed.split("fix", 1)[0]  # the evidence, too


def test_readiness_keeps_its_own_colours(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    console = SafeConsole(file=out, width=400, force_terminal=True, color_system="standard")
    monkeypatch.setattr(readiness_cmd, "console", console)
    report = ReadinessReport(
        plan="p", checked_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), results=(result(),)
    )
    readiness_cmd.print_report(report, verbose=False)
    assert "\x1b[31mfail" in out.getvalue() and "[red]PASS[/red]" in out.getvalue()


def test_serve_failures_print_outside_text_literally(monkeypatch: pytest.MonkeyPatch) -> None:
    out = capture(monkeypatch, serve_group, "err")
    assert isinstance(serve_group.fail(f"run ended Failed: {MARKUP}"), typer.Exit)
    assert f"run ended Failed: {MARKUP}" in out.getvalue()


def test_serve_status_shows_paused_and_names_as_written(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = capture(monkeypatch, serve_cmd, "console")
    # A real record, so that a field added to it later is there with its default.
    info = ServeInfo(
        state_dir=str(tmp_path), project_dir=str(tmp_path), api_url="x", ui_url="http://ui [/]",
        db_url="sqlite://", server_pid=1, worker_pid=None, started_at="now", warm_pid=2,
    )  # fmt: skip

    class Api:
        def __enter__(self) -> Api:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def healthy(self) -> bool:
            return True

        def workers(self, pool: str) -> list[WorkerStatus]:
            return [WorkerStatus("worker [/]", "ONLINE", None)]

        def deployments(self) -> list[Deployment]:
            return [Deployment("1", "nightly [/]", "drill", ("cron 0 3 * * *",), True, {})]

    monkeypatch.setattr(serve_cmd, "serve_running", lambda state_dir: info)
    monkeypatch.setattr(serve_cmd, "warm_running", lambda info: True)
    monkeypatch.setattr(serve_cmd, "PrefectRest", lambda url: Api())
    serve_cmd.status(state_dir=tmp_path, as_json=False)
    printed = out.getvalue()
    assert "cron 0 3 * * * [paused]" in printed
    assert "nightly [/]" in printed and "worker [/]" in printed and "http://ui [/]" in printed


def test_lab_up_failure_prints_the_error_literally(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    out = capture(monkeypatch, lab_cmd, "err")

    def refuse(*args: object, **kwargs: object) -> None:
        raise LabError(f"port taken {MARKUP}")

    monkeypatch.setattr(lab_control, "missing_modules", lambda: [])
    monkeypatch.setattr(lab_control, "up", refuse)
    with pytest.raises(typer.Exit):
        lab_cmd.up(state_dir=tmp_path)
    assert f"lab up failed: port taken {MARKUP}" in out.getvalue()
