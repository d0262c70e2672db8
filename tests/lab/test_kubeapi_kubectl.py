"""The lab Kubernetes API server through the real kubectl binary.

Each test runs kubectl with its own HOME and discovery cache: kubectl caches
discovery and the server version per host:port.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from drills_lab.kubeapi import NEVER_READY_ANNOTATION, KubeApiServer

Kubectl = Callable[..., subprocess.CompletedProcess[str]]
Body = Callable[..., dict[str, Any]]


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, f"kubectl {result.args[2:]} failed: {result.stderr}"
    return result.stdout


def _rows(output: str) -> list[list[str]]:
    return [line.split() for line in output.strip().splitlines()]


def _seed(
    server: KubeApiServer, namespace: str, body: dict[str, Any], resource: str = "deployments"
) -> None:
    server.store.create(resource, body, namespace=namespace)


def test_get_deployments_in_all_namespaces_prints_server_columns(
    kubectl: Kubectl, kubectl_server: KubeApiServer, kubectl_namespace: str, deployment: Body
) -> None:
    _seed(kubectl_server, kubectl_namespace, deployment("web", 2))
    _seed(kubectl_server, kubectl_namespace, deployment("idle", 0))
    rows = _rows(ok(kubectl("get", "deployments", "-A")))
    assert rows[0] == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    mine = {r[1]: r for r in rows[1:] if r[0] == kubectl_namespace}
    assert set(mine) == {"web", "idle"}
    assert mine["idle"][2:5] == ["0/0", "0", "0"]
    assert mine["web"][2] in ("0/2", "1/2", "2/2")


def test_get_nodes_and_short_names(
    kubectl: Kubectl, kubectl_server: KubeApiServer, kubectl_namespace: str, deployment: Body
) -> None:
    node = f"gpu-{uuid.uuid4().hex[:6]}"
    kubectl_server.store.create(
        "nodes",
        {
            "metadata": {"name": node, "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.30.4"},
            },
        },
    )
    try:
        rows = _rows(ok(kubectl("get", "nodes")))
        assert rows[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert [node, "Ready", "worker"] == next(r for r in rows if r[0] == node)[:3]

        _seed(kubectl_server, kubectl_namespace, deployment("web", 0))
        ingress = {
            "metadata": {"name": "edge"},
            "spec": {"ingressClassName": "nginx", "rules": [{"host": "api.lab"}]},
        }
        _seed(kubectl_server, kubectl_namespace, ingress, "ingresses")
        out = ok(kubectl("get", "deploy,ing,no", "-n", kubectl_namespace))
        assert "deployment.apps/web" in out and "ingress.networking.k8s.io/edge" in out
        assert f"node/{node}" in out and "api.lab" in out
    finally:
        kubectl_server.store.delete("nodes", None, node)


def test_scale_rollout_status_and_wait(
    kubectl: Kubectl,
    kubectl_server: KubeApiServer,
    kubectl_namespace: str,
    deployment: Body,
    kube_ready_delay: float,
) -> None:
    _seed(kubectl_server, kubectl_namespace, deployment("web", 0))
    ns = ("-n", kubectl_namespace)
    assert "deployment.apps/web scaled" in ok(
        kubectl("scale", "deployment/web", "--replicas=3", *ns)
    )
    stored = kubectl_server.store.get("deployments", kubectl_namespace, "web")
    assert stored is not None and stored["spec"]["replicas"] == 3

    started = time.monotonic()
    out = ok(kubectl("rollout", "status", "deployment/web", "--timeout=10s", *ns))
    assert 'deployment "web" successfully rolled out' in out
    assert time.monotonic() - started >= kube_ready_delay * 0.5
    status = kubectl_server.store.get("deployments", kubectl_namespace, "web")
    assert status is not None and status["status"]["readyReplicas"] == 3
    assert "condition met" in ok(
        kubectl("wait", "--for=condition=Available", "deployment/web", "--timeout=5s", *ns)
    )


def test_wait_and_rollout_fail_for_a_never_ready_deployment(
    kubectl: Kubectl, kubectl_server: KubeApiServer, kubectl_namespace: str, deployment: Body
) -> None:
    _seed(
        kubectl_server,
        kubectl_namespace,
        deployment("stuck", 1, annotations={NEVER_READY_ANNOTATION: "true"}),
    )
    ns = ("-n", kubectl_namespace)
    waited = kubectl("wait", "--for=condition=Available", "deployment/stuck", "--timeout=0.2s", *ns)
    assert waited.returncode != 0 and "timed out" in waited.stderr
    rollout = kubectl("rollout", "status", "deployment/stuck", "--timeout=0.2s", *ns)
    assert rollout.returncode != 0 and "0 of 1 updated replicas are available" in rollout.stdout


def test_patch_types(
    kubectl: Kubectl, kubectl_server: KubeApiServer, kubectl_namespace: str, deployment: Body
) -> None:
    body = deployment("web", 1)
    body["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "proxy:1"})
    _seed(kubectl_server, kubectl_namespace, body)
    ns = ("-n", kubectl_namespace)
    image = '{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"app:2"}]}}}}'
    assert "patched" in ok(kubectl("patch", "deployment", "web", "-p", image, *ns))
    merged = '{"metadata":{"labels":{"drill":"q3"}}}'
    ok(kubectl("patch", "deployment", "web", "--type=merge", "-p", merged, *ns))
    ops = '[{"op":"replace","path":"/spec/replicas","value":2}]'
    ok(kubectl("patch", "deployment", "web", "--type=json", "-p", ops, *ns))
    assert "(no change)" in ok(kubectl("patch", "deployment", "web", "--type=json", "-p", ops, *ns))

    stored = kubectl_server.store.get("deployments", kubectl_namespace, "web")
    assert stored is not None
    containers = stored["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("app", "app:2"),
        ("sidecar", "proxy:1"),
    ]
    assert stored["metadata"]["labels"]["drill"] == "q3" and stored["spec"]["replicas"] == 2
    replicas = '{"spec":{"replicas":9}}'
    ok(
        kubectl(
            "patch", "deployment", "web", "--type=merge", "-p", replicas, "--dry-run=server", *ns
        )
    )
    after = kubectl_server.store.get("deployments", kubectl_namespace, "web")
    assert after is not None and after["spec"]["replicas"] == 2


def test_create_apply_get_json_and_delete(
    kubectl: Kubectl,
    kubectl_server: KubeApiServer,
    kubectl_namespace: str,
    deployment: Body,
    tmp_path: Path,
) -> None:
    ns = ("-n", kubectl_namespace)
    manifest = tmp_path / "web.json"
    body = deployment("web", 1)
    manifest.write_text(json.dumps(body))
    # With validation on: kubectl fetches /openapi/v3 and /openapi/v2 first.
    assert "deployment.apps/web created" in ok(kubectl("create", "-f", str(manifest), *ns))
    assert "AlreadyExists" in kubectl("create", "-f", str(manifest), *ns).stderr

    body["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.lab/app:2"
    manifest.write_text(json.dumps(body))
    assert "deployment.apps/web configured" in ok(kubectl("apply", "-f", str(manifest), *ns))
    cm = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings"},"data":{"a":"1"}}'
    assert "configmap/settings created" in ok(kubectl("apply", "-f", "-", *ns, stdin=cm))

    fetched = json.loads(ok(kubectl("get", "deployment", "web", "-o", "json", *ns)))
    assert fetched["kind"] == "Deployment" and fetched["metadata"]["generation"] == 2
    assert fetched["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.lab/app:2"
    listed = json.loads(ok(kubectl("get", "deployments", "-o", "json", *ns)))
    assert [i["metadata"]["name"] for i in listed["items"]] == ["web"]

    assert 'deployment.apps "web" deleted' in ok(kubectl("delete", "deployment", "web", *ns))
    assert kubectl_server.store.get("deployments", kubectl_namespace, "web") is None
    missing = kubectl("get", "deployment", "web", *ns)
    assert missing.returncode != 0 and 'deployments.apps "web" not found' in missing.stderr


def test_plain_http_without_token_and_a_wrong_token(
    kubectl_for: Callable[..., Kubectl], kubectl_server: KubeApiServer, tmp_path: Path
) -> None:
    with KubeApiServer(ready_delay=0.1, name="open") as open_server:
        run = kubectl_for(open_server, tmp_path / "open", token=None)
        assert "kube-system" in ok(run("get", "namespaces"))
    wrong = kubectl_for(kubectl_server, tmp_path / "wrong", token="not-the-token")
    refused = wrong("get", "namespaces")
    assert refused.returncode != 0 and "You must be logged in to the server" in refused.stderr
