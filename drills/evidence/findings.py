"""Findings: what a run showed to be wrong, until a later run of the same plan shows it fixed.

A readiness check that failed or errored at T0, or a step of the takeover that failed,
opens a finding. It stays open while later runs of the plan fail it again, and closes at
the first later run in which the same check (or step, by phase and name) passed. A pure
function of the history store: nothing is kept but the runs themselves.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from drills.store import findings as queries
from drills.store.findings import history_version as history_version  # ui/data's cache key
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun

Kind = Literal["readiness", "step"]
FAILED_CHECK = ("fail", "error")
PASSED_CHECK = ("pass", "warn")  # a warning does not block: the check did its job
# The check a succeeded drill answers by itself: "never drilled" (or "too long ago") at its
# T0 is no longer true once it is recorded, so such a drill passes it rather than open it.
CADENCE_CHECK = "drill.cadence"


@dataclass
class Finding:
    id: str
    plan: str
    kind: Kind
    key: str  # a check id, or "phase / step"
    what: str  # the check's title or the step's name
    detail: str  # what was wrong, the last time it was seen
    remediation: str
    opened_run: str
    opened_at: str | None
    last_seen_run: str
    times_seen: int = 1
    closed_run: str | None = None
    closed_at: str | None = None

    @property
    def open(self) -> bool:
        return self.closed_run is None

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"open": self.open}


@dataclass(frozen=True)
class Observation:
    kind: Kind
    key: str
    what: str
    failed: bool
    detail: str
    remediation: str


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value else None


def proves_cadence(run: DrillRun) -> bool:
    """A real drill that succeeded: it is the drill the cadence check asks for."""
    return run.mode == Mode.DRILL and not run.dry_run and run.status == RunStatus.SUCCEEDED


def observations(run: DrillRun) -> Iterator[Observation]:
    """What one run says about each readiness check and step: failed, or passed."""
    drilled = proves_cadence(run)
    for result in (run.readiness or {}).get("results") or []:
        status = result.get("status")
        if status in FAILED_CHECK or status in PASSED_CHECK:
            answered = drilled and result.get("id") == CADENCE_CHECK
            yield Observation(
                "readiness", str(result.get("id")), str(result.get("title") or result.get("id")),
                status in FAILED_CHECK and not answered,
                f"pass: drill {run.id} succeeded" if answered else
                f"{status}: {result.get('summary', '')}",
                str(result.get("remediation") or ""),
            )  # fmt: skip
    for phase in run.timeline or []:
        for step in phase.get("steps") or []:
            if step.get("status") not in ("ok", "failed"):
                continue  # planned (dry run), skipped or never ended: says nothing
            yield Observation(
                "step", f"{phase.get('name')} / {step.get('name')}", str(step.get("name")),
                step["status"] == "failed", str(step.get("result") or "failed"),
                f"Find and fix the cause of the failed step, then drill plan {run.plan} again.",
            )  # fmt: skip


def _finding_id(plan: str, obs: Observation, run_id: str) -> str:
    digest = hashlib.sha256(f"{plan}\0{obs.kind}\0{obs.key}\0{run_id}".encode()).hexdigest()
    return "F-" + digest[:10]


def fold(runs: Iterable[DrillRun]) -> list[Finding]:
    """Findings of ``runs``, given oldest first (all of one plan, or several)."""
    current: dict[tuple[str, Kind, str], Finding] = {}
    done: list[Finding] = []
    for run in runs:
        for obs in observations(run):
            key = (run.plan, obs.kind, obs.key)
            found = current.get(key)
            if obs.failed and found is None:
                current[key] = Finding(
                    _finding_id(run.plan, obs, run.id), run.plan, obs.kind, obs.key, obs.what,
                    obs.detail, obs.remediation, run.id, _iso(run.t0 or run.started_at), run.id,
                )  # fmt: skip
            elif obs.failed and found is not None:
                found.detail, found.last_seen_run = obs.detail, run.id
                found.times_seen += 1
            elif found is not None:
                found.closed_run, found.closed_at = run.id, _iso(run.t0 or run.started_at)
                done.append(current.pop(key))
    return sorted([*done, *current.values()], key=lambda f: (f.plan, f.opened_at or "", f.key))


def findings(
    store: HistoryStore, plan: str | None = None, *, until: dt.datetime | None = None
) -> list[Finding]:
    """Every finding of ``plan`` (or of every plan), as of ``until`` (default: now)."""
    return fold(queries.runs_oldest_first(store, plan, until))


def open_findings(store: HistoryStore, plan: str | None = None) -> list[Finding]:
    return [f for f in findings(store, plan) if f.open]


def findings_of_run(store: HistoryStore, run: DrillRun) -> list[Finding]:
    """The findings as they stood when ``run`` ended: those it opened or saw again, those it
    closed, and those still open from earlier runs of the plan."""
    return fold(queries.runs_oldest_first(store, run.plan, run.started_at))


def open_counts(store: HistoryStore, plans: Sequence[str]) -> dict[str, int]:
    """How many findings each plan has open (plans with none are left out): exact, over
    the whole history, the same count as :func:`open_findings` gives."""
    if not plans:
        return {}
    counted = queries.counted_in_database(store, plans)
    return folded_open_counts(store, plans) if counted is None else counted


def folded_open_counts(store: HistoryStore, plans: Sequence[str]) -> dict[str, int]:
    """The same count, every run of ``plans`` read and folded in Python: for a backend
    without a statement of its own, and the reference the statements are tested against."""
    found = queries.fold_runs_of(store, plans, fold)
    counts: dict[str, int] = {}
    for finding in found:
        if finding.open:
            counts[finding.plan] = counts.get(finding.plan, 0) + 1
    return counts
