"""`drills plan ...`: validate a plan, show what it will do, print its JSON Schema."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from drills import timefmt
from drills.cli.common import (
    EXIT_FAILED,
    EXIT_INVALID,
    PlanFiles,
    fleet_paths,
    load_plan_or_exit,
    print_plan_problems,
    with_usable_providers,
)
from drills.cli.console import err_console, out_console
from drills.errors import PlanError, PlanProblem, TargetError
from drills.plan import (
    DrillPlan,
    ExternalDnsController,
    KubeconfigError,
    PlanWarning,
    Rfc2136Dns,
    Route53Dns,
    Site,
    Tier,
    describe_site,
    load_kubeconfig,
    plan_schema_text,
)
from drills.text import for_terminal, redact_url

plan_app = typer.Typer(
    name="plan",
    help="Validate, inspect and describe drill plans.",
    no_args_is_help=True,
)

PlanPath = Annotated[
    Path, typer.Argument(metavar="PLAN", help="The plan file (YAML).", show_default=False)
]


def register(app: typer.Typer) -> None:
    """Add the `plan` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is plan_app for group in app.registered_groups):
        return
    app.add_typer(plan_app, name="plan")


def _out() -> Console:
    return out_console(highlight=False, soft_wrap=True)


def _err() -> Console:
    return err_console(highlight=False, soft_wrap=True)


def _summary(plan: DrillPlan) -> str:
    tiers = ", ".join(f"{len(plan.workloads_in(t))} {t.value}" for t in Tier)
    datasets = len(plan.datasets)
    return (
        f"{len(plan.workloads)} workloads ({tiers}), "
        f"{datasets} dataset{'s' if datasets != 1 else ''}, "
        f"{len(plan.smoke)} smoke probe{'s' if len(plan.smoke) != 1 else ''}"
    )


CLAIM_EXAMPLES = 3  # targets named in a fleet warning; the rest are counted

ResolveOption = Annotated[
    bool,
    typer.Option(
        "--resolve",
        help="Also check that every credential reference resolves (environment "
        "variable set, file readable, Prefect block loadable) and that kubeconfig "
        "files exist and hold the named context, then list each field that was resolved "
        "and the reference it names. Every credential field (passwords, tokens, access "
        "keys, and registry user names and TSIG key names too) takes a reference. Values are "
        "never printed.",
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict",
        help="Treat warnings (a TTL longer than the RTO, a rare schedule, with --all two "
        "plans claiming one workload or DNS record...) as problems: exit 2 when there are any.",
    ),
]


@plan_app.command("validate")
def validate(
    path: Annotated[
        Path | None,
        typer.Argument(
            metavar="PLAN", help="The plan file (YAML); none with --all.", show_default=False
        ),
    ] = None,
    resolve: ResolveOption = False,
    strict: StrictOption = False,
    all_plans: Annotated[
        bool,
        typer.Option(
            "--all",
            help="Validate every plan of DRILLS_PLANS (or --plans), and warn about plans "
            "that claim the same workload, DNS record or bucket: their takeovers cannot run "
            "at once.",
        ),
    ] = False,
    plans: PlanFiles = None,
) -> None:
    """Check a plan file and report every problem in it, with file, line and field."""
    if all_plans == (path is not None):
        _err().print(Text("✗ give a plan file, or --all (not both)", style="red"))
        raise typer.Exit(EXIT_INVALID)
    if all_plans:
        _validate_all(fleet_paths(plans), resolve=resolve, strict=strict)
        return
    assert path is not None
    if not _validate_one(load_plan_or_exit(path), path, resolve=resolve, strict=strict):
        raise typer.Exit(EXIT_INVALID)


def _validate_one(plan: DrillPlan, path: Path | str, *, resolve: bool, strict: bool) -> bool:
    shown = for_terminal(str(path))
    warnings = plan.warnings
    _print_warnings(warnings)
    if resolve:
        problems = _resolution_problems(plan)
        if problems:
            err = _err()
            err.print(Text(f"✗ {shown}: {len(problems)} reference(s) do not resolve", style="red"))
            for problem in problems:
                err.print(Text(for_terminal(str(problem))))
            return False
    if strict and warnings:
        _err().print(Text(f"✗ {shown}: warnings are problems with --strict", style="red"))
        return False
    checked = " and its references resolve" if resolve else ""
    out = _out()
    out.print(Text(f"✓ {shown} is valid{checked}: {_summary(plan)}", style="green"))
    if resolve:
        # Which field resolved from which reference: the reference is a name, never the value.
        for field, ref in plan.secret_refs():
            out.print(Text(for_terminal(f"  ✓ {field}: {ref}")))
    return True


