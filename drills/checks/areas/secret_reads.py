"""Reading the plan's secrets at a site, as fields to fingerprint and as a rotation time.

Values stay inside this module's callers' locals: what leaves is key names,
truncated keyed fingerprints, dates and statuses. No check is registered here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from drills.plan import DrillPlan
from drills.targets.external_secrets import PATH as ES_PATH
from drills.targets.external_secrets import SyncState, sync_state, target_name
from drills.targets.fingerprint import fingerprints, same, short
from drills.targets.provider_api import SecretStoreAdapter
from drills.targets.secrets import aws_secret_fields, kube_secret_fields
from drills.targets.sites import Targets

ROTATED_AT = "drills.dev/rotated-at"
Role = Literal["primary", "dr"]


@dataclass(frozen=True)
class PlanSecret:
    kind: Literal["kubernetes", "aws", "store", "external"]
    # "namespace/name" for Kubernetes and an ExternalSecret ("external", whose target Secret
    # is compared), the secret id for AWS or the site's store
    name: str
    per_site: bool

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.name}"


def plan_secrets(plan: DrillPlan) -> list[PlanSecret]:
    kube = [
        PlanSecret("kubernetes", f"{s.namespace}/{s.name}", s.per_site)
        for s in plan.secrets.kubernetes
    ]
    aws = [PlanSecret("aws", s.id, s.per_site) for s in plan.secrets.aws]
    store = [PlanSecret("store", s.id, s.per_site) for s in plan.secrets.store]
    external = [
        PlanSecret("external", f"{s.namespace}/{s.name}", False)
        for s in plan.secrets.external_secrets
    ]
    return kube + aws + store + external


def read_external(targets: Targets, role: Role, secret: PlanSecret) -> dict[str, Any] | None:
    """The ExternalSecret itself at a site (spec and status), None when it does not exist."""
    namespace, name = secret.name.split("/", 1)
    return targets.site(role).kube.read(ES_PATH, {"namespace": namespace, "name": name})


def external_sync(targets: Targets, role: Role, secret: PlanSecret) -> SyncState | None:
    """What the operator recorded of the ExternalSecret's sync at a site; None when absent."""
    found = read_external(targets, role, secret)
    return None if found is None else sync_state(found)


def _store(targets: Targets, role: Role, secret: PlanSecret) -> SecretStoreAdapter:
    """AWS Secrets Manager for ``secrets.aws``; the site's secret store for ``secrets.store``."""
    site = targets.site(role)
    return site.aws_secrets if secret.kind == "aws" else site.secret_store


def read_fields(targets: Targets, role: Role, secret: PlanSecret) -> dict[str, bytes] | None:
    """The secret's fields (name → value) at a site, or None when it does not exist there."""
    site = targets.site(role)
    if secret.kind == "external":
        found = read_external(targets, role, secret)
        if found is None:
            return None
        obj = site.kube.secret(secret.name.split("/", 1)[0], target_name(found))
        return None if obj is None else kube_secret_fields(obj)
    if secret.kind == "kubernetes":
        namespace, name = secret.name.split("/", 1)
        obj = site.kube.secret(namespace, name)
        return None if obj is None else kube_secret_fields(obj)
    raw = _store(targets, role, secret).value(secret.name)
    return None if raw is None else aws_secret_fields(raw)


@dataclass(frozen=True)
class Comparison:
    """How one secret compares between the sites, with nothing secret in it."""

    secret: PlanSecret
    status: Literal["match", "mismatch", "missing_at_dr", "missing_at_primary", "missing"]
    keys: tuple[str, ...] = ()
    missing_keys: tuple[str, ...] = ()  # at the primary, not at DR
    extra_keys: tuple[str, ...] = ()  # at DR, not at the primary
    differing: tuple[str, ...] = ()
    identical: tuple[str, ...] = ()
    shown: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "secret": self.secret.name,
            "kind": self.secret.kind,
            "status": self.status,
            "keys": list(self.keys),
        }
        for name in ("missing_keys", "extra_keys", "differing"):
            if getattr(self, name):
                out[name] = list(getattr(self, name))
        if self.shown:
            out["fingerprints"] = {k: dict(v) for k, v in self.shown.items()}
        return out


