"""The values the DNS record may hold around a takeover: the plan's two, never a third.

The plan names the record's value at each site. A record at neither (switched by hand
to a maintenance page, a third site, a typo) is a state nobody planned: a drill from it
would "restore" it at rollback, and an incident would journal it as the value to go
back to. So a takeover starts only from a planned value, and every switch, forward or
back, moves between planned values only.
"""

from __future__ import annotations

from collections.abc import Sequence

from drills.errors import DrillError, RunRefused, StepFailed
from drills.plan import DrillPlan
from drills.plan.files import call_within
from drills.takeover.steps.changes import KINDS, record_address
from drills.takeover.timeline import Timeline
from drills.targets.dns import DnsTarget, RecordAnswer, normalize_value
from drills.targets.providers import dns_adapter

# How long an incident's preflight looks at the record before it goes on without it.
INCIDENT_LOOK_S = 3.0


def planned_values(plan: DrillPlan) -> dict[str, str]:
    """``{"primary": value, "dr": value}``, normalised as DNS answers are."""
    rtype = str(plan.dns.record.type)
    return {
        "primary": normalize_value(rtype, plan.dns.primary_value),
        "dr": normalize_value(rtype, plan.dns.dr_value),
    }


def unplanned(plan: DrillPlan, answers: Sequence[RecordAnswer], sites: Sequence[str]) -> str | None:
    """Why the record, as ``answers`` give it, is not at one of ``sites``' values; None
    when every server answers exactly one value of theirs."""
    values = planned_values(plan)
    allowed = {(values[site],): site for site in sites}
    for answer in answers:
        if tuple(answer.values) not in allowed:
            found = ", ".join(answer.values) or "no value"
            wanted = " or ".join(f"{values[s]} ({s})" for s in sites)
            return f"{answer.server} answers {found}, not {wanted}"
    return None


def check_switch(plan: DrillPlan, answers: Sequence[RecordAnswer], value: str) -> None:
    """Refuse (StepFailed) a switch from or to a value the plan does not name: what the
    record holds before is what a rollback writes back."""
    address = record_address(plan.dns.record.name, str(plan.dns.record.type))
    why = unplanned(plan, answers, ("primary", "dr"))
    target = normalize_value(str(plan.dns.record.type), value)
    if why is None and target not in planned_values(plan).values():
        why = f"the value to write, {target}, is neither site's"
    if why:
        raise StepFailed(
            f"switch dns.record {address}",
            f"{why}; drills switches only between the plan's primary_value and dr_value, "
            "so that nothing ever restores a value nobody planned",
        )


def _read(target: DnsTarget, name: str, rtype: str, *, incident: bool) -> list[RecordAnswer]:
    if not incident:
        return target.read(name, rtype)
    # An incident's fence must not wait out a DNS outage here: its switch waits for the
    # servers, within its own deadline, after the fence.
    return call_within(INCIDENT_LOOK_S, lambda: target.read(name, rtype), "read the record")


def record_where_planned(plan: DrillPlan, timeline: Timeline, *, incident: bool) -> None:
    """Preflight: a drill starts only with the record at the primary's value (and one value,
    which it can switch back); an incident at the primary's or DR's. A record at any other
    address is refused before the first change, naming it. An incident whose DNS cannot
    be read now goes on: its switch waits for the servers within its own deadline."""
    record = plan.dns.record
    address = record_address(record.name, str(record.type))
    sites = ("primary", "dr") if incident else ("primary",)
    with timeline.step("DNS record at a planned value") as step:
        target = dns_adapter(plan)  # its own: the run's is made (credentials read) at the switch
        try:
            answers = _read(target, record.name, str(record.type), incident=incident)
        except (DrillError, TimeoutError) as exc:
            if not incident:
                raise
            step.result = f"not read now ({exc}); the switch reads it again"
            return
        finally:
            target.close()
        values = sorted({v for a in answers for v in a.values})
        step.evidence = {"record": address, "values": values, "planned": planned_values(plan)}
        try:
            KINDS["dns.record"].restorable(address, {"values": list(answers[0].values)})
        except StepFailed as exc:
            step.result = "refused"
            raise RunRefused(f"preflight: {exc.step} {exc.cause}") from exc
        why = unplanned(plan, answers, sites)
        if why:
            step.result = "refused"
            mode = "an incident" if incident else "a drill"
            raise RunRefused(
                f"preflight: DNS record {address} is at an address the plan does not name: "
                f"{why}. {mode.capitalize()} starts only from "
                f"{' or '.join(sites)}'s value; someone changed the record outside drills: "
                "set it back (or fix the plan's primary_value/dr_value), then run again"
            )
        step.result = f"{len(values)} value(s): {', '.join(values)}"