def _validate_all(paths: tuple[str, ...], *, resolve: bool, strict: bool) -> None:
    """Each plan as `validate` checks it alone, then what the plans claim in common."""
    from drills.plan import load_plan

    if not paths:
        _err().print(Text("✗ no plan file: set DRILLS_PLANS or --plans", style="red"))
        raise typer.Exit(EXIT_INVALID)
    valid, failed = [], 0
    for path in paths:
        try:
            plan = with_usable_providers(load_plan(path))
        except PlanError as exc:
            print_plan_problems(path, exc)
            failed += 1
            continue
        failed += not _validate_one(plan, path, resolve=resolve, strict=strict)
        valid.append(plan)
    fleet_warnings = _fleet_warnings(valid)
    summary = f"{len(paths)} plan file(s): {failed} invalid, {fleet_warnings} fleet warning(s)"
    _out().print(Text(summary, style="red" if failed else "yellow" if fleet_warnings else "green"))
    if failed or (strict and fleet_warnings):
        raise typer.Exit(EXIT_INVALID)


def _fleet_warnings(plans: list[DrillPlan]) -> int:
    """Warn about plan names used twice and targets claimed by several plans; their count."""
    from drills.plan import shared_claims

    err, count = _err(), 0
    names: dict[str, int] = {}
    for plan in plans:
        names[plan.name] = names.get(plan.name, 0) + 1
    for name, times in sorted(names.items()):
        if times > 1:
            count += 1
            line = f"! {times} plan files are named {name}: their history and leases would mix"
            err.print(Text(for_terminal(line), style="yellow"))
    groups: dict[tuple[str, ...], list[str]] = {}
    for shared in shared_claims(plans):
        groups.setdefault(shared.plans, []).append(str(shared.claim))
    for owners, claims in groups.items():
        count += 1
        examples = "; ".join(claims[:CLAIM_EXAMPLES])
        more = f" and {len(claims) - CLAIM_EXAMPLES} more" if len(claims) > CLAIM_EXAMPLES else ""
        line = (f"! plans {', '.join(owners)} claim the same {len(claims)} target(s): "
                f"{examples}{more}; their takeovers cannot run at once")  # fmt: skip
        err.print(Text(for_terminal(line), style="yellow"))
    return count


def _print_warnings(warnings: tuple[PlanWarning, ...]) -> None:
    err = _err()
    for warning in warnings:
        err.print(Text(for_terminal(f"! {warning}"), style="yellow"))


def _resolution_problems(plan: DrillPlan) -> list[PlanProblem]:
    """Each reference that does not resolve, located in the plan file (file:line:col)."""
    problems = []
    for field, ref in plan.secret_refs():
        try:
            plan.resolve_secret(ref)
        except TargetError as exc:
            problems.append(plan.problem_at(field, f"{ref} does not resolve: {exc.cause}"))
    for role, site in plan.sites.items():
        problem = _kubeconfig_problem(plan, site)
        if problem:
            problems.append(plan.problem_at(f"sites.{role}.kubernetes.kubeconfig", problem))
    return problems


def _kubeconfig_problem(plan: DrillPlan, site: Site) -> str | None:
    access = site.kubernetes
    if access.kubeconfig is None:
        return None
    file = plan.resolve_path(access.kubeconfig)
    try:
        load_kubeconfig(file, access.context)
    except FileNotFoundError:
        return f"{file} does not exist"
    except KubeconfigError as exc:
        return str(exc)
    except OSError as exc:
        return f"{file} cannot be read ({exc.strerror or type(exc).__name__})"
    return None


@plan_app.command("show")
def show(path: PlanPath) -> None:
    """Show what a plan will do: sites, workloads by tier, data, secrets, DNS and objectives."""
    plan = load_plan_or_exit(path)
    out = _out()
    out.print(Text(f"Plan {plan.name}", style="bold"))
    if plan.description:
        # Validation refuses control characters; escaping again costs nothing and keeps
        # `show` safe for a plan built some other way.
        out.print(Text(for_terminal(plan.description.strip(), multiline=True)))
    for table in (
        _sites_table(plan),
        _workloads_table(plan),
        _datasets_table(plan),
        _secrets_table(plan),
        _dns_table(plan),
        _run_table(plan),
    ):
        out.print(table)


def _cell(text: str, style: str = "") -> Text:
    """Plan text as a table cell: control characters visible, never Rich markup."""
    return Text(for_terminal(text), style=style)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def _sites_table(plan: DrillPlan) -> Table:
    table = _table("Sites", "", "primary", "dr")
    primary, dr = describe_site(plan.sites.primary), describe_site(plan.sites.dr)
    for key in primary:
        table.add_row(key, _cell(primary[key]), _cell(dr[key]))
    return table


