"""The readiness report's Markdown shows outside text (summaries, remediations) as text."""

from __future__ import annotations

import datetime as dt
import re

from drills.checks.base import CheckResult, Status
from drills.checks.runner import ReadinessReport
from drills.checks.view import markdown


def _report(summary: str, remediation: str) -> ReadinessReport:
    result = CheckResult(
        id="dns.ttl",
        title="DNS TTL",
        category="dns",
        status=Status.FAIL,
        blocking=True,
        summary=summary,
        evidence={},
        duration_s=0.1,
        remediation=remediation,
    )
    return ReadinessReport("plan", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), (result,))


def test_summaries_and_remediations_cannot_add_markup_rows_or_lines() -> None:
    summary = "a | b\n| fake | row |\n# heading [link](http://x) <img src=x> `code` *em*\x1b[2J"
    text = markdown(_report(summary, "do this\n## fake section\n- [x] done"))
    table_rows = [line for line in text.splitlines() if line.startswith("| dns")]
    assert len(table_rows) == 1
    row = table_rows[0]
    assert len(re.findall(r"(?<!\\)\|", row)) == 6  # five cells, whatever the summary holds
    for raw in ("[link](", "\x1b"):
        assert raw not in row
    assert "\\[link\\]" in row and "\\<img" in row and "\\`code\\`" in row and "\\*em\\*" in row
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["# Readiness of `plan`", "## What to do"]
    remediation = [line for line in text.splitlines() if line.startswith("- `dns.ttl`")]
    assert remediation == ["- `dns.ttl`: do this ## fake section - \\[x\\] done"]


def test_plain_text_reads_as_written() -> None:
    text = markdown(_report("TTL 60s is within the RTO of 15m", "lower the TTL"))
    assert "| TTL 60s is within the RTO of 15m |" in text
    assert "- `dns.ttl`: lower the TTL" in text
