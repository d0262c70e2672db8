"""One drill or incident at a time per plan: a lease in the history store.

Taking the lease is one atomic statement: an INSERT, or an UPDATE that only
matches an expired lease (or one whose holder is a process on this host that
no longer exists). Whoever holds it renews it from a heartbeat thread; it
expires on its own when the holder dies, and `drills recover` can take over at once
after a crash on the same host.

A run's target leases outlive it when it ends unfinished (crashed, or stopped part-way):
its half-done changes are still on those targets, so another plan's run stays off them,
expired or not, until `drills recover` (which leases them under the same run) finishes it.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType

from drills.errors import DrillError
from drills.plan.claims import Claim
from drills.plan.models.applications import lease_name
from drills.store import leases
from drills.store.clock import database_now
from drills.store.history import HistoryStore
from drills.store.leases import current
from drills.store.models import DrillRun, Lease, TargetLease
from drills.store.outage import is_store_outage

log = logging.getLogger("drills.takeover.lease")

LEASE_S = 60.0
RENEW_S = 15.0


class LeaseHeldError(DrillError):
    """Another live run holds the plan's lease."""

    def __init__(self, plan: str, holder: str, run_id: str, expires_at: dt.datetime) -> None:
        self.plan, self.holder, self.run_id, self.expires_at = plan, holder, run_id, expires_at
        super().__init__(
            f"plan {plan} is busy: run {run_id} holds its lease ({holder}) until "
            f"{expires_at:%Y-%m-%d %H:%M:%S} UTC. Wait for it to finish, or cancel it; "
            f"if it died, run `drills recover {run_id}`."
        )


class TargetBusyError(LeaseHeldError):
    """Another plan's live run holds a target this run's takeover would touch too."""

    def __init__(self, plan: str, held: TargetLease) -> None:
        self.plan, self.holder, self.run_id, self.expires_at = (
            plan, held.holder, held.run_id, held.expires_at,
        )  # fmt: skip
        self.other_plan, self.claim = held.plan, held.claim
        DrillError.__init__(
            self,
            f"plan {plan} cannot run now: plan {held.plan} (run {held.run_id}) holds "
            f"{held.claim}, which both takeovers touch, until "
            f"{held.expires_at:%Y-%m-%d %H:%M:%S} UTC. Plans that share a target run one at "
            f"a time: wait for run {held.run_id} to finish, or cancel it; if it died, run "
            f"`drills recover {held.run_id}`.",
        )


class CrashedRunHoldsTargetError(TargetBusyError):
    """An unfinished run of another plan (its process gone) still holds a target: its
    half-done changes may be there until it is recovered."""

    def __init__(self, plan: str, held: TargetLease, status: str) -> None:
        self.plan, self.holder, self.run_id, self.expires_at = (
            plan, held.holder, held.run_id, held.expires_at,
        )  # fmt: skip
        self.other_plan, self.claim, self.status = held.plan, held.claim, status
        DrillError.__init__(
            self,
            f"plan {plan} cannot run now: run {held.run_id} of plan {held.plan} touched "
            f"{held.claim}, which both takeovers touch, and crashed or stopped part-way "
            f"(status {status}): its changes may still be there. The target stays held until "
            f"it is recovered: run `drills recover {held.run_id}` first.",
        )


class UnfinishedRunError(DrillError):
    """The plan has a run that never finished (it crashed): recover it before a new one."""

    def __init__(self, plan: str, run_id: str, status: str) -> None:
        self.plan, self.run_id = plan, run_id
        super().__init__(
            f"plan {plan} has an unfinished run {run_id} (status {status}); it may have left "
            f"changes behind. Run `drills recover {run_id}` first."
        )


def new_holder(role: str = "") -> str:
    """Who holds a lease: host, process id, a token unique to this lease, and what for
    (``recover``, say) when the holder says: a refusal can then name its rival."""
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    return f"{holder}:{role}" if role else holder


def holder_role(holder: str) -> str:
    """The role :func:`new_holder` recorded in ``holder``, or "" (a run's own process)."""
    parts = holder.split(":", 3)
    return parts[3] if len(parts) == 4 else ""


