"""A drill plan: what to fail over, where, and how to judge it; and how to load one.

``load_plan(path)`` reads YAML, validates it whole and raises a single
:class:`drills.errors.PlanError` listing every problem with its file, line,
column and field path. It raises nothing else, whatever the file holds.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, model_validator

from drills.errors import PlanError, PlanProblem
from drills.plan.errors import schema_vocabulary, translate
from drills.plan.models import (
    Approval,
    AwsAccess,
    AwsCredentials,
    AwsSecret,
    ControllerFence,
    Dataset,
    DatasetKind,
    Dns,
    DnsRecord,
    EcrRegistry,
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
    RecordType,
    Registry,
    Rfc2136Dns,
    Route53Dns,
    Schedule,
    SecretsPolicy,
    Site,
    Sites,
    SmokeProbe,
    Tier,
    TsigAlgorithm,
    TsigKey,
    Workload,
    WorkloadKind,
)
from drills.plan.refs import SecretRef, find_literal_credentials, resolve_secret
from drills.plan.rules import Rule, key_of, raise_rules, unique_by
from drills.plan.types import PlanName
from drills.plan.yamlfile import YamlDocument, format_loc, parse_yaml, read_plan_text

log = logging.getLogger("drills.plan")

__all__ = [
    "Approval",
    "AwsAccess",
    "AwsCredentials",
    "AwsSecret",
    "ControllerFence",
    "Dataset",
    "DatasetKind",
    "Dns",
    "DnsRecord",
    "DrillPlan",
    "EcrRegistry",
    "Fence",
    "IngressFence",
    "KubernetesAccess",
    "KubernetesSecret",
    "ObjectRef",
    "ObjectStorage",
    "Objectives",
    "OciAuth",
    "OciRegistry",
    "RecordType",
    "Registry",
    "Rfc2136Dns",
    "Route53Dns",
    "Schedule",
    "SecretRef",
    "SecretsPolicy",
    "Site",
    "Sites",
    "SmokeProbe",
    "Tier",
    "TsigAlgorithm",
    "TsigKey",
    "Workload",
    "WorkloadKind",
    "load_plan",
    "plan_digest",
    "plan_from_text",
    "plan_schema",
]


class DrillPlan(PlanModel):
    """A whole drill plan, as validated from YAML (see plans/gpu-platform.example.yaml)."""

    name: PlanName
    description: Annotated[str, Field(max_length=4000)] = ""
    sites: Sites
    workloads: Annotated[
        tuple[Workload, ...],
        Field(min_length=1),
        unique_by("workload", key_of("namespace", "name"), "name", "workloads"),
    ]
    datasets: Annotated[
        tuple[Dataset, ...], unique_by("dataset", key_of("name"), "name", "datasets")
    ] = ()
    secrets: SecretsPolicy = SecretsPolicy()
    dns: Dns
    objectives: Objectives
    smoke: Annotated[
        tuple[SmokeProbe, ...], unique_by("smoke probe", key_of("name"), "name", "smoke")
    ] = ()
    schedule: Schedule | None = None
    approval: Approval = Approval()

    # The plan file's directory, for relative paths in it; not part of the plan itself.
    _source_dir: Path | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_section_rules(self) -> DrillPlan:
        primary, dr = self.sites.primary, self.sites.dr
        rules: list[Rule] = []
        # The same bucket name on the same storage is the same bucket: no copy at all.
        # On separate storage (per-site MinIO, say) equal names are fine.
        if primary.objects.endpoint_url == dr.objects.endpoint_url:
            rules += [
                (
                    ("datasets", i, "dr_bucket"),
                    "must differ from primary_bucket: both sites use "
                    "the same object storage, so this would be the same bucket",
                )
                for i, ds in enumerate(self.datasets)
                if ds.primary_bucket == ds.dr_bucket
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
        raise_rules("plan", rules)
        return self

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
            raise PlanError(problems)
        return _validate(text, source, file.resolve().parent)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError, OSError) as exc:
        raise PlanError([_unexpected(source, exc)]) from None


def plan_from_text(text: str, source: str = "<plan>") -> DrillPlan:
    """Validate plan YAML given as text; relative paths resolve against the working directory."""
    try:
        return _validate(text, source, None)
    except PlanError:
        raise
    except (RecursionError, MemoryError, ValueError) as exc:
        raise PlanError([_unexpected(source, exc)]) from None


def _unexpected(source: str, exc: BaseException) -> PlanProblem:
    # Not expected to happen; the type is enough to report, and the text might quote input.
    log.warning("plan %s could not be checked: %s", source, type(exc).__name__)
    return PlanProblem(
        source, None, None, "", f"the plan could not be checked ({type(exc).__name__})"
    )


def _validate(text: str, source: str, source_dir: Path | None) -> DrillPlan:
    doc = parse_yaml(text, source)
    if doc.data is None:
        raise PlanError(doc.problems or [doc.problem(None, (), "the plan file is empty")])
    if not isinstance(doc.data, dict):
        kind = "a list" if isinstance(doc.data, list) else "a single value"
        message = f"the plan must be a mapping of fields (name, sites, workloads, ...), not {kind}"
        raise PlanError([*doc.problems, doc.problem(doc.values.get(()), (), message)])
    # Duplicate keys and unreadable values do not stop validation: the operator gets
    # every problem in one run. A field the YAML layer already reported is not reported twice.
    problems = list(doc.problems)
    try:
        plan = DrillPlan.model_validate(doc.data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=True)
        reported = {p.path for p in doc.problems}
        problems += [p for p in translate(errors, doc, _vocabulary()) if p.path not in reported]
    problems = _merge_credential_problems(doc, problems)
    if problems:
        raise PlanError(_in_file_order(problems))
    plan._source_dir = source_dir
    return plan


def _merge_credential_problems(doc: YamlDocument, problems: list[PlanProblem]) -> list[PlanProblem]:
    """Add literal-credential findings; each replaces pydantic's problem for the same field."""
    findings = {
        format_loc(loc): (loc, msg, at_key)
        for loc, msg, at_key in find_literal_credentials(doc.data)
    }
    unknown: dict[str, str] = {}
    merged: list[PlanProblem] = []
    for problem in problems:
        if problem.path not in findings:
            merged.append(problem)
        elif problem.message.startswith("unknown field"):
            unknown[problem.path] = problem.message
    for path, (loc, message, at_key) in findings.items():
        if path in unknown and not at_key:
            message = f"{unknown[path]}; its value {message}"
        at = doc.keys.get(loc) if at_key else doc.values.get(loc)
        merged.append(doc.problem(at, loc, message))
    return list(dict.fromkeys(merged))


def _in_file_order(problems: list[PlanProblem]) -> list[PlanProblem]:
    # Stable: problems at one spot (missing fields of a mapping) keep the model's field order.
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0, p.column or 0))


@cache
def _vocabulary() -> set[str]:
    return schema_vocabulary(plan_schema())


# --- schema and digest --------------------------------------------------------------


def plan_schema() -> dict[str, Any]:
    """The JSON Schema of a plan file, for editors and for `drills plan schema`."""
    return DrillPlan.model_json_schema()


def plan_digest(plan: DrillPlan) -> str:
    """sha256 of the plan's canonical JSON: equal for equal plans, wherever the file lives."""
    canonical = json.dumps(
        plan.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
