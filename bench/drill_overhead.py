"""Orchestrator overhead of a takeover: the RTO minus the waits no orchestrator can avoid.

A full drill (``Drill(...).run()``, drill mode, failback included) on a lab whose
pods turn ready ``READY_DELAY_S`` after they are scheduled. A minimum takeover
restores the service with the critical tier alone: what the drill cannot avoid
inside the RTO is that tier's rollout delay and the DNS confirmation step. The
normal tier comes up after the smoke: full capacity, one more rollout delay later,
outside the RTO. Everything else in the RTO is ours: API calls, probes, journal and
history writes, thread start-up. Goal: under 1 s for the lab plan of 12 workloads.
Three drills; medians. (Code from before the minimum takeover, run by ``--compare``,
waited for every tier inside the RTO; it is measured as it was.)

Every part of the overhead is attributed to the phase or step where it was
spent, from the drill's own timeline, so a miss says what to fix.

``DRILLS_BENCH_BASE=REV`` (or ``python -m bench drill_overhead --compare REV``) runs the
same drills on the code of git revision REV and on this tree, in turns, each on a fresh
lab, and prints them side by side: what a change to the drill's writes (the evidence
chain) costs. This tree's run also counts the chain links a drill appends and times
``verify_store`` over the store the drills left.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from drills.plan import DrillPlan, load_plan
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest, DrillResult
from drills.takeover.timeline import PhaseRecord
from drills.targets.http import new_client
from drills_lab import control

READY_DELAY_S = 1.0
RUNS = 3
GOAL_S = 1.0
TIERS = ("critical", "normal")
CONFIRM_STEP = "confirm on every authoritative server"
SHOWN_PHASES = ("declare", "fence", "bring-up", "dns", "smoke")
FULL_CAPACITY_PHASE = "full-capacity"


@dataclass(frozen=True)
class Figures:
    """One drill's RTO taken apart. ``parts`` sums to the overhead exactly."""

    rto: float
    full_capacity: float  # the normal tier ready too (the RTO, in code that waited for it)
    phases: dict[str, float]
    unavoidable: float
    parts: dict[str, float]
    steps: list[tuple[str, str, float]]  # (phase, step, seconds) inside the RTO window

    @property
    def overhead(self) -> float:
        return self.rto - self.unavoidable


def _tiers_brought_up(plan: DrillPlan) -> list[str]:
    return [t for t in TIERS if any(w.dr_replicas > 0 for w in plan.workloads_in(t))]


def _span(phase: PhaseRecord, prefix: str) -> float:
    """Wall time of a tier: its workloads come up at once, so first start to last end."""
    steps = [s for s in phase.steps if s.name.startswith(prefix) and s.ended_at is not None]
    if not steps:
        return 0.0
    end = max(s.ended_at for s in steps if s.ended_at is not None)
    return (end - min(s.started_at for s in steps)).total_seconds()


def _figures(result: DrillResult, tiers: list[str]) -> Figures:
    m = result.measurement
    assert m is not None
    phases = {p.name: p for p in result.timeline.phases}
    if FULL_CAPACITY_PHASE in phases:  # a minimum takeover: only the critical tier in the RTO
        tiers = [t for t in tiers if t == "critical"]
    seconds = {name: phases[name].seconds for name in SHOWN_PHASES}
    confirm = next(s.seconds for s in phases["dns"].steps if s.name == CONFIRM_STEP)
    unavoidable = READY_DELAY_S * len(tiers) + confirm

    bring_up = phases["bring-up"]
    tier_spans = {t: _span(bring_up, f"{t}: ") for t in tiers}
    declare_end = phases["declare"].ended_at
    assert declare_end is not None
    parts = {
        "declare: record T0 in the history store": (declare_end - m.t0).total_seconds(),
        "fence: close ingress, scale writers, verify": seconds["fence"],
    }
    for tier, span in tier_spans.items():
        parts[f"bring-up: {tier} tier beyond the rollout delay"] = span - READY_DELAY_S
    parts["bring-up: the rest of the phase"] = bring_up.seconds - sum(tier_spans.values())
    parts["dns: read and update the record"] = seconds["dns"] - confirm
    parts["smoke: probe through DNS until it answers"] = (
        m.restored - phases["smoke"].started_at
    ).total_seconds()
    accounted = sum(parts.values())
    parts["between phases (history writes at phase end)"] = m.rto_seconds - unavoidable - accounted

    steps = [
        (p.name, s.name, s.seconds)
        for p in result.timeline.phases
        if p.name in SHOWN_PHASES
        for s in p.steps
    ]
    full_capacity = getattr(m, "full_capacity_seconds", m.rto_seconds)
    return Figures(m.rto_seconds, full_capacity, seconds, unavoidable, parts, steps)


