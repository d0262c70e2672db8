"""`sites.distinct`: a plan whose "DR" is the primary under another name is refused.

Each way one site can pass for two is built on a lab of its own: a DR kubeconfig that is a
byte copy of the primary's, the same file through a hard link, a symlink or a `../` path
(its context left to the file's default, so validation cannot see it), the primary's API
server through a TCP tunnel under another URL, and a DR endpoint that is the primary's
service behind a proxy. Readiness must fail and block on it, and a run, drill or incident,
must refuse before its first change.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import yaml

from drills.checks.areas.canary import CANARY_PREFIX
from drills.checks.base import Status
from drills.errors import PlanError
from drills.plan import DrillPlan, load_plan, plan_from_text
from drills.store.history import HistoryStore
from drills.takeover.drill import Drill, DrillRequest
from drills.targets import site_identity
from drills.targets.probe import ProbeResult
from drills.targets.site_identity import (
    EndpointIdentity,
    ServerAddress,
    Verdict,
    compare_endpoints,
)
from drills.targets.sites import Targets
from drills_lab.kubeapi import write_kubeconfig
from drills_lab.runtime import LabInfo
from tests.support.checks import run_check
from tests.support.drill import drills_cli, lab_plan, snapshot
from tests.support.faultproxy import FaultProxy
from tests.support.kube_sites import TOKEN as KUBE_SITES_TOKEN
from tests.support.kube_sites import SiteSpec, plan_for, site_pair
from tests.support.services import own_lab

Change = Callable[[dict[str, Any]], None]


@pytest.fixture(scope="module")
def id_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: a run that failed to refuse would change it."""
    with own_lab(tmp_path_factory, "identity-lab", ready_delay=0.2) as info:
        yield info


def _dr_kubeconfig(path: str, context: str | None) -> Change:
    def change(data: dict[str, Any]) -> None:
        access: dict[str, Any] = {"kubeconfig": path}
        if context is not None:
            access["context"] = context
        data["sites"]["dr"]["kubernetes"] = access

    return change


def _fresh(state: Path, stem: str) -> Path:
    """A new file name in the lab's state directory (tests of a module share the lab)."""
    return state / f"{stem}-{time.monotonic_ns()}.kubeconfig"


def byte_copy(info: LabInfo, _: Any) -> Change:
    state = Path(info.state_dir)
    copy = _fresh(state, "dr-copy")
    shutil.copyfile(state / "primary.kubeconfig", copy)
    return _dr_kubeconfig(copy.name, "primary")


def hard_link(info: LabInfo, _: Any) -> Change:
    state = Path(info.state_dir)
    link = _fresh(state, "dr-hardlink")
    os.link(state / "primary.kubeconfig", link)
    return _dr_kubeconfig(link.name, "primary")


def symlink(info: LabInfo, _: Any) -> Change:
    state = Path(info.state_dir)
    link = _fresh(state, "dr-symlink")
    link.symlink_to(state / "primary.kubeconfig")
    return _dr_kubeconfig(link.name, None)  # the file's own current-context: the primary's


def dot_dot(info: LabInfo, _: Any) -> Change:
    state = Path(info.state_dir)
    return _dr_kubeconfig(f"../{state.name}/primary.kubeconfig", None)


def tunnel(info: LabInfo, proxies: list[FaultProxy]) -> Change:
    """Another URL (https://localhost:PORT) that reaches the primary's API server."""
    state = Path(info.state_dir)
    primary = yaml.safe_load((state / "primary.kubeconfig").read_text())
    cluster, user = primary["clusters"][0]["cluster"], primary["users"][0]["user"]
    upstream = urlsplit(cluster["server"]).netloc
    proxy = FaultProxy(upstream)  # relays TLS as it is: the server's own certificate
    proxies.append(proxy)
    port = proxy.address.rpartition(":")[2]
    path = _fresh(state, "dr-tunnel")
    write_kubeconfig(
        path,
        server_url=f"https://localhost:{port}",  # the lab's certificate names localhost too
        context="dr",
        token=user["token"],
        ca_pem=base64.b64decode(cluster["certificate-authority-data"]),
    )
    return _dr_kubeconfig(path.name, "dr")


