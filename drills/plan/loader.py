"""A drill plan: what to fail over, where, and how to judge it; and how to load one.

``load_plan(path)`` reads YAML, validates it whole and raises a single
:class:`drills.errors.PlanError` listing every problem with its file, line,
column and field path. It raises nothing else, whatever the file holds.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from drills.errors import PlanError, PlanProblem
from drills.plan.applications import Application, Applications, application_rules, lease_name
from drills.plan.cost import CostSettings
from drills.plan.demand import Demands
from drills.plan.errors import CREDENTIAL_KEY_HINT, translate
from drills.plan.gates import DeclareSelector, Gates
from drills.plan.images import ImageRemap, ImagesPolicy
from drills.plan.lint import PlanWarning, findings
from drills.plan.models import (
    Approval,
    AwsAccess,
    AwsCredentials,
    AwsSecret,
    ControllerFence,
    Dataset,
    DatasetInventory,
    DatasetKind,
    Dns,
    DnsRecord,
    EcrRegistry,
    EvidenceSettings,
    ExternalDns,
    ExternalDnsController,
    ExternalDnsResource,
    ExternalRegistry,
    ExternalSecretRef,
    Fence,
    IngressFence,
    KubernetesAccess,
    KubernetesSecret,
    Objectives,
    ObjectRef,
    ObjectStorage,
    OciAuth,
    OciRegistry,
    PlanModel,
    Practice,
    RecordType,
    Registry,
    Rfc2136Dns,
    Route53Dns,
    Schedule,
    SecretsPolicy,
    SecretStore,
    Sentinel,
    Site,
    Sites,
    SmokeProbe,
    StoreSecret,
    Tier,
    TsigAlgorithm,
    TsigKey,
    Workload,
    WorkloadKind,
)
from drills.plan.refs import SecretRef, find_literal_credentials, resolve_secret
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.slo import LoadProbe, Slo
from drills.plan.stores import dataset_store_rules
from drills.plan.types import PlanName, Text
from drills.plan.urls import same_storage
from drills.plan.validation_jobs import ValidationJob
from drills.plan.yamlfile import Loc, Position, YamlDocument, format_loc, parse_yaml, read_plan_text
from drills.text import for_terminal

log = logging.getLogger("drills.plan")

__all__ = [
    "Application",
    "Approval",
    "AwsAccess",
    "AwsCredentials",
    "AwsSecret",
    "ControllerFence",
    "CostSettings",
    "Dataset",
    "DatasetInventory",
    "DatasetKind",
    "Dns",
    "DnsRecord",
    "DrillPlan",
    "EcrRegistry",
    "ExternalDns",
    "ExternalDnsController",
    "ExternalDnsResource",
    "ExternalRegistry",
    "ExternalSecretRef",
    "Fence",
    "ImageRemap",
    "ImagesPolicy",
    "IngressFence",
    "KubernetesAccess",
    "KubernetesSecret",
    "LoadProbe",
    "ObjectRef",
    "ObjectStorage",
    "Objectives",
    "OciAuth",
    "OciRegistry",
    "PlanWarning",
    "RecordType",
    "Registry",
    "Rfc2136Dns",
    "Route53Dns",
    "Schedule",
    "SecretRef",
    "SecretStore",
    "SecretsPolicy",
    "Sentinel",
    "Site",
    "Sites",
    "Slo",
    "SmokeProbe",
    "StoreSecret",
    "Tier",
    "TsigAlgorithm",
    "TsigKey",
    "Workload",
    "WorkloadKind",
    "load_plan",
    "plan_digest",
    "plan_from_text",
    "plan_schema",
    "plan_schema_text",
    "plan_warnings",
]

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
        """What validation accepted but an SRE should look at; see :func:`plan_warnings`."""
        return plan_warnings(self)

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
        line, column = _nearest(self._positions, loc) or (None, None)
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


# --- loading ------------------------------------------------------------------------


def load_plan(path: str | Path) -> DrillPlan:
    """Load and validate a plan file. Raises only :class:`PlanError`."""
    source = str(path)
    try:
        file = Path(path)
        text, problems = read_plan_text(file, source)
        if text is None:
            raise _plan_error(problems)
        return _validate(text, source, file.resolve().parent)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError, OSError) as exc:
        raise _plan_error([_unexpected(source, exc)]) from None


def plan_from_text(text: str, source: str = "<plan>") -> DrillPlan:
    """Validate plan YAML given as text; relative paths resolve against the working directory."""
    try:
        return _validate(text, source, None)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError) as exc:
        raise _plan_error([_unexpected(source, exc)]) from None


def _unexpected(source: str, exc: BaseException) -> PlanProblem:
    # Not expected to happen; the type is enough to report, and the text might quote input.
    log.warning("plan %s could not be checked: %s", for_terminal(source), type(exc).__name__)
    return PlanProblem(
        source, None, None, "", f"the plan could not be checked ({type(exc).__name__})"
    )


def _plan_error(problems: list[PlanProblem]) -> PlanError:
    """The PlanError for ``problems``, each made safe to print: whatever the plan held
    (an ESC sequence in a key, say) shows as a visible escape."""
    return PlanError(
        [
            dataclasses.replace(
                p,
                file=for_terminal(p.file),
                path=for_terminal(p.path),
                message=for_terminal(p.message),
            )
            for p in problems
        ]
    )


def _validate(text: str, source: str, source_dir: Path | None) -> DrillPlan:
    doc = parse_yaml(text, source)
    if doc.data is None:
        raise _plan_error(doc.problems or [doc.problem(None, (), "the plan file is empty")])
    if not isinstance(doc.data, dict):
        kind = "a list" if isinstance(doc.data, list) else "a single value"
        message = f"the plan must be a mapping of fields (name, sites, workloads, ...), not {kind}"
        raise _plan_error([*doc.problems, doc.problem(doc.values.get(()), (), message)])
    # Duplicate keys and unreadable values do not stop validation: the operator gets
    # every problem in one run. A field the YAML layer already reported is not reported twice.
    problems = list(doc.problems)
    plan = None
    try:
        plan = DrillPlan.model_validate(doc.data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=True)
        reported = {p.path for p in doc.problems}
        problems += [p for p in translate(errors, doc, DrillPlan) if p.path not in reported]
    problems = _merge_credential_problems(doc, doc.data, problems)
    if plan is not None and not problems:
        # What the models hold, after every conversion, is what gets stored and printed:
        # scan that too, not only what the YAML said.
        problems = _merge_credential_problems(doc, plan.model_dump(mode="json"), problems)
        problems += _same_cluster_problems(doc, plan, source_dir or Path.cwd())
    if problems or plan is None:
        raise _plan_error(_in_file_order(problems))
    plan._source_dir = source_dir
    plan._source = source
    plan._positions = doc.values
    return plan


def _merge_credential_problems(
    doc: YamlDocument, data: Any, problems: list[PlanProblem]
) -> list[PlanProblem]:
    """Add literal-credential findings; each replaces pydantic's problem for the same field."""
    found = {
        format_loc(loc): (loc, msg, at_key) for loc, msg, at_key in find_literal_credentials(data)
    }
    unknown: dict[str, str] = {}
    merged: list[PlanProblem] = []
    for problem in problems:
        if problem.path not in found:
            merged.append(problem)
        elif problem.message.startswith("unknown field"):
            unknown[problem.path] = problem.message
    for path, (loc, message, at_key) in found.items():
        if path in unknown and not at_key:
            # A credential-named key's message already says where credentials go.
            said = CREDENTIAL_KEY_HINT in unknown[path]
            message = f"{unknown[path]}; its value {message.split(';')[0] if said else message}"
        at = doc.keys.get(loc) if at_key else _nearest(doc.values, loc)
        merged.append(doc.problem(at, loc, message))
    return list(dict.fromkeys(merged))


