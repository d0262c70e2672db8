"""A kubeconfig file for a lab server, readable by kubectl and the official client."""

from __future__ import annotations

import base64
import os
import pathlib
from typing import Any

import yaml


def write_kubeconfig(
    path: pathlib.Path,
    *,
    server_url: str,
    context: str,
    token: str | None,
    ca_pem: bytes | None = None,
) -> None:
    """Write a one-context kubeconfig; the file is mode 0600 because it holds the token.

    ``ca_pem`` is the certificate to trust for an https server (``KubeApiServer.ca_pem``).
    """
    user: dict[str, Any] = {"token": token} if token else {}
    cluster: dict[str, Any] = {"server": server_url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": user}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    # An existing file keeps its mode on open; narrow it before the token goes in.
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        yaml.safe_dump(config, f, sort_keys=False)
