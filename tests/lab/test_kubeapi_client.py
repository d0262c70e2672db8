"""The lab Kubernetes API server through the official Python client."""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import urllib3
from kubernetes import client

from drills_lab.kubeapi import KubeApiServer

Body = Callable[..., dict[str, Any]]


def _status(exc: client.ApiException) -> dict[str, Any]:
    body = json.loads(exc.body)
    assert body["kind"] == "Status" and body["code"] == exc.status
    return body


def test_version_and_discovery_come_from_one_catalogue(kube_api: client.ApiClient) -> None:
    version = client.VersionApi(kube_api).get_code()
    assert (version.major, version.minor, version.git_version) == ("1", "30", "v1.30.4")

    groups = {
        g.name: g.preferred_version.group_version
        for g in client.ApisApi(kube_api).get_api_versions().groups
    }
    assert groups == {
        "apps": "apps/v1",
        "batch": "batch/v1",
        "networking.k8s.io": "networking.k8s.io/v1",
        "scheduling.k8s.io": "scheduling.k8s.io/v1",
        "kueue.x-k8s.io": "kueue.x-k8s.io/v1beta1",
        "externaldns.k8s.io": "externaldns.k8s.io/v1alpha1",
        "external-secrets.io": "external-secrets.io/v1beta1",
    }
    assert client.CoreApi(kube_api).get_api_versions().versions == ["v1"]

    core = {r.name: r for r in client.CoreV1Api(kube_api).get_api_resources().resources}
    assert core["pods"].short_names == ["po"] and core["pods"].namespaced
    assert core["nodes"].short_names == ["no"] and not core["nodes"].namespaced
    assert {"namespaces", "secrets", "services", "configmaps"} <= set(core)
    apps = {r.name: r for r in client.AppsV1Api(kube_api).get_api_resources().resources}
    assert apps["deployments"].short_names == ["deploy"]
    assert (apps["deployments/scale"].group, apps["deployments/scale"].kind) == (
        "autoscaling",
        "Scale",
    )
    assert {"statefulsets/scale", "statefulsets/status", "deployments/status"} <= set(apps)
    net = client.NetworkingV1Api(kube_api).get_api_resources().resources
    assert [(r.name, r.short_names) for r in net if "/" not in r.name] == [("ingresses", ["ing"])]


def _bodies(suffix: str, deployment: Body) -> dict[str, dict[str, Any]]:
    container = {"name": "app", "image": "registry.lab/app:1"}
    return {
        "config_map": {"metadata": {"name": f"cm-{suffix}"}, "data": {"k": "v"}},
        "secret": {"metadata": {"name": f"s-{suffix}"}, "stringData": {"token": "hunter2"}},
        "service": {"metadata": {"name": f"svc-{suffix}"}, "spec": {"ports": [{"port": 80}]}},
        "pod": {"metadata": {"name": f"pod-{suffix}"}, "spec": {"containers": [container]}},
        "deployment": deployment(f"dep-{suffix}", 0),
        "stateful_set": deployment(f"sts-{suffix}", 0, kind="StatefulSet"),
        "ingress": {"metadata": {"name": f"ing-{suffix}"}, "spec": {"ingressClassName": "nginx"}},
        "node": {"metadata": {"name": f"node-{suffix}"}},
        "namespace": {"metadata": {"name": f"ns-{suffix}"}},
    }


CRUD_CASES = [
    (client.CoreV1Api, "config_map", True),
    (client.CoreV1Api, "secret", True),
    (client.CoreV1Api, "service", True),
    (client.CoreV1Api, "pod", True),
    (client.AppsV1Api, "deployment", True),
    (client.AppsV1Api, "stateful_set", True),
    (client.NetworkingV1Api, "ingress", True),
    (client.CoreV1Api, "node", False),
    (client.CoreV1Api, "namespace", False),
]


