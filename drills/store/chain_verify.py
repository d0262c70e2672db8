"""Verifying the evidence chain: every plan's links against the live tables, and a run's links
as an evidence pack lists them.

How records are sealed, and what each kind of problem means, is told in
:mod:`drills.store.chain`; this module reads the chain and never writes it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, select

from drills.store import checkpoints
from drills.store.chain import (
    GENESIS,
    chain_since,
    entry_digest,
    journal_key,
    json_value,
    model_table,
    prune_digest,
    raw_rows,
    record_digest,
    step_digests,
)
from drills.store.chain_report import STORE, ChainProblem, ChainReport, PlanChain
from drills.store.models import (
    AuditEvent,
    DrillRun,
    EvidenceEntry,
    JournalEntry,
    PrunedRecord,
    ReadinessSnapshot,
)

Checkpoint = checkpoints.Checkpoint


# -- verifying ----------------------------------------------------------------------------
@dataclass
class _Live:
    """One record as the live tables hold it now."""

    kind: str
    key: str
    sha256: str
    label: str
    order: tuple[Any, ...]  # where it sorts among records of its kind and scope
    scope: str  # plan for runs/readiness/audit, run id for steps/journal


@dataclass
class _PlanState:
    plan: str
    live: dict[tuple[str, str], _Live] = field(default_factory=dict)
    open_runs: int = 0
    # (kind, key) -> (content hash when pruned, the prune link's seq)
    pruned: dict[tuple[str, str], tuple[str, int]] = field(default_factory=dict)
    batches: dict[int, list[tuple[str, str, str]]] = field(default_factory=dict)


def verify_store(store: Any, external: Iterable[tuple[str, Checkpoint]] = ()) -> ChainReport:
    """Walk every plan's chain against the live tables, in one consistent read.

    ``store`` is a HistoryStore. The report is ``ok`` when every link is in place and
    every sealed record still holds what was sealed, with no final record left unsealed,
    the chain's marker is there, and no checkpoint (the store's own, and ``external``:
    (where it was kept, checkpoint) pairs) finds the chain shorter or different.
    """
    with _snapshot(store.engine) as conn:
        since = chain_since(conn)
        states = _live_records(conn)
        links = _links(conn)
        opening = checkpoints.opening_problems(conn)
        kept = [("the store", cp) for cp in checkpoints.all_checkpoints(conn)]
    plans = sorted(set(states) | set(links))
    summaries: list[PlanChain] = []
    problems = _checkpoint_problems(opening, links, [*kept, *external])
    for plan in plans:
        state = states.get(plan) or _PlanState(plan)
        chain = links.get(plan, [])
        summaries.append(_summary(state, chain))
        problems.extend(_plan_problems(state, chain))
    problems.sort(key=lambda pair: pair[0])
    return ChainReport(tuple(summaries), tuple(p for _, p in problems), since)


def _checkpoint_problems(
    opening: list[str], links: dict[str, list[EvidenceEntry]],
    kept: list[tuple[str, Checkpoint]],
) -> list[Ranked]:  # fmt: skip
    """The store's own tampering (its marker or its links gone), then each checkpoint the
    chain contradicts: these come before any record's problem."""
    found: list[Ranked] = [
        ((0, 0, 0), ChainProblem(STORE, "chain", "evidence_chain", "tampered", detail))
        for detail in opening
    ]
    heads = {plan: [e.entry_sha256 for e in chain] for plan, chain in links.items()}
    for source, cp in kept:
        for gone in checkpoints.disagreements(heads, [cp]):
            what = "truncated" if len(heads.get(cp.plan, [])) < cp.length else "rewritten"
            problem = ChainProblem(
                cp.plan, "checkpoint", str(cp.length), what, gone.describe(source), cp.length
            )
            found.append(((0, cp.length, 0), problem))
    return found


