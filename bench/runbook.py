"""drills beside a hand-written runbook: the same takeover, timed in one run.

The peer is ``bench/runbook.sh``: kubectl, the aws CLI and curl, one command
after the other, as an on-call engineer types them. Ours is the whole CLI as an
operator starts it, ``drills run PLAN --mode incident --yes``: Python start-up,
readiness preflight, fence, bring-up, DNS, smoke, report. A takeover leaves DR
active, so each gets a fresh lab, with Route 53 on moto (where the aws CLI can
reach it) and pods that turn ready ``READY_DELAY_S`` after they are scheduled.

After each run the same probe checks the end state from outside (primary no
longer serving, DR serving, the record pointing at DR), so neither can win by
doing less. Three pairs, taken in turn; the ratio is of the medians. The CPU
time of each side is printed too: on a shared two-core machine the wall time of
CPU-bound work (Python start-up, the preflight) swings with the load, the CPU
time much less. Goal: drills takes at most half the runbook's time, and
verifies more.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import httpx

from drills.checks.checkup import select_checks
from drills.plan import Route53Dns, load_plan
from drills.targets.sites import Targets
from drills_lab import control
from drills_lab.runtime import LabInfo

READY_DELAY_S = 1.0
PAIRS = 3
GOAL_RATIO = 0.5
RUN_TIMEOUT_S = 300.0
SCRIPT = Path(__file__).with_name("runbook.sh")
Completed = subprocess.CompletedProcess[str]
STEP_LINE = re.compile(r"^(\d\d):(\d\d):(\d\d\.\d+)  (.+)$")

VERIFIED_ONLY_BY_DRILLS = (
    "readiness preflight before any change: {checks} checks (images, data, RPO, secrets, "
    "cluster, GPU capacity, DNS TTL and control), recorded at T0",
    "fence verified from outside (endpoint stops serving) AND no primary writer pod left",
    "every original state journalled before each change: undoable, `drills recover`",
    "DNS confirmed by reading the record back on every authoritative server, not only "
    "the change status; the old TTL recorded (client-visible RTO)",
    "smoke through the DNS name: resolved on the authoritative servers, connected to the "
    "answer with the service's Host header, body checked (expect 'dr')",
    "each tier waits for ready replicas of all its workloads, in parallel; batch kept paused",
    "DNS switched as soon as the critical tier is ready, smoke-tested before the normal tier "
    "comes up (minimum takeover: the service restored sooner than the runbook's step 7)",
    "RTO, client-visible RTO, full capacity and RPO per dataset measured; verdict on the RTO",
    "the whole run (timeline, readiness, journal) kept in the history store and reported",
)


@dataclass
class Outcome:
    wall: float
    cpu: float  # CPU seconds of the processes it ran: less at the mercy of the machine's load
    exit_code: int
    end_state: list[str]  # what is wrong after the run; empty when the takeover is complete
    parts: list[tuple[str, float]] = field(default_factory=list)
    note: str = ""


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[Completed, float, float]:
    """Run to the end: the result, its wall time and the CPU time of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        argv, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return done, wall, cpu


