"""The whole lab, as `drills lab up` starts it: processes, plan, seeded platform, drift."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import time
from pathlib import Path

import boto3
import dns.message
import dns.query
import httpx
import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from drills.plan import load_plan
from drills.processes import descendants, pid_alive
from drills_lab import control, topology
from drills_lab.images import OCI_INDEX, OCI_MANIFEST
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process
from tests.support.services import LAB_START_S, require_system_binary

ACCEPT = f"{OCI_MANIFEST}, {OCI_INDEX}, application/vnd.docker.distribution.manifest.v2+json"


def drills_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return drills_process(args, timeout=60, cwd=cwd)


def apis(info: LabInfo, site: str) -> tuple[k8s.AppsV1Api, k8s.CoreV1Api, k8s.NetworkingV1Api]:
    api = k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / f"{site}.kubeconfig"), context=site
    )
    return k8s.AppsV1Api(api), k8s.CoreV1Api(api), k8s.NetworkingV1Api(api)


def test_lab_up_and_down_leave_no_process(tmp_path: Path) -> None:
    require_system_binary("named", "bind9")
    require_system_binary("docker-registry", "docker-registry")
    state = tmp_path / "lab"
    started = time.monotonic()
    up = drills_cli("lab", "up", "--state-dir", str(state), "--ready-delay", "0.1")
    took = time.monotonic() - started
    assert up.returncode == 0, up.stdout + up.stderr
    info = json.loads((state / "lab.json").read_text())
    children = set(descendants(info["pid"]))
    names = {Path(f"/proc/{p}/exe").resolve().name for p in children if pid_alive(p)}
    assert {"named", "docker-registry"} <= names
    assert (state / "plan.yaml").exists() and (state / "primary.kubeconfig").exists()
    assert oct((state / "tsig.secret").stat().st_mode)[-3:] == "600"
    print(f"lab up took {took:.2f}s wall, {info['startup_seconds']}s inside")

    again = drills_cli("lab", "up", "--state-dir", str(state))
    assert again.returncode == 0 and "already running" in again.stdout
    refused = drills_cli("lab", "up", "--state-dir", str(state), "--drift")
    assert refused.returncode == 1 and "drills lab down" in refused.stderr

    status = drills_cli("lab", "status", "--state-dir", str(state), "--json")
    assert status.returncode == 0
    probes = {p["name"]: p for p in json.loads(status.stdout)["probes"]}
    assert probes["endpoint primary"]["detail"].startswith("200")
    assert probes["endpoint dr"]["detail"].startswith("503")

    down = drills_cli("lab", "down", "--state-dir", str(state))
    assert down.returncode == 0 and "stopped" in down.stdout
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(pid_alive(p) for p in {info["pid"], *children}):
        time.sleep(0.05)
    assert not [p for p in {info["pid"], *children} if pid_alive(p)]
    assert not (state / "lab.json").exists()
    assert drills_cli("lab", "status", "--state-dir", str(state)).returncode == 1


def test_lab_plan_validates(lab: LabInfo) -> None:
    plan = load_plan(Path(lab.state_dir) / "plan.yaml")
    assert plan.name == "lab"
    assert len(plan.workloads) == len(topology.WORKLOADS) >= 12
    assert {w.tier for w in plan.workloads} == {"critical", "normal", "batch"}
    assert len(plan.datasets) == 3
    assert plan.dns.provider == "rfc2136"
    result = drills_cli("plan", "validate", str(Path(lab.state_dir) / "plan.yaml"), "--resolve")
    assert result.returncode == 0, result.stdout + result.stderr


def test_kubectl_lists_the_lab_workloads(lab: LabInfo, tmp_path: Path) -> None:
    require_system_binary("kubectl", "kubernetes-client")
    kubeconfig = Path(lab.state_dir) / "primary.kubeconfig"
    result = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), "get", "deployments", "-A"],
        capture_output=True,
        text=True,
        timeout=30,
        env=os.environ | {"HOME": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0].split()
    assert header[:4] == ["NAMESPACE", "NAME", "READY", "UP-TO-DATE"]
    for w in topology.WORKLOADS:
        if w.kind == "Deployment":
            assert w.name in result.stdout


def test_endpoint_follows_kubernetes_state(lab: LabInfo) -> None:
    """Closing the ingress stops the primary serving; DR serves once its critical tier is up."""
    _, _, net_p = apis(lab, "primary")
    apps_d, _, _ = apis(lab, "dr")
    primary, dr = lab.endpoints["primary"], lab.endpoints["dr"]
    assert httpx.get(primary).text == "primary\n"
    assert httpx.get(dr).status_code == 503

    patch = {"spec": {"ingressClassName": "drills-fenced"}}
    net_p.patch_namespaced_ingress(topology.INGRESS_NAME, topology.INGRESS_NAMESPACE, patch)
    try:
        closed = httpx.get(primary)
        assert closed.status_code == 503 and "ingress closed" in closed.text
    finally:
        patch = {"spec": {"ingressClassName": topology.INGRESS_CLASS}}
        net_p.patch_namespaced_ingress(topology.INGRESS_NAME, topology.INGRESS_NAMESPACE, patch)
    assert httpx.get(primary).status_code == 200

    critical = topology.critical_workloads()
    try:
        for w in critical:
            scale = {"spec": {"replicas": w.dr_replicas}}
            if w.kind == "Deployment":
                apps_d.patch_namespaced_deployment_scale(w.name, w.namespace, scale)
            else:
                apps_d.patch_namespaced_stateful_set_scale(w.name, w.namespace, scale)
        deadline = time.monotonic() + 10
        while httpx.get(dr).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert httpx.get(dr).text == "dr\n"
    finally:
        for w in critical:
            scale = {"spec": {"replicas": 0}}
            if w.kind == "Deployment":
                apps_d.patch_namespaced_deployment_scale(w.name, w.namespace, scale)
            else:
                apps_d.patch_namespaced_stateful_set_scale(w.name, w.namespace, scale)
    assert httpx.get(dr).status_code == 503


def _s3(info: LabInfo, region: str) -> object:
    state = Path(info.state_dir)
    return boto3.client(
        "s3",
        endpoint_url=info.moto,
        region_name=region,
        aws_access_key_id=(state / "aws/access_key_id").read_text().strip(),
        aws_secret_access_key=(state / "aws/secret_access_key").read_text().strip(),
    )


def _newest(s3: object, bucket: str) -> dt.datetime:
    listing = s3.list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
    return max(o["LastModified"] for o in listing["Contents"])


def _manifest_status(registry: str, image: str) -> int:
    repo, tag = image.rsplit(":", 1)
    return httpx.head(
        f"{registry}/v2/{repo}/manifests/{tag}", headers={"Accept": ACCEPT}
    ).status_code


def _secret(info: LabInfo, site: str, ns: str, name: str) -> dict[str, str]:
    _, core, _ = apis(info, site)
    data = core.read_namespaced_secret(name, ns).data
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def _ttl(info: LabInfo) -> int:
    host, port = info.dns_server.rsplit(":", 1)
    answer = dns.query.udp(dns.message.make_query(topology.RECORD, "A"), host, port=int(port))
    return int(answer.answer[0].ttl)


def _es_ready(info: LabInfo, site: str, ns: str, name: str) -> tuple[str, str]:
    """The Ready condition's status and message of an ExternalSecret at a site."""
    api = k8s_config.new_client_from_config(
        config_file=str(Path(info.state_dir) / f"{site}.kubeconfig"), context=site
    )
    es = k8s.CustomObjectsApi(api).get_namespaced_custom_object(
        "external-secrets.io", "v1beta1", ns, "externalsecrets", name
    )
    (ready,) = [c for c in es["status"]["conditions"] if c["type"] == "Ready"]
    return ready["status"], ready["message"]


