"""`drills lab up|down|status|inventory`: the local lab of two stand-in sites.

The lab is a package of its own beside the product (drills_lab). It is imported only when
a lab command runs, so nothing else in drills depends on it being installed.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.common import EXIT_FAILED, EXIT_INVALID, exit_not_running
from drills.cli.console import err_console, out_console
from drills.errors import LabError

if TYPE_CHECKING:
    from drills_lab.control import Probe
    from drills_lab.state import LabInfo

lab_app = typer.Typer(help="The local lab: two stand-in sites on loopback.", no_args_is_help=True)
console = out_console()
err = err_console()

LAB_INSTALL = "pip install 'drills[lab]'"


class LabDns(StrEnum):
    AUTO = "auto"
    EXTERNAL_DNS = "external-dns"


def _lab(module: str = "control") -> ModuleType:
    """A module of the lab, imported now; one line saying how to install it when missing."""
    try:
        return importlib.import_module(f"drills_lab.{module}")
    except ModuleNotFoundError as exc:
        missing = (exc.name or "drills_lab").split(".")[0]
        err.print(
            Text(f"✗ the lab is not installed ({missing} is missing): ", style="red")
            + Text(LAB_INSTALL),
            soft_wrap=True,
        )
        raise typer.Exit(EXIT_INVALID) from None


StateDir = Annotated[
    Path,
    typer.Option(
        "--state-dir",
        envvar="DRILLS_LAB_DIR",
        help="Directory for the lab's kubeconfigs, credential files, plan and logs.",
    ),
]


@lab_app.command("up")
def up(
    state_dir: StateDir = Path(".lab"),
    drift: Annotated[
        bool,
        typer.Option(
            "--drift",
            help="Seed realistic faults: a missing image, a stale checkpoint, a differing "
            "secret, a DR deployment that never becomes ready, a TTL that is too long, an "
            "ExternalSecret whose sync fails at DR.",
        ),
    ] = False,
    drift_scheduling: Annotated[
        bool,
        typer.Option(
            "--drift-scheduling",
            help="Seed the faults that keep pods from running at DR: a ClusterQueue with too "
            "little GPU quota for the critical tier, a missing PriorityClass, a device-plugin "
            "pod not ready on one GPU node, a GPU node taint the LLM server does not tolerate.",
        ),
    ] = False,
    low_priority_work: Annotated[
        bool,
        typer.Option(
            "--low-priority-work",
            help="Run low-priority work on every DR GPU (an offline evaluation through Kueue, "
            "on the batch PriorityClass) that a takeover preempts and a rollback gives back.",
        ),
    ] = False,
    drift_capacity: Annotated[
        bool,
        typer.Option(
            "--drift-capacity",
            help="Seed DR with GPUs for the plan's dr_replicas but not for target_percent of "
            "the primary's peak: work outside the plan, at the critical tier's priority, holds "
            "the rest. Its users stay at their peak all day, so a drill meets the busy hour "
            "whenever it runs: capacity.carry fails, and a drill's load probe at DR goes over "
            "its limits, so it is not met and rolls back.",
        ),
    ] = False,
    slo: Annotated[
        bool,
        typer.Option(
            "--slo/--no-slo",
            help="Give the lab's plan two SLOs on DR's own series (error ratio at most 1%, p95 "
            "latency under 500ms, each held 10s) and a load probe through the public name "
            "(8 requests/s for 5s, p95 400ms). Written only when Prometheus is installed, as "
            "it answers them.",
        ),
    ] = True,
    day_seconds: Annotated[
        float,
        typer.Option(
            "--day-seconds",
            min=10.0,
            help="Seconds of the lab's compressed day: the demand generator drives the primary "
            "with a daily shape (lowest at midnight, highest at noon) repeated every this long.",
        ),
    ] = 240.0,
    drift_training: Annotated[
        bool,
        typer.Option(
            "--drift-training",
            help="At DR, the plan's validation job runs the trainer under an image tag built "
            "for CUDA 12.8, whose driver check fails on DR's driver-550 GPU nodes: the Job "
            "ends Failed, its log names the mismatch, and a drill is not met and rolls back.",
        ),
    ] = False,
    ready_delay: Annotated[
        float,
        typer.Option(
            "--ready-delay", min=0.0, help="Seconds a scaled workload takes to become ready."
        ),
    ] = 1.0,
    system_services: Annotated[
        bool,
        typer.Option(
            "--system-services/--no-system-services",
            help="Use BIND named and docker-registry when installed; without them DNS is "
            "Route 53 and images are ECR, both on moto.",
        ),
    ] = True,
    checkpoint_every: Annotated[
        float,
        typer.Option(
            "--checkpoint-every",
            min=0.1,
            help="Seconds between the checkpoints the lab's trainer writes while the primary "
            "trainer runs (replicated to DR unless --drift).",
        ),
    ] = 60.0,
    reverse_replication: Annotated[
        bool,
        typer.Option(
            "--reverse-replication/--no-reverse-replication",
            help="While DR serves, copy what DR writes back to the primary, as bidirectional "
            "replication rules would. Without it a failback's data gate fails.",
        ),
    ] = True,
    dns: Annotated[
        LabDns,
        typer.Option(
            "--dns",
            help="How the lab's name is switched. auto: RFC 2136 on BIND (Route 53 on moto "
            "without --system-services). external-dns: the plan writes a DNSEndpoint at DR, "
            "and a controller that behaves like external-dns's rfc2136 provider syncs it into "
            "BIND every --dns-sync-interval seconds, with its TXT ownership records.",
        ),
    ] = LabDns.AUTO,
    dns_sync_interval: Annotated[
        float,
        typer.Option(
            "--dns-sync-interval",
            min=0.1,
            help="With --dns external-dns: seconds between the controller's syncs (its "
            "--interval), which the plan states and a drill's RTO includes.",
        ),
    ] = 3.0,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1.0, help="Seconds to wait for the lab to start.")
    ] = 30.0,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Record every request to each site's Kubernetes API (verb, group, resource, "
            "subresource, namespace, name; never bodies) in STATE_DIR/SITE.audit.jsonl.",
        ),
    ] = False,
) -> None:
    """Start the lab in the background and write its plan to STATE_DIR/plan.yaml."""
    control = _lab()
    missing = control.missing_modules()
    if missing:
        needs = f"✗ the lab needs {', '.join(missing)}: "
        err.print(Text(needs, style="red") + Text(LAB_INSTALL), soft_wrap=True)
        raise typer.Exit(EXIT_INVALID)
    try:
        info, already = control.up(
            state_dir,
            drift=drift,
            drift_scheduling=drift_scheduling,
            drift_capacity=drift_capacity,
            day_seconds=day_seconds,
            drift_training=drift_training,
            ready_delay=ready_delay,
            system_services=system_services,
            checkpoint_every=checkpoint_every,
            reverse_replication=reverse_replication,
            timeout=timeout,
            audit=audit,
            dns=dns.value,
            dns_sync_interval=dns_sync_interval,
            low_priority_work=low_priority_work,
            slo=slo,
        )
    except LabError as exc:
        err.print(Text("lab up failed: ", style="red").append(str(exc), style=""))
        raise typer.Exit(EXIT_FAILED) from None
    if already:
        console.print(f"The lab is already running (pid {info.pid}).")
    else:
        console.print(
            f"[green]Lab up[/] in {timefmt.duration(info.startup_seconds)} (pid {info.pid})."
        )
    _print_info(info)


@lab_app.command("down")
def down(state_dir: StateDir = Path(".lab")) -> None:
    """Stop the lab and every process it started."""
    if _lab().down(state_dir):
        console.print("Lab stopped.")
    else:
        console.print(f"No lab is running in {state_dir}.")


@lab_app.command("status")
def status(
    state_dir: StateDir = Path(".lab"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the lab's state as JSON.")] = False,
) -> None:
    """Show where each part of the lab runs and whether it answers (status and reason, never
    a response body). Exit 1 if the lab is down or any part of it does not answer."""
    control = _lab()
    info = control.running(state_dir)
    if info is None:
        exit_not_running(
            as_json, f"No lab is running in {state_dir}. Start one with `drills lab up`."
        )
    probes = control.probe(info)
    if as_json:
        payload = {"running": True, **asdict(info), "probes": [asdict(p) for p in probes]}
        console.print_json(json.dumps(payload))
    else:
        _print_probes(info, probes)
    if not all(p.ok for p in probes):
        raise typer.Exit(EXIT_FAILED)


def _print_probes(info: LabInfo, probes: list[Probe]) -> None:
    _print_info(info)
    table = Table(title="Probes")
    for column in ("part", "url", "answer"):
        table.add_column(column)
    for p in probes:
        table.add_row(Text(p.name), Text(p.url), Text(p.detail, style="green" if p.ok else "red"))
    console.print(table)


@lab_app.command("inventory")
def inventory(
    state_dir: StateDir = Path(".lab"),
    file_format: Annotated[
        str,
        typer.Option(
            "--format", help="CSV (gzip, keys URL-encoded) or Parquet, as S3 Inventory writes."
        ),
    ] = "CSV",
) -> None:
    """Publish an S3 Inventory report of every lab bucket, as S3 would: data file,
    manifest.json and manifest.checksum under inventory/BUCKET/lab-daily/YYYY-MM-DDTHH-MMZ/
    of the bucket BUCKET-inventory. Run it again for a newer report."""
    if file_format not in ("CSV", "Parquet"):
        err.print(f"✗ --format must be CSV or Parquet, not {file_format!r}")
        raise typer.Exit(EXIT_INVALID)
    info = _lab().running(state_dir)
    if info is None:
        err.print(f"✗ No lab is running in {state_dir}. Start one with `drills lab up`.")
        raise typer.Exit(EXIT_FAILED)
    for url in _lab("inventory").publish_lab(Path(info.state_dir), info.moto, file_format):
        typer.echo(url)  # one per line, unwrapped: scripts read them


def _print_info(info: LabInfo) -> None:
    drifts = [
        name for name, on in (("drift", info.drift), ("capacity drift", info.drift_capacity)) if on
    ]
    table = Table(
        title=f"Lab in {info.state_dir}" + (f" ({', '.join(drifts)} seeded)" if drifts else "")
    )
    table.add_column("part")
    table.add_column("where")
    for site, url in info.kube.items():
        table.add_row(f"Kubernetes API ({site})", url)
    for site, url in info.endpoints.items():
        table.add_row(f"service endpoint ({site})", url)
    for site, url in info.registries.items():
        table.add_row(f"registry ({site})", url)
    if not info.registries:
        table.add_row("registries", "ECR on moto")
    table.add_row("moto (S3, Secrets Manager, Route 53, ECR)", info.moto)
    table.add_row(f"DNS ({info.dns_provider})", info.dns_server)
    table.add_row(
        "Prometheus (GPU and site metrics)", info.prometheus or "not installed: idle by allocation"
    )
    if info.demand:
        table.add_row("demand", info.demand)
    state = Path(info.state_dir)
    table.add_row("plan", str(state / "plan.yaml"))
    table.add_row("kubeconfigs", f"{state / 'primary.kubeconfig'}, {state / 'dr.kubeconfig'}")
    table.add_row("log", str(state / "lab.log"))
    console.print(table)


def register(app: typer.Typer) -> None:
    app.add_typer(lab_app, name="lab")
