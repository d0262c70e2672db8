"""The RBAC evaluator the role test relies on decides as Kubernetes does, and the lab's
audit log records requests as the real authorizer sees them."""

from __future__ import annotations

from kubernetes import client as k8s

from drills_lab.kubeapi import KubeApiServer
from drills_lab.kubeapi.audit import AuditEvent, AuditLog
from tests.support.rbac import Rule, allowed


def _scale(name: str = "web") -> AuditEvent:
    return AuditEvent("patch", "apps", "deployments", "scale", "serving", name)


def test_rules_match_groups_resources_subresources_verbs_and_names() -> None:
    deployments = Rule(("apps",), ("deployments",), ("get", "patch"))
    assert deployments.allows(AuditEvent("get", "apps", "deployments", "", "serving", "web"))
    assert not deployments.allows(_scale())  # the scale subresource is its own resource
    assert Rule(("apps",), ("deployments/scale",), ("patch",)).allows(_scale())
    assert Rule(("apps",), ("*/scale",), ("patch",)).allows(_scale())
    assert not Rule(("apps",), ("deployments/*",), ("patch",)).allows(_scale())  # no wildcard
    assert Rule(("*",), ("*",), ("*",)).allows(_scale())
    assert not Rule(("",), ("deployments/scale",), ("patch",)).allows(_scale())  # wrong group
    named = Rule(("apps",), ("deployments/scale",), ("patch",), ("web",))
    assert named.allows(_scale("web")) and not named.allows(_scale("api"))
    listing = AuditEvent("list", "", "nodes")
    assert not Rule(("",), ("nodes",), ("list",), ("gpu-1",)).allows(listing)
    assert allowed([], AuditEvent("get", path="/version"))
    assert not allowed([], AuditEvent("get", path="/metrics"))


def test_the_lab_audit_log_records_verbs_as_the_authorizer_sees_them() -> None:
    with KubeApiServer(audit=AuditLog()) as server:
        server.store.create("namespaces", {"metadata": {"name": "serving"}})
        config = k8s.Configuration(host=server.url)
        with k8s.ApiClient(config) as api:
            core = k8s.CoreV1Api(api)
            core.list_node()
            core.read_namespace("kube-system")
            core.list_namespaced_pod("serving", field_selector="metadata.name=web-0")
            stream = core.list_namespaced_pod(
                "serving", watch=True, timeout_seconds=1, _preload_content=False
            )
            stream.read()  # the watch ends after its timeout
            stream.release_conn()
            body = {"metadata": {"name": "web"}, "data": {}}
            core.create_namespaced_config_map("serving", body, dry_run="All")
        assert server.audit is not None
        seen = [
            (e.verb, e.group, e.resource, e.namespace, e.name)
            for e in server.audit.events()
            if e.is_resource
        ]
    assert seen == [
        ("list", "", "nodes", "", ""),
        ("get", "", "namespaces", "kube-system", "kube-system"),
        ("list", "", "pods", "serving", "web-0"),
        ("watch", "", "pods", "serving", ""),
        ("create", "", "configmaps", "serving", ""),
    ]
