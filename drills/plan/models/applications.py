"""Applications: the parts of a plan that fail over, or are practised, one at a time.

An application names its members the way the plan already names them: workloads by
``namespace/name`` (or ``name`` alone when one workload has it), datasets by name, DNS
records by name. A member belongs to one application at most; what no application lists
belongs to every run, as it did before applications. (Validation jobs will join them
when plans have them.) ``drills.plan.only`` makes the plan one application's run sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated

from pydantic import Field

from drills.plan.models.base import PlanModel
from drills.plan.models.datasets import Dataset
from drills.plan.models.objectives import Practice
from drills.plan.models.workloads import Tier, Workload
from drills.plan.rules import Rule
from drills.plan.types import DnsName, Label, ShortText

# A workload as an application names it: namespace/name, or a name no other workload has.
WorkloadMember = Annotated[ShortText, Field(pattern=r"^([a-z0-9-]{1,63}/)?[a-z0-9.-]{1,253}$")]


class Application(PlanModel):
    """What `drills run PLAN --only NAME` takes over or practises, with what no
    application lists."""

    name: Label
    """The application's name, as `--only` takes it and reports show it."""
    workloads: Annotated[tuple[WorkloadMember, ...], Field(max_length=1000)] = ()
    """Its workloads, each as namespace/name (or name, when one workload has it)."""
    datasets: Annotated[tuple[Label, ...], Field(max_length=1000)] = ()
    """Its datasets, by name: only its runs measure their RPO."""
    dns_records: Annotated[tuple[DnsName, ...], Field(max_length=100)] = ()
    """DNS records only its runs change: the plan's practice.record (a practice of another
    application then probes DR at its endpoint). The production record is switched by
    every takeover, so no application holds it."""


# Duplicate names are found with the other rules (application_rules), so that one
# validation reports them all.
Applications = Annotated[tuple[Application, ...], Field(max_length=200)]


def lease_name(plan: str, application: str | None) -> str:
    """What a run leases: its plan, or one application of it (drills.takeover.lease)."""
    return f"{plan}/{application}" if application else plan


def _same_name(a: str, b: str) -> bool:
    return a.lower().rstrip(".") == b.lower().rstrip(".")


def workload_keys(workloads: Sequence[Workload], member: str) -> list[str]:
    """The keys of the workloads ``member`` names: one, none (unknown) or several (a
    bare name that more than one namespace has)."""
    if "/" in member:
        return [w.key for w in workloads if w.key == member]
    return [w.key for w in workloads if w.name == member]


def _listing(names: Iterable[str], most: int = 20) -> str:
    shown = sorted(names)
    more = f" and {len(shown) - most} more" if len(shown) > most else ""
    return ", ".join(shown[:most]) + more


def _workload_rules(i: int, app: Application, workloads: Sequence[Workload],
                    owner: dict[str, str]) -> list[Rule]:  # fmt: skip
    rules: list[Rule] = []
    for j, member in enumerate(app.workloads):
        found = workload_keys(workloads, member)
        at = ("applications", i, "workloads", j)
        if not found:
            rules.append((at, f"no workload {member} in the plan (its workloads: "
                              f"{_listing(w.key for w in workloads)})"))  # fmt: skip
        elif len(found) > 1:
            rules.append((at, f"{member} names {len(found)} workloads ({_listing(found)}): "
                              "write namespace/name"))  # fmt: skip
        elif owner.setdefault(found[0], app.name) != app.name:
            rules.append((at, f"workload {found[0]} is already in application "
                              f"{owner[found[0]]}: a member belongs to one "
                              "application"))  # fmt: skip
    return rules


def _dataset_rules(i: int, app: Application, datasets: Sequence[Dataset],
                   owner: dict[str, str]) -> list[Rule]:  # fmt: skip
    known = {d.name for d in datasets}
    rules: list[Rule] = []
    for j, member in enumerate(app.datasets):
        at = ("applications", i, "datasets", j)
        if member not in known:
            rules.append((at, f"no dataset {member} in the plan (its datasets: "
                              f"{_listing(known) or 'none'})"))  # fmt: skip
        elif owner.setdefault(member, app.name) != app.name:
            rules.append((at, f"dataset {member} is already in application {owner[member]}: "
                              "a member belongs to one application"))  # fmt: skip
    return rules


def _record_rules(i: int, app: Application, production: str, practice: Practice,
                  owner: dict[str, str]) -> list[Rule]:  # fmt: skip
    rules: list[Rule] = []
    for j, member in enumerate(app.dns_records):
        at = ("applications", i, "dns_records", j)
        if _same_name(member, production):
            rules.append((at, f"{member} is the production record: every takeover fences "
                              "the primary and switches it, so it belongs to every "
                              "application"))  # fmt: skip
        elif practice.record is None or not _same_name(member, practice.record):
            rules.append((at, f"no DNS record {member} in the plan (an application may hold "
                              f"practice.record: {practice.record or 'none set'})"))  # fmt: skip
        elif owner.setdefault(member.lower(), app.name) != app.name:
            rules.append((at, f"DNS record {member} is already in application "
                              f"{owner[member.lower()]}: a member belongs to one "
                              "application"))  # fmt: skip
    return rules


def application_rules(
    applications: Sequence[Application],
    workloads: Sequence[Workload],
    datasets: Sequence[Dataset],
    production_record: str,
    practice: Practice,
) -> list[Rule]:
    """Every problem of the plan's applications: unknown or ambiguous members, a member
    in two applications, an application whose run would bring nothing up at DR."""
    owners: dict[str, str] = {}  # workload key -> its application
    dataset_owners: dict[str, str] = {}
    record_owners: dict[str, str] = {}
    rules: list[Rule] = []
    first: dict[str, int] = {}
    for i, app in enumerate(applications):
        if first.setdefault(app.name, i) != i:
            rules.append((("applications", i, "name"), f"duplicate application `{app.name}` "
                          f"(already listed as applications[{first[app.name]}])"))  # fmt: skip
        rules += _workload_rules(i, app, workloads, owners)
        rules += _dataset_rules(i, app, datasets, dataset_owners)
        rules += _record_rules(i, app, production_record, practice, record_owners)
    if rules:
        return rules
    for i, app in enumerate(applications):
        mine = {k for m in app.workloads for k in workload_keys(workloads, m)}
        seen = [w for w in workloads if w.key in mine or w.key not in owners]
        if not any(w.tier is not Tier.BATCH and w.dr_replicas > 0 for w in seen):
            rules.append((("applications", i, "workloads"), f"a run of application {app.name} "
                          "would bring nothing up at DR: none of its workloads (nor those "
                          "in no application) is critical or normal with DR replicas"))  # fmt: skip
    return rules


__all__ = ["Application", "Applications", "application_rules", "lease_name", "workload_keys"]
