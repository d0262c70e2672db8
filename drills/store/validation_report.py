"""The report's section on a run's validation jobs: how each ended, where, and its log."""

from __future__ import annotations

from typing import Any

from drills.text import for_markdown, for_terminal
from drills.timefmt import duration


def _code(value: object) -> str:
    return "`" + for_terminal(str(value)).replace("`", "'") + "`"


def _job(job: dict[str, Any]) -> list[str]:
    labels = job.get("gpu_labels") or {}
    gpu = labels.get("nvidia.com/gpu.product")
    driver = labels.get("nvidia.com/cuda.driver-version.full") or labels.get(
        "nvidia.com/cuda.driver.major"
    )
    where = _code(job["node"]) if job.get("node") else "no node"
    if gpu or driver:
        where += f" ({_code(gpu or '?')}, driver {_code(driver or '?')})"
    lines = [
        f"### {_code(job['namespace'] + '/' + job['name'])}: **{job['verdict']}**",
        "",
        f"- **Duration:** {duration(job.get('duration_seconds'))} — **node:** {where}",
    ]
    if job.get("reason"):
        lines.append(f"- **Why:** {for_markdown(job['reason'])}")
    if job.get("output"):
        lines.append(f"- **Output seen at DR:** {_code(job['output'])}")
    if labels:
        lines.append("- **GPU labels:** " + ", ".join(_code(f"{k}={v}") for k, v in labels.items()))
    lines.append(f"- **Job deleted after the run:** {'yes' if job.get('deleted') else 'NO'}")
    tail = job.get("log_tail") or []
    if tail:
        # Four-space indentation, never a fence: a log line cannot end the block early.
        lines += ["", "Last lines of its log:", ""]
        lines += ["    " + for_terminal(line) for line in tail]
    return [*lines, ""]


def validation_jobs_markdown(jobs: list[dict[str, Any]]) -> list[str]:
    if not jobs:
        return []
    lines = ["", "## Validation jobs at DR", ""]
    for job in jobs:
        lines += _job(job)
    return lines