def same_service(info: LabInfo, proxies: list[FaultProxy]) -> Change:
    """A DR endpoint on another address that is the primary's service behind a proxy."""
    upstream = urlsplit(info.endpoints["primary"])
    proxy = FaultProxy(upstream.netloc, http=True)
    proxies.append(proxy)

    def change(data: dict[str, Any]) -> None:
        data["sites"]["dr"]["endpoint"] = f"http://{proxy.address}{upstream.path}"

    return change


ONE_CLUSTER = [byte_copy, hard_link, symlink, dot_dot, tunnel]
ONE_SITE = [*ONE_CLUSTER, same_service]


@pytest.fixture()
def proxies() -> Iterator[list[FaultProxy]]:
    started: list[FaultProxy] = []
    yield started
    for proxy in started:
        proxy.close()


def one_site_file(info: LabInfo, case: Callable[..., Change], proxies: list[FaultProxy]) -> Path:
    """The lab's plan with ``case`` applied, written beside it (relative paths resolve)."""
    data = yaml.safe_load((Path(info.state_dir) / "plan.yaml").read_text())
    case(info, proxies)(data)
    path = Path(info.state_dir) / f"one-site-{time.monotonic_ns()}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def one_site_plan(
    info: LabInfo, case: Callable[..., Change], proxies: list[FaultProxy]
) -> DrillPlan:
    return load_plan(one_site_file(info, case, proxies))


def test_the_lab_is_two_sites_told_apart_by_what_each_cluster_says(id_lab: LabInfo) -> None:
    result = run_check(lab_plan(id_lab), "sites.distinct")
    assert result.status is Status.PASS, result.summary
    clusters = result.evidence["clusters"]
    assert clusters["verdict"] == {
        "same": False,
        "by": "kube-system namespace UID",
        "detail": clusters["verdict"]["detail"],
    }
    uids = {clusters[r]["kube_system_uid"] for r in ("primary", "dr")}
    infos = {clusters[r]["cluster_info_uid"] for r in ("primary", "dr")}
    assert len(uids) == 2 and None not in uids  # each site's API server has its own
    assert len(infos) == 2 and None not in infos  # and publishes its own cluster-info
    assert result.evidence["endpoints"]["verdict"]["same"] is False


@pytest.mark.parametrize("case", ONE_SITE, ids=lambda c: c.__name__)
def test_readiness_fails_and_blocks_on_one_site(
    id_lab: LabInfo, proxies: list[FaultProxy], case: Callable[..., Change]
) -> None:
    result = run_check(one_site_plan(id_lab, case, proxies), "sites.distinct")
    assert (result.status, result.blocking) == (Status.FAIL, True), result.summary
    assert result.summary.startswith("primary and DR are one site")
    assert result.remediation
    if case is same_service:
        assert result.evidence["endpoints"]["verdict"]["same"] is True
    else:
        verdict = result.evidence["clusters"]["verdict"]
        # The cluster itself says so, whatever the path or URL that reached it.
        assert (verdict["same"], verdict["by"]) == (True, "kube-system namespace UID")


@pytest.mark.parametrize("mode", ["drill", "incident"])
@pytest.mark.parametrize("case", ONE_SITE, ids=lambda c: c.__name__)
def test_a_run_on_one_site_is_refused_before_any_change(
    id_lab: LabInfo,
    proxies: list[FaultProxy],
    history: HistoryStore,
    case: Callable[..., Change],
    mode: str,
) -> None:
    real = lab_plan(id_lab)
    before = snapshot(real)
    plan = one_site_plan(id_lab, case, proxies)
    result = Drill(DrillRequest(plan, mode=mode, operator="tests"), history).run()  # type: ignore[arg-type]
    assert result.status == "aborted", result.error
    assert "sites.distinct" in (result.error or "") or "one site" in (result.error or "")
    assert history.journal(result.run_id) == []
    assert snapshot(real) == before


