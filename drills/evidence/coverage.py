"""Coverage: for every plan, over a period, was it drilled, was failback drilled, how many
incidents, how many open findings; and does the history's chain verify.

"Failback drilled" means a drill (mode drill, not a dry run) in the period whose failback
phase succeeded: failback runs of their own do not exist yet.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from drills.evidence.findings import open_counts
from drills.store import runs as run_queries
from drills.store.history import HistoryStore
from drills.store.kinds import Mode, RunStatus
from drills.store.models import DrillRun
from drills.text import for_markdown

_PERIOD = re.compile(r"\s*(\d{1,4})\s*([dwmy])\s*")
_UNITS = {"d": "day", "w": "week", "m": "month", "y": "year"}


@dataclass(frozen=True)
class Period:
    count: int
    unit: str  # d, w, m (months) or y

    @classmethod
    def parse(cls, text: str) -> Period:
        match = _PERIOD.fullmatch(text.lower())
        if not match or int(match.group(1)) == 0:
            raise ValueError(
                f"period {text!r} is not a number of days, weeks, months or years "
                "(e.g. 90d, 12w, 12m, 1y)"
            )
        return cls(int(match.group(1)), match.group(2))

    def __str__(self) -> str:
        word = _UNITS[self.unit]
        return f"{word}" if self.count == 1 else f"{self.count} {word}s"

    def start(self, now: dt.datetime) -> dt.datetime:
        if self.unit in "dw":
            return now - dt.timedelta(days=self.count * (7 if self.unit == "w" else 1))
        months = self.count * (12 if self.unit == "y" else 1)
        year, month = divmod(now.year * 12 + now.month - 1 - months, 12)
        day = min(now.day, calendar.monthrange(year, month + 1)[1])
        return now.replace(year=year, month=month + 1, day=day)


@dataclass(frozen=True)
class ChainStatus:
    """Whether the history store's tamper-evident chain verifies, and where it breaks."""

    verifies: bool
    detail: str
    broken: dict[str, str] = field(default_factory=dict)  # plan -> its first problem
    checked: bool = True  # False: not verified this time (it reads every record)


@dataclass(frozen=True)
class UnreadablePlan:
    """A plan file that is configured but cannot be read or does not validate: its plan's
    coverage is unknown, which is a finding of its own, not a plan left out."""

    path: str
    error: str


@dataclass
class PlanCoverage:
    plan: str
    drilled: bool
    last_drill: str | None
    failback_drilled: bool
    incidents: int
    open_findings: int
    chain: str
    # Succeeded practice runs, counted on their own: a practice is never a drill.
    practices: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Coverage:
    period: str
    since: str
    generated_at: str
    plans: list[PlanCoverage]
    chain: ChainStatus
    unreadable: list[UnreadablePlan] = field(default_factory=list)

    @property
    def undrilled(self) -> list[str]:
        return [p.plan for p in self.plans if not p.drilled]

    @property
    def complete(self) -> bool:
        """Every plan drilled, every plan file read, and the chain verifies."""
        return not self.undrilled and not self.unreadable and self.chain.verifies

    def headline(self) -> str:
        """One line a compliance officer can read. A plan file that cannot be read counts
        as a plan not known to be drilled."""
        missing = self.undrilled
        total = len(self.plans) + len(self.unreadable)
        line = (
            f"{len(self.plans) - len(missing)} of {total} plans drilled in the last {self.period}"
        )
        if missing:
            line += f"; {_and(missing)} {'has' if len(missing) == 1 else 'have'} not been"
        if self.unreadable:
            files = [u.path for u in self.unreadable]
            line += f"; {_and(files)} cannot be read as {'a plan' if len(files) == 1 else 'plans'}"
        return line + "."

    def to_json(self) -> dict[str, Any]:
        return {
            "headline": self.headline(),
            "period": self.period,
            "since": self.since,
            "generated_at": self.generated_at,
            "chain": asdict(self.chain),
            "plans": [p.to_json() for p in self.plans],
            "unreadable_plans": [asdict(u) for u in self.unreadable],
        }


