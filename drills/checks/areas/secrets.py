"""Readiness checks of category "Secrets": synced, rotated, and distinct where they must be.

Secrets are compared by keyed fingerprint (HMAC-SHA256 under the run's random
``fingerprint_key``); evidence shows key names and truncated fingerprints,
never a value.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from drills.checks.areas.secret_reads import (
    Comparison,
    PlanSecret,
    Rotation,
    compare_at_sites,
    external_sync,
    plan_secrets,
    read_rotation,
)
from drills.checks.base import EXAMPLES, CheckContext, Outcome, Status, check
from drills.plan import DrillPlan
from drills.targets.sites import Targets


def _names(items: list[Comparison]) -> str:
    shown = ", ".join(c.secret.name for c in items[:EXAMPLES])
    return shown + (f" and {len(items) - EXAMPLES} more" if len(items) > EXAMPLES else "")


@check(
    "secrets.synced",
    title="Secrets synced to DR",
    category="Secrets",
    timeout_s=20,
    reads=(
        "Each shared secret of the plan at both sites (Kubernetes Secrets, AWS Secrets "
        "Manager and its DR-region replica, or each site's secret store for secrets.store), "
        "compared by keyed fingerprint; values never leave the process. For each "
        "ExternalSecret of secrets.external_secrets, its status and target Secret at DR."
    ),
    blocks=(
        "A secret is missing at DR, or a key's name or value differs; an ExternalSecret at DR "
        "is not Ready, or its refreshTime is older than twice its refreshInterval."
    ),
    warns="Never.",
    remediation=(
        "Sync the secret to DR (External Secrets, the Secrets Manager replica) so each key "
        "holds the primary's value."
    ),
)
def secrets_synced(ctx: CheckContext) -> Outcome:
    """Each secret of the plan exists at DR with the same key names and, key by key, the
    same value, compared by keyed fingerprint (HMAC-SHA256 under a random per-run key):
    a Kubernetes Secret in the DR cluster, or the Secrets Manager replica in the DR
    region under the same id. Values never leave the process.

    An ExternalSecret (``secrets.external_secrets``) is also read at DR as External
    Secrets Operator recorded it: its ``Ready`` condition must be ``True`` and its
    ``status.refreshTime`` no older than twice its ``spec.refreshInterval``; otherwise the
    summary names it, the store it reads (``spec.secretStoreRef``) and the condition's
    reason and message. Its target Secret is compared with the primary's as above.

    Secrets marked ``per_site`` are skipped here (they must differ; see
    secrets.distinct_credentials). A secret missing or different at DR fails and
    blocks: workloads that mount it would not start, or start with stale credentials.
    """
    plan, targets, fingerprint_key = ctx.plan, ctx.targets, ctx.fingerprint_key
    wanted = [s for s in plan_secrets(plan) if not s.per_site]
    skipped = [s.label for s in plan_secrets(plan) if s.per_site]
    results = [compare_at_sites(targets, fingerprint_key, s) for s in wanted]
    bad = [c for c in results if c.status != "match"]
    syncs = external_syncs(targets, [s for s in wanted if s.kind == "external"], ctx.now)
    failing = [row for row in syncs if row["problem"]]
    evidence: dict[str, Any] = {
        "compared": len(results),
        "matching": len(results) - len(bad),
        "skipped_per_site": skipped,
        "secrets": [c.to_json() for c in results],
    } | ({"external_secrets": syncs} if syncs else {})
    if not wanted:
        return Outcome(Status.PASS, "no shared secrets in the plan", evidence)
    if bad or failing:
        parts = [f"{len(bad)} of {len(results)} secrets not identical at DR: {_names(bad)}"]
        parts = parts if bad else []
        parts += [f"ExternalSecret {row['secret']} at DR {row['problem']}" for row in failing]
        return Outcome(
            Status.FAIL,
            "; ".join(parts),
            evidence,
            remediation="Re-sync the secret to DR from the primary (External Secrets / sealed "
            "secrets / Secrets Manager replication) and check why the sync stopped: for an "
            "ExternalSecret, the store it names and the error its Ready condition records.",
            blocking=True,
        )
    return Outcome(Status.PASS, f"all {len(results)} secrets identical at DR", evidence)


def external_syncs(
    targets: Targets, externals: list[PlanSecret], now: dt.datetime
) -> list[dict[str, Any]]:
    """Each ExternalSecret's sync at DR as its operator recorded it, and why it cannot be
    trusted (missing, not Ready, stale), if so."""
    rows: list[dict[str, Any]] = []
    for secret in externals:
        state = external_sync(targets, "dr", secret)
        if state is None:
            rows.append({"secret": secret.name, "problem": "does not exist"})
            continue
        rows.append({"secret": secret.name, **state.to_json(), "problem": state.problem(now)})
    return rows


def _age_days(now: dt.datetime, when: dt.datetime) -> float:
    return round(max(0.0, (now - when).total_seconds()) / 86400, 1)


def _rotations(plan: DrillPlan, targets: Targets) -> list[Rotation]:
    """Shared secrets at the primary (DR holds copies); per-site secrets at both sites."""
    out = []
    for s in plan_secrets(plan):
        if s.kind == "external":
            continue  # its Secret is rewritten at each refresh: rotation is its store's
        out.append(read_rotation(targets, "primary", s))
        if s.per_site:
            out.append(read_rotation(targets, "dr", s))
    return out


@check(
    "secrets.rotation",
    title="Secrets rotated",
    category="Secrets",
    timeout_s=20,
    reads=(
        "Each secret's rotation date: the drills.dev/rotated-at annotation or "
        "creationTimestamp of a Kubernetes Secret, or LastRotatedDate and LastChangedDate in "
        "AWS Secrets Manager."
    ),
    blocks="Never: an old credential still opens the door at DR.",
    warns=(
        "Warns when a secret is older than secrets.max_age_days or cannot be found or dated; "
        "fails without blocking when older than twice that."
    ),
    remediation=(
        "Rotate the named secrets (and sync them to DR), or annotate a Kubernetes Secret with"
        " drills.dev/rotated-at when it was rotated in place."
    ),
)
def secrets_rotation(ctx: CheckContext) -> Outcome:
    """Each secret was rotated or changed within the plan's ``secrets.max_age_days``.

    Kubernetes: the ``drills.dev/rotated-at`` annotation (ISO 8601) when present,
    else the Secret's creationTimestamp. AWS Secrets Manager: the newer of
    LastRotatedDate and LastChangedDate. Shared secrets are dated at the primary
    (DR holds copies, checked by secrets.synced); per-site secrets at both sites.
    Rule: older than the maximum warns; older than twice the maximum fails, but
    does not block (an old credential still opens the door at DR). A secret that
    cannot be found or dated warns.
    """
    plan, targets, now = ctx.plan, ctx.targets, ctx.now
    limit = plan.secrets.max_age_days
    rows, stale, expired, unknown = [], [], [], []
    for r in _rotations(plan, targets):
        row: dict[str, Any] = {"secret": r.secret.name, "kind": r.secret.kind, "site": r.site}
        if r.when is None:
            row |= {"status": "unknown", "note": r.note}
            unknown.append(r)
        else:
            age = _age_days(now, r.when)
            row |= {"rotated_at": r.when.isoformat(timespec="seconds"), "age_days": age}
            row |= {"source": r.source} | ({"note": r.note} if r.note else {})
            if age > 2 * limit:
                row["status"] = "expired"
                expired.append(r)
            elif age > limit:
                row["status"] = "stale"
                stale.append(r)
            else:
                row["status"] = "ok"
        rows.append(row)
    evidence = {"max_age_days": limit, "checked": len(rows), "secrets": rows}
    if not rows:
        return Outcome(Status.PASS, "no secrets in the plan", evidence)
    remediation = (
        "Rotate the secret (and record the time in the drills.dev/rotated-at annotation), "
        "or enable Secrets Manager rotation."
    )
    if expired:
        names = ", ".join(f"{r.secret.name}@{r.site}" for r in expired[:EXAMPLES])
        return Outcome(
            Status.FAIL,
            f"{len(expired)} secret(s) older than {2 * limit} days: {names}",
            evidence,
            remediation=remediation,
        )
    if stale or unknown:
        parts = []
        if stale:
            parts.append(f"{len(stale)} older than {limit} days")
        if unknown:
            parts.append(f"{len(unknown)} not found or undated")
        first = (stale + unknown)[0]
        return Outcome(
            Status.WARN,
            "; ".join(parts) + f" (first: {first.secret.name}@{first.site})",
            evidence,
            remediation=remediation,
        )
    return Outcome(Status.PASS, f"all {len(rows)} rotated within {limit} days", evidence)


def _distinct_json(c: Comparison) -> dict[str, Any]:
    """A per-site comparison in its own words: differing keys are the good case here."""
    out = c.to_json()
    out.pop("differing", None)
    if c.status in ("match", "mismatch"):
        out["status"] = "shared" if c.identical else "distinct"
        out["shared_keys"] = list(c.identical)
    return out


@check(
    "secrets.distinct_credentials",
    title="Per-site credentials distinct",
    category="Secrets",
    timeout_s=20,
    reads=(
        "Each per_site secret at both sites (Kubernetes Secrets or AWS Secrets Manager), "
        "compared by keyed fingerprint."
    ),
    blocks="A per-site secret is missing at DR.",
    warns=(
        "Fails without blocking when a key has the same value at both sites; warns when the "
        "secret is missing at the primary."
    ),
    remediation=(
        "Issue a separate credential for each site and store each in its own site's secret."
    ),
)
def secrets_distinct_credentials(ctx: CheckContext) -> Outcome:
    """Secrets marked ``per_site`` (registry pull secrets, site-scoped API keys) differ
    between the primary and DR, key by key, compared by keyed fingerprint.

    A credential shared by both sites means one leaked key opens both: any key
    with the same value at both sites fails, without blocking (the takeover
    itself still works). A per-site secret missing at DR fails and blocks: what
    it unlocks (pulling images, say) would fail there. Missing at the primary warns.
    """
    plan, targets, fingerprint_key = ctx.plan, ctx.targets, ctx.fingerprint_key
    wanted = [s for s in plan_secrets(plan) if s.per_site]
    results = [compare_at_sites(targets, fingerprint_key, s) for s in wanted]
    shared = [c for c in results if c.identical]
    missing_dr = [c for c in results if c.status in ("missing_at_dr", "missing")]
    missing_primary = [c for c in results if c.status == "missing_at_primary"]
    evidence: dict[str, Any] = {
        "compared": len(results),
        "secrets": [_distinct_json(c) for c in results],
    }
    if not wanted:
        return Outcome(Status.PASS, "no per-site secrets in the plan", evidence)
    if missing_dr:
        return Outcome(
            Status.FAIL,
            f"{len(missing_dr)} per-site secret(s) missing at DR: {_names(missing_dr)}",
            evidence,
            remediation="Create the DR site's own credential (never a copy of the primary's).",
            blocking=True,
        )
    if shared:
        return Outcome(
            Status.FAIL,
            f"{len(shared)} per-site secret(s) share a value between sites: {_names(shared)}",
            evidence,
            remediation="Issue a separate credential for the DR site and revoke the shared one "
            "there, so one leak cannot open both sites.",
        )
    if missing_primary:
        return Outcome(
            Status.WARN,
            f"{len(missing_primary)} per-site secret(s) missing at the primary: "
            f"{_names(missing_primary)}",
            evidence,
            remediation="Check the plan's secret names against the primary cluster.",
        )
    return Outcome(Status.PASS, f"all {len(results)} per-site secrets differ", evidence)