def compare(
    key: bytes,
    secret: PlanSecret,
    primary: Mapping[str, bytes] | None,
    dr: Mapping[str, bytes] | None,
) -> Comparison:
    """Compare per key by keyed fingerprint; "mismatch" means names or any fingerprint differ."""
    if primary is None or dr is None:
        status: Any = (
            "missing"
            if primary is None and dr is None
            else ("missing_at_dr" if dr is None else "missing_at_primary")
        )
        return Comparison(secret, status, tuple(sorted(primary or dr or {})))
    fp_p, fp_d = fingerprints(key, primary), fingerprints(key, dr)
    common = sorted(fp_p.keys() & fp_d.keys())
    differing = tuple(k for k in common if not same(fp_p[k], fp_d[k]))
    identical = tuple(k for k in common if same(fp_p[k], fp_d[k]))
    missing_keys = tuple(sorted(fp_p.keys() - fp_d.keys()))
    extra_keys = tuple(sorted(fp_d.keys() - fp_p.keys()))
    shown = {
        k: {
            "primary": short(fp_p[k]) if k in fp_p else "-",
            "dr": short(fp_d[k]) if k in fp_d else "-",
        }
        for k in sorted(fp_p.keys() | fp_d.keys())
    }
    ok = not (differing or missing_keys or extra_keys)
    return Comparison(
        secret,
        "match" if ok else "mismatch",
        tuple(sorted(fp_p.keys() | fp_d.keys())),
        missing_keys,
        extra_keys,
        differing,
        identical,
        shown,
    )


def compare_at_sites(targets: Targets, key: bytes, secret: PlanSecret) -> Comparison:
    return compare(
        key, secret, read_fields(targets, "primary", secret), read_fields(targets, "dr", secret)
    )


# -- rotation ------------------------------------------------------------------------


@dataclass(frozen=True)
class Rotation:
    secret: PlanSecret
    site: Role
    when: dt.datetime | None  # None: the secret is missing, or no date could be read
    source: str
    note: str = ""


def _parse_time(text: str) -> dt.datetime:
    parsed = dt.datetime.fromisoformat(text.strip())
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def _kube_rotation(secret: PlanSecret, site: Role, obj: Mapping[str, Any]) -> Rotation:
    meta = obj.get("metadata") or {}
    annotated = (meta.get("annotations") or {}).get(ROTATED_AT)
    note = ""
    if annotated:
        try:
            return Rotation(secret, site, _parse_time(str(annotated)), f"annotation {ROTATED_AT}")
        except ValueError:
            note = f"annotation {ROTATED_AT} is not ISO 8601; used creationTimestamp"
    created = meta.get("creationTimestamp")
    if not created:
        return Rotation(secret, site, None, "none", "no rotation annotation nor creationTimestamp")
    return Rotation(secret, site, _parse_time(str(created)), "creationTimestamp", note)


def read_rotation(targets: Targets, site: Role, secret: PlanSecret) -> Rotation:
    """When the secret was last rotated or changed at a site, and where that date came from.

    Kubernetes: the ``drills.dev/rotated-at`` annotation, else the object's
    creationTimestamp (a Secret updated in place keeps its creationTimestamp; the
    newest ``metadata.managedFields[].time`` would catch such updates too, at the
    cost of also counting label-only edits). AWS: the newer of LastRotatedDate and
    LastChangedDate.
    """
    adapters = targets.site(site)
    if secret.kind == "kubernetes":
        namespace, name = secret.name.split("/", 1)
        obj = adapters.kube.secret(namespace, name)
        if obj is None:
            return Rotation(secret, site, None, "none", "not found")
        return _kube_rotation(secret, site, obj)
    described = _store(targets, site, secret).describe(secret.name)
    if described is None:
        return Rotation(secret, site, None, "none", "not found")
    dates = [
        (described[k].astimezone(dt.UTC), k)
        for k in ("LastRotatedDate", "LastChangedDate")
        if isinstance(described.get(k), dt.datetime)
    ]
    if not dates:
        return Rotation(secret, site, None, "none", "no LastRotatedDate nor LastChangedDate")
    when, source = max(dates)
    return Rotation(secret, site, when, source)
