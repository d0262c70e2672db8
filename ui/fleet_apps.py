"""The Fleet page's applications: each application's own last drill (`drills run --only`).

A plan's row counts every drill of it; an application's row only the drills restricted to
it, so a team sees when its application last moved on its own. No Streamlit here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

from drills.plan import DrillPlan
from drills.store import DrillRun, HistoryStore, Mode

# How far back, in drills of a plan, an application's last drill is looked for.
RUNS_LOOKED_AT = 500


@dataclass(frozen=True)
class ApplicationRow:
    plan: str
    application: str
    workloads: int  # the workloads it lists (those in no application join every run too)
    last_drill_at: dt.datetime | None
    last_verdict: str | None
    last_rto: float | None
    rto_target: float
    run_id: str | None


def application_rows(store: HistoryStore, plans: Sequence[DrillPlan]) -> list[ApplicationRow]:
    """A row per application of each plan, with its newest drill restricted to it (dry
    runs left out), newest first within the plan as the plan lists them."""
    rows: list[ApplicationRow] = []
    for plan in plans:
        if not plan.applications:
            continue
        newest: dict[str, DrillRun] = {}
        for run in store.list_runs(plan=plan.name, mode=Mode.DRILL, limit=RUNS_LOOKED_AT):
            restricted_to = run.details.application
            if restricted_to and not run.dry_run:
                newest.setdefault(restricted_to, run)
        for app in plan.applications:
            last = newest.get(app.name)
            rows.append(
                ApplicationRow(
                    plan.name, app.name, len(app.workloads),
                    last.started_at if last else None, last.verdict if last else None,
                    last.rto_seconds if last else None, plan.objectives.rto,
                    last.id if last else None,
                )
            )  # fmt: skip
    return rows


__all__ = ["ApplicationRow", "application_rows"]