def _never_ready(info: LabInfo) -> str | None:
    apps, _, _ = apis(info, "dr")
    ns, name = topology.DRIFT_NEVER_READY
    annotations = apps.read_namespaced_deployment(name, ns).metadata.annotations or {}
    return annotations.get("lab.drills.dev/never-ready")


def test_clean_lab_is_in_sync(lab: LabInfo) -> None:
    now = dt.datetime.now(dt.UTC)
    dr_s3 = _s3(lab, topology.DR_REGION)
    assert now - _newest(dr_s3, "ckpt-dr") < dt.timedelta(minutes=10)
    for image in [w.image for w in topology.WORKLOADS]:
        assert _manifest_status(lab.registries["dr"], image) == 200
    ns, name = topology.DRIFT_DIFFERENT_SECRET
    assert _secret(lab, "primary", ns, name) == _secret(lab, "dr", ns, name)
    pull_p = _secret(lab, "primary", "serving", "registry-pull")
    assert pull_p != _secret(lab, "dr", "serving", "registry-pull")
    assert all(v.startswith("drills-lab-secret-") for v in pull_p.values())
    assert _ttl(lab) == topology.GOOD_TTL
    assert _never_ready(lab) is None
    for es in topology.EXTERNAL_SECRETS:
        assert _es_ready(lab, "dr", es.namespace, es.name)[0] == "True"
        assert _secret(lab, "primary", es.namespace, es.name) == _secret(
            lab, "dr", es.namespace, es.name
        )