def _tools() -> dict[str, str] | None:
    found = {name: shutil.which(name) for name in ("aws", "kubectl", "curl", "bash")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        print(f"not on PATH: {', '.join(missing)}; the runbook cannot run without them")
        print("(aws is the AWS CLI: `pip install awscli` or `apt-get install awscli`)")
        return None
    return {name: str(path) for name, path in found.items()}


@contextmanager
def _fresh_lab(state: Path) -> Iterator[LabInfo]:
    begun = time.perf_counter()
    info, _ = control.up(state, ready_delay=READY_DELAY_S, system_services=False)
    try:
        print(f"  fresh lab up in {time.perf_counter() - begun:.2f}s ({info.dns_provider} DNS)")
        yield info
    finally:
        control.down(state)


def _end_state(info: LabInfo) -> list[str]:
    """What an outside observer finds wrong with the takeover; empty if it is complete."""
    plan = load_plan(Path(info.state_dir) / "plan.yaml")
    problems = []
    with httpx.Client(timeout=2.0) as http:
        for site, want in (("primary", False), ("dr", True)):
            url = info.endpoints[site]
            try:
                serves = http.get(url).status_code == 200
            except httpx.HTTPError:
                serves = False
            if serves != want:
                problems.append(f"{site} {'does not serve' if want else 'still serves'}")
    with Targets(plan) as targets:
        answers = targets.dns.read(plan.dns.record.name, str(plan.dns.record.type))
    values = sorted({v for a in answers for v in a.values})
    if values != [plan.dns.dr_value]:
        problems.append(f"{plan.dns.record.name} answers {values}")
    return problems


def _step_times(stdout: str) -> list[tuple[str, float]]:
    """Each runbook step's duration, from the timestamps it prints."""
    marks = []
    for line in stdout.splitlines():
        match = STEP_LINE.match(line)
        if match:
            h, m, s, label = match.groups()
            marks.append((label, int(h) * 3600 + int(m) * 60 + float(s)))
    return [(label, end - start) for (label, start), (_, end) in itertools.pairwise(marks)]


def _runbook(info: LabInfo, home: Path) -> Outcome:
    plan = load_plan(Path(info.state_dir) / "plan.yaml")
    assert isinstance(plan.dns, Route53Dns)
    # The runbook's own credentials only: none of this machine's AWS settings, whose
    # AWS_CA_BUNDLE the aws CLI cannot use against plain-HTTP moto anyway.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env |= {
        "HOME": str(home),
        "KUBE_CACHE": str(home / "kube-cache"),
        "LAB": info.state_dir,
        "MOTO_URL": info.moto,
        "ZONE_ID": plan.dns.hosted_zone_id,
        "PRIMARY_URL": info.endpoints["primary"],
        "DR_URL": info.endpoints["dr"],
    }
    done, wall, cpu = _timed(["bash", str(SCRIPT)], env)
    if done.returncode:
        tail = f"{done.stdout[-800:]}{done.stderr[-800:]}"
        print(f"  runbook failed (exit {done.returncode}):\n{tail}")
    ran = [line.split()[1] for line in done.stderr.splitlines() if line.startswith("+ ")]
    counts = ", ".join(f"{ran.count(tool)} {tool}" for tool in sorted(set(ran)))
    return Outcome(
        wall,
        cpu,
        done.returncode,
        _end_state(info),
        _step_times(done.stdout),
        note=f"{len(ran)} commands, one after the other: {counts}",
    )


def _drills_command() -> str:
    """The `drills` entry point installed beside this interpreter."""
    return str(Path(sysconfig.get_path("scripts")) / "drills")


def _drills(info: LabInfo, db_url: str) -> Outcome:
    plan_path = Path(info.state_dir) / "plan.yaml"
    command = [
        _drills_command(), "run", str(plan_path),
        "--mode", "incident", "--yes", "--db", db_url, "--json", "--operator", "bench",
    ]  # fmt: skip
    done, wall, cpu = _timed(command)
    try:
        report: dict[str, Any] = json.loads(done.stdout)
    except ValueError:
        print(f"  drills printed no report (exit {done.returncode}): {done.stderr[-800:]}")
        return Outcome(wall, cpu, done.returncode or 1, _end_state(info))
    phases = [(p["name"], float(p["seconds"])) for p in report["phases"]]
    in_phases = sum(seconds for _, seconds in phases)
    # What any `drills` command pays before it starts: Python, imports, Typer.
    _, start_up, _ = _timed([_drills_command(), "--help"])
    parts = [
        ("outside the phases: start-up, plan, history, report", wall - in_phases),
        ("  `drills --help` alone, just after (Python, imports)", start_up),
        *phases,
    ]
    rto = report.get("rto_seconds") or 0.0
    full = report.get("full_capacity_seconds") or 0.0
    note = (
        f"status {report['run']['status']}, RTO {rto:.2f}s, full capacity {full:.2f}s "
        "(T0 = when the CLI started)"
    )
    return Outcome(wall, cpu, done.returncode, _end_state(info), parts, note=note)