def _drill(plan: DrillPlan, history: HistoryStore) -> DrillResult:
    request = DrillRequest(plan, operator="bench", reason="bench", tier_deadline_s=60.0)
    return Drill(request, history).run()


def _client_cost() -> float:
    """One ``new_client()``: the fence check and each smoke probe build one inside the RTO."""
    samples = []
    for _ in range(5):
        started = time.perf_counter()
        new_client(read_timeout=2.0).close()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def _median_run(runs: list[Figures]) -> Figures:
    return sorted(runs, key=lambda f: f.overhead)[len(runs) // 2]


def _report(runs: list[Figures], tiers: list[str], plan: DrillPlan) -> None:
    med = statistics.median
    print(
        f"drill on the lab plan: {len(plan.workloads)} workloads, "
        f"tiers brought up: {', '.join(tiers)}; rollout delay {READY_DELAY_S:.1f}s"
    )
    header = "".join(f"{f'run {i}':>9}" for i in range(1, len(runs) + 1))
    print(f"  {'':<50}{header}{'median':>9}")

    def row(label: str, values: list[float]) -> None:
        cells = "".join(f"{v:8.3f}s" for v in values)
        print(f"  {label:<50}{cells}{med(values):8.3f}s")

    for name in SHOWN_PHASES:
        row(f"phase {name}", [f.phases[name] for f in runs])
    row("RTO (restored − T0)", [f.rto for f in runs])
    row("full capacity (normal tier ready − T0)", [f.full_capacity for f in runs])
    row("unavoidable: critical rollout + DNS confirmation", [f.unavoidable for f in runs])
    row("orchestrator overhead (RTO − unavoidable)", [f.overhead for f in runs])
    verdict = "met" if med([f.overhead for f in runs]) < GOAL_S else "MISSED"
    print(f"  goal: overhead < {GOAL_S:.0f}s: {verdict}")
    print("  where the overhead goes:")
    for label in runs[0].parts:
        row(f"  {label}", [f.parts[label] for f in runs])
    print(
        f"  for scale: building one httpx client (new_client, SSL context included) costs "
        f"{_client_cost() * 1e3:.0f} ms here; the RTO builds {1 + len(plan.smoke)} "
        "(fence check, smoke probes)"
    )
    median_run = _median_run(runs)
    print("  steps of the median run, T0 to restored:")
    for phase, step, seconds in median_run.steps:
        print(f"    {phase:<9} {step:<55}{seconds:7.3f}s")


@dataclass
class Measured:
    runs: list[Figures]
    walls: list[float]  # each whole drill, failback included: every journal and history write
    tiers: list[str]
    plan: DrillPlan
    links: list[int]  # chain links each drill appended (none before the chain existed)
    verify_s: float | None  # verify_store over the store the drills left


def _chain_links(history: HistoryStore) -> int | None:
    try:
        from drills.store.chain_verify import verify_store
    except ImportError:  # the code compared against predates the chain
        return None
    return verify_store(history).links


def _verify_seconds(history: HistoryStore) -> float | None:
    try:
        from drills.store.chain_verify import verify_store
    except ImportError:
        return None
    started = time.perf_counter()
    report = verify_store(history)
    assert report.ok, report.first_problem
    return time.perf_counter() - started


def _measure(quiet: bool = False) -> Measured | None:
    with tempfile.TemporaryDirectory(prefix="bench-drill-") as tmp:
        state = Path(tmp) / "lab"
        begun = time.perf_counter()
        info, _ = control.up(state, ready_delay=READY_DELAY_S, slo=False)
        if not quiet:
            print(f"setup: lab up in {time.perf_counter() - begun:.2f}s ({info.dns_provider} DNS)")
        try:
            plan = load_plan(state / "plan.yaml")
            history = HistoryStore(f"sqlite:///{Path(tmp) / 'history.db'}")
            tiers = _tiers_brought_up(plan)
            measured = Measured([], [], tiers, plan, [], None)
            for i in range(RUNS):
                links_before = _chain_links(history)
                started = time.perf_counter()
                result = _drill(plan, history)
                wall = time.perf_counter() - started
                if result.status != "succeeded" or result.measurement is None:
                    print(f"drill {i + 1} did not succeed: {result.status}: {result.error}")
                    return None
                measured.runs.append(_figures(result, tiers))
                measured.walls.append(wall)
                links_after = _chain_links(history)
                if links_before is not None and links_after is not None:
                    measured.links.append(links_after - links_before)
                if not quiet:
                    print(f"  drill {i + 1}: {result.status} in {wall:.2f}s")
            measured.verify_s = _verify_seconds(history)
            history.close()
        finally:
            control.down(state)
    return measured


def _as_json(m: Measured) -> dict[str, object]:
    return {
        "overhead": [f.overhead for f in m.runs],
        "rto": [f.rto for f in m.runs],
        "full_capacity": [f.full_capacity for f in m.runs],
        "writes": [f.parts["between phases (history writes at phase end)"] for f in m.runs],
        "fence": [f.phases["fence"] for f in m.runs],
        "wall": m.walls,
        "links": m.links,
        "verify_s": m.verify_s,
    }


def _subprocess(code_dir: Path) -> dict[str, object]:
    """This script, measuring the drills package found in ``code_dir``."""
    env = {**os.environ, "PYTHONPATH": str(code_dir)}
    env.pop("DRILLS_BENCH_BASE", None)
    done = subprocess.run(
        [sys.executable, __file__, "--json"], env=env, cwd=code_dir, capture_output=True,
        text=True, check=False, timeout=600,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"drills at {code_dir}: {done.stderr[-2000:]}")
    data: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return data


def _compare(rev: str, rounds: int = 2) -> int:
    """Base and this tree in turns, ``rounds`` times each, each turn on a fresh lab."""
    here = Path(__file__).resolve().parent.parent
    results: dict[str, list[dict[str, object]]] = {"base": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="bench-base-") as base_dir:
        archive = subprocess.run(
            ["git", "-C", str(here), "archive", rev], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", base_dir], input=archive, check=True)
        for i in range(rounds):
            for name, code in (("base", Path(base_dir)), ("this", here)):
                results[name].append(_subprocess(code))
                print(f"  round {i + 1}: {name} measured", flush=True)
    _report_compare(rev, results)
    return 0


def _pooled(turns: list[dict[str, object]], key: str) -> list[float]:
    values: list[float] = []
    for turn in turns:
        found = turn.get(key)
        if isinstance(found, list):
            values.extend(float(v) for v in found)
    return values


def _report_compare(rev: str, results: dict[str, list[dict[str, object]]]) -> None:
    med = statistics.median
    drills = len(_pooled(results["this"], "overhead"))
    print(f"drill_overhead, {rev} (base) beside this tree: {drills} drills each, medians")
    print(f"  {'':<48}{'base':>10}{'this':>10}{'change':>10}")
    rows = (
        ("orchestrator overhead (RTO − unavoidable)", "overhead"),
        ("RTO", "rto"),
        ("full capacity (normal tier ready)", "full_capacity"),
        ("phase fence (3 journalled changes)", "fence"),
        ("between phases (history writes)", "writes"),
        ("whole drill, failback included", "wall"),
    )
    for label, key in rows:
        base, this = med(_pooled(results["base"], key)), med(_pooled(results["this"], key))
        print(f"  {label:<48}{base:9.3f}s{this:9.3f}s{this - base:+9.3f}s")
    links = _pooled(results["this"], "links")
    verify = [float(str(t["verify_s"])) for t in results["this"] if t.get("verify_s") is not None]
    if links:
        print(f"  chain links appended per drill (this tree): {med(links):.0f}")
    if verify:
        print(f"  verify_store over {RUNS} drills' store: median {med(verify) * 1e3:.0f} ms")


def main() -> int:
    base = os.environ.get("DRILLS_BENCH_BASE")
    if base:
        status = _compare(base)
        _print_load()
        return status
    measured = _measure()
    if measured is None:
        return 1
    runs, tiers, plan = measured.runs, measured.tiers, measured.plan
    _report(runs, tiers, plan)
    if measured.links:
        print(f"  chain links appended per drill: {measured.links}; verify_store "
              f"{(measured.verify_s or 0) * 1e3:.0f} ms")  # fmt: skip
    _print_load()
    return 0 if statistics.median(f.overhead for f in runs) < GOAL_S else 1


def _print_load() -> None:
    load = os.getloadavg()
    print(
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )


def cli(argv: list[str]) -> int:
    if argv[:1] == ["--json"]:
        measured = _measure(quiet=True)
        if measured is None:
            return 1
        print(json.dumps(_as_json(measured)))
        return 0
    if argv[:1] == ["--compare"] and len(argv) == 2:
        os.environ["DRILLS_BENCH_BASE"] = argv[1]
    return main()


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