def _same_cluster_problems(doc: YamlDocument, plan: DrillPlan, base: Path) -> list[PlanProblem]:
    """Two kubeconfig paths that are one file (a symlink, `./a` and `a`) with one context
    are one cluster. (Whether two files name one API server is a runtime check.)"""
    p, d = plan.sites.primary.kubernetes, plan.sites.dr.kubernetes
    if p.kubeconfig is None or d.kubeconfig is None or p.context != d.context:
        return []
    if _real(p.kubeconfig, base) != _real(d.kubeconfig, base):
        return []
    loc: Loc = ("sites", "dr", "kubernetes", "kubeconfig")
    message = (
        "is the same file as the primary's kubeconfig, with the same context: "
        "both sites would be the one cluster"
    )
    return [doc.problem(_nearest(doc.values, loc), loc, message)]


def _real(path: Path, base: Path) -> str:
    path = path.expanduser()
    return os.path.realpath(path if path.is_absolute() else base / path)


def _in_file_order(problems: list[PlanProblem]) -> list[PlanProblem]:
    # Stable: problems at one spot (missing fields of a mapping) keep the model's field order.
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))


def plan_warnings(plan: DrillPlan) -> tuple[PlanWarning, ...]:
    """Warnings about a valid plan, each with its field path and, when the plan came from
    a file, its line and column. Printed by `drills plan validate`; for readiness too."""
    located = []
    for loc, code, message in findings(plan):
        line, column = _nearest(plan._positions, loc) or (None, None)
        located.append(PlanWarning(code, plan._source, line, column, format_loc(loc), message))
    return tuple(located)


