"""deploy/: the Kustomize base renders the worker and the dashboard without a secret value,
and the Prefect work pool's job template renders, as a Kubernetes worker renders it, to a
Job that `kubectl apply --dry-run=server` accepts on the lab's API server."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills_lab.kubeapi import KubeApiServer, write_kubeconfig
from drills_lab.kubeapi.audit import AuditLog
from tests.support.services import require_system_binary
from tests.support.ui import ROOT

BASE = ROOT / "deploy" / "kubernetes"
JOB_TEMPLATE = ROOT / "deploy" / "prefect" / "kubernetes-base-job-template.json"
KUBERNETES_PAGE = (ROOT / "docs" / "how-to" / "kubernetes.md").read_text()
TOKEN = "manifests-test-token"


def _kubectl() -> str:
    return require_system_binary("kubectl", "kubernetes-client")


def _render_base() -> list[dict[str, Any]]:
    done = subprocess.run(
        [_kubectl(), "kustomize", str(BASE)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _secret_names(objects: list[dict[str, Any]]) -> set[str]:
    """Every Secret the rendered objects read: envFrom, secretKeyRef and volumes."""
    text = json.dumps(objects)
    refs = re.findall(r'"secretRef": \{"name": "([^"]+)"', text)
    refs += re.findall(r'"secretKeyRef": \{[^}]*"name": "([^"]+)"', text)
    refs += re.findall(r'"secretName": "([^"]+)"', text)
    return set(refs)


def test_the_base_renders_the_worker_and_the_dashboard_with_no_secret_in_it() -> None:
    objects = _render_base()
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
    assert {("Deployment", "drills-worker"), ("Deployment", "drills-dashboard"),
            ("Service", "drills-dashboard"), ("Namespace", "drills")} <= kinds  # fmt: skip
    assert all(o["metadata"].get("namespace") in (None, "drills") for o in objects)
    assert not [o for o in objects if o["kind"] == "Secret"]
    deployments = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Deployment"}
    worker = deployments["drills-worker"]["spec"]["template"]["spec"]["containers"][0]
    assert worker["args"][:5] == ["prefect", "worker", "start", "--pool", "drills-kubernetes"]
    dashboard = deployments["drills-dashboard"]["spec"]["template"]["spec"]["containers"][0]
    assert dashboard["args"][:2] == ["drills", "ui"]
    # A literal value for a credential would be a secret in the manifests.
    for container in (worker, dashboard):
        for var in container.get("env") or []:
            assert not re.search(r"KEY|SECRET|PASSWORD|TOKEN|DB_URL", var["name"]), var
    # The how-to names every Secret the operator must create.
    secrets = _secret_names(objects)
    assert secrets >= {"drills-db", "drills-prefect", "drills-targets"}
    missing = [name for name in sorted(secrets) if f"`{name}`" not in KUBERNETES_PAGE]
    assert not missing, f"Secrets the how-to does not name: {missing}"


# --- the work pool's base job template ------------------------------------------------


def _defaults(variables: dict[str, Any]) -> dict[str, Any]:
    return {
        name: spec["default"]
        for name, spec in variables.get("properties", {}).items()
        if "default" in spec
    }


def render_job(template: dict[str, Any], job_variables: dict[str, Any]) -> dict[str, Any]:
    """The Job a prefect-kubernetes worker creates for a flow run: the pool's defaults and
    the run's job variables put into the template by Prefect's own templating, then the
    worker's own steps (KubernetesWorkerJobConfiguration.prepare_for_flow_run): its env
    as a list, the command as arguments."""
    from prefect.utilities.templating import apply_values

    values = _defaults(template["variables"]) | job_variables
    config = apply_values(template["job_configuration"], values)
    job = config["job_manifest"]
    container = job["spec"]["template"]["spec"]["containers"][0]
    env = config.get("env") or {}
    container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    container["args"] = shlex.split(config["command"])
    return dict(job)


@pytest.fixture()
def lab_api(tmp_path: Path) -> Iterator[tuple[KubeApiServer, Path]]:
    """The lab's API server over HTTPS, as kubectl needs it, with the namespace `drills`."""
    server = KubeApiServer(token=TOKEN, tls=True, name="orchestrator", audit=AuditLog())
    server.start()
    server.store.create("namespaces", {"metadata": {"name": "drills"}})
    kubeconfig = tmp_path / "orchestrator.kubeconfig"
    write_kubeconfig(kubeconfig, server_url=server.url, context="orchestrator", token=TOKEN,
                     ca_pem=server.ca_pem)  # fmt: skip
    try:
        yield server, kubeconfig
    finally:
        server.stop()


def _dry_run(kubeconfig: Path, job: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_kubectl(), "--kubeconfig", str(kubeconfig), "apply", "--dry-run=server", "-f", "-"],
        input=json.dumps(job), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_job_template_renders_a_job_that_the_api_server_accepts_in_a_dry_run(
    lab_api: tuple[KubeApiServer, Path],
) -> None:
    server, kubeconfig = lab_api
    template = json.loads(JOB_TEMPLATE.read_text())
    job = render_job(template, {
        "name": "flow-run-quarterly-drill",
        "command": "prefect flow-run execute",
        "env": {"PREFECT__FLOW_RUN_ID": "0f5c3f2e-4a7b-4b1e-9d1e-3c1c2a7e9b10"},
        "labels": {"prefect.io/flow-run-name": "quarterly-drill"},
    })  # fmt: skip
    # kubectl apply needs a name; the server would make it from generateName.
    job["metadata"]["name"] = job["metadata"]["generateName"] + "x7k2p"
    spec = job["spec"]
    pod = spec["template"]["spec"]
    container = pod["containers"][0]
    assert (job["metadata"]["namespace"], pod["serviceAccountName"]) == ("drills", "drills")
    assert container["image"] == "drills:latest"
    assert container["args"][:2] == ["prefect", "flow-run"]
    assert {e["secretRef"]["name"] for e in container["envFrom"]} == {
        "drills-db", "drills-prefect", "drills-credentials"}  # fmt: skip
    assert spec["parallelism"] == 1 and "parallelism" not in pod
    assert "{{" not in json.dumps(job)  # every placeholder filled or left out, as Prefect does

    done = _dry_run(kubeconfig, job)
    assert done.returncode == 0, done.stderr
    assert "job.batch/flow-run-quarterly-drill-x7k2p created (server dry run)" in done.stdout
    assert server.store.get("jobs", "drills", job["metadata"]["name"]) is None  # not persisted
    assert server.audit is not None
    creates = [e for e in server.audit.events() if e.verb == "create"]
    assert [(e.group, e.resource, e.namespace) for e in creates] == [("batch", "jobs", "drills")]

    # The dry run validates as a create does: a Job that restarts Always is refused.
    pod["restartPolicy"] = "Always"
    refused = _dry_run(kubeconfig, job)
    assert refused.returncode != 0
    assert 'Unsupported value: "Always"' in refused.stderr
