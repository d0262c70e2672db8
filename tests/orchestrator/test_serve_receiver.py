"""The receiver as `drills serve` runs it: started from a token reference (a relative file:
path made absolute where it was typed), in the project directory with the serve stack's
history store, recorded in serve.json, and stopped by `drills serve stop` with the rest.
A reference it cannot read stops it at once, in one line naming the reference only."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills.errors import LabError
from drills.orchestrator import serve
from drills.orchestrator.receiver_process import ensure_receiver, receiver_running
from drills.processes import pid_alive
from drills.store.history import HistoryStore
from drills_lab.procs import free_port

TOKEN = "serve-receiver-token-77d1"


def _info(tmp_path: Path, db_url: str) -> serve.ServeInfo:
    """serve.json as `drills serve` writes it, with no Prefect server behind it."""
    state = tmp_path / "state"
    state.mkdir()
    info = serve.ServeInfo(
        state_dir=str(state), project_dir=str(tmp_path), api_url="http://127.0.0.1:9/api",
        ui_url="http://127.0.0.1:9", db_url=serve.redacted(db_url), server_pid=0,
        worker_pid=None, started_at=dt.datetime.now(dt.UTC).isoformat(),
    )  # fmt: skip
    serve._write_info(info)
    return info


def test_serve_starts_the_receiver_from_a_reference_and_stop_ends_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    HistoryStore(db_url).close()
    monkeypatch.setenv("DRILLS_DB_URL", db_url)
    monkeypatch.setenv("DRILLS_PLANS", str(tmp_path / "none.yaml"))
    (tmp_path / "typed-here").mkdir()
    (tmp_path / "typed-here" / "token").write_text(TOKEN + "\n")
    monkeypatch.chdir(tmp_path / "typed-here")
    info = _info(tmp_path, db_url)

    started = ensure_receiver(info, "file:token", free_port())
    try:
        assert receiver_running(started) and started.receiver_url.endswith("/alertmanager")
        assert serve.read_info(Path(info.state_dir)) == started  # recorded for the stop
        body = {"version": "4", "groupKey": "g", "status": "firing", "alerts": []}
        ok = httpx.post(started.receiver_url, json=body, timeout=5,
                        headers={"Authorization": f"Bearer {TOKEN}"})  # fmt: skip
        assert ok.status_code == 200 and ok.json() == {"changes": []}
        refused = httpx.post(started.receiver_url, json=body, timeout=5)
        assert refused.status_code == 401
        assert ensure_receiver(started, "file:token", None) == started  # already running
        assert TOKEN not in (Path(info.state_dir) / "serve.json").read_text()
    finally:
        serve.down(Path(info.state_dir))
    assert started.receiver_pid is not None and not pid_alive(started.receiver_pid)


def test_a_token_reference_that_cannot_be_read_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_VARIABLE", raising=False)
    result = CliRunner().invoke(
        app, ["serve", "receiver", "--token", "env:NO_SUCH_TOKEN_VARIABLE", "--port", "0"]
    )
    assert result.exit_code == 2
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "NO_SUCH_TOKEN_VARIABLE is not set" in lines[0], result.output
    literal = CliRunner().invoke(app, ["serve", "receiver", "--token", "s3cr3t-literal"])
    assert literal.exit_code == 2 and "s3cr3t-literal" not in literal.output
    db_url = f"sqlite:///{tmp_path / 'history.db'}"
    monkeypatch.setenv("DRILLS_DB_URL", db_url)
    info = _info(tmp_path, db_url)
    with pytest.raises(LabError, match="exited while starting"):
        ensure_receiver(info, "env:NO_SUCH_TOKEN_VARIABLE", free_port(), timeout=30)
    serve.down(Path(info.state_dir))


@pytest.mark.parametrize(
    ("reference", "says"),
    [("env:NO_SUCH_TOKEN_VARIABLE", "NO_SUCH_TOKEN_VARIABLE is not set"),
     ("file:/dev/null", "not a regular file")],
)  # fmt: skip
def test_drills_serve_reads_the_receiver_token_before_it_starts_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reference: str, says: str
) -> None:
    monkeypatch.delenv("NO_SUCH_TOKEN_VARIABLE", raising=False)
    state = tmp_path / "state"
    result = CliRunner().invoke(
        app, ["serve", "--state-dir", str(state), "--project-dir", str(tmp_path),
              "--receiver-token", reference, "--port", str(free_port())],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    lines = [x for x in result.output.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("--receiver-token"), result.output
    assert says in lines[0], result.output
    # No server, worker or warm runner was started: no state was written for a stop to find.
    assert not state.exists() or not any(state.iterdir())
    assert serve.running(state) is None