def _nearest(positions: dict[Loc, Position], loc: Loc) -> Position | None:
    # A defaulted field (max_ttl left out) points at the section that omitted it.
    for end in range(len(loc), -1, -1):
        if loc[:end] in positions:
            return positions[loc[:end]]
    return None


# --- schema and digest --------------------------------------------------------------


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of a plan file, for editors and for `drills plan schema`."""
    return DrillPlan.model_json_schema()


def plan_schema_text() -> str:
    """The schema as `drills plan schema` prints it and docs/schema/plan.schema.json holds it."""
    return json.dumps(plan_schema(), indent=2, sort_keys=False) + "\n"


def plan_digest(plan: DrillPlan) -> str:
    """sha256 of the plan's canonical JSON: equal for equal plans, wherever the file lives
    (an application's view has its whole plan's digest: the file it came from)."""
    canonical = json.dumps(
        _without_later_defaults(plan.whole.model_dump(mode="json")),
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# Fields a plan gained after runs began recording digests: at their defaults they are left out,
# so a plan file that did not change keeps the digest its earlier runs recorded.
_LATER_DEFAULTS: tuple[tuple[tuple[str, ...], object], ...] = (
    (("applications",), []),
    (("cost",), None),
    (("slo",), []),
    (("load",), None),
    (("demand",), {}),
    (("images",), {"remap": []}),
    (("validation_jobs",), []),
    (("secrets", "store"), []),
    (("secrets", "external_secrets"), []),
    *(
        (("sites", role, *field), value)
        for role in ("primary", "dr")
        for field, value in (
            (("secret_store",), {"provider": "aws-secrets-manager", "settings": {}}),
            (("objects", "provider"), "s3"),
            (("objects", "settings"), {}),
            (("object_stores",), {}),
        )
    ),
)


def _without_later_defaults(dumped: dict[str, Any]) -> dict[str, Any]:
    for dataset in dumped.get("datasets") or ():
        if isinstance(dataset, dict) and dataset.get("store", False) is None:
            del dataset["store"]
    for path, default in _LATER_DEFAULTS:
        *parents, key = path
        node: Any = dumped
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict) and node.get(key, object()) == default:
            del node[key]
    return dumped
