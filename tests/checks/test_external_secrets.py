"""secrets.synced on ExternalSecrets (External Secrets Operator), on a lab of its own whose
controllers sync them from moto's Secrets Manager at each site."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills.checks.base import CheckResult, Status
from drills.targets.external_secrets import go_duration
from drills_lab import topology
from drills_lab.externalsecrets import PAUSED
from drills_lab.runtime import LabInfo
from tests.support.checks import run_check
from tests.support.drill import lab_plan
from tests.support.services import own_lab

GROUP, VERSION, PLURAL = "external-secrets.io", "v1beta1", "externalsecrets"


@pytest.fixture(scope="module")
def eso_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    """A lab of its own: these tests break and mend its ExternalSecrets."""
    with own_lab(tmp_path_factory, "eso-lab", ready_delay=0.2) as info:
        yield info


def _api(info: LabInfo, site: str) -> k8s.ApiClient:
    return k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / f"{site}.kubeconfig"), context=site
    )


def _es(info: LabInfo, name: tuple[str, str]) -> dict[str, Any]:
    ns, es = name
    custom = k8s.CustomObjectsApi(_api(info, "dr"))
    return dict(custom.get_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, es))


def _patch(
    info: LabInfo, name: tuple[str, str], body: dict[str, Any], status: bool = False
) -> None:
    ns, es = name
    custom = k8s.CustomObjectsApi(_api(info, "dr"))
    patch = (
        custom.patch_namespaced_custom_object_status
        if status
        else custom.patch_namespaced_custom_object
    )
    patch(GROUP, VERSION, ns, PLURAL, es, body)


def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "the lab's controller did not get there in time"
        time.sleep(0.1)


def _ready(info: LabInfo, name: tuple[str, str]) -> str:
    conditions = (_es(info, name).get("status") or {}).get("conditions") or []
    return next((c["status"] for c in conditions if c["type"] == "Ready"), "absent")


def _synced(info: LabInfo) -> CheckResult:
    return run_check(lab_plan(info), "secrets.synced")


def _primary_values(info: LabInfo, ns: str, name: str) -> list[str]:
    secret = k8s.CoreV1Api(_api(info, "primary")).read_namespaced_secret(name, ns)
    return [base64.b64decode(v).decode() for v in (secret.data or {}).values()]


def test_the_lab_syncs_each_external_secret_at_both_sites(eso_lab: LabInfo) -> None:
    result = _synced(eso_lab)
    assert result.status is Status.PASS, result.summary
    rows = {r["secret"]: r for r in result.evidence["external_secrets"]}
    assert set(rows) == {f"{e.namespace}/{e.name}" for e in topology.EXTERNAL_SECRETS}
    assert all(r["ready"] == "True" and r["problem"] is None for r in rows.values())


def test_an_external_secret_failing_at_dr_fails_naming_it_its_store_and_error(
    eso_lab: LabInfo,
) -> None:
    name = ("training", "feature-store")
    values = _primary_values(eso_lab, *name)
    good = _es(eso_lab, name)["spec"]["data"]
    broken = [dict(good[0], remoteRef={**good[0]["remoteRef"], "key": "lab/moved-away"})]
    _patch(eso_lab, name, {"spec": {"data": broken}})
    try:
        _until(lambda: _ready(eso_lab, name) == "False")
        result = _synced(eso_lab)
    finally:
        _patch(eso_lab, name, {"spec": {"data": good}})
        _until(lambda: _ready(eso_lab, name) == "True")
    assert (result.status, result.blocking) == (Status.FAIL, True)
    # The last Secret it wrote is still there, and equal: only its Ready condition fails it.
    assert all(s["status"] == "match" for s in result.evidence["secrets"])
    assert "ExternalSecret training/feature-store at DR is not Ready (SecretSyncedError: " in (
        result.summary
    )
    assert f"ClusterSecretStore/{topology.SECRET_STORE}" in result.summary
    assert "lab/moved-away" in result.summary
    shown = json.dumps([result.summary, result.evidence, result.remediation])
    assert values and not any(v in shown for v in values)  # a value is never shown


def test_a_stale_refresh_time_fails(eso_lab: LabInfo) -> None:
    name = ("serving", "inference-db")
    interval = go_duration(_es(eso_lab, name)["spec"]["refreshInterval"])
    assert interval
    long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=3 * interval)
    _patch(eso_lab, name, {"metadata": {"annotations": {PAUSED: "true"}}})
    try:
        _patch(eso_lab, name, {"status": {"refreshTime": long_ago.isoformat()}}, status=True)
        result = _synced(eso_lab)
    finally:
        _patch(eso_lab, name, {"metadata": {"annotations": {PAUSED: None}}})
        _until(lambda: _synced(eso_lab).status is Status.PASS)
    assert (result.status, result.blocking) == (Status.FAIL, True)
    assert _ready(eso_lab, name) == "True"  # Ready, and yet not to be trusted
    assert "ExternalSecret serving/inference-db at DR is stale: last synced " in result.summary
    assert f"ClusterSecretStore/{topology.SECRET_STORE}" in result.summary


def test_a_target_secret_that_differs_from_the_primarys_fails(eso_lab: LabInfo) -> None:
    core = k8s.CoreV1Api(_api(eso_lab, "dr"))
    before = core.read_namespaced_secret("inference-db", "serving").data
    changed = {k: base64.b64encode(b"edited-at-dr").decode() for k in before}
    core.patch_namespaced_secret("inference-db", "serving", {"data": changed})
    try:
        result = _synced(eso_lab)
    finally:
        core.patch_namespaced_secret("inference-db", "serving", {"data": before})
    assert (result.status, result.blocking) == (Status.FAIL, True)
    (row,) = [s for s in result.evidence["secrets"] if s["secret"] == "serving/inference-db"]
    assert row["kind"] == "external" and row["differing"] == ["password", "username"]
    assert "serving/inference-db" in result.summary
