"""The whole drill plan: its sections, and the few rules that span them.

What each section holds, and the rules inside one section, are in the section's own module;
loading a plan from YAML is :mod:`drills.plan.loader`'s.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, PrivateAttr, model_validator

from drills.errors import PlanProblem
from drills.plan.models.applications import Applications, application_rules, lease_name
from drills.plan.models.base import PlanModel
from drills.plan.models.cost import CostSettings
from drills.plan.models.datasets import Dataset
from drills.plan.models.demand import Demands
from drills.plan.models.dns_switch import Dns, ExternalDnsController, Rfc2136Dns
from drills.plan.models.drill_gates import DeclareSelector, Gates
from drills.plan.models.image_remap import ImagesPolicy
from drills.plan.models.lint import PlanWarning, findings
from drills.plan.models.objectives import (
    Approval,
    EvidenceSettings,
    Objectives,
    Practice,
    Schedule,
    Sentinel,
    SmokeProbe,
)
from drills.plan.models.secrets_policy import SecretsPolicy
from drills.plan.models.service_levels import LoadProbe, Slo
from drills.plan.models.sites import Site, Sites
from drills.plan.models.stores import dataset_store_rules
from drills.plan.models.validation_job_spec import ValidationJob
from drills.plan.models.workloads import Tier, Workload
from drills.plan.refs import SecretRef, resolve_secret
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.types import PlanName, Text
from drills.plan.urls import same_storage
from drills.plan.yamlfile import Loc, Position, format_loc, nearest_position

# More GPUs than any single cluster holds: a plan asking for them is a typo (gpu and
# dr_replicas multiplied), and a DR pool sized from it would be fiction.
MAX_DR_GPUS = 100_000


class DrillPlan(PlanModel):
    """A whole drill plan, as validated from YAML (see plans/gpu-platform.example.yaml)."""

    name: PlanName
    """The plan's name, used by the CLI, the history store and the dashboard."""
    description: Annotated[Text, Field(max_length=4000)] = ""
    """Free text for people: what this plan fails over and why."""
    sites: Sites
    """The two sites: the primary that serves now and the DR site that takes over."""
    workloads: Annotated[
        tuple[Workload, ...],
        Field(min_length=1),
        unique_by("workload", key_of("namespace", "name"), "name", "workloads"),
    ]
    """The Deployments and StatefulSets that fail over, each in a tier."""
    datasets: Annotated[
        tuple[Dataset, ...], unique_by("dataset", key_of("name"), "name", "datasets")
    ] = ()
    """Bucket pairs replicated from the primary to DR, checked and measured for RPO."""
    secrets: SecretsPolicy = SecretsPolicy()
    """Secrets that must exist at DR, and how old they may be."""
    images: ImagesPolicy = ImagesPolicy()
    """How the primary's image names read at DR (images.remap)."""
    dns: Dns
    """The DNS record the takeover switches from the primary to DR."""
    objectives: Objectives
    """The RTO and RPO a takeover is judged against."""
    smoke: Annotated[
        tuple[SmokeProbe, ...], unique_by("smoke probe", key_of("name"), "name", "smoke")
    ] = ()
    """Probes through the DNS name that prove the service is restored."""
    schedule: Schedule | None = None
    """When drills of this plan run (the Prefect deployment's schedule)."""
    approval: Approval = Approval()
    """Whether a person must approve before the primary is fenced."""
    sentinel: Sentinel | None = None
    """A small real workload kept running at DR, checked by cluster.sentinel."""
    declare_on: Annotated[tuple[DeclareSelector, ...], Field(max_length=50)] = ()
    """Alertmanager selectors (``alertname="PrimaryRegionDown", severity="page"``): an alert
    matching one, sent to the receiver of `drills serve`, proposes an incident on the
    Incident page; an operator approves it there (never automatically)."""
    # Where to send notifications: credential references, each to one or more Apprise URLs
    # (comma-separated), because an Apprise URL holds its service's token.
    notify: Annotated[tuple[SecretRef, ...], Field(max_length=20)] = ()
    """Where to send notifications: credential references (env:, file:, prefect:), each
    to one or more Apprise URLs."""
    evidence: EvidenceSettings = EvidenceSettings()
    """Where the evidence chain's checkpoints are kept outside the store."""
    practice: Practice = Practice()
    """The practice name `drills run --mode practice` verifies DR through."""
    gates: Gates = Gates()
    """Alerts and change freezes that refuse a drill or a practice (never an incident)."""
    applications: Applications = ()
    """Groups of workloads, datasets and DNS records that `drills run --only NAME` takes
    over or practises one at a time; what no application lists belongs to every run."""
    cost: CostSettings | None = None
    """Prices, GPU metrics and demand, for `drills capacity` (what the DR pool costs)."""
    slo: Annotated[
        tuple[Slo, ...], Field(max_length=50), unique_by("SLO", key_of("name"), "name", "slo")
    ] = ()
    """SLOs (PromQL against cost.prometheus or DRILLS_PROMETHEUS_URL) that must be OK within
    the RTO target after the switch and stay OK for their hold; a drill is not met otherwise."""
    load: LoadProbe | None = None
    """A load probe through the public name, run after the switch (and, in a drill, against
    the primary in the preflight as a baseline); a drill is not met over its limits."""
    demand: Demands = Field(default_factory=dict)
    """Per workload (``namespace/name``): its measured demand, what one replica carries, and
    the part DR must carry (`capacity.carry`, and the drill's scale to demand)."""
    validation_jobs: Annotated[
        tuple[ValidationJob, ...],
        Field(max_length=20),
        unique_by("validation job", key_of("namespace", "name"), "name", "validation_jobs"),
    ] = ()
    """Kubernetes Jobs a drill runs to completion at DR once its critical tier is ready
    (resume from the newest replicated checkpoint, train a few steps, write a checkpoint):
    one that fails, passes its deadline or writes nothing where it should makes the drill
    not met, and it rolls back."""

    # Where the plan came from, for relative paths and for locating warnings; not part
    # of the plan itself.
    _source_dir: Path | None = PrivateAttr(default=None)
    _source: str = PrivateAttr(default="<plan>")
    _positions: dict[Loc, Position] = PrivateAttr(default_factory=dict)
    # Set on the view drills.plan.only makes for one application's run.
    _application: str | None = PrivateAttr(default=None)
    _whole: DrillPlan | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_section_rules(self) -> DrillPlan:
        primary, dr = self.sites.primary, self.sites.dr
        rules: list[Rule] = [*self._capacity_rules()]
        # The same bucket name on the same storage is the same bucket: no copy at all.
        # On separate storage (per-site MinIO, say) equal names are fine. Endpoints are
        # compared normalised: a trailing slash, a default port, or the host written
        # another way (localhost, 127.1, 0x7f000001) is the same storage.
        rules += dataset_store_rules(self.datasets, primary, dr)
        rules += [
            (
                ("datasets", i, "dr_bucket"),
                "must differ from primary_bucket: both sites use "
                "the same object storage, so this would be the same bucket",
            )
            for i, ds in enumerate(self.datasets)
            if ds.primary_bucket == ds.dr_bucket and _same_object_store(primary, dr, ds.store)
        ]
        # A per-site AWS secret must differ between sites, which it cannot when both
        # sites read the one Secrets Manager.
        if _secrets_manager(primary) == _secrets_manager(dr):
            rules += [
                (
                    ("secrets", "aws", i, "per_site"),
                    "both sites use the same Secrets Manager (same aws region and "
                    "endpoint_url), so this secret cannot differ between them",
                )
                for i, secret in enumerate(self.secrets.aws)
                if secret.per_site
            ]
        rules += self._practice_rules()
        rules += application_rules(
            self.applications, self.workloads, self.datasets, self.dns.record.name, self.practice
        )
        raise_rules("plan", rules)
        return self

    def _practice_rules(self) -> list[Rule]:
        name = self.practice.record
        if name is None or not isinstance(self.dns, Rfc2136Dns | ExternalDnsController):
            return []
        zone = self.dns.zone
        if name == zone or name.endswith("." + zone):
            return []
        return [(("practice", "record"), f"{name} is not inside the zone {zone}")]

    def _capacity_rules(self) -> list[Rule]:
        serving = [w for w in self.workloads if w.tier is not Tier.BATCH and w.dr_replicas > 0]
        rules: list[Rule] = []
        if not serving:
            message = (
                "no critical or normal workload has DR replicas: a drill would fence the "
                "primary and switch DNS with nothing behind it"
            )
            rules.append((("workloads",), message))
        total = self.dr_gpus()
        if total > MAX_DR_GPUS:
            biggest = max(range(len(self.workloads)), key=lambda i: self.workloads[i].dr_gpus)
            message = (
                f"the workloads need {total:,} GPUs at DR (gpu × dr_replicas), more than "
                f"any single cluster holds (at most {MAX_DR_GPUS:,} here)"
            )
            rules.append((("workloads", biggest, "dr_replicas"), message))
        return rules

    @property
    def application(self) -> str | None:
        """The application this view of the plan is restricted to (None: the whole plan)."""
        return self._application

    @property
    def whole(self) -> DrillPlan:
        """The whole plan, of which this may be one application's view."""
        return self._whole or self

    @property
    def lease_name(self) -> str:
        """The name its runs lease: one run at a time per plan, or per application of it."""
        return lease_name(self.name, self._application)

    @property
    def warnings(self) -> tuple[PlanWarning, ...]:
        """What validation accepted but an SRE should look at, each warning with its field
        path and, when the plan came from a file, its line and column."""
        located = []
        for loc, code, message in findings(self):
            line, column = nearest_position(self._positions, loc) or (None, None)
            located.append(PlanWarning(code, self._source, line, column, format_loc(loc), message))
        return tuple(located)

    @property
    def source_dir(self) -> Path | None:
        """The directory of the plan file, when the plan was loaded from one."""
        return self._source_dir

    def resolve_path(self, path: str | Path) -> Path:
        """``path`` as written in the plan, made absolute against the plan file's directory."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        return (self._source_dir or Path.cwd()) / p

    def resolve_secret(self, ref: SecretRef) -> str:
        """Read a credential the plan refers to (``file:`` paths relative to the plan)."""
        return resolve_secret(ref, self._source_dir or Path.cwd())

    def resolve_value(self, value: str) -> str:
        """``value`` itself, or what it names when it is a reference (a user name)."""
        return self.resolve_secret(value) if isinstance(value, SecretRef) else value

    def workloads_in(self, tier: Tier | str) -> tuple[Workload, ...]:
        return tuple(w for w in self.workloads if w.tier == Tier(tier))

    @property
    def writers(self) -> tuple[Workload, ...]:
        """Workloads that write, and so are stopped at the primary before DR comes up."""
        return tuple(w for w in self.workloads if w.writer)

    def dr_gpus(self, tier: Tier | str | None = None) -> int:
        """GPUs the DR site needs for ``tier`` (all tiers when None)."""
        chosen = self.workloads if tier is None else self.workloads_in(tier)
        return sum(w.dr_gpus for w in chosen)

    def secret_refs(self) -> Iterator[tuple[str, SecretRef]]:
        """Every credential reference in the plan, with its dotted field path."""
        yield from _refs_in(self, "")

    def problem_at(self, field: str, message: str) -> PlanProblem:
        """A problem found after loading (a reference that does not resolve) at ``field``
        (a path as :meth:`secret_refs` gives it: ``sites.dr.registry.auth.password``),
        with the file, line and column of that field, as the loader's own problems have."""
        loc: Loc = tuple(int(index) if index else key for key, index in _FIELD_PART.findall(field))
        line, column = nearest_position(self._positions, loc) or (None, None)
        return PlanProblem(self._source, line, column, field, message)


# One part of a field path: a key (`sites`) or an index (`[3]`).
_FIELD_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _same_object_store(primary: Site, dr: Site, store: str | None = None) -> bool:
    if store is not None and not (store in primary.object_stores and store in dr.object_stores):
        return False  # dataset_store_rules names the store that is missing
    p, d = primary.objects_for(store), dr.objects_for(store)
    if p.provider != d.provider:
        return False
    if p.provider != "s3":
        return p.settings == d.settings  # all that another provider is told
    return same_storage(p.endpoint_url, d.endpoint_url)


def _secrets_manager(site: Site) -> tuple[str, str | None] | None:
    return (site.aws.region, site.aws.endpoint_url) if site.aws else None


def _refs_in(value: Any, path: str) -> Iterator[tuple[str, SecretRef]]:
    if isinstance(value, SecretRef):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from _refs_in(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, tuple):
        for i, item in enumerate(value):
            yield from _refs_in(item, f"{path}[{i}]")
