"""A practice: DR's critical tier brought up and verified beside the primary, then stood down.

Beside the smoke probes it runs the plan's validation jobs at DR, the load probe at DR
(never at the primary), and the SLOs marked ``in_practice``: any of them failing makes the
practice not met, and it stands DR down as any failure does.

Nothing the primary serves from is touched: the primary is never fenced, its writers
keep running, and the production DNS record keeps its value. DR is verified through a
name of its own (the plan's ``practice.record``, pointed at DR's value for the run and
restored afterwards, absence included) or, without one, at DR's endpoint directly.
Replication goes on throughout. Every change goes through the same journal as a drill's,
so a crash is recovered by `drills recover` as a drill's is: DR back to standby.
"""

from __future__ import annotations

import datetime as dt
import time
from functools import partial
from urllib.parse import urlsplit, urlunsplit

from drills.checks.areas.identity import CHECK_ID as DISTINCT_CHECK
from drills.checks.base import Status
from drills.checks.checkup import check_context, select_checks
from drills.checks.runner import run_checks
from drills.errors import RunRefused
from drills.plan import DrillPlan, SmokeProbe
from drills.plan.claims import Claim, plan_claims
from drills.store.kinds import RunStatus
from drills.takeover import carry
from drills.takeover.drill import Drill
from drills.takeover.request import DrillResult
from drills.takeover.snapshot import Snapshot
from drills.takeover.steps.changes import record_address
from drills.takeover.steps.dns_values import planned_values
from drills.takeover.steps.executor import PlannedChange
from drills.takeover.steps.phases import (
    DeadlinePassed,
    PhaseContext,
    bring_up_critical,
    persist,
    shown_waits,
    waiting_pool,
)
from drills.takeover.steps.rollback import safe_rollback
from drills.takeover.steps.sequence import TakeoverPhase
from drills.takeover.timeline import utc_now
from drills.takeover.validation_jobs import validation_jobs
from drills.targets.dns import normalize_name
from drills.targets.http import new_client
from drills.targets.probe import PROBE_TIMEOUT_S, ProbeResult, smoke_until
from drills.targets.sites import Targets

POLL_S = 0.1


def _host(url: str) -> str:
    return normalize_name(urlsplit(url).hostname or "")


def static_refusal(plan: DrillPlan) -> str | None:
    """Why a practice of ``plan`` would touch a name the primary serves from, if it would."""
    name = plan.practice.record
    if name is None:
        return None
    production = {normalize_name(plan.dns.record.name): "the plan's DNS record"}
    production |= {_host(str(p.url)): f"smoke probe {p.name!r}'s host" for p in plan.smoke}
    production.setdefault(_host(str(plan.sites.primary.endpoint)), "the primary's endpoint")
    what = production.get(normalize_name(name))
    if what is None:
        return None
    return (
        f"practice.record {name} is {what}, a name production serves from: a practice "
        "never changes it. Give the practice a name of its own."
    )


def live_refusal(plan: DrillPlan, targets: Targets) -> str | None:
    """What only the sites can tell: a DR cluster that is the primary's, or a practice name
    that answers the primary's value now (production users may be reaching it)."""
    distinct = run_checks(select_checks([DISTINCT_CHECK]), check_context(plan, targets, None))
    for result in distinct.results:
        if result.status is Status.FAIL:
            return (
                f"{result.summary}: a practice would change the primary's cluster. "
                f"{result.remediation}"
            )
    name = plan.practice.record
    if name is None:
        return None
    primary_value = planned_values(plan)["primary"]
    for answer in targets.dns.read(name, str(plan.dns.record.type)):
        if primary_value in answer.values:
            return (
                f"practice.record {name} answers the primary's value {primary_value} on "
                f"{answer.server}: it may be serving production. Give the practice a name "
                "of its own."
            )
    return None


# -- the phases --------------------------------------------------------------------
def point_practice_name(ctx: PhaseContext) -> None:
    """The practice name to DR's value, confirmed on every authoritative server."""
    name = ctx.plan.practice.record
    if name is None:
        with ctx.timeline.step("no practice name: DR is probed at its endpoint") as step:
            step.status = "skipped"
        return
    dns, rtype = ctx.plan.dns, str(ctx.plan.dns.record.type)
    deadline = time.monotonic() + ctx.dns_deadline_s
    ttl = int(dns.max_ttl)
    with ctx.timeline.step(f"point {name} {rtype} → {dns.dr_value}") as step:
        intended = {"values": [dns.dr_value], "ttl": ttl}
        address = record_address(name, rtype)
        before = persist(
            ctx, step, lambda: ctx.executor.apply("dns.name", address, intended), deadline
        )
        step.evidence = {"before": before.get("values"), "ttl": ttl}
        if ctx.dry_run:
            step.status = "planned"
            return
    with ctx.timeline.step("confirm on every authoritative server") as step:
        confirmed = ctx.targets.dns.confirm(
            name, rtype, dns.dr_value, deadline_s=max(0.0, deadline - time.monotonic()),
            on_wait=shown_waits(ctx.timeline, step),
        )  # fmt: skip
        step.evidence = {"servers": [a.server for a in confirmed]}


def _at_endpoint(probe: SmokeProbe, endpoint: str) -> str:
    """The probe's path at DR's endpoint: DR asked directly, without any name."""
    ep, p = urlsplit(endpoint), urlsplit(str(probe.url))
    return urlunsplit((ep.scheme, ep.netloc, p.path or "/", p.query, ""))