@pytest.mark.parametrize(
    ("api_class", "kind", "namespaced"), CRUD_CASES, ids=[c[1] for c in CRUD_CASES]
)
def test_crud(
    kube_api: client.ApiClient,
    kube_namespace: str,
    api_class: Any,
    kind: str,
    namespaced: bool,
    deployment: Body,
) -> None:
    api = api_class(kube_api)
    body = _bodies(uuid.uuid4().hex[:6], deployment)[kind]
    name = body["metadata"]["name"]
    scope = "namespaced_" if namespaced else ""
    ns: tuple[str, ...] = (kube_namespace,) if namespaced else ()

    created = getattr(api, f"create_{scope}{kind}")(*ns, body)
    assert created.metadata.uid and created.metadata.creation_timestamp
    assert created.metadata.generation == 1 and int(created.metadata.resource_version) > 0

    fetched = getattr(api, f"read_{scope}{kind}")(name, *ns)
    assert fetched.metadata.uid == created.metadata.uid
    listed = getattr(api, f"list_{scope}{kind}")(*ns)
    assert name in [i.metadata.name for i in listed.items]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)

    # The rollout controller may write status between our read and our replace (409), as
    # on a real cluster: read-modify-write again, as every client must.
    for _ in range(5):
        raw = kube_api.sanitize_for_serialization(getattr(api, f"read_{scope}{kind}")(name, *ns))
        raw["metadata"].setdefault("labels", {})["edited"] = "yes"
        try:
            replaced = getattr(api, f"replace_{scope}{kind}")(name, *ns, raw)
            break
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    else:
        pytest.fail("replace kept conflicting")
    assert replaced.metadata.labels["edited"] == "yes"
    assert int(replaced.metadata.resource_version) > int(created.metadata.resource_version)

    getattr(api, f"delete_{scope}{kind}")(name, *ns)
    with pytest.raises(client.ApiException) as missing:
        getattr(api, f"read_{scope}{kind}")(name, *ns)
    assert missing.value.status == 404


def test_secret_string_data_is_stored_as_base64_data(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    core = client.CoreV1Api(kube_api)
    core.create_namespaced_secret(
        kube_namespace, {"metadata": {"name": "s"}, "stringData": {"a": "b"}}
    )
    secret = core.read_namespaced_secret("s", kube_namespace)
    assert (secret.data, secret.string_data, secret.type) == ({"a": "Yg=="}, None, "Opaque")


def test_errors_are_status_objects(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    with pytest.raises(client.ApiException) as err:
        apps.read_namespaced_deployment("absent", kube_namespace)
    assert (err.value.status, _status(err.value)["reason"]) == (404, "NotFound")
    assert _status(err.value)["message"] == 'deployments.apps "absent" not found'

    apps.create_namespaced_deployment(kube_namespace, deployment("web"))
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(kube_namespace, deployment("web"))
    assert (err.value.status, _status(err.value)["reason"]) == (409, "AlreadyExists")

    stale = kube_api.sanitize_for_serialization(
        apps.read_namespaced_deployment("web", kube_namespace)
    )
    apps.patch_namespaced_deployment("web", kube_namespace, {"metadata": {"labels": {"bump": "1"}}})
    with pytest.raises(client.ApiException) as err:
        apps.replace_namespaced_deployment("web", kube_namespace, stale)
    assert (err.value.status, _status(err.value)["reason"]) == (409, "Conflict")

    invalid = [
        {"metadata": {}, "data": {}},
        {"metadata": {"name": "Not_DNS"}, "data": {}},
    ]
    for body in invalid:
        with pytest.raises(client.ApiException) as err:
            core.create_namespaced_config_map(kube_namespace, body)
        assert (err.value.status, _status(err.value)["reason"]) == (422, "Invalid")
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(kube_namespace, deployment("neg", -1))
    causes = _status(err.value)["details"]["causes"]
    assert err.value.status == 422 and causes[0]["field"] == "spec.replicas"

    with pytest.raises(client.ApiException) as err:
        core.create_namespaced_config_map("no-such-ns", {"metadata": {"name": "x"}})
    assert err.value.status == 404 and "namespaces" in _status(err.value)["message"]

    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment(
            "web", kube_namespace, {"spec": {}}, _content_type="application/apply-patch+yaml"
        )
    assert err.value.status == 415


def test_authentication(
    kube_server: KubeApiServer, kube_connect: Callable[..., client.ApiClient]
) -> None:
    for token in ("wrong-token", None):
        with kube_connect(kube_server, token) as api, pytest.raises(client.ApiException) as err:
            client.CoreV1Api(api).list_namespace()
        assert (err.value.status, _status(err.value)["reason"]) == (401, "Unauthorized")
    # Health checks answer without a token, as a load balancer's probe expects.
    for path in ("/healthz", "/livez", "/readyz"):
        with urllib.request.urlopen(f"{kube_server.url}{path}", timeout=5) as response:
            assert (response.status, response.read()) == (200, b"ok")


def test_scale_subresource(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps = client.AppsV1Api(kube_api)
    apps.create_namespaced_deployment(kube_namespace, deployment("web", 1))
    scale = apps.read_namespaced_deployment_scale("web", kube_namespace)
    assert (scale.kind, scale.api_version, scale.spec.replicas) == ("Scale", "autoscaling/v1", 1)
    assert scale.status.selector == "app=web"

    patched = apps.patch_namespaced_deployment_scale(
        "web", kube_namespace, {"spec": {"replicas": 3}}
    )
    assert patched.spec.replicas == 3
    assert apps.read_namespaced_deployment("web", kube_namespace).spec.replicas == 3

    stale = kube_api.sanitize_for_serialization(scale)
    stale["spec"]["replicas"] = 5
    with pytest.raises(client.ApiException) as err:
        apps.replace_namespaced_deployment_scale("web", kube_namespace, stale)
    assert err.value.status == 409
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment_scale("web", kube_namespace, {"spec": {"replicas": -1}})
    assert err.value.status == 422
    assert apps.read_namespaced_deployment("web", kube_namespace).spec.replicas == 3


def test_patch_types(kube_api: client.ApiClient, kube_namespace: str, deployment: Body) -> None:
    apps = client.AppsV1Api(kube_api)
    body = deployment("web")
    body["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "proxy:1"})
    apps.create_namespaced_deployment(kube_namespace, body)

    # Strategic merge (the client's default for an object body): containers merge by name.
    image = {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "app:2"}]}}}}
    result = apps.patch_namespaced_deployment("web", kube_namespace, image)
    assert [(c.name, c.image) for c in result.spec.template.spec.containers] == [
        ("app", "app:2"),
        ("sidecar", "proxy:1"),
    ]
    assert result.metadata.generation == 2

    # Merge patch: a list is replaced whole.
    result = apps.patch_namespaced_deployment(
        "web", kube_namespace, image, _content_type="application/merge-patch+json"
    )
    assert [c.name for c in result.spec.template.spec.containers] == ["app"]

    # JSON patch: a list body selects it; a failed test operation changes nothing.
    result = apps.patch_namespaced_deployment(
        "web", kube_namespace, [{"op": "replace", "path": "/spec/replicas", "value": 4}]
    )
    assert result.spec.replicas == 4
    with pytest.raises(client.ApiException) as err:
        apps.patch_namespaced_deployment(
            "web",
            kube_namespace,
            [
                {"op": "replace", "path": "/spec/replicas", "value": 9},
                {"op": "test", "path": "/spec/replicas", "value": 1},
            ],
        )
    assert err.value.status == 422
    assert apps.read_namespaced_deployment("web", kube_namespace).spec.replicas == 4