def test_drift_lab_seeds_each_fault(drift_lab: LabInfo) -> None:
    now = dt.datetime.now(dt.UTC)
    stale = now - _newest(_s3(drift_lab, topology.DR_REGION), "ckpt-dr")
    assert stale > dt.timedelta(seconds=topology.DRIFT_STALE_AGE_S - 60)
    fresh = now - _newest(_s3(drift_lab, topology.PRIMARY_REGION), "ckpt-primary")
    assert fresh < dt.timedelta(minutes=10)
    assert _manifest_status(drift_lab.registries["dr"], topology.DRIFT_MISSING_IMAGE) == 404
    assert _manifest_status(drift_lab.registries["primary"], topology.DRIFT_MISSING_IMAGE) == 200
    ns, name = topology.DRIFT_DIFFERENT_SECRET
    assert _secret(drift_lab, "primary", ns, name) != _secret(drift_lab, "dr", ns, name)
    assert _ttl(drift_lab) == topology.DRIFT_TTL
    assert _never_ready(drift_lab) == "true"
    ns, name = topology.DRIFT_FAILING_EXTERNAL_SECRET
    assert _es_ready(drift_lab, "primary", ns, name)[0] == "True"
    status, message = _es_ready(drift_lab, "dr", ns, name)
    assert status == "False" and "lab/feature-store" in message


@pytest.mark.parametrize("site", ["primary", "dr"])
def test_nodes_carry_gpu_capacity_and_driver_labels(lab: LabInfo, site: str) -> None:
    _, core, _ = apis(lab, site)
    nodes = core.list_node(label_selector="nvidia.com/gpu.present=true").items
    shape = topology.SITES[site]
    assert len(nodes) == sum(p.count for p in shape.pools if p.gpus)
    for n in nodes:
        assert n.status.allocatable["nvidia.com/gpu"] == "8"
        assert n.metadata.labels["nvidia.com/cuda.driver-version.full"] == shape.driver


def test_the_lab_trainer_writes_checkpoints_until_it_is_fenced(tmp_path: Path) -> None:
    state = tmp_path / "lab"
    info, _ = control.up(state, ready_delay=0.1, checkpoint_every=0.3, timeout=LAB_START_S)
    try:
        primary_s3, dr_s3 = _s3(info, topology.PRIMARY_REGION), _s3(info, topology.DR_REGION)

        def keys(s3: object, bucket: str) -> set[str]:
            listing = s3.list_objects_v2(Bucket=bucket)  # type: ignore[attr-defined]
            return {o["Key"] for o in listing["Contents"]}

        seeded = keys(primary_s3, "ckpt-primary")
        deadline = time.monotonic() + 10
        while (
            time.monotonic() < deadline and len(keys(primary_s3, "ckpt-primary")) < len(seeded) + 2
        ):
            time.sleep(0.1)
        written = keys(primary_s3, "ckpt-primary") - seeded
        assert len(written) >= 2
        assert written <= keys(dr_s3, "ckpt-dr")  # replicated
        apps, _, _ = apis(info, "primary")
        apps.patch_namespaced_deployment_scale("trainer", "training", {"spec": {"replicas": 0}})
        time.sleep(0.5)  # let a write already under way land
        stopped = keys(primary_s3, "ckpt-primary")
        time.sleep(1.0)
        assert keys(primary_s3, "ckpt-primary") == stopped
    finally:
        control.down(state)