def _probe_endpoint(probe: SmokeProbe, endpoint: str) -> ProbeResult:
    url = _at_endpoint(probe, endpoint)
    headers = {"Host": urlsplit(str(probe.url)).netloc}
    deadline = time.monotonic() + probe.timeout
    with new_client(read_timeout=PROBE_TIMEOUT_S) as client:
        while True:
            try:
                response = client.get(url, headers=headers)
            except Exception as exc:  # noqa: BLE001 - a probe that fails is one more try
                result = ProbeResult(False, None, f"no answer from {url} ({type(exc).__name__})")
            else:
                body = response.text
                ok = response.status_code == probe.expect_status and (
                    probe.expect_body is None or probe.expect_body in body
                )
                result = ProbeResult(ok, response.status_code, body[:80].strip(), url)
            if result.ok or time.monotonic() >= deadline:
                return result
            time.sleep(POLL_S)


def smoke_at_dr(ctx: PhaseContext) -> dt.datetime:
    """The plan's smoke probes, sent to DR (through the practice name, or at its endpoint);
    without probes, DR's endpoint must serve. Returns when DR served: the practice's RTO."""
    plan, name = ctx.plan, ctx.plan.practice.record
    endpoint = str(plan.sites.dr.endpoint)
    probes = plan.smoke or (
        SmokeProbe(name="DR endpoint", url=endpoint, timeout=ctx.tier_deadline_s),
    )

    def one(probe: SmokeProbe) -> ProbeResult:
        if name is not None:
            return smoke_until(probe, ctx.targets.dns, stop=stop, via=name)
        return _probe_endpoint(probe, endpoint)

    with waiting_pool(len(probes)) as (pool, stop):
        results = list(pool.map(one, probes))
    served = utc_now()
    for probe, result in zip(probes, results, strict=True):
        with ctx.timeline.step(f"smoke {probe.name} at DR") as step:
            step.evidence = {"via": name or endpoint, "address": result.address,
                             "status": result.status, "body": result.detail}  # fmt: skip
            if not result.ok:
                raise DeadlinePassed(f"smoke {probe.name} at DR", result.describe())
    return served


def _smoke(ctx: PhaseContext) -> None:
    ctx.facts["restored_at"] = smoke_at_dr(ctx)


def _bring_up_minimum(ctx: PhaseContext) -> None:
    # A practice proves DR answers through its own name; it carries no users' demand, so
    # it brings the critical tier up at dr_replicas, not scaled to demand.
    ctx.facts.setdefault(carry.FACT, None)
    bring_up_critical(ctx)


PRACTICE: tuple[TakeoverPhase, ...] = (
    TakeoverPhase("bring-up", _bring_up_minimum),
    TakeoverPhase("practice name", point_practice_name),
    TakeoverPhase("smoke at DR", _smoke, changes=False),
)


class Practice(Drill):
    """`drills run --mode practice`: a drill's journal, lease, rollback and records, with
    phases that never touch the primary or the production record."""

    def _claims(self) -> tuple[Claim, ...]:
        return plan_claims(self.plan, practice=True)

    def _refuse_at_dr(self) -> None:
        super()._refuse_at_dr()
        refusal = static_refusal(self.plan)
        if refusal is None:
            with Targets(self.plan) as targets:
                refusal = live_refusal(self.plan, targets)
        if refusal:
            raise RunRefused(f"practice: {refusal}")

    def _planned(self, preview: PhaseContext) -> list[PlannedChange]:
        with preview.timeline.phase("preview", dry=True):
            for phase in PRACTICE:
                if phase.changes:
                    phase.run(preview)
        return list(preview.executor.planned)

    def _dry_run(self, ctx: PhaseContext) -> DrillResult:
        return self.ending.result(RunStatus.DRY_RUN, None, planned=self._planned(ctx))

    def _take_over(self, ctx: PhaseContext, before: Snapshot) -> DrillResult:
        # DR is reached through the practice name, else at its endpoint's host.
        endpoint_host = urlsplit(str(self.plan.sites.dr.endpoint)).hostname
        self.after_switch.via = self.plan.practice.record or endpoint_host
        with validation_jobs(ctx, self.run_id, incident=False) as jobs:
            for phase in PRACTICE:
                self._phase(phase.name, partial(phase.run, ctx))
                if phase.name == "bring-up":
                    jobs.start()  # beside the rest, as in a drill
            if self.after_switch.active:  # the load is DR's only traffic: the SLOs watch it
                assert self.t0 is not None
                self.after_switch.start(self.t0)
                self._phase("at DR", partial(self.after_switch.finish, ctx.targets,
                                             self.timeline))  # fmt: skip
            self._validate(jobs, judge=True)
        with self.timeline.phase("measure"), self.timeline.step("RTO at DR") as step:
            measurement = self._measure(ctx)
            step.evidence = measurement.to_json()
            step.result = measurement.summary()
        self._phase("standby", partial(self._standby, ctx))
        drift = self.ending.verify(ctx, before, "verify standby")
        status = RunStatus.SUCCEEDED if not drift else RunStatus.FAILBACK_DRIFT
        return self.ending.result(status, measurement, drift=drift)

    def _standby(self, ctx: PhaseContext) -> None:
        """The practice name restored, DR's tier back to standby and seen to stop serving;
        the primary had nothing to undo."""
        self.recorder.undoing = True
        safe_rollback(ctx.executor, self.plan, self.timeline)


__all__ = ["PRACTICE", "Practice", "live_refusal", "smoke_at_dr", "static_refusal"]
