"""The pack's report: the run's report with the auditor's section, as Markdown, HTML, PDF.

The PDF is printed by headless Chromium from HTML that Python-Markdown renders from the
Markdown, never drawn by hand. Raw HTML in the Markdown is not passed through: outside
text stays text. The page may load nothing (a Content-Security-Policy of 'none').
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import markdown

from drills.errors import DrillError
from drills.evidence.findings import Finding
from drills.store.report import render_markdown
from drills.text import for_html, for_markdown
from drills.timefmt import duration

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
PDF_TIMEOUT_S = 90.0

_STYLE = """
body { font-family: sans-serif; font-size: 10.5pt; margin: 0 1.5em; color: #111; }
h1 { font-size: 16pt; } h2 { font-size: 13pt; border-bottom: 1px solid #999; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #999; padding: 2px 6px; text-align: left; vertical-align: top; }
code { font-size: 9.5pt; overflow-wrap: anywhere; }
"""


class RenderError(DrillError, RuntimeError):
    """The PDF could not be printed (no Chromium, or it failed)."""


def _t(value: object) -> str:
    return for_markdown(str(value if value is not None else "—"))


def _seconds(value: object) -> str:
    return duration(value) if isinstance(value, int | float) else "—"


def evidence_markdown(answers: dict[str, Any]) -> list[str]:
    """The auditor's section: controls, scenario, participants, objectives, findings."""
    people = answers["participants"]
    lines = [
        "", "## Evidence for auditors", "",
        f"- **Scenario:** {_t(answers['scenario'])}",
        f"- **Date (T0):** {_t(answers['date'])}",
        f"- **Participants:** operator {_t(people['operator'])}; approver "
        f"{_t(people['approver'] or 'none (no approval step)')}",
        f"- **Verdict:** **{_t(answers['verdict'])}**",
        "", "### Controls evidenced", "",
        "| framework | control | requirement | evidenced by |", "|---|---|---|---|",
    ]  # fmt: skip
    for c in answers["controls"]:
        lines.append(
            f"| {_t(c['framework'])} | {_t(c['control'])} | {_t(c['requirement'])} "
            f"| {_t(c['evidenced_by'])} |"
        )
    lines += ["", "### Objectives against measured", "", "| objective | target | measured | met |"]
    lines.append("|---|---|---|---|")
    for o in answers["objectives"]:
        met = {True: "yes", False: "**no**", None: "—"}[o["met"]]
        lines.append(
            f"| {_t(o['objective'])} | {_seconds(o['target_seconds'])} "
            f"| {_seconds(o['measured_seconds'])} | {met} |"
        )
    return [*lines, *_findings_markdown(answers)]


def _findings_markdown(answers: dict[str, Any]) -> list[str]:
    lines = ["", "### Issues found and remediation", ""]
    issues = answers["issues_found"]
    earlier = [f for f in answers["open_findings"] if f not in issues]
    if not issues and not earlier:
        return [*lines, "No issue was found, and no finding of this plan is open."]
    lines += ["| finding | state | what | detail | remediation |", "|---|---|---|---|---|"]
    for f in [*issues, *earlier]:
        state = "open" if f["open"] else f"closed by run {f['closed_run']}"
        lines.append(
            f"| {_t(f['id'])} | {_t(state)} | {_t(f['kind'] + ': ' + f['key'])} "
            f"| {_t(f['detail'])} | {_t(f['remediation'] or '—')} |"
        )
    return lines


def pack_markdown(report: dict[str, Any], answers: dict[str, Any]) -> str:
    return render_markdown(report) + "\n".join(evidence_markdown(answers)) + "\n"


def findings_markdown(findings: list[Finding]) -> list[str]:
    answers = {"issues_found": [f.to_json() for f in findings], "open_findings": []}
    return _findings_markdown(answers)


def to_html(text: str, title: str) -> str:
    md = markdown.Markdown(extensions=["tables"], output_format="html")
    # No raw HTML: a '<' in the Markdown (already escaped by for_markdown) stays text.
    md.preprocessors.deregister("html_block")
    md.inlinePatterns.deregister("html")
    body = md.convert(text)
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' "
        "content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        f"<title>{for_html(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )


NO_CHROMIUM = "no Chromium to print the PDF with (apt-get install chromium, or set DRILLS_CHROMIUM)"


def find_chromium() -> str | None:
    configured = os.environ.get("DRILLS_CHROMIUM")
    if configured:
        return configured
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def _chromium_env(home: str) -> dict[str, str]:
    """What Chromium needs to run, and nothing of ours: os.environ holds secrets."""
    kept = {k: v for k, v in os.environ.items() if k.startswith("LC_")}
    kept |= {k: os.environ[k] for k in ("PATH", "LANG", "TMPDIR") if k in os.environ}
    return kept | {"HOME": home}


def chromium_problem() -> str | None:
    """Why no PDF can be printed here, or None when a Chromium is found and runnable."""
    chromium = find_chromium()
    if chromium is None:
        return NO_CHROMIUM
    found = shutil.which(chromium)  # a path is checked as is, a bare name on PATH
    if found is None or not os.access(found, os.X_OK):
        return f"Chromium {chromium} (DRILLS_CHROMIUM) is not a program that can be run"
    return None


def to_pdf(html_text: str) -> bytes:
    """``html_text`` printed to PDF by headless Chromium. Raises :class:`RenderError`."""
    chromium = find_chromium()
    if chromium is None:
        raise RenderError(NO_CHROMIUM)
    with tempfile.TemporaryDirectory(prefix="drills-pdf-") as tmp:
        page, out = Path(tmp) / "report.html", Path(tmp) / "report.pdf"
        page.write_text(html_text, encoding="utf-8")
        command = [
            chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
            "--disable-extensions", "--disable-background-networking", "--no-pdf-header-footer",
            f"--user-data-dir={Path(tmp) / 'profile'}", f"--print-to-pdf={out}", page.as_uri(),
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command, capture_output=True, timeout=PDF_TIMEOUT_S, check=False,
                env=_chromium_env(tmp),
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise RenderError(f"Chromium did not print the PDF in {PDF_TIMEOUT_S:.0f}s") from None
        except OSError as exc:  # DRILLS_CHROMIUM names no runnable program
            raise RenderError(f"cannot run Chromium {chromium}: {exc.strerror or exc}") from None
        if not out.exists() or out.stat().st_size == 0:
            tail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise RenderError(f"Chromium printed no PDF (exit {done.returncode}): {tail}")
        return out.read_bytes()
