"""The plan one application's run sees: `drills run PLAN --only APP`.

Its workloads, datasets and practice name are the application's and those no application
lists; the rest of the plan (sites, the fence, the production record, secrets, smoke
probes, objectives) is the plan's own, shared by every application. The run then leases
only what it touches (drills.plan.claims reads the view), so another application's run
is not in its way.
"""

from __future__ import annotations

from drills.errors import DrillError
from drills.plan.models import DrillPlan, Practice
from drills.plan.models.applications import Application, workload_keys


class UnknownApplicationError(DrillError):
    """`--only` names no application of the plan."""

    def __init__(self, plan: DrillPlan, name: str) -> None:
        known = ", ".join(a.name for a in plan.applications)
        listed = f"its applications: {known}" if known else "it lists no applications"
        super().__init__(f"plan {plan.name} has no application {name!r} ({listed})")


def application_named(plan: DrillPlan, name: str) -> Application:
    for app in plan.applications:
        if app.name == name:
            return app
    raise UnknownApplicationError(plan, name)


def only_applications(plan: DrillPlan, name: str | None) -> DrillPlan:
    """``plan`` as a run of application ``name`` sees it; the whole plan for None.
    Raises UnknownApplicationError when the plan has no such application."""
    if name is None:
        return plan
    whole = plan.whole
    app = application_named(whole, name)

    def keys(a: Application) -> set[str]:
        return {k for m in a.workloads for k in workload_keys(whole.workloads, m)}

    mine = keys(app)
    others = set().union(*(keys(a) for a in whole.applications if a is not app))
    other_datasets = {d for a in whole.applications if a is not app for d in a.datasets}
    other_records = {r.lower() for a in whole.applications if a is not app for r in a.dns_records}
    practice = whole.practice
    if practice.record is not None and practice.record.lower() in other_records:
        practice = Practice(record=None)  # another application's: probed at DR's endpoint
    view = whole.model_copy(
        update={
            "workloads": tuple(w for w in whole.workloads if w.key in mine or w.key not in others),
            "datasets": tuple(d for d in whole.datasets if d.name not in other_datasets),
            "practice": practice,
        }
    )
    view._application = name
    view._whole = whole
    return view


__all__ = ["UnknownApplicationError", "application_named", "only_applications"]
