"""The services the tests start, and the rule for a missing system binary."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from drills.plan import Rfc2136Dns
from drills.targets.dns import Rfc2136Target
from drills_lab import control
from drills_lab.named import LabDnsRecord, NamedServer
from drills_lab.procs import find_binary
from drills_lab.runtime import LabInfo
from tests.support.cli import spawn_lab_daemon

LAB_ZONE = "drills.test."
API_RECORD = LabDnsRecord(name="api", type="A", ttl=30, value="127.0.0.2")

FAKE_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SECURITY_TOKEN": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}

# Beside the rest of the suite on two cores a lab takes longer to start than the 30 s a
# person is given: a slow start is not what the tests are about.
LAB_START_S = 90.0


def require_system_binary(name: str, package: str) -> str:
    """Return the path of ``name``; skip the test without it, or fail under CI=true."""
    path = find_binary(name)
    if path is None:
        message = f"{name} not installed; apt-get install {package} (or run scripts/sysdeps.sh)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@contextmanager
def own_lab(
    tmp_path_factory: pytest.TempPathFactory, name: str, **options: Any
) -> Iterator[LabInfo]:
    """A whole lab (both sites, moto, BIND, two registries) as `drills lab up` runs it.

    It is a separate process: moto keeps one backend per process, so two labs, or a
    lab and the bare moto fixture, must not share one. Stopped however the test ends.
    """
    if options.get("system_services", True):
        # Under CI the lab must run on the real BIND and registries, never on the fallbacks.
        require_system_binary("named", "bind9")
        require_system_binary("docker-registry", "docker-registry")
        require_system_binary("prometheus", "prometheus")
    # The lab plan's SLO hold and load probe add seconds to every drill: only the tests
    # about them ask for them.
    options.setdefault("slo", False)
    options.setdefault("timeout", LAB_START_S)
    state_dir = tmp_path_factory.mktemp(name)
    info, _ = control.up(state_dir, spawn=spawn_lab_daemon, **options)
    try:
        yield info
    finally:
        control.down(state_dir)


def bind_target(
    named: NamedServer, servers: list[str], *, secret: str | None = None, timeout_s: float = 1.0
) -> Rfc2136Target:
    """drills' RFC 2136 target for ``named``'s zone, asking ``servers`` (the server itself, or
    proxies in front of it), signed with ``secret`` (the server's own key by default)."""
    config = Rfc2136Dns.model_validate(
        {
            "provider": "rfc2136",
            "servers": servers,
            "zone": named.zone,
            "tsig": {"name": named.tsig_name, "algorithm": "hmac-sha256", "secret": "env:UNUSED"},
            "record": {"name": f"api.{named.zone}", "type": "A"},
            "primary_value": "127.0.0.2",
            "dr_value": "127.0.0.3",
        }
    )
    return Rfc2136Target(
        config, named.tsig_secret if secret is None else secret, timeout_s=timeout_s
    )
