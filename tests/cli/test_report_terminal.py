"""A report reads as a document on a terminal (Rich: headings and real tables, no Markdown
syntax), stays Markdown for a pipe or on request, and `drills run` piped follows the run
line by line instead of printing everything at its end."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from drills.cli.app import app
from drills_lab.runtime import LabInfo
from tests.evidence.support import check, make_run, phase, store_with
from tests.support.cli import drills_process
from tests.support.drill import lab_plan_file

runner = CliRunner()
MARKDOWN_SYNTAX = re.compile(r"^#+ |\|---|\*\*|\\\[", re.MULTILINE)


def _db(tmp_path: Path) -> str:
    run = make_run(
        "r-terminal-1",
        checks=[check("dns.ttl", "pass")],
        phases=[phase("fence", ("close primary ingress ['127.0.0.2']", "ok", "2 closed"))],
    )
    store = store_with(tmp_path, run)
    url = store.url
    store.close()
    return url


def test_the_report_renders_on_request_and_stays_markdown_for_a_pipe(tmp_path: Path) -> None:
    db = _db(tmp_path)
    rendered = runner.invoke(app, ["report", "r-terminal", "--format", "text", "--db", db])
    assert rendered.exit_code == 0, rendered.output
    assert "Drill report r-terminal-1" in rendered.output
    assert "close primary ingress ['127.0.0.2']" in rendered.output  # no \[ escapes
    assert not MARKDOWN_SYNTAX.search(rendered.output), rendered.output
    assert "━" in rendered.output or "─" in rendered.output  # a real table
    piped = runner.invoke(app, ["report", "r-terminal", "--db", db])  # auto, not a terminal
    assert piped.exit_code == 0 and piped.output.startswith("# Drill report"), piped.output
    markdown = runner.invoke(app, ["report", "r-terminal", "--format", "markdown", "--db", db])
    assert markdown.output == piped.output
    wrong = runner.invoke(app, ["report", "r-terminal", "--format", "html", "--db", db])
    assert wrong.exit_code == 2 and "auto, text, markdown, md, json" in wrong.output


def test_a_piped_run_streams_each_step_as_it_ends(lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/history.db"
    process = drills_process(["run", str(lab_plan_file(lab)), "--dry-run", "--db", db], timeout=300)
    assert process.returncode == 0, process.stderr
    lines = [ln for ln in process.stderr.splitlines() if re.match(r"\s+(T0|\d\d:\d\d:\d\d )", ln)]
    assert len(lines) >= 5, process.stderr
    assert any("close primary ingress would (" in ln for ln in lines), lines
    # The steps came on stderr, each as it ended; the report alone is on stdout.
    assert process.stdout.startswith("# Drill report"), process.stdout[:200]