def test_the_cli_refuses_a_copied_kubeconfig_in_both_modes(id_lab: LabInfo, tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    real = lab_plan(id_lab)
    before = snapshot(real)
    plan = str(one_site_file(id_lab, byte_copy, []))
    readiness = drills_cli("readiness", plan, "--json", db=db)
    assert readiness.returncode == 1, readiness.stderr
    results = {r["id"]: r for r in json.loads(readiness.stdout)["results"]}
    assert results["sites.distinct"]["status"] == "fail" and results["sites.distinct"]["blocking"]
    for mode in ("drill", "incident"):
        ran = drills_cli("run", plan, "--mode", mode, "--yes", db=db)
        assert ran.returncode == 1, ran.stdout + ran.stderr
        assert "one site" in ran.stdout and "No change was made" in ran.stdout
        assert snapshot(real) == before


def _endpoint(role: str, host: str, status: int | None, body: str) -> EndpointIdentity:
    # Names stand for themselves; "shared" stands for one address both names resolve to.
    addresses = frozenset({"192.0.2.1"} if host.startswith("shared") else {f"{host}-address"})
    if host.startswith("unresolved"):
        addresses = frozenset()  # DNS failed here
    digest = f"{status}:{body}" if status is not None else ""
    answer = ProbeResult(status == 200, status, body, digest=digest)
    return EndpointIdentity(role, ServerAddress("http", host, 80, "/h", addresses), answer)


@pytest.mark.parametrize(
    ("primary", "dr", "same"),
    [
        (("p.example", 200, "primary"), ("d.example", 503, "dr: ingress closed"), False),
        # Two names on one address may be two sites behind one router: the answers decide.
        (("shared-p", 200, "primary"), ("shared-d", 503, "dr"), False),
        # Identical 200s cannot be two sites, one of them a standby.
        (("p.example", 200, "ok"), ("d.example", 200, "ok"), True),
        # Identical errors (both down, in an incident) tell nothing either way.
        (("p.example", 503, "down"), ("d.example", 503, "down"), None),
        # A silent side cannot be compared by its answer: the addresses decide.
        (("p.example", None, ""), ("d.example", 503, "dr"), False),
        # ...unless a side has no addresses (its name did not resolve): nothing to compare.
        (("unresolved-p", None, ""), ("d.example", 503, "dr"), None),
        (("p.example", None, ""), ("unresolved-d", 503, "dr"), None),
        (("unresolved-p", 200, "primary"), ("unresolved-d", None, ""), None),
        (("unresolved-p", None, ""), ("unresolved-d", None, ""), None),
    ],
)
def test_endpoint_verdicts(
    primary: tuple[str, int | None, str], dr: tuple[str, int | None, str], same: bool | None
) -> None:
    verdict: Verdict = compare_endpoints(_endpoint("primary", *primary), _endpoint("dr", *dr))
    assert verdict.same is same, verdict


def test_one_address_is_one_listener_unless_both_names_differ() -> None:
    ip = ServerAddress("https", "127.0.0.2", 443, "", frozenset({"127.0.0.2"}))
    name = ServerAddress("https", "kube.example", 443, "", frozenset({"127.0.0.2"}))
    other_name = ServerAddress("https", "kube2.example", 443, "", frozenset({"127.0.0.2"}))
    other_path = ServerAddress("https", "kube.example", 443, "/k8s/c-2", frozenset({"127.0.0.2"}))
    assert ip.same_listener(name) and name.same_listener(ip)
    assert not name.same_listener(other_name)  # a router may pick the cluster by name
    assert not name.same_listener(other_path)  # or by path (one gateway, many clusters)
    assert ServerAddress.of("https://localhost:6443/").same_listener(
        ServerAddress.of("https://127.0.0.1:6443")
    )


@pytest.mark.parametrize(
    "url", ["https://kube.example:99999/", "https://kube.example:port/", "https://[::1/"]
)
def test_a_malformed_url_leads_nowhere_it_does_not_raise(url: str) -> None:
    address = ServerAddress.of(url)
    assert address.addresses == frozenset()
    assert not address.same_listener(ServerAddress.of(url))


def test_a_name_that_resolves_too_slowly_has_no_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    def slow(*args: object, **kwargs: object) -> list[Any]:
        time.sleep(2)
        return []

    monkeypatch.setattr(site_identity.socket, "getaddrinfo", slow)
    started = time.monotonic()
    assert site_identity._resolve("slow.example", 443, timeout=0.1) == frozenset()
    assert time.monotonic() - started < 1


def test_default_ports_and_names_are_normalised() -> None:
    a = ServerAddress.of("HTTPS://LocalHost.:443/api/")
    assert (a.scheme, a.host, a.port, a.path) == ("https", "localhost", 443, "/api")


def test_ca_files_are_read_bounded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fifo = tmp_path / "ca.fifo"
    os.mkfifo(fifo)
    assert site_identity._ca_fingerprints(str(fifo)) == frozenset()  # and does not block
    big = tmp_path / "big.pem"
    big.write_bytes(b"x" * 64)
    monkeypatch.setattr(site_identity, "CA_FILE_LIMIT", 16)
    assert site_identity._ca_fingerprints(str(big)) == frozenset()


# -- when the clusters cannot both be asked (an incident: the primary is down) ---------


def test_a_down_primary_leaves_distinct_sites_undecided_not_blocked(tmp_path: Path) -> None:
    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:
        pair.primary.stop()
        result = run_check(plan_for(tmp_path), "sites.distinct")
    assert (result.status, result.blocking) == (Status.WARN, False), result.summary
    assert "could not both be asked" in result.summary
    assert result.evidence["clusters"]["primary"]["unasked"]


@pytest.mark.parametrize("primary_up", [True, False], ids=["primary up", "primary down"])
def test_another_file_naming_the_primarys_server_is_one_cluster(
    tmp_path: Path, primary_up: bool
) -> None:
    """The DR kubeconfig is a file of its own, with a context of its own, and the primary's
    server and CA: the UID says so while the primary answers, its address once it is down."""
    with site_pair(tmp_path, SiteSpec(), SiteSpec()) as pair:
        write_kubeconfig(
            tmp_path / "dr.kubeconfig",
            server_url=pair.primary.url,
            context="dr",
            token=KUBE_SITES_TOKEN,
            ca_pem=pair.primary.ca_pem,
        )
        if not primary_up:
            pair.primary.stop()
        result = run_check(plan_for(tmp_path), "sites.distinct")
    seen = f"{result.summary}; clusters: {result.evidence.get('clusters')}"
    assert (result.status, result.blocking) == (Status.FAIL, True), seen
    by = result.evidence["clusters"]["verdict"]["by"]
    assert by == ("kube-system namespace UID" if primary_up else "API server address")


# -- one bucket under two names ----------------------------------------------------------

STORAGE_ALIAS = "s3.dr-storage.test"  # resolves, here, to the primary's object storage


@pytest.fixture
def storage_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name for the primary's S3 endpoint that validation cannot see through, as a
    hosts-file entry or a CNAME would be: only its address tells."""
    real = site_identity.socket.getaddrinfo

    def resolve(host: str, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == STORAGE_ALIAS else host, *args, **kwargs)

    monkeypatch.setattr(site_identity.socket, "getaddrinfo", resolve)


def _one_bucket(info: LabInfo) -> Change:
    port = urlsplit(info.moto).port

    def change(data: dict[str, Any]) -> None:
        data["sites"]["dr"]["objects"]["endpoint_url"] = f"http://{STORAGE_ALIAS}:{port}"
        for dataset in data["datasets"]:
            dataset["dr_bucket"] = dataset["primary_bucket"]

    return change


def _canaries(info: LabInfo, plan: DrillPlan) -> list[str]:
    creds = Path(info.state_dir) / "aws"
    s3 = boto3.client(
        "s3", endpoint_url=info.moto, region_name="us-west-2",
        aws_access_key_id=(creds / "access_key_id").read_text().strip(),
        aws_secret_access_key=(creds / "secret_access_key").read_text().strip(),
    )  # fmt: skip
    keys = []
    for bucket in {d.primary_bucket for d in plan.datasets}:
        listed = s3.list_object_versions(Bucket=bucket, Prefix=CANARY_PREFIX)
        keys += [v["Key"] for v in listed.get("Versions", []) + listed.get("DeleteMarkers", [])]
    return keys


@pytest.mark.usefixtures("storage_alias")
def test_the_primarys_bucket_under_another_name_is_refused_before_any_write(
    id_lab: LabInfo, tmp_path: Path
) -> None:
    history = HistoryStore(f"sqlite:///{tmp_path / 'history.db'}")
    plan = lab_plan(id_lab, _one_bucket(id_lab))  # validates: the names differ
    assert all(d.dr_bucket == d.primary_bucket for d in plan.datasets)
    distinct = run_check(plan, "sites.distinct")
    assert (distinct.status, distinct.blocking) == (Status.FAIL, True), distinct.summary
    assert "the same bucket at both sites" in distinct.summary
    assert distinct.evidence["buckets"]["same"] is True
    # Every data check fails on it, before listing or writing: one bucket matches itself.
    for check_id in ("data.replicated", "data.rpo", "data.checkpoint_fresh", "data.dr_writable"):
        result = run_check(plan, check_id)
        assert (result.status, result.blocking) == (Status.FAIL, True), (check_id, result)
        assert result.summary.startswith("the DR bucket is the primary bucket"), result.summary
    assert _canaries(id_lab, plan) == []  # no "DR" canary was ever written at the primary
    before = snapshot(lab_plan(id_lab))
    for mode in ("drill", "incident"):
        result = Drill(DrillRequest(plan, mode=mode, operator="tests"), history).run()  # type: ignore[arg-type]
        error = result.error or ""
        assert result.status == "aborted", error
        # A drill stops on its blocking readiness (sites.distinct among them); an incident,
        # whose readiness runs beside it, on drills' own sites.distinct guard.
        assert "sites.distinct" in error or "the same bucket at both sites" in error, error
        assert history.journal(result.run_id) == []
    assert snapshot(lab_plan(id_lab)) == before
    assert _canaries(id_lab, plan) == []


def test_two_buckets_of_one_name_on_two_storages_are_two(id_lab: LabInfo) -> None:
    """Same names, other storage: not one bucket (what a per-site MinIO looks like)."""
    verdict = site_identity.compare_storage(id_lab.moto, "http://127.0.0.4:5000")
    assert verdict.same is False, verdict
    port = urlsplit(id_lab.moto).port
    assert site_identity.compare_storage(id_lab.moto, f"http://localhost.:{port}").same


def test_buckets_of_one_name_on_another_providers_stores_are_told_by_settings() -> None:
    """Another provider's store is what its settings say: with the same settings a bucket
    name at both sites is one bucket, and the plan is refused; with others, two."""
    from drills.checks.areas.identity import one_bucket
    from drills.checks.checkup import check_context

    doc = yaml.safe_load((Path(__file__).parents[1] / "plan" / "plans" / "valid.yaml").read_text())
    doc["sites"]["primary"]["objects"] = {"provider": "blobs", "settings": {"account": "use1"}}
    doc["sites"]["dr"]["objects"] = {"provider": "blobs", "settings": {"account": "use1"}}
    for dataset in doc["datasets"]:
        dataset["dr_bucket"] = dataset["primary_bucket"]
    with pytest.raises(PlanError, match="must differ from primary_bucket"):
        plan_from_text(yaml.safe_dump(doc))

    doc["sites"]["dr"]["objects"]["settings"] = {"account": "usw2"}
    plan = plan_from_text(yaml.safe_dump(doc))
    assert plan.datasets and all(d.dr_bucket == d.primary_bucket for d in plan.datasets)
    with Targets(plan) as targets:
        assert one_bucket(check_context(plan, targets, None)) is None


def test_two_plans_claim_one_bucket_name_on_two_stores_of_another_provider_apart() -> None:
    """What `plan validate --all` and the run lease compare: another provider's store is named
    by its settings, so one bucket name on two of its stores is two claims."""
    from drills.plan.claims import plan_claims

    doc = yaml.safe_load((Path(__file__).parents[1] / "plan" / "plans" / "valid.yaml").read_text())

    def buckets(account: str) -> set[str]:
        for site in doc["sites"].values():
            site["objects"] = {"provider": "blobs", "settings": {"account": account}}
        doc["sites"]["dr"]["objects"]["settings"]["account"] += "-dr"
        plan = plan_from_text(yaml.safe_dump(doc))
        return {c.key for c in plan_claims(plan) if c.kind == "bucket"}

    one, other = buckets("use1"), buckets("euw1")
    assert one and one.isdisjoint(other)
    assert any(target.startswith('blobs:{"account":"use1"} ') for target in one)
    assert buckets("use1") == one
