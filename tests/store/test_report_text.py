"""A report shows outside text as text: no terminal escapes, no Markdown of its own."""

from __future__ import annotations

from typing import Any

from drills.store.report import render_markdown

HOSTILE = "\x1b[2J\x1b[H✓ all checks passed \u202e| fake | pass |"


def report_of(**run: Any) -> str:
    data: dict[str, Any] = {
        "run": {
            "id": "r1", "plan": "lab", "plan_digest": "d", "mode": "incident", "dry_run": False,
            "operator": HOSTILE, "reason": HOSTILE, "status": "failed", "verdict": None,
            "started_at": "2026-01-01T00:00:00+00:00", "t0": None, "finished_at": None,
            "error": HOSTILE, **run,
        },
        "measurement": None, "rto_seconds": None, "client_rto_seconds": None,
        "rpo_seconds": {}, "approval": {"approved": False, "approver": HOSTILE, "comment": HOSTILE},
        "unfenced": False,
        "phases": [{"name": "fence", "status": "failed", "seconds": 1.0, "steps": [
            {"name": HOSTILE, "status": "failed", "seconds": 1.0, "result": HOSTILE}]}],
        "journal": [{"seq": 1, "change": "dns.record", "target": HOSTILE + "`",
                     "original": "a", "intended": "b", "state": "applied"}],
        "planned_changes": [HOSTILE], "state_differences": [],
        "readiness": {"results": [{"id": "dns.ttl", "status": "fail", "summary": HOSTILE}]},
    }  # fmt: skip
    return render_markdown(data)


def test_no_control_character_of_the_input_reaches_the_report() -> None:
    report = report_of()
    assert "\x1b" not in report and "\u202e" not in report
    assert "\\x1b[2J" in report  # shown, not hidden


def test_outside_text_cannot_add_table_cells_or_end_a_code_span() -> None:
    report = report_of()
    readiness_rows = [line for line in report.splitlines() if line.startswith("| `dns.ttl`")]
    assert len(readiness_rows) == 1
    # Three cells, as the table has: the hostile pipes are escaped.
    assert readiness_rows[0].replace("\\|", "").count("|") == 4
    journal_rows = [line for line in report.splitlines() if line.startswith("| 1 |")]
    assert journal_rows and journal_rows[0].count("`") == 4  # two spans, none broken
    assert "`a → b`" in journal_rows[0]


def test_a_change_reads_field_by_field_without_python_reprs() -> None:
    report = report_of()
    data_row = {
        "seq": 2,
        "change": "k8s.scale",
        "target": "dr/serving/llm",
        "original": {"replicas": 0},
        "intended": {"replicas": 1},
        "state": "applied",
    }
    from drills.store.report import _journal

    (row,) = [ln for ln in _journal([data_row]) if ln.startswith("| 2 |")]
    assert "`replicas 0 → 1`" in row and "{" not in row and "'" not in row, row
    assert report  # the whole report renders too
