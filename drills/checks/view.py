"""A readiness report as rows and Markdown: the same table for the CLI, Prefect and the UI."""

from __future__ import annotations

from typing import Any

from drills import timefmt
from drills.checks.base import CheckResult, Status
from drills.checks.catalog import CATEGORIES
from drills.checks.runner import ReadinessReport
from drills.text import for_markdown

BADGE = {
    Status.PASS: "✅ pass",
    Status.WARN: "⚠️ warn",
    Status.FAIL: "❌ fail",
    Status.ERROR: "⛔ error",
}


def by_category(report: ReadinessReport) -> list[tuple[str, list[CheckResult]]]:
    order = {name: i for i, name in enumerate(CATEGORIES)}
    groups: dict[str, list[CheckResult]] = {}
    for result in report.results:
        groups.setdefault(result.category, []).append(result)
    return sorted(groups.items(), key=lambda item: order.get(item[0], len(order)))


def rows(report: ReadinessReport) -> list[dict[str, Any]]:
    """One flat row per check, in catalogue order: what the table artifact shows."""
    return [
        {
            "category": category,
            "check": r.id,
            "status": r.status.value,
            "blocking": "yes" if r.blocking else "",
            "summary": r.summary,
        }
        for category, results in by_category(report)
        for r in results
    ]


def verdict(report: ReadinessReport) -> str:
    failed = [r for r in report.results if r.status in (Status.FAIL, Status.ERROR)]
    if not failed:
        return "ready"
    return "blocked" if report.blocking else "ready with failures outside the critical tier"


def markdown(report: ReadinessReport) -> str:
    blocking = report.blocking
    lines = [
        f"# Readiness of `{report.plan}`",
        "",
        f"Checked {timefmt.moment(report.checked_at)}: **{verdict(report)}**"
        f" ({len(report.results)} checks, {len(blocking)} blocking).",
        "",
        "| category | check | status | blocking | summary |",
        "|---|---|---|---|---|",
    ]
    for r in _ordered(report):
        summary = _inline(r.summary)
        block = "yes" if r.blocking else ""
        lines.append(f"| {r.category} | `{r.id}` | {BADGE[r.status]} | {block} | {summary} |")
    problems = [r for r in _ordered(report) if r.status is not Status.PASS and r.remediation]
    if problems:
        lines += ["", "## What to do"]
        lines += [f"- `{r.id}`: {_inline(r.remediation)}" for r in problems]
    return "\n".join(lines) + "\n"


def _inline(text: str) -> str:
    """Outside text (a summary, a remediation) for one table cell or list item: on one
    line, with Markdown's punctuation and control characters made inert."""
    return for_markdown(" ".join(text.splitlines()))


def _ordered(report: ReadinessReport) -> list[CheckResult]:
    return [r for _, results in by_category(report) for r in results]
