"""The CRDs the lab serves (external-dns's DNSEndpoint, External Secrets Operator's
ExternalSecret, SecretStore and ClusterSecretStore), through kubectl and the official client."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from drills_lab.externaldns import dns_endpoint
from drills_lab.kubeapi import KubeApiServer
from tests.lab.conftest import Kubectl

CRDS = (
    ("externaldns.k8s.io", "v1alpha1", "dnsendpoints", "DNSEndpoint", True),
    ("external-secrets.io", "v1beta1", "externalsecrets", "ExternalSecret", True),
    ("external-secrets.io", "v1beta1", "secretstores", "SecretStore", True),
    ("external-secrets.io", "v1beta1", "clustersecretstores", "ClusterSecretStore", False),
)


def _body(kind: str, api_version: str, name: str, namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    spec: dict[str, Any] = {}
    if kind == "ExternalSecret":
        spec = {"secretStoreRef": {"name": "store", "kind": "SecretStore"},
                "refreshInterval": "1h", "target": {"name": name}}  # fmt: skip
    elif kind == "DNSEndpoint":
        spec = dns_endpoint(namespace or "", name, "x.drills.test.", "A", "127.0.0.9", 30)["spec"]
    elif kind.endswith("SecretStore"):
        spec = {"provider": {"aws": {"service": "SecretsManager", "region": "us-east-1"}}}
    return {"apiVersion": api_version, "kind": kind, "metadata": meta, "spec": spec}


@pytest.mark.parametrize(("group", "version", "plural", "kind", "namespaced"), CRDS)
def test_the_official_client_creates_gets_and_lists_the_crds(
    kube_api: client.ApiClient,
    kube_namespace: str,
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool,
) -> None:
    api = client.CustomObjectsApi(kube_api)
    body = _body(kind, f"{group}/{version}", "one", kube_namespace if namespaced else None)
    if namespaced:
        api.create_namespaced_custom_object(group, version, kube_namespace, plural, body)
        got = api.get_namespaced_custom_object(group, version, kube_namespace, plural, "one")
        listed = api.list_namespaced_custom_object(group, version, kube_namespace, plural)
    else:
        api.create_cluster_custom_object(group, version, plural, body)
        got = api.get_cluster_custom_object(group, version, plural, "one")
        listed = api.list_cluster_custom_object(group, version, plural)
        api.delete_cluster_custom_object(group, version, plural, "one")
    assert got["kind"] == kind and got["spec"] == body["spec"]
    assert [i["metadata"]["name"] for i in listed["items"]] == ["one"]


def test_an_invalid_dns_endpoint_or_external_secret_is_refused(
    kube_api: client.ApiClient, kube_namespace: str
) -> None:
    api = client.CustomObjectsApi(kube_api)
    bad_endpoint = _body("DNSEndpoint", "externaldns.k8s.io/v1alpha1", "bad", kube_namespace)
    bad_endpoint["spec"]["endpoints"][0]["recordTTL"] = "soon"
    with pytest.raises(ApiException) as caught:
        api.create_namespaced_custom_object(
            "externaldns.k8s.io", "v1alpha1", kube_namespace, "dnsendpoints", bad_endpoint
        )
    assert caught.value.status == 422 and "recordTTL" in str(caught.value.body)
    bad_secret = _body("ExternalSecret", "external-secrets.io/v1beta1", "bad", kube_namespace)
    del bad_secret["spec"]["secretStoreRef"]
    with pytest.raises(ApiException) as caught:
        api.create_namespaced_custom_object(
            "external-secrets.io", "v1beta1", kube_namespace, "externalsecrets", bad_secret
        )
    assert caught.value.status == 422 and "secretStoreRef" in str(caught.value.body)


def test_kubectl_gets_and_lists_the_crds(
    kubectl_for: Callable[..., Kubectl],
    kubectl_server: KubeApiServer,
    kubectl_namespace: str,
    tmp_path: Path,
) -> None:
    kubectl = kubectl_for(kubectl_server, tmp_path / "home")
    ns = kubectl_namespace
    for _, version_of, plural, kind, namespaced in CRDS:
        group = {"DNSEndpoint": "externaldns.k8s.io"}.get(kind, "external-secrets.io")
        body = _body(kind, f"{group}/{version_of}", "k", ns if namespaced else None)
        created = kubectl("create", "--validate=false", "-f", "-", stdin=json.dumps(body))
        assert created.returncode == 0, created.stderr
        where = ["-n", ns] if namespaced else []
        got = kubectl("get", plural, "k", *where, "-o", "json")
        assert got.returncode == 0, got.stderr
        assert json.loads(got.stdout)["kind"] == kind
        listed = kubectl("get", f"{plural}.{group}", *where, "-o", "name")
        assert listed.returncode == 0, listed.stderr
        assert f"{plural.removesuffix('s')}.{group}/k" in listed.stdout.lower()
        if not namespaced:
            assert kubectl("delete", plural, "k").returncode == 0
    # kubectl resolves the short names discovery serves.
    short = kubectl("get", "es", "-n", ns, "-o", "name")
    assert short.returncode == 0 and "externalsecret.external-secrets.io/k" in short.stdout
