"""A history-store outage in the middle of a takeover, injected for real: a PostgreSQL
server of the test's own stopped as the bring-up starts, a SQLite store on a tiny
filesystem filled up. A drill stops and rolls back; an incident goes on to service; each
writes its journal and its record to the store when it answers again. And a journal that
lost its last entries is completed by `drills recover` from the snapshot before the run."""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import os
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from drills.store.history import HistoryStore
from drills.store.kinds import EntryState, Mode, RunStatus
from drills.takeover.drill import Drill, DrillHooks, DrillRequest, DrillResult
from drills.takeover.recover import RecoverError, RecoverStatus, pick_run, plan_of, recover_run
from drills.takeover.write_ahead import STATE_DIR_ENV, write_ahead_file
from drills_lab.runtime import LabInfo
from tests.support.drill import back_to_normal, lab_plan, serving, snapshot
from tests.support.postgres import PostgresServer, store_on, unstarted_server
from tests.support.rawdb import RawDatabase
from tests.support.services import own_lab

OUTAGE_S = 8.0  # long enough that the bring-up runs into it, whatever the machine's speed
BRING_UP = "phase:bring-up:start"


@pytest.fixture(scope="module")
def outage_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "outage-lab", ready_delay=0.1) as info:
        yield info


@pytest.fixture(scope="module")
def own_postgres() -> Iterator[PostgresServer]:
    """A server of this module's own: the tests stop it, which the session's must never be."""
    server = unstarted_server()
    server.start()
    yield server
    server.stop()


@pytest.fixture()
def pg_history(own_postgres: PostgresServer) -> Iterator[HistoryStore]:
    with store_on(own_postgres) as store:
        yield store


@pytest.fixture()
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Where the runs of the test keep their write-ahead files."""
    monkeypatch.setenv(STATE_DIR_ENV, str(tmp_path / "state"))
    return tmp_path / "state"


@pytest.fixture()
def pg_outage(own_postgres: PostgresServer) -> Outage:
    """The server stopped as the bring-up starts, started again OUTAGE_S later."""
    return Outage(own_postgres.halt, own_postgres.resume, OUTAGE_S)


class Outage:
    """A fault started at the bring-up's start (from the run's own thread, so the run
    meets it at its next write) and cleared ``seconds`` later from another thread."""

    def __init__(self, begin: Callable[[], None], end: Callable[[], None], seconds: float):
        self.begin, self.end, self.seconds = begin, end, seconds
        self.started: float | None = None
        self.ended = threading.Event()
        self._timer: threading.Timer | None = None

    def crash_point(self, name: str) -> None:
        if name != BRING_UP or self._timer is not None:
            return
        self.begin()
        self._timer = threading.Timer(self.seconds, self._clear)
        self._timer.start()

    def _clear(self) -> None:
        self.end()
        self.ended.set()

    def __enter__(self) -> Outage:
        return self

    def __exit__(self, *_: object) -> None:
        if self._timer is not None:
            self._timer.join(self.seconds + 60)
        assert self._timer is not None, "the run never reached its bring-up"


def run(
    info: LabInfo, history: HistoryStore, outage: Outage, mode: Mode, **options: object
) -> tuple[Drill, DrillResult]:
    plan = lab_plan(info)
    declared = dt.datetime.now(dt.UTC) if mode == Mode.INCIDENT else None
    request = DrillRequest(
        plan, mode=mode, operator="tests", reason="store outage", declared_at=declared,
        tier_deadline_s=30, plan_path=str(Path(info.state_dir) / "plan.yaml"),
        **{"store_wait_s": 60.0, **options},  # type: ignore[arg-type]
    )  # fmt: skip
    drill = Drill(request, history, DrillHooks(crash_point=outage.crash_point))
    with outage:
        return drill, drill.run()


def test_a_drill_meeting_a_postgres_outage_rolls_back_and_its_record_is_written_back(
    outage_lab: LabInfo, pg_history: HistoryStore, pg_outage: Outage, state: Path
) -> None:
    """The store stays out past the run's wait: the record waits in the write-ahead file,
    and the next `drills recover` here writes it back."""
    plan = lab_plan(outage_lab)
    before = snapshot(plan)
    _, result = run(outage_lab, pg_history, pg_outage, Mode.DRILL, store_wait_s=1.0)

    assert result.status == RunStatus.ROLLED_BACK, result.error
    assert "history store does not answer" in (result.error or "")
    assert result.drift == {} and snapshot(plan) == before
    assert serving(outage_lab.endpoints["primary"]) and not serving(outage_lab.endpoints["dr"])
    kept = write_ahead_file(state, result.run_id)
    assert str(kept) in (result.error or "") and kept.exists()

    pg_outage.ended.wait(OUTAGE_S + 30)
    stored = pg_history.get_run(result.run_id)
    assert stored is not None and stored.status == RunStatus.RUNNING  # the store as it was left
    # The next recover here writes the file back first: the run is then finished.
    with pytest.raises(RecoverError, match="nothing to recover"):
        pick_run(pg_history, result.run_id, None)
    stored = pg_history.get_run(result.run_id)
    assert stored is not None and stored.status == RunStatus.ROLLED_BACK
    assert "history store does not answer" in (stored.error or "")
    assert stored.finished_at is not None and not kept.exists()
    journal = pg_history.journal(result.run_id)
    # The bring-up's first entry, kept while the store was out, is there, undone.
    assert any(e.target.startswith("dr/") for e in journal)
    assert {e.state for e in journal} <= {EntryState.UNDONE, EntryState.FAILED}


def test_an_incident_reaches_service_through_a_postgres_outage_and_replays_its_journal(
    outage_lab: LabInfo, pg_history: HistoryStore, pg_outage: Outage, state: Path
) -> None:
    plan = lab_plan(outage_lab)
    _, result = run(outage_lab, pg_history, pg_outage, Mode.INCIDENT)
    try:
        assert result.status == RunStatus.SUCCEEDED, result.error
        assert serving(outage_lab.endpoints["dr"]) and not serving(outage_lab.endpoints["primary"])
        stored = pg_history.get_run(result.run_id)
        assert stored is not None and stored.status == RunStatus.SUCCEEDED
        assert stored.error is None and stored.rto_seconds and stored.finished_at
        assert len(stored.details.store_outages) == 1, stored.details.store_outages
        assert "OperationalError" in stored.details.store_outages[0]
        # Every change made during the outage is in the store, applied.
        journal = pg_history.journal(result.run_id)
        assert any(e.target.startswith("dr/") for e in journal)
        assert {e.state for e in journal} == {EntryState.APPLIED}
        assert not write_ahead_file(state, result.run_id).exists()
    finally:
        back_to_normal(plan, pg_history, result.run_id)


@pytest.fixture()
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MiB tmpfs of the test's own, for a store to fill."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_an_incident_reaches_service_with_its_sqlite_store_on_a_full_disk(
    outage_lab: LabInfo, tiny_disk: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The write-ahead file beside the store (where it is without DRILLS_STATE_DIR) is on
    the same full disk: the run goes on from memory and writes everything back once space
    is freed."""
    monkeypatch.delenv(STATE_DIR_ENV)
    history = HistoryStore(f"sqlite:///{tiny_disk / 'history.db'}")
    plan = lab_plan(outage_lab)
    filler = tiny_disk / "filler"

    def full() -> None:
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 65536):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
        finally:
            os.close(fd)

    outage = Outage(full, filler.unlink, OUTAGE_S)
    drill, result = run(outage_lab, history, outage, Mode.INCIDENT)
    try:
        assert result.status == RunStatus.SUCCEEDED, result.error
        assert serving(outage_lab.endpoints["dr"])
        stored = history.get_run(result.run_id)
        assert stored is not None and stored.status == RunStatus.SUCCEEDED and stored.rto_seconds
        # The store refused the writes for a full disk, and the file beside it too.
        assert "full" in " ".join(stored.details.store_outages), stored.details.store_outages
        assert "No space left" in (drill.journal.file_error or ""), drill.journal.file_error
        journal = history.journal(result.run_id)
        assert any(e.target.startswith("dr/") for e in journal)
        assert {e.state for e in journal} == {EntryState.APPLIED}
    finally:
        back_to_normal(plan, history, result.run_id)
        history.close()


