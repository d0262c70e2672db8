"""The controls a drill provides evidence for, and the answers an auditor asks for.

The mapping says which requirement each kind of exercise evidences; a run's answers
(scenario, date, participants, objectives against measured RTO/RPO, issues and their
remediation) come from its report and its findings.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from drills.evidence.findings import Finding


@dataclass(frozen=True)
class Control:
    framework: str
    control: str
    requirement: str
    evidenced_by: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


CONTROLS = (
    Control(
        "DORA (EU 2022/2554)", "Art. 11(6)",
        "Test the ICT business continuity and response and recovery plans, including "
        "switchover between the primary ICT infrastructure and redundant capacity.",
        "A takeover of the primary site's workloads, DNS and data by the DR site, timed "
        "from T0, then failed back (drill) or held (incident).",
    ),
    Control(
        "SOC 2 (TSC 2017)", "A1.3",
        "Recovery plan procedures supporting system recovery are tested.",
        "The recovery procedure run end to end against the plan's RTO and RPO targets, with "
        "its journal of changes and the state verified after failback.",
    ),
    Control(
        "ISO 22301:2019", "§8.5",
        "Exercise and test business continuity procedures; produce formalized post-exercise "
        "reports with outcomes, recommendations and actions to implement improvements.",
        "This report: objectives against measured results, the issues found (findings) and "
        "the remediation action for each.",
    ),
)  # fmt: skip


def _objectives(report: dict[str, Any]) -> list[dict[str, Any]]:
    m = report.get("measurement") or {}
    rto_target = m.get("rto_target_seconds")
    rto = report.get("rto_seconds")
    rows = [
        {
            "objective": "RTO",
            "target_seconds": rto_target,
            "measured_seconds": rto,
            "met": None if rto is None or rto_target is None else rto <= rto_target,
        }
    ]
    rpo_target = m.get("rpo_target_seconds")
    for name, lag in (report.get("rpo_seconds") or {}).items():
        rows.append(
            {
                "objective": f"RPO {name}",
                "target_seconds": rpo_target,
                "measured_seconds": lag,
                "met": None if lag is None or rpo_target is None else lag <= rpo_target,
            }
        )
    return rows


def scenario(run: dict[str, Any]) -> str:
    if run["mode"] == "incident":
        return f"Real incident takeover of plan {run['plan']} by its DR site."
    dry = " (dry run: changes listed, none made)" if run["dry_run"] else ""
    return (
        f"Switchover drill of plan {run['plan']}: the DR site takes over the primary's "
        f"workloads, DNS and data, is measured, then fails back{dry}."
    )


def auditor_answers(report: dict[str, Any], findings: list[Finding]) -> dict[str, Any]:
    """What the pack says to an auditor, as data: controls.json, and the report's section."""
    run = report["run"]
    approval = report.get("approval") or {}
    of_run = [f for f in findings if run["id"] in (f.opened_run, f.last_seen_run, f.closed_run)]
    return {
        "controls": [c.to_json() for c in CONTROLS],
        "scenario": scenario(run),
        "date": run["t0"] or run["started_at"],
        "participants": {
            "operator": run["operator"],
            "approver": approval.get("approver"),
        },
        "verdict": run["verdict"] or run["status"],
        "objectives": _objectives(report),
        "issues_found": [f.to_json() for f in of_run],
        "open_findings": [f.to_json() for f in findings if f.open],
    }
