"""The report's sections on what held after the switch: the SLOs and the load probe."""

from __future__ import annotations

from typing import Any

from drills.text import for_markdown, for_terminal
from drills.timefmt import duration


def _code(value: object) -> str:
    return "`" + for_terminal(str(value)).replace("`", "'") + "`"


def _ms(seconds: object) -> str:
    return "—" if not isinstance(seconds, int | float) else f"{seconds * 1000:.0f} ms"


def _num(value: object) -> str:
    return "—" if not isinstance(value, int | float) else f"{value:g}"


def slo_markdown(slos: list[dict[str, Any]]) -> list[str]:
    if not slos:
        return []
    lines = [
        "",
        "## SLOs after the switch",
        "",
        "| SLO | rule | hold | status | OK after T0 | last value | breaches | required |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in slos:
        first_ok = s.get("first_ok_seconds")
        rule = f"{s.get('expr')} {s.get('op')} {s.get('threshold')}"
        lines.append(
            f"| {_code(s.get('name'))} | {_code(rule)} "
            f"| {duration(s.get('hold_seconds'))} | **{s.get('status')}** "
            f"| {duration(first_ok) if first_ok is not None else '—'} "
            f"| {_num(s.get('last_value'))} | {len(s.get('breaches') or [])} "
            f"| {'yes' if s.get('required') else 'no'} |"
        )
    lines += ["", *(f"- {for_markdown(str(s.get('line', '')))}" for s in slos)]
    return lines


def load_markdown(load: dict[str, Any] | None) -> list[str]:
    if not load:
        return []
    lines = [
        "",
        "## Load probe through the name",
        "",
        "| site | address | rate | p50 | p95 | p99 | throughput | error rate |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for site in ("primary", "dr"):
        r = load.get(site)
        if not r:
            continue
        if "error" in r:
            lines.append(f"| {site} | {for_markdown(str(r['error']))} | | | | | | |")
            continue
        lines.append(
            f"| {site} | {_code(r.get('address'))} | {r.get('rate')}/s for "
            f"{duration(r.get('duration_seconds'))} | {_ms(r.get('p50_seconds'))} "
            f"| {_ms(r.get('p95_seconds'))} | {_ms(r.get('p99_seconds'))} "
            f"| {_num(r.get('throughput'))}/s | {r.get('error_rate', 0):.1%} |"
        )
    limits = load.get("limits")
    if limits:
        lines += ["", f"- **Limits:** p95 {_ms(limits.get('p95_seconds'))}, error rate "
                      f"{limits.get('error_rate', 0):.1%}"]  # fmt: skip
    if load.get("overhead_seconds") is not None:
        lines.append(
            f"- **Probe overhead** (resolving, starting the generator, reading its result): "
            f"{duration(load['overhead_seconds'])}"
        )
    return lines


_LOAD_FIGURES = ("p50_seconds", "p95_seconds", "p99_seconds", "throughput", "error_rate")


def slo_summary(slos: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each SLO's outcome, without its values over time: a line of `drills history --json`."""
    keys = ("name", "status", "required", "first_ok_seconds", "last_value")
    return [{k: s.get(k) for k in keys} for s in slos]


def load_summary(load: dict[str, Any] | None) -> dict[str, Any] | None:
    """The load probe's figures at each site, as `drills history --json` lists them."""
    if not load:
        return None
    return {
        site: {k: load[site].get(k) for k in (*_LOAD_FIGURES, "error") if k in load[site]}
        for site in ("primary", "dr")
        if isinstance(load.get(site), dict)
    }