def holder_is_dead(holder: str) -> bool:
    """True only when the holder is a process on this host that no longer exists."""
    host, _, rest = holder.partition(":")
    pid_text = rest.partition(":")[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False  # another host: only expiry can tell
    try:
        os.kill(int(pid_text), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def _stale(existing: Lease | TargetLease, now: dt.datetime) -> bool:
    return existing.expires_at <= now or holder_is_dead(existing.holder)


def acquire(
    store: HistoryStore, plan: str, run_id: str, holder: str, lease_s: float = LEASE_S
) -> None:
    """Take the plan's lease for ``run_id``, or raise LeaseHeldError naming who has it."""
    now = database_now(store)
    expires = now + dt.timedelta(seconds=lease_s)
    row = Lease(plan=plan, holder=holder, run_id=run_id, expires_at=expires)
    existing = leases.take(store, row, now, holder_is_dead)
    if existing is not None:
        raise LeaseHeldError(plan, existing.holder, existing.run_id, existing.expires_at)


def run_lease(run: DrillRun) -> str:
    """The lease a run holds while it lives: its plan's, or its application's."""
    return lease_name(run.plan, run.details.application)


def target_key(claim: Claim) -> str:
    return hashlib.sha256(str(claim).encode()).hexdigest()


def _unfinished(store: HistoryStore, run_id: str) -> DrillRun | None:
    """The run, if the history has it unfinished (a dry run changes nothing: never)."""
    run = store.get_run(run_id)
    if run is None or run.finished_at is not None or run.dry_run:
        return None
    return run


def _refusal(store: HistoryStore, plan: str, held: TargetLease, now: dt.datetime) -> DrillError:
    """Why ``held`` keeps ``plan`` off: a live run, or an unfinished one whose process is
    gone (the same plan's: recover it first, as the plan's own check says)."""
    crashed = _unfinished(store, held.run_id) if _stale(held, now) else None
    if crashed is None:
        return TargetBusyError(plan, held)
    if held.plan == plan:
        return UnfinishedRunError(plan, crashed.id, crashed.status)
    return CrashedRunHoldsTargetError(plan, held, crashed.status)


def acquire_targets(
    store: HistoryStore,
    plan: str,
    run_id: str,
    holder: str,
    claims: Sequence[Claim],
    lease_s: float = LEASE_S,
) -> None:
    """Take every target the run touches, in one order for all runs; or none of them, and
    raise TargetBusyError naming the plan and run in the way (CrashedRunHoldsTargetError
    when that run crashed and waits for `drills recover`; UnfinishedRunError when it is
    of this plan). A stale lease of an unfinished run is only taken by that run's recover."""
    now = database_now(store)
    expires = now + dt.timedelta(seconds=lease_s)

    def still_held(stale: TargetLease) -> bool:
        return stale.run_id != run_id and _unfinished(store, stale.run_id) is not None

    for claim in sorted(set(claims)):
        row = TargetLease(target=target_key(claim), claim=str(claim), plan=plan, holder=holder,
                          run_id=run_id, expires_at=expires)  # fmt: skip
        existing = leases.take(store, row, now, holder_is_dead, still_held)
        if existing is not None:
            release_targets(store, holder)
            raise _refusal(store, plan, existing, now)


def release_targets(store: HistoryStore, holder: str) -> None:
    leases.release_targets(store, holder)


def lapse_targets(store: HistoryStore, holder: str) -> None:
    """Let go of the targets without deleting them: expired now, so the run's recover takes
    them at once, while acquire_targets keeps every other run off them."""
    leases.lapse_targets(store, holder)


def renew(store: HistoryStore, plan: str, holder: str, lease_s: float = LEASE_S) -> bool:
    """Push the expiry out, of the plan's lease and of its targets'; False if the plan's
    lease is no longer ours."""
    return leases.renew(store, plan, holder, database_now(store) + dt.timedelta(seconds=lease_s))


def release(store: HistoryStore, plan: str, holder: str) -> None:
    leases.release(store, plan, holder)


@dataclass
class PlanLease:
    """The lease as a context manager, renewed by a heartbeat thread while held.

    When the lease is lost (another holder took it, or it went a whole lease without a
    renewal, so another may take it), ``on_lost`` is called once with why, from the
    heartbeat thread: a run stops there. Without it the loss is only logged.
    """

    store: HistoryStore
    plan: str
    run_id: str
    lease_s: float = LEASE_S
    renew_s: float | None = None  # RENEW_S, or a third of a shorter lease
    claims: Sequence[Claim] = ()  # the targets the run touches, leased with the plan
    on_lost: Callable[[str], None] | None = None
    role: str = ""  # what the holder does, recorded in its name (new_holder)

    def __post_init__(self) -> None:
        if self.renew_s is None:
            # Renewed well before it expires, however short a lease the caller asks for.
            self.renew_s = min(RENEW_S, self.lease_s / 3)
        self.holder = new_holder(self.role)
        self.lost: str | None = None  # why the lease was lost, once it is
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._heartbeat, name=f"lease-{self.plan}", daemon=True
        )

    def _heartbeat(self) -> None:
        assert self.renew_s is not None
        renewed = time.monotonic()
        while not self._stop.wait(self.renew_s):
            try:
                if renew(self.store, self.plan, self.holder, self.lease_s):
                    renewed = time.monotonic()
                    continue
                why = "another holder took it"
            except Exception:  # a store hiccup must not kill the heartbeat
                if time.monotonic() - renewed < self.lease_s:
                    log.warning("could not renew the lease of %s; retrying", self.plan,
                                exc_info=True)  # fmt: skip
                    continue
                why = f"not renewed for {self.lease_s:.0f}s, so another may take it"
            self._lose(why)
            return

    def _lose(self, why: str) -> None:
        self.lost = f"the run lost the lease of plan {self.plan}: {why}"
        log.error("run %s: %s", self.run_id, self.lost)
        if self.on_lost is not None and not self._stop.is_set():
            self.on_lost(self.lost)

    def __enter__(self) -> PlanLease:
        acquire(self.store, self.plan, self.run_id, self.holder, self.lease_s)
        try:
            acquire_targets(
                self.store, self.plan, self.run_id, self.holder, self.claims, self.lease_s
            )
        except BaseException:
            release(self.store, self.plan, self.holder)
            raise
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(5)
        try:
            if _unfinished(self.store, self.run_id) is None:
                release_targets(self.store, self.holder)
            else:  # ended part-way: its targets stay held for it until `drills recover`
                lapse_targets(self.store, self.holder)
            release(self.store, self.plan, self.holder)
        except Exception as failed:
            if not is_store_outage(failed):
                raise
            # The run's own end is what matters; the lease expires by itself, and its
            # targets stay held while the run's record says it is unfinished.
            log.error("run %s: the history store does not answer; the lease of %s is left "
                      "to expire (%s)", self.run_id, self.plan, failed)  # fmt: skip


__all__ = [
    "LEASE_S",
    "RENEW_S",
    "CrashedRunHoldsTargetError",
    "LeaseHeldError",
    "PlanLease",
    "TargetBusyError",
    "UnfinishedRunError",
    "acquire",
    "acquire_targets",
    "current",
    "holder_is_dead",
    "holder_role",
    "lapse_targets",
    "release",
    "release_targets",
    "renew",
    "run_lease",
]