def _median(outcomes: list[Outcome]) -> Outcome:
    return sorted(outcomes, key=lambda o: o.wall)[len(outcomes) // 2]


def _table(runbooks: list[Outcome], ours: list[Outcome]) -> float:
    """Print the side-by-side figures; return the ratio of the medians."""
    med = statistics.median
    header = "".join(f"{f'pair {i}':>9}" for i in range(1, len(runbooks) + 1))
    print(f"  {'':<44}{header}{'median':>9}")

    def row(label: str, values: list[float], unit: str = "s") -> None:
        cells = "".join(f"{v:8.2f}{unit}" for v in values)
        print(f"  {label:<44}{cells}{med(values):8.2f}{unit}")

    row("runbook.sh wall", [o.wall for o in runbooks])
    row("drills run --mode incident wall", [o.wall for o in ours])
    ratios = [d.wall / r.wall for d, r in zip(ours, runbooks, strict=True)]
    row("ratio drills / runbook", ratios, "")
    row("runbook CPU (bash, kubectl, aws, curl)", [o.cpu for o in runbooks])
    row("drills CPU (its one process)", [o.cpu for o in ours])
    ratio = med(o.wall for o in ours) / med(o.wall for o in runbooks)
    print(f"  ratio of the medians: {ratio:.2f} (goal ≤ {GOAL_RATIO:.2f})")
    return ratio


def _detail(label: str, outcome: Outcome) -> None:
    state = "complete" if not outcome.end_state else "; ".join(outcome.end_state)
    print(f"  {label}: {outcome.wall:.2f}s, exit {outcome.exit_code}, takeover {state}")
    print(f"    {outcome.note}")
    for part, seconds in outcome.parts:
        print(f"    {part:<58}{seconds:6.2f}s")


def _versions(tools: dict[str, str]) -> str | None:
    aws = subprocess.run([tools["aws"], "--version"], capture_output=True, text=True, check=False)
    if aws.returncode:
        print(f"`aws --version` failed (exit {aws.returncode}): {aws.stderr.strip()}")
        return None
    kubectl = subprocess.run(
        [tools["kubectl"], "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        check=False,
    )
    kube = json.loads(kubectl.stdout or "{}").get("clientVersion", {}).get("gitVersion")
    return f"{(aws.stdout or aws.stderr).strip()}; kubectl {kube}"


def main() -> int:
    tools = _tools()
    versions = _versions(tools) if tools else None
    if versions is None:
        return 1
    runbooks: list[Outcome] = []
    ours: list[Outcome] = []
    with TemporaryDirectory(prefix="bench-runbook-") as tmp:
        root = Path(tmp)
        # Pairs taken in turn, so a burst of load on this shared machine hits both sides.
        for i in range(1, PAIRS + 1):
            home = root / f"home-{i}"
            home.mkdir()
            print(f"pair {i}: runbook.sh")
            with _fresh_lab(root / f"lab-runbook-{i}") as info:
                runbooks.append(_runbook(info, home))
            print(f"pair {i}: drills run --mode incident --yes")
            with _fresh_lab(root / f"lab-drills-{i}") as info:
                ours.append(_drills(info, f"sqlite:///{root / f'history-{i}.db'}"))

    print(
        f"takeover of the lab plan, each run on a fresh lab "
        f"(Route 53 on moto, rollout delay {READY_DELAY_S:.1f}s)"
    )
    ratio = _table(runbooks, ours)
    _detail("median runbook.sh (kubectl + aws CLI, in sequence)", _median(runbooks))
    _detail("median drills run --mode incident (the whole CLI)", _median(ours))
    print("  what drills verifies that the runbook does not:")
    for item in VERIFIED_ONLY_BY_DRILLS:
        print(f"    - {item.format(checks=len(select_checks()))}")
    load = os.getloadavg()
    print(
        f"  tools: {versions}\n"
        f"  at {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} CPUs, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    everything = runbooks + ours
    complete = all(not o.end_state and o.exit_code == 0 for o in everything)
    return 0 if complete and ratio <= GOAL_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