def _workloads_table(plan: DrillPlan) -> Table:
    table = _table("Workloads", "tier", "workload", "kind", "DR replicas", "GPUs each", "DR GPUs")
    for tier in Tier:
        chosen = plan.workloads_in(tier)
        for w in chosen:
            name = w.key + (" (writer)" if w.writer else "")
            cells = [tier.value, name, w.kind.value, str(w.dr_replicas), str(w.gpu), str(w.dr_gpus)]
            table.add_row(*(_cell(c) for c in cells))
        if chosen:
            replicas = sum(w.dr_replicas for w in chosen)
            total = ["", f"{tier.value} total", "", str(replicas), "", str(plan.dr_gpus(tier))]
            table.add_row(*(_cell(c, style="bold") for c in total), end_section=True)
    return table


def _datasets_table(plan: DrillPlan) -> Table:
    table = _table(
        "Datasets", "dataset", "kind", "primary → DR", "prefix", "RPO target", "versions"
    )
    for d in plan.datasets:
        cells = [
            d.name,
            d.kind.value,
            f"{d.primary_bucket} → {d.dr_bucket}",
            d.prefix or "(all)",
            timefmt.duration(d.rpo_target),
            f">= {d.min_versions}",
        ]
        table.add_row(*(_cell(c) for c in cells))
    return table


def _secrets_table(plan: DrillPlan) -> Table:
    policy = plan.secrets
    table = _table(f"Secrets (max age {policy.max_age_days} days)", "store", "secret", "per site")
    for s in policy.kubernetes:
        table.add_row("kubernetes", _cell(f"{s.namespace}/{s.name}"), "yes" if s.per_site else "no")
    for a in policy.aws:
        table.add_row("aws", _cell(a.id), "yes" if a.per_site else "no")
    return table


def _dns_table(plan: DrillPlan) -> Table:
    dns = plan.dns
    table = _table("DNS", "setting", "value")
    if isinstance(dns, Rfc2136Dns):
        where = f"RFC 2136 zone {dns.zone} on {', '.join(dns.servers)} (TSIG {dns.tsig.name})"
    elif isinstance(dns, Route53Dns):
        where = f"Route 53 hosted zone {dns.hosted_zone_id} ({dns.aws.region})"
    elif isinstance(dns, ExternalDnsController):
        res = dns.resource
        where = (
            f"external-dns: {res.kind} {res.namespace}/{res.name} at {dns.site} (owner "
            f"{dns.owner_id}, sync {timefmt.duration(dns.sync_interval)}), zone {dns.zone} on "
            f"{', '.join(dns.servers)}"
        )
    else:
        where = f"provider {dns.provider}"
    rows = [
        ("provider", where),
        ("record", f"{dns.record.name} {dns.record.type.value}"),
        ("switch", f"{dns.primary_value} → {dns.dr_value}"),
        ("max TTL", timefmt.duration(dns.max_ttl)),
    ]
    for key, value in rows:
        table.add_row(key, _cell(value))
    return table


def _run_table(plan: DrillPlan) -> Table:
    table = _table("Objectives and running", "setting", "value")
    schedule = plan.schedule
    rows: list[tuple[str, list[str]]] = [
        ("RTO objective", [timefmt.duration(plan.objectives.rto)]),
        ("RPO objective", [timefmt.duration(plan.objectives.rpo)]),
        ("schedule", [f"{schedule.cron} ({schedule.timezone})" if schedule else "not scheduled"]),
        (
            "approval",
            [
                f"required, times out after {timefmt.duration(plan.approval.timeout)}"
                if plan.approval.required
                else "not required"
            ],
        ),
        ("smoke probes", [f"{p.name}: {redact_url(p.url)}" for p in plan.smoke] or ["none"]),
    ]
    for key, lines in rows:
        # One cell per line, escaped apart: the newlines between them are ours.
        table.add_row(key, Text("\n").join(_cell(line) for line in lines))
    return table


@plan_app.command("schema")
def schema(
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            "-o",
            help="Write the JSON Schema to this file instead of standard output.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of plan files (for editors and CI)."""
    text = plan_schema_text()
    if output is None:
        typer.echo(text, nl=False)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        _err().print(Text(f"✗ cannot write {output}: {exc.strerror}", style="red"))
        raise typer.Exit(EXIT_FAILED) from None
    _out().print(Text(f"✓ wrote the plan schema to {output}", style="green"))
