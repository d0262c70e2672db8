"""KubeTarget against the lab's Kubernetes API server over HTTPS, and its failure paths."""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest
from kubernetes.client.exceptions import ApiException

from drills.errors import MisroutedError, PermanentError, TargetError, TemporaryError
from drills.plan import DrillPlan
from drills.targets.kube import (
    KubeTarget,
    canonical,
    cluster_queues,
    local_queue,
    parse_quantity,
    priority_classes,
)
from drills.targets.kube.errors import NotReadyInTime, translate
from drills_lab.kubeapi import NEVER_READY_ANNOTATION, KubeApiServer, write_kubeconfig
from drills_lab.seed_cluster import ingress, secret, workload
from drills_lab.topology import LabWorkload
from tests.support.kube_sites import TOKEN, plan_for
from tests.support.not_found import NotFoundServer

WEB = LabWorkload("apps", "web", "Deployment", "critical", "platform/web:1", 1, 1)
DB = LabWorkload("apps", "db", "StatefulSet", "critical", "platform/db:1", 1, 1)


@pytest.fixture(scope="module")
def server() -> Iterator[KubeApiServer]:
    server = KubeApiServer(version=(1, 31), token=TOKEN, ready_delay=0.1, name="t", tls=True)
    server.start()
    store = server.store
    for ns in ("apps", "serving"):
        store.create("namespaces", {"metadata": {"name": ns}})
    store.create("deployments", workload(WEB, "reg.example", 0))
    store.create("statefulsets", workload(DB, "reg.example", 0))
    store.create("secrets", secret("apps", "creds", {"k": "v"}, dt.datetime.now(dt.UTC)))
    store.create("ingresses", ingress("nginx"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def plan(server: KubeApiServer, tmp_path_factory: pytest.TempPathFactory) -> DrillPlan:
    where = tmp_path_factory.mktemp("kube")
    for role in ("primary", "dr"):
        write_kubeconfig(
            where / f"{role}.kubeconfig",
            server_url=server.url,
            context=role,
            token=TOKEN,
            ca_pem=server.ca_pem,
        )
    return plan_for(where, workloads=[WEB])


@pytest.fixture
def kube(plan: DrillPlan) -> Iterator[KubeTarget]:
    target = KubeTarget.for_site("dr", plan.sites.dr, plan)
    yield target
    target.close()


def test_reads_return_plain_dicts(kube: KubeTarget, server: KubeApiServer) -> None:
    assert kube.target == f"kubernetes dr ({server.url})"
    assert kube.version() == (1, 31, "v1.31.4")
    assert kube.nodes() == []
    web = kube.workload("apps", "Deployment", "web")
    assert web is not None and web["spec"]["template"]["spec"]["containers"][0]["name"] == "web"
    db = kube.workload("apps", "StatefulSet", "db")
    assert db is not None and db["kind"] == "StatefulSet"
    assert kube.workload("apps", "Deployment", "absent") is None
    creds = kube.secret("apps", "creds")
    assert creds is not None and creds["data"] == {"k": "dg=="}
    assert kube.secret("apps", "absent") is None
    found = kube.ingress("serving", "public")
    assert found is not None and found["spec"]["ingressClassName"] == "nginx"
    assert kube.pods("apps", "app=web") == []
    with pytest.raises(ValueError, match="unsupported workload kind"):
        kube.workload("apps", "DaemonSet", "x")


def test_scale_and_wait_ready_by_watch(kube: KubeTarget) -> None:
    kube.scale("apps", "Deployment", "web", 2)
    final = kube.wait_ready("apps", "Deployment", "web", 2, deadline_s=5)
    assert final["status"]["readyReplicas"] == 2
    assert len(kube.pods("apps", "app=web")) == 2
    kube.scale("apps", "StatefulSet", "db", 1)
    assert kube.wait_ready("apps", "StatefulSet", "db", 1, deadline_s=5)["spec"]["replicas"] == 1
    kube.scale("apps", "Deployment", "web", 0)
    gone = kube.wait_ready("apps", "Deployment", "web", 0, deadline_s=5)
    assert int(gone["status"].get("replicas") or 0) == 0


def test_wait_ready_sees_a_change_made_while_it_watches(kube: KubeTarget) -> None:
    kube.scale("apps", "Deployment", "web", 0)
    kube.wait_ready("apps", "Deployment", "web", 0, deadline_s=5)
    later = threading.Timer(0.3, kube.scale, ("apps", "Deployment", "web", 1))
    later.start()
    started = time.monotonic()
    final = kube.wait_ready("apps", "Deployment", "web", 1, deadline_s=5)
    later.join()
    assert final["status"]["readyReplicas"] == 1
    assert time.monotonic() - started < 2


def test_wait_ready_gives_up_at_the_deadline_with_counts(
    kube: KubeTarget, server: KubeApiServer
) -> None:
    stuck = LabWorkload("apps", "stuck", "Deployment", "critical", "platform/stuck:1", 1, 1)
    server.store.create(
        "deployments", workload(stuck, "reg.example", 2, {NEVER_READY_ANNOTATION: "true"})
    )
    started = time.monotonic()
    with pytest.raises(NotReadyInTime) as caught:
        kube.wait_ready("apps", "Deployment", "stuck", 2, deadline_s=0.6)
    elapsed = time.monotonic() - started
    assert 0.5 < elapsed < 1.5
    assert (caught.value.ready, caught.value.desired) == (0, 2)
    assert caught.value.observed is not None
    assert not isinstance(caught.value, TemporaryError)
    assert "0/2 replicas ready" in str(caught.value)


def test_patch_ingress_class_sets_and_removes(kube: KubeTarget) -> None:
    kube.patch_ingress_class("serving", "public", None)
    found = kube.ingress("serving", "public")
    assert found is not None and "ingressClassName" not in found["spec"]
    kube.patch_ingress_class("serving", "public", "nginx")
    found = kube.ingress("serving", "public")
    assert found is not None and found["spec"]["ingressClassName"] == "nginx"


def test_api_errors_are_translated_with_the_status_message(kube: KubeTarget) -> None:
    with pytest.raises(PermanentError, match=r"HTTP 404: deployments.apps \"absent\" not found"):
        kube.scale("apps", "Deployment", "absent", 1)
    with pytest.raises(PermanentError, match=r"HTTP 422: .*greater than or equal to 0"):
        kube.scale("apps", "Deployment", "web", -1)


def test_a_wrong_token_is_a_permanent_error(server: KubeApiServer, tmp_path: Path) -> None:
    write_kubeconfig(
        tmp_path / "dr.kubeconfig",
        server_url=server.url,
        context="dr",
        token="wrong",
        ca_pem=server.ca_pem,
    )
    write_kubeconfig(
        tmp_path / "primary.kubeconfig", server_url=server.url, context="primary", token="x"
    )
    plan = plan_for(tmp_path, workloads=[WEB])
    kube = KubeTarget.for_site("dr", plan.sites.dr, plan)
    with pytest.raises(PermanentError, match="HTTP 401") as caught:
        kube.nodes()
    assert caught.value.target == f"kubernetes dr ({server.url})"
    assert "wrong" not in str(caught.value)


def test_an_untrusted_certificate_is_a_permanent_tls_error(
    server: KubeApiServer, tmp_path: Path
) -> None:
    for role in ("primary", "dr"):  # no CA: the server's own certificate is not trusted
        write_kubeconfig(
            tmp_path / f"{role}.kubeconfig", server_url=server.url, context=role, token=TOKEN
        )
    plan = plan_for(tmp_path, workloads=[WEB])
    with pytest.raises(PermanentError, match=r"TLS failure: .*CERTIFICATE_VERIFY_FAILED"):
        KubeTarget.for_site("dr", plan.sites.dr, plan).version()


def test_a_missing_kubeconfig_is_a_permanent_error(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, workloads=[WEB])
    with pytest.raises(PermanentError, match="cannot load the Kubernetes configuration"):
        KubeTarget.for_site("dr", plan.sites.dr, plan)


def _pointed_at(tmp_path: Path, host_port: str, **timeouts: float) -> KubeTarget:
    for role in ("primary", "dr"):
        write_kubeconfig(
            tmp_path / f"{role}.kubeconfig",
            server_url=f"http://{host_port}",
            context=role,
            token=TOKEN,
        )
    plan = plan_for(tmp_path, workloads=[WEB])
    return KubeTarget.for_site("dr", plan.sites.dr, plan, **timeouts)


def test_unreachable_api_fails_fast(tmp_path: Path, closed_port: str) -> None:
    kube = _pointed_at(tmp_path, closed_port)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="connection refused") as caught:
        kube.version()
    assert time.monotonic() - started < 1
    assert caught.value.target == f"kubernetes dr (http://{closed_port})"


def test_hung_api_times_out_once_without_retries(tmp_path: Path, blackhole: str) -> None:
    kube = _pointed_at(tmp_path, blackhole, connect_timeout=0.5, read_timeout=0.5)
    for call in (kube.version, kube.nodes, lambda: kube.secret("a", "b")):
        started = time.monotonic()
        with pytest.raises(TemporaryError, match="timed out"):
            call()
        # One attempt: the client's default three urllib3 retries would take 2 s.
        assert time.monotonic() - started < 1.2


def test_translate_status_classes() -> None:
    def error(status: int, body: str = "") -> TargetError:
        return translate("k", ApiException(status=status, reason="R", body=body))

    assert isinstance(error(503), TemporaryError)
    assert isinstance(error(429), TemporaryError)
    for status in (401, 403, 409, 422):
        assert type(error(status)) is PermanentError
    # A 404 naming its object may mean "absent"; any other 404 is not the API's answer.
    named = '{"kind":"Status","reason":"NotFound","details":{"name":"web"},"message":"m"}'
    assert type(error(404, named)) is PermanentError
    assert type(error(404)) is MisroutedError
    assert type(error(404, '{"kind":"Status","reason":"NotFound","details":{}}')) is MisroutedError
    assert str(error(409, '{"kind":"Status","message":"the object was modified"}')) == (
        "k: HTTP 409: the object was modified"
    )


def test_quantities() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("8Gi") == 8 * 1024**3
    assert parse_quantity("1e3") == parse_quantity("1k") == 1000
    assert parse_quantity("1E") == 10**18  # exa, not an exponent
    assert parse_quantity("2") == 2
    assert canonical("1") == canonical("1000m") == "1"
    for bad in ("1K", "abc", "", "1Gb", "1e"):
        with pytest.raises(ValueError):
            parse_quantity(bad)


# -- a 404 is "none here" only when the API server itself says so ----------------------
KUEUE_LIKE = "/apis/nothere.example.com/v1"


def test_an_api_that_is_not_installed_reads_as_none_here(kube: KubeTarget) -> None:
    # /apis answers as discovery does, without the group: nothing of it here.
    assert kube.list_items(f"{KUEUE_LIKE}/widgets") == []
    assert kube.read(f"{KUEUE_LIKE}/namespaces/{{namespace}}/widgets/{{name}}",
                     {"namespace": "apps", "name": "w"}) is None  # fmt: skip
    quotas = "/api/v1/namespaces/{namespace}/resourcequotas"
    assert kube.list_items(quotas, {"namespace": "apps"}) == []  # served, and none there


def test_a_built_in_type_the_server_does_not_serve_is_an_error(kube: KubeTarget) -> None:
    # The lab serves no PodDisruptionBudgets: every cluster does, so the 404 is no answer.
    path = "/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    with pytest.raises(MisroutedError, match="not the Kubernetes API asked"):
        kube.list_items(path, {"namespace": "apps"})
    with pytest.raises(MisroutedError, match="not the Kubernetes API asked"):
        kube.read(path + "/{name}", {"namespace": "apps", "name": "p"})


@pytest.mark.parametrize("names_object", [False, True])
def test_a_server_answering_404_to_every_path_is_never_none_here(
    tmp_path: Path, names_object: bool
) -> None:
    with NotFoundServer(names_object=names_object) as server:
        kube = _pointed_at(tmp_path, server.address)
        reads: list[Callable[[], object]] = [
            kube.version,
            kube.nodes,
            lambda: kube.secret("apps", "creds"),
            lambda: kube.namespace("kube-system"),
            lambda: kube.workload("apps", "Deployment", "web"),
            lambda: priority_classes(kube),
            lambda: cluster_queues(kube),
            lambda: local_queue(kube, "apps", "q"),
        ]
        for read in reads:
            with pytest.raises(MisroutedError, match="not the Kubernetes API asked"):
                read()
        kube.close()