def _and(names: list[str]) -> str:
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def _failback_ok(run: DrillRun) -> bool:
    return any(p.get("name") == "failback" and p.get("status") == "ok" for p in run.timeline or [])


def _practised(run: DrillRun) -> bool:
    return run.mode == Mode.PRACTICE and not run.dry_run and run.status == RunStatus.SUCCEEDED


def _chain_cell(chain: ChainStatus, plan: str) -> str:
    if not chain.checked:
        return "not verified"
    return "does NOT verify" if plan in chain.broken else "verifies"


def coverage_over(
    store: HistoryStore,
    plan_names: Iterable[str],
    period: Period,
    *,
    chain: Callable[[HistoryStore], ChainStatus],
    now: dt.datetime | None = None,
    unreadable: Iterable[UnreadablePlan] = (),
) -> Coverage:
    """Coverage of ``plan_names`` and of every plan in the history, over ``period``; the
    ``unreadable`` plan files are reported, and counted, as findings."""
    now = now or dt.datetime.now(dt.UTC)
    since = period.start(now)
    names = sorted(set(plan_names) | set(run_queries.plan_names(store)))
    recent = run_queries.coverage_runs_since(store, since)
    open_count = open_counts(store, names)
    status = chain(store)
    by_plan: dict[str, list[DrillRun]] = {}
    for run in recent:
        by_plan.setdefault(run.plan, []).append(run)
    rows = []
    for name in names:
        mine = by_plan.get(name, [])
        drills = [r for r in mine if r.mode == Mode.DRILL and not r.dry_run]
        last = store.last_successful_drill(name)
        rows.append(
            PlanCoverage(
                plan=name,
                drilled=last is not None and last.started_at >= since,
                last_drill=last.started_at.isoformat() if last else None,
                failback_drilled=any(_failback_ok(r) for r in drills),
                incidents=sum(1 for r in mine if r.mode == Mode.INCIDENT),
                open_findings=open_count.get(name, 0),
                chain=_chain_cell(status, name),
                practices=sum(1 for r in mine if _practised(r)),
            )
        )
    return Coverage(str(period), since.isoformat(), now.isoformat(), rows, status, list(unreadable))


def _yes(value: bool) -> str:
    return "yes" if value else "**no**"


def coverage_markdown(report: Coverage) -> str:
    lines = [
        "# Drill coverage",
        "",
        f"**{for_markdown(report.headline())}**",
        "",
        f"Period: the last {report.period} (since {report.since}); "
        f"generated {report.generated_at}.",
        f"History chain: {for_markdown(report.chain.detail)}",
        "",
        "| plan | drilled in period | last drill | failback drilled | practices | incidents "
        "| open findings | chain |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for p in report.plans:
        lines.append(
            f"| {for_markdown(p.plan)} | {_yes(p.drilled)} | {p.last_drill or 'never'} "
            f"| {_yes(p.failback_drilled)} | {p.practices} | {p.incidents} | {p.open_findings} "
            f"| {p.chain} |"
        )
    if report.unreadable:
        lines += ["", "Plan files that cannot be read (their plans' coverage is unknown):", ""]
        lines += [f"- {for_markdown(u.path)}: {for_markdown(u.error)}" for u in report.unreadable]
    lines += [
        "",
        "A plan is drilled when a drill of it (not a dry run) succeeded in the period. Failback "
        "is drilled when such a drill's failback phase succeeded.",
        "Practices (succeeded practice runs) are counted on their own: a practice never "
        "fences the primary nor switches the production record, so it never counts as a drill.",
    ]
    return "\n".join(lines) + "\n"


def chain_not_checked(_: HistoryStore) -> ChainStatus:
    """For a view that cannot read every record: the chain's verdict is left to ask for."""
    return ChainStatus(True, "the history chain was not verified here", checked=False)