class _snapshot:  # noqa: N801 - a context manager, named as one is used
    """A connection whose reads all see one moment: a drill may be writing meanwhile."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.conn: Connection | None = None

    def __enter__(self) -> Connection:
        if self.engine.dialect.name == "sqlite":
            self.conn = self.engine.connect()
            self.conn.exec_driver_sql("BEGIN")  # pysqlite starts none for reads
        else:
            self.conn = self.engine.connect().execution_options(isolation_level="REPEATABLE READ")
        return self.conn

    def __exit__(self, *exc: object) -> None:
        assert self.conn is not None
        self.conn.rollback()
        self.conn.close()


def _links(conn: Connection) -> dict[str, list[EvidenceEntry]]:
    table = model_table(EvidenceEntry)
    chains: dict[str, list[EvidenceEntry]] = {}
    rows = conn.execute(select(table).order_by(table.c.plan, table.c.seq))
    for row in rows:
        entry = EvidenceEntry(**dict(row._mapping))
        chains.setdefault(entry.plan, []).append(entry)
    return chains


def _live_records(conn: Connection) -> dict[str, _PlanState]:
    states: dict[str, _PlanState] = {}

    def state(plan: str) -> _PlanState:
        return states.setdefault(plan, _PlanState(plan))

    plan_of: dict[str, str] = {}
    for run in _stream(conn, DrillRun):
        plan_of[run["id"]] = run["plan"]
        _add_run(state(run["plan"]), run)
    for entry in _stream(conn, JournalEntry):
        run_id, seq = entry["run_id"], entry["seq"]
        live = _Live(
            "journal", journal_key(run_id, seq), record_digest(entry),
            f"{entry.get('step')} {entry.get('target')}", (seq,), run_id,
        )  # fmt: skip
        state(plan_of.get(run_id, "")).live[("journal", live.key)] = live
    for model, kind in ((ReadinessSnapshot, "readiness"), (AuditEvent, "audit")):
        for row in _stream(conn, model):
            plan = row.get("plan") or ""
            live = _Live(kind, str(row["id"]), record_digest(row), kind, (row["id"],), plan)
            state(plan).live[(kind, live.key)] = live
    for gone in _stream(conn, PrunedRecord):
        found = state(gone["plan"])
        kind, key, sha, seq = (
            gone["kind"],
            gone["record_key"],
            gone["content_sha256"],
            gone["prune_seq"],
        )
        found.pruned[(kind, key)] = (sha, seq)
        found.batches.setdefault(seq, []).append((kind, key, sha))
    return states


def _stream(conn: Connection, model: type[Any]) -> Iterator[dict[str, Any]]:
    result = conn.execution_options(yield_per=500).execute(raw_rows(model_table(model)))
    for row in result:
        yield dict(row._mapping)


def _add_run(state: _PlanState, run: dict[str, Any]) -> None:
    run_id = run["id"]
    for step in step_digests(run_id, run.get("timeline")):
        state.live[("step", step.key)] = _Live(
            "step", step.key, step.sha256, step.label, step.position, run_id
        )
    label = f"{json_value(run.get('mode'))} run, {json_value(run.get('status'))}"
    started = json_value(run.get("started_at")) or ""
    live = _Live("run", run_id, record_digest(run), label, (started, run_id), state.plan)
    if run.get("finished_at") is None:
        state.open_runs += 1
        live.order = ("open",)  # judged only if it was sealed once
    state.live[("run", run_id)] = live


def _summary(state: _PlanState, chain: list[EvidenceEntry]) -> PlanChain:
    keys = {(e.kind, e.record_key) for e in chain}
    return PlanChain(
        plan=state.plan,
        links=len(chain),
        records=len(keys),
        pre_chain=sum(1 for e in chain if e.pre_chain),
        open_runs=state.open_runs,
        head_sha256=chain[-1].entry_sha256 if chain else GENESIS,
        pruned=len(state.pruned),
    )


# (0 for the chain's own links, else 1; the link where it shows; order within it)
Ranked = tuple[tuple[int, float, int], ChainProblem]


def _plan_problems(state: _PlanState, chain: list[EvidenceEntry]) -> list[Ranked]:
    problems = _link_problems(state.plan, chain)
    problems.extend(_prune_problems(state, chain))
    newest: dict[tuple[str, str], EvidenceEntry] = {}
    for entry in chain:
        if entry.kind != "prune":
            newest[(entry.kind, entry.record_key)] = entry
    problems.extend(_content_problems(state, newest))
    problems.extend(_unsealed_problems(state, newest))
    return problems


def _link_problems(plan: str, chain: list[EvidenceEntry]) -> list[Ranked]:
    """The chain itself: seqs 1, 2, 3…, each link naming the hash of the one before."""
    found: list[Ranked] = []
    prev = GENESIS
    for expected, e in enumerate(chain, start=1):
        problem = None
        if e.seq != expected:
            what = "removed" if e.seq > expected else "inserted"
            problem = ChainProblem(
                plan, "chain", str(expected), what,
                f"link {expected} expected, link {e.seq} found", e.seq, e.label,
            )  # fmt: skip
        elif e.prev_sha256 != prev:
            problem = ChainProblem(
                plan, "chain", str(e.seq), "inserted",
                "the link does not follow the one before it (prev hash differs)", e.seq, e.label,
            )  # fmt: skip
        elif e.entry_sha256 != entry_digest(
            e.prev_sha256, e.plan, e.seq, e.kind, e.record_key, e.content_sha256, e.pre_chain
        ):
            problem = ChainProblem(
                plan, "chain", str(e.seq), "changed", "the link's own hash differs", e.seq, e.label
            )
        if problem is not None:
            found.append(((0, e.seq, 0), problem))
            return found  # everything after a broken link is unproven anyway
        prev = e.entry_sha256
    return found


def _content_problems(
    state: _PlanState, newest: dict[tuple[str, str], EvidenceEntry]
) -> list[Ranked]:
    found: list[Ranked] = []
    sealed_steps: dict[str, list[EvidenceEntry]] = {}
    for (kind, key), entry in newest.items():
        if kind == "step":
            sealed_steps.setdefault(entry.run_id or key.rsplit("/", 1)[0], []).append(entry)
            continue
        live = state.live.get((kind, key))
        if live is None and (kind, key) in state.pruned:
            gone = _pruned_problem(state, entry)
            if gone is not None:
                found.append(((1, entry.seq, 1), gone))
        elif live is None:
            problem = _problem(state.plan, entry, "removed", "sealed, now gone")
            found.append(((1, entry.seq, 1), problem))
        elif live.sha256 != entry.content_sha256:
            problem = _problem(state.plan, entry, "changed", _changed(entry))
            found.append(((1, entry.seq, 1), problem))
    live_steps: dict[str, dict[str, _Live]] = {}
    for live in state.live.values():
        if live.kind == "step":
            live_steps.setdefault(live.scope, {})[live.key] = live
    for run_id, sealed in sealed_steps.items():
        found.extend(_step_problems(state.plan, sealed, live_steps.get(run_id, {})))
    return found


def _prune_problems(state: _PlanState, chain: list[EvidenceEntry]) -> list[Ranked]:
    """Each prune link against the batch it covers; a batch with no link was slipped in."""
    found: list[Ranked] = []
    linked = set()
    for entry in chain:
        if entry.kind != "prune":
            continue
        linked.add(entry.seq)
        if prune_digest(state.batches.get(entry.seq, ())) != entry.content_sha256:
            detail = "the records listed as pruned differ from those the prune sealed"
            found.append(((1, entry.seq, 0), _problem(state.plan, entry, "changed", detail)))
    for seq in sorted(set(state.batches) - linked):
        kind, key, _ = state.batches[seq][0]
        problem = ChainProblem(
            state.plan, kind, key, "removed",
            f"listed as pruned by link {seq}, which is no prune of the chain", seq,
        )  # fmt: skip
        found.append(((1, seq, 0), problem))
    return found


def _pruned_problem(state: _PlanState, entry: EvidenceEntry) -> ChainProblem | None:
    """None when the record was pruned after it was sealed, holding what was sealed."""
    sha, prune_seq = state.pruned[(entry.kind, entry.record_key)]
    if prune_seq < entry.seq:
        return _problem(state.plan, entry, "removed", "sealed after the prune that lists it")
    if sha != entry.content_sha256:
        return _problem(state.plan, entry, "changed", "pruned, but " + _changed(entry))
    return None


def _problem(plan: str, entry: EvidenceEntry, what: str, detail: str) -> ChainProblem:
    return ChainProblem(plan, entry.kind, entry.record_key, what, detail, entry.seq, entry.label)


def _changed(entry: EvidenceEntry) -> str:
    since = "at the store's upgrade" if entry.pre_chain else "when sealed"
    return (
        f"content differs from {since} {entry.chained_at.isoformat()} "
        f"(sealed sha256 {entry.content_sha256[:12]}…)"
    )


def _step_problems(plan: str, sealed: list[EvidenceEntry], live: dict[str, _Live]) -> list[Ranked]:
    """A run's steps in timeline order: a step deleted shifts those after it, so tell a
    removal or an insertion from a change by where the sealed contents went."""
    sealed = sorted(sealed, key=lambda e: _position(e.record_key))
    sealed_shas = {e.content_sha256 for e in sealed}
    live_shas = {lv.sha256 for lv in live.values()}
    for entry in sealed:
        now = live.get(entry.record_key)
        if now is not None and now.sha256 == entry.content_sha256:
            continue
        if now is None or (entry.content_sha256 not in live_shas and now.sha256 in sealed_shas):
            return [((1, entry.seq, 1), _problem(plan, entry, "removed", "sealed, now gone"))]
        if entry.content_sha256 in live_shas and now.sha256 not in sealed_shas:
            detail = f"a step not in the chain stands here: {now.label}"
            return [((1, entry.seq, 1), _problem(plan, entry, "inserted", detail))]
        return [((1, entry.seq, 1), _problem(plan, entry, "changed", _changed(entry)))]
    return []


def _position(key: str) -> tuple[int, ...]:
    return tuple(int(n) for n in key.rsplit("/", 1)[1].split("."))


def _unsealed_problems(
    state: _PlanState, newest: dict[tuple[str, str], EvidenceEntry]
) -> list[Ranked]:
    """Final records with no link: inserted when sealed records of their kind and scope
    sort after them, unchained when they come after all of them."""
    found: list[Ranked] = []
    index = _Later(state, newest)
    for (kind, key), live in state.live.items():
        if (kind, key) in newest or live.order == ("open",):
            continue
        later = index.first_after(kind, live.scope, live.order)
        if later is not None:
            problem = ChainProblem(
                state.plan, kind, key, "inserted",
                "not in the chain, among records that are", later, live.label,
            )  # fmt: skip
            found.append(((1, later, 0), problem))
        else:
            problem = ChainProblem(
                state.plan, kind, key, "unchained", "final, but not in the chain", None,
                live.label,
            )  # fmt: skip
            found.append(((1, float("inf"), 0), problem))
    return found


class _Later:
    """For a record's place among sealed ones of its kind and scope: the lowest link seq
    of those that sort after it (bisection over each group, sorted once)."""

    def __init__(self, state: _PlanState, newest: dict[tuple[str, str], EvidenceEntry]) -> None:
        groups: dict[tuple[str, str], list[tuple[tuple[Any, ...], int]]] = {}
        for (kind, _), entry in newest.items():
            order = _order(state, entry)
            if order is not None:
                groups.setdefault((kind, _scope(entry, state.plan)), []).append((order, entry.seq))
        self._orders: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        self._min_seq_from: dict[tuple[str, str], list[int]] = {}
        for group, items in groups.items():
            items.sort(key=lambda item: item[0])
            suffix = [seq for _, seq in items]
            for i in range(len(suffix) - 2, -1, -1):
                suffix[i] = min(suffix[i], suffix[i + 1])
            self._orders[group] = [order for order, _ in items]
            self._min_seq_from[group] = suffix

    def first_after(self, kind: str, scope: str, order: tuple[Any, ...]) -> int | None:
        orders = self._orders.get((kind, scope))
        if not orders:
            return None
        i = bisect.bisect_right(orders, order)
        return self._min_seq_from[(kind, scope)][i] if i < len(orders) else None


def _scope(entry: EvidenceEntry, plan: str) -> str:
    return entry.run_id if entry.kind in ("step", "journal") and entry.run_id else plan


def _order(state: _PlanState, entry: EvidenceEntry) -> tuple[Any, ...] | None:
    live = state.live.get((entry.kind, entry.record_key))
    if live is not None and live.order != ("open",):
        return live.order
    if entry.kind == "step":
        return _position(entry.record_key)
    if entry.kind == "journal":
        return (int(entry.record_key.rsplit("/", 1)[1]),)
    if entry.kind in ("readiness", "audit"):
        return (int(entry.record_key),)
    return None


__all__ = ["ChainProblem", "ChainReport", "PlanChain", "verify_store"]