def test_dry_run_stores_nothing(
    kube_server: KubeApiServer, kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps = client.AppsV1Api(kube_api)
    preview = apps.create_namespaced_deployment(kube_namespace, deployment("web"), dry_run="All")
    assert preview.metadata.name == "web"
    assert kube_server.store.get("deployments", kube_namespace, "web") is None

    apps.create_namespaced_deployment(kube_namespace, deployment("web", 1), field_manager="drills")
    generation = kube_server.store.get("deployments", kube_namespace, "web")["metadata"][
        "generation"
    ]  # type: ignore[index]
    patched = apps.patch_namespaced_deployment_scale(
        "web", kube_namespace, {"spec": {"replicas": 7}}, dry_run="All"
    )
    assert patched.spec.replicas == 7
    apps.delete_namespaced_deployment("web", kube_namespace, dry_run="All")
    stored = kube_server.store.get("deployments", kube_namespace, "web")
    assert stored is not None and stored["spec"]["replicas"] == 1
    with pytest.raises(client.ApiException) as err:
        apps.create_namespaced_deployment(kube_namespace, deployment("neg", -1), dry_run="All")
    assert err.value.status == 422
    # The controller may still write status (and bump resourceVersion); the spec must not move.
    stored = kube_server.store.get("deployments", kube_namespace, "web")
    assert stored is not None and stored["metadata"]["generation"] == generation
    assert kube_server.store.get("deployments", kube_namespace, "neg") is None


def test_label_selectors(kube_api: client.ApiClient, kube_namespace: str) -> None:
    core = client.CoreV1Api(kube_api)
    labels = {
        "a": {"tier": "critical", "gpu": "yes"},
        "b": {"tier": "normal"},
        "c": {"tier": "batch", "gpu": "no"},
        "d": {},
    }
    for name, values in labels.items():
        core.create_namespaced_config_map(
            kube_namespace, {"metadata": {"name": name, "labels": values}}
        )

    def names(selector: str) -> list[str]:
        return [
            i.metadata.name
            for i in core.list_namespaced_config_map(kube_namespace, label_selector=selector).items
        ]

    assert names("tier=critical") == ["a"]
    assert names("tier==normal") == ["b"]
    assert names("tier!=critical") == ["b", "c", "d"]
    assert names("tier in (critical, batch)") == ["a", "c"]
    assert names("tier notin (critical,batch)") == ["b", "d"]
    assert names("gpu") == ["a", "c"]
    assert names("!gpu") == ["b", "d"]
    assert names("gpu,tier!=batch") == ["a"]
    with pytest.raises(client.ApiException) as err:
        names("tier in critical")
    assert err.value.status == 400


def test_field_selectors_and_all_namespaces(
    kube_api: client.ApiClient, kube_namespace: str, deployment: Body
) -> None:
    apps, core = client.AppsV1Api(kube_api), client.CoreV1Api(kube_api)
    other = f"{kube_namespace}-b"
    core.create_namespace({"metadata": {"name": other}})
    try:
        for ns in (kube_namespace, other):
            apps.create_namespaced_deployment(ns, deployment("web", 0))
            apps.create_namespaced_deployment(ns, deployment("api", 0))
        everywhere = apps.list_deployment_for_all_namespaces(label_selector="app in (web,api)")
        found = {(d.metadata.namespace, d.metadata.name) for d in everywhere.items}
        assert {
            (kube_namespace, "web"),
            (other, "web"),
            (kube_namespace, "api"),
            (other, "api"),
        } <= found
        assert everywhere.kind == "DeploymentList"
        picked = apps.list_deployment_for_all_namespaces(
            field_selector=f"metadata.name=web,metadata.namespace={other}"
        )
        assert [(d.metadata.namespace, d.metadata.name) for d in picked.items] == [(other, "web")]
        assert [
            d.metadata.name
            for d in apps.list_namespaced_deployment(
                other, field_selector="metadata.name!=web"
            ).items
        ] == ["api"]
        with pytest.raises(client.ApiException) as err:
            apps.list_namespaced_deployment(other, field_selector="spec.paused=true")
        assert err.value.status == 400
    finally:
        core.delete_namespace(other)
    assert apps.list_namespaced_deployment(other).items == []


def test_stop_refuses_clients_and_restart_keeps_objects(
    kube_connect: Callable[..., client.ApiClient], deployment: Body
) -> None:
    server = KubeApiServer(token="t", ready_delay=0.05, name="restart")
    server.start()
    server.store.create("deployments", deployment("web", 1), namespace="default")
    with kube_connect(server, "t") as api:
        apps = client.AppsV1Api(api)
        apps.read_namespaced_deployment("web", "default")  # opens a keep-alive connection
        url = server.url
        started = time.monotonic()
        server.stop()
        server.stop()  # idempotent
        assert time.monotonic() - started < 0.5
        with pytest.raises(urllib3.exceptions.HTTPError):
            apps.read_namespaced_deployment("web", "default", _request_timeout=2)

        server.start()
        try:
            assert server.url == url
            restarted = apps.read_namespaced_deployment("web", "default", _request_timeout=2)
            assert restarted.spec.replicas == 1
            apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 2}})
            deadline = time.monotonic() + 3
            while apps.read_namespaced_deployment("web", "default").status.ready_replicas != 2:
                assert time.monotonic() < deadline, "the controller did not restart"
                time.sleep(0.01)
        finally:
            server.stop()


def test_seeded_node_with_partial_node_info_reads_through_the_client(
    kube_server: KubeApiServer, kube_api: client.ApiClient
) -> None:
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    info = {"kubeletVersion": "v1.30.4", "osImage": "Ubuntu 22.04.4 LTS"}
    kube_server.store.create("nodes", {"metadata": {"name": name}, "status": {"nodeInfo": info}})
    try:
        node = client.CoreV1Api(kube_api).read_node(name)
        assert node.status.node_info.kubelet_version == "v1.30.4"
        assert (node.status.node_info.kernel_version, node.status.node_info.architecture) == (
            "",
            "amd64",
        )
    finally:
        kube_server.store.delete("nodes", None, name)
