"""Readiness check that the plan's two sites are two: a takeover onto itself is never right."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from drills.checks.base import CheckContext, CheckResult, Outcome, Status, check
from drills.checks.runner import ReadinessReport
from drills.targets.http import new_client
from drills.targets.site_identity import (
    EndpointIdentity,
    Verdict,
    compare_clusters,
    compare_endpoints,
    compare_storage,
    identify_cluster,
    identify_endpoint,
)

CHECK_ID = "sites.distinct"
PROBE_READ_S = 2.0

_BUCKET_REMEDIATION = (
    "A dataset's dr_bucket must be another bucket than its primary_bucket: the same name "
    "on the same object storage, however its endpoint is written, is one bucket."
)
_REMEDIATION = (
    "Point sites.dr.kubernetes at the DR cluster's own kubeconfig (its own API server and "
    "CA) and sites.dr.endpoint at the DR site's own service. A copy of the primary's "
    "kubeconfig, the same file by another path, or another URL for the same server makes a "
    "takeover fence the primary and then 'bring DR up' by restarting what it just stopped. "
    + _BUCKET_REMEDIATION
)


@check(
    CHECK_ID,
    title="Primary and DR are distinct",
    category="Cluster",
    timeout_s=20,
    reads=(
        "Both clusters' kube-system namespace UID (else kube-public/cluster-info), the "
        "service endpoints' resolved addresses and answers, and each dataset's bucket names "
        "and S3 endpoints."
    ),
    blocks=(
        "Primary and DR are the same cluster, the same service, or the same bucket; an "
        "undecided cluster verdict with the DR cluster unreachable is an error and blocks "
        "too."
    ),
    warns="The verdict is undecided (one side silent, identical errors).",
    remediation=(
        "Point the plan's DR kubeconfig, endpoints and buckets at the DR site, not at the primary."
    ),
)
def sites_distinct(ctx: CheckContext) -> Outcome:
    """The primary and DR are two clusters and two services, as each answers for itself.

    Clusters are told apart by the ``kube-system`` namespace UID (the usual cluster ID,
    made when a cluster is created), else by the UID of ``kube-public/cluster-info``;
    only when the clusters cannot both be asked (an incident, the primary down) by the
    kubeconfig file and the API server's resolved address and CA. The service endpoints
    are told apart by where their URLs lead (resolved address and port), and, when both
    answer, by their answers: identical 200s are one site. The same cluster or the same
    service at both sites fails and blocks; a takeover refuses to start on it, drill or
    incident. Undecided (one side silent, identical errors) warns, but an undecided
    cluster verdict with the DR cluster unreachable (or something else answering for it)
    is an error: the check could not read what it judges. A dataset whose
    ``dr_bucket`` has its ``primary_bucket``'s name is one bucket when the two S3
    endpoints lead to one storage (one AWS partition, or one resolved address and port
    however the host is written: ``localhost``, ``127.1``, ``[::ffff:127.0.0.1]``): that
    fails and blocks too, and the data checks fail on it without reading or writing.
    """
    with ThreadPoolExecutor(max_workers=4) as pool:
        p_id, d_id = (pool.submit(identify_cluster, ctx.targets.site(r)) for r in ("primary", "dr"))
        endpoints = _endpoints(ctx, pool)
        clusters = compare_clusters(p_id.result(), d_id.result())
        buckets = _buckets(ctx)
        evidence: dict[str, Any] = {
            "clusters": {
                "primary": p_id.result().to_json(),
                "dr": d_id.result().to_json(),
                "verdict": clusters.to_json(),
            },
            "endpoints": endpoints[1],
            "buckets": buckets.to_json() if buckets else None,
        }
    if clusters.same is None and d_id.result().unreachable and not (buckets and buckets.same):
        summary = f"cannot read the DR cluster: {d_id.result().unasked}"
        remediation = "Check the DR kubeconfig's server URL and the network path to it."
        return Outcome(Status.ERROR, summary, evidence, remediation, blocking=True)
    return _outcome(clusters, endpoints[0], buckets, evidence)


def _storage(ctx: CheckContext, store: str | None) -> Verdict:
    p = ctx.plan.sites.primary.objects_for(store)
    d = ctx.plan.sites.dr.objects_for(store)
    if (p.provider, d.provider) != ("s3", "s3"):
        # Another provider's store is all in its settings: the same provider and settings
        # reach one store; anything else, two (a provider's settings are not URLs to resolve).
        same = p.provider == d.provider and p.settings == d.settings
        words = f"{p.provider} at the primary, {d.provider} at DR" + (", same settings" * same)
        return Verdict(same, "object storage provider", words)
    urls = tuple(str(s.endpoint_url) if s.endpoint_url else None for s in (p, d))
    return ctx.targets.once(("object storage", urls), lambda: compare_storage(*urls))


def _same_names(ctx: CheckContext, store: str | None) -> list[str]:
    return sorted(
        {
            d.dr_bucket
            for d in ctx.plan.datasets
            if d.dr_bucket == d.primary_bucket and d.store == store
        }
    )


def _buckets(ctx: CheckContext) -> Verdict | None:
    """Whether a dataset's DR bucket is its primary bucket (same name, one storage);
    None when no dataset gives both sites the same bucket name."""
    found: list[Verdict] = []
    for store in sorted({d.store or "" for d in ctx.plan.datasets}):
        names = _same_names(ctx, store or None)
        if names:
            storage = _storage(ctx, store or None)
            found.append(Verdict(storage.same, storage.by, f"{', '.join(names)}: {storage.detail}"))
    if not found:
        return None
    # One bucket anywhere is one bucket; else one undecided store leaves the answer open.
    return next((v for v in found if v.same), None) or next(
        (v for v in found if v.same is None), found[0]
    )


def one_bucket(ctx: CheckContext) -> Outcome | None:
    """For the data checks: a failure, before anything is listed or written, when a
    dataset's DR bucket is (or may be) its primary bucket; None when they are two.

    One bucket compares equal to itself: every data check would pass on it, and the
    DR-writable canary would be written into the primary bucket.
    """
    verdict = _buckets(ctx)
    if verdict is None or verdict.same is False:
        return None
    evidence = {"buckets": verdict.to_json()}
    if verdict.same:
        summary = f"the DR bucket is the primary bucket ({verdict.detail})"
        return Outcome(Status.FAIL, summary, evidence, _BUCKET_REMEDIATION, blocking=True)
    summary = f"cannot tell the DR bucket from the primary bucket ({verdict.detail})"
    return Outcome(Status.ERROR, summary, evidence, _BUCKET_REMEDIATION, blocking=True)


def _endpoints(ctx: CheckContext, pool: ThreadPoolExecutor) -> tuple[Verdict, dict[str, Any]]:
    sites = ctx.plan.sites
    with new_client(read_timeout=PROBE_READ_S) as client:

        def identify(role: str, url: str) -> EndpointIdentity:
            # Once per run for every plan that serves at this endpoint (readiness --all).
            return ctx.targets.once(
                ("endpoint", role, url), lambda: identify_endpoint(role, url, client)
            )

        p, d = (pool.submit(identify, role, str(site.endpoint)) for role, site in sites.items())
        verdict = compare_endpoints(p.result(), d.result())
    return verdict, {
        "primary": p.result().to_json(),
        "dr": d.result().to_json(),
        "verdict": verdict.to_json(),
    }


def _outcome(
    clusters: Verdict, endpoints: Verdict, buckets: Verdict | None, evidence: dict[str, Any]
) -> Outcome:
    verdicts = [("cluster", clusters), ("service", endpoints)]
    if buckets is not None:
        verdicts.append(("bucket", buckets))
    same = [f"the same {what} at both sites ({v.by}: {v.detail})" for what, v in verdicts if v.same]
    if same:
        summary = f"primary and DR are one site: {'; '.join(same)}"
        return Outcome(Status.FAIL, summary, evidence, _REMEDIATION, blocking=True)
    undecided = [f"{what}: {v.detail}" for what, v in verdicts if v.same is None]
    if undecided:
        summary = f"could not confirm the sites are distinct: {'; '.join(undecided)}"
        return Outcome(Status.WARN, summary, evidence, _REMEDIATION)
    summary = f"two clusters ({clusters.by}: {clusters.detail}), two services ({endpoints.detail})"
    return Outcome(Status.PASS, summary, evidence)


def distinct_result(report: ReadinessReport | None) -> CheckResult | None:
    """The ``sites.distinct`` result of a readiness run, if it ran."""
    for result in report.results if report else ():
        if result.id == CHECK_ID:
            return result
    return None
