"""Fixtures for the lab's Kubernetes API server: the server, clients, kubectl."""

from __future__ import annotations

import functools
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from drills_lab.kubeapi import KubeApiServer, write_kubeconfig
from tests.support.services import require_system_binary

KUBE_TOKEN = "lab-test-token"
KUBE_READY_DELAY = 0.2


def kube_client(server: KubeApiServer, token: str | None = KUBE_TOKEN) -> client.ApiClient:
    """An official-client ApiClient for ``server``, authenticating with ``token``."""
    config = client.Configuration()
    config.host = server.url
    if token is not None:
        config.api_key = {"BearerToken": token}
        config.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(config)


@pytest.fixture(scope="session")
def kube_server() -> Iterator[KubeApiServer]:
    """A plain-HTTP server requiring KUBE_TOKEN, with pods ready after KUBE_READY_DELAY s."""
    server = KubeApiServer(token=KUBE_TOKEN, ready_delay=KUBE_READY_DELAY, name="test")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def kube_api(kube_server: KubeApiServer) -> Iterator[client.ApiClient]:
    api = kube_client(kube_server)
    yield api
    api.close()


def fresh_namespace(server: KubeApiServer) -> Iterator[str]:
    """A new namespace, removed (with its contents) afterwards."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    server.store.create("namespaces", {"metadata": {"name": name}})
    yield name
    if server.store.get("namespaces", None, name) is not None:
        server.store.delete("namespaces", None, name)


@pytest.fixture
def kube_namespace(kube_server: KubeApiServer) -> Iterator[str]:
    """A fresh namespace per test, so tests sharing the session server never collide."""
    yield from fresh_namespace(kube_server)


def deployment_body(
    name: str,
    replicas: int = 1,
    *,
    annotations: dict[str, str] | None = None,
    image: str = "registry.lab/app:1",
    kind: str = "Deployment",
) -> dict[str, Any]:
    """A minimal valid Deployment (or StatefulSet) body."""
    meta: dict[str, Any] = {"name": name, "labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    spec: dict[str, Any] = {
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": image}]},
        },
    }
    if kind == "StatefulSet":
        spec["serviceName"] = name
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": meta, "spec": spec}


@pytest.fixture(scope="session")
def kube_ready_delay() -> float:
    """How long the test servers take to turn a new pod ready."""
    return KUBE_READY_DELAY


@pytest.fixture(scope="session")
def kube_connect() -> Callable[..., client.ApiClient]:
    """``kube_client`` as a fixture: test modules cannot import conftest helpers."""
    return kube_client


@pytest.fixture(scope="session")
def deployment() -> Callable[..., dict[str, Any]]:
    """``deployment_body`` as a fixture: builds a Deployment or StatefulSet body."""
    return deployment_body


# -- kubectl -------------------------------------------------------------


@pytest.fixture(scope="session")
def kubectl_bin() -> str:
    return require_system_binary("kubectl", "kubernetes-client")


@pytest.fixture(scope="session")
def kubectl_server() -> Iterator[KubeApiServer]:
    """An HTTPS server requiring KUBE_TOKEN: client-go sends a token only over TLS."""
    server = KubeApiServer(token=KUBE_TOKEN, ready_delay=KUBE_READY_DELAY, name="kubectl", tls=True)
    server.start()
    yield server
    server.stop()


Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def make_kubectl(
    kubectl_bin: str, server: KubeApiServer, home: Path, token: str | None = KUBE_TOKEN
) -> Kubectl:
    """A kubectl runner with its own HOME, kubeconfig and discovery cache."""
    home.mkdir(parents=True, exist_ok=True)
    config = home / "kubeconfig"
    write_kubeconfig(
        config, server_url=server.url, context="lab", token=token, ca_pem=server.ca_pem
    )
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "KUBECONFIG": str(config)}

    def run(
        *args: str, stdin: str | None = None, timeout: float = 20
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl_bin, f"--cache-dir={home / 'cache'}", *args],
            env=env,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    return run


@pytest.fixture
def kubectl_namespace(kubectl_server: KubeApiServer) -> Iterator[str]:
    yield from fresh_namespace(kubectl_server)


@pytest.fixture(scope="session")
def kubectl_for(kubectl_bin: str) -> Callable[..., Kubectl]:
    """``make_kubectl`` bound to the kubectl binary: (server, home, token=...) -> runner."""
    return functools.partial(make_kubectl, kubectl_bin)


@pytest.fixture
def kubectl(kubectl_bin: str, kubectl_server: KubeApiServer, tmp_path: Path) -> Kubectl:
    return make_kubectl(kubectl_bin, kubectl_server, tmp_path / "home")