def test_recover_undoes_from_the_snapshot_what_the_journal_lost(
    outage_lab: LabInfo, pg_history: HistoryStore, state: Path
) -> None:
    """The journal's last entries lost, as a store without durable commits loses them in
    a crash. The run's write-ahead file on its machine puts them back; without it (recover
    on another machine), recover finds the changes they made from the snapshot before."""
    plan = lab_plan(outage_lab)
    before = snapshot(plan)

    class Crash(BaseException):
        pass

    def crash_point(name: str) -> None:
        if name == "phase:smoke:start":
            raise Crash(name)

    request = DrillRequest(plan, operator="tests", tier_deadline_s=30,
                           plan_path=str(Path(outage_lab.state_dir) / "plan.yaml"))  # fmt: skip
    drill = Drill(request, pg_history, DrillHooks(crash_point=crash_point))
    with pytest.raises(Crash):
        drill.run()
    journal = pg_history.journal(drill.run_id)
    assert len(journal) > 4
    lost = journal[-4:]

    def lose_the_last_four() -> None:
        with RawDatabase(pg_history.url) as db:
            db.execute(
                "DELETE FROM journal WHERE run_id = ? AND seq >= ?", (drill.run_id, lost[0].seq)
            )
        assert len(pg_history.journal(drill.run_id)) == len(journal) - 4

    lose_the_last_four()
    # A second recover started at the same moment holds the file: this one leaves it alone
    # rather than write the same entries a second time.
    with write_ahead_file(state, drill.run_id).open("rb") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        pick_run(pg_history, drill.run_id, None)
    assert len(pg_history.journal(drill.run_id)) == len(journal) - 4
    pick_run(pg_history, drill.run_id, None)  # the file written back first
    assert [e.to_json() for e in pg_history.journal(drill.run_id)] == [e.to_json() for e in journal]

    lose_the_last_four()
    write_ahead_file(state, drill.run_id).unlink(missing_ok=True)
    run_record = pick_run(pg_history, drill.run_id, None)
    report = recover_run(pg_history, plan_of(run_record), run_record, deadline_s=30)

    assert report.status == RecoverStatus.RECOVERED, report.error
    # A validation Job the interrupted run deleted on its way out is undone already.
    left = {e.target for e in lost if e.state != EntryState.UNDONE}
    assert sorted(report.from_snapshot) == sorted(left)
    assert snapshot(plan) == before and report.drift == {}
    assert serving(outage_lab.endpoints["primary"]) and not serving(outage_lab.endpoints["dr"])
    stored = pg_history.get_run(drill.run_id)
    assert stored is not None and stored.details.recover[-1].from_snapshot == report.from_snapshot
    steps = {s["name"]: s for p in stored.timeline for s in p["steps"]}
    said = steps["journal against the snapshot before the run"]["result"]
    assert f"journal is incomplete: {len(left)} change(s)" in said
    assert "snapshot before the run" in said
