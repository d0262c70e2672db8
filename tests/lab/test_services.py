"""The lab's real services: child-process lifetime, BIND, the registries and moto."""

from __future__ import annotations

import hashlib
import json
import logging
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import dns.tsig
import dns.tsigkeyring
import dns.update
import httpx
import pytest

from drills.errors import LabError
from drills.processes import pid_alive
from drills_lab.moto_server import MotoServer
from drills_lab.named import LabDnsRecord, NamedServer
from drills_lab.procs import ManagedProcess, free_port, require_binary
from drills_lab.registry import RegistryPair, RegistryServer

log = logging.getLogger("drills.tests.lab")

MANIFEST_ACCEPT = ", ".join(
    [
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)


def _wait_gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.02)
    return not pid_alive(pid)


def _sleeper(tmp_path: Path, name: str = "sleeper") -> ManagedProcess:
    return ManagedProcess(name, ["sleep", "60"], log_path=tmp_path / f"{name}.log")


# --- ManagedProcess and helpers -------------------------------------------------------


def test_stopped_child_is_gone_and_stop_is_idempotent(tmp_path: Path) -> None:
    child = _sleeper(tmp_path)
    child.start(lambda: True)
    pid = child.pid
    assert pid is not None and pid_alive(pid)
    child.stop()
    assert not pid_alive(pid)
    assert child.pid is None
    child.stop()


def test_child_dies_when_its_parent_is_killed(tmp_path: Path) -> None:
    parent_code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from drills_lab.procs import ManagedProcess\n"
        "child = ManagedProcess('sleeper', ['sleep', '60'], log_path=Path(sys.argv[1]))\n"
        "child.start(lambda: True)\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, str(tmp_path / "child.log")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert pid_alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=5)
        assert _wait_gone(child_pid, within=2.0), f"sleep {child_pid} outlived its parent"
    finally:
        parent.kill()
        parent.wait()


def test_child_started_from_a_finished_thread_keeps_running(tmp_path: Path) -> None:
    # PDEATHSIG follows the forking thread; the lab must not lose children to that.
    child = _sleeper(tmp_path)
    worker = threading.Thread(target=child.start, args=(lambda: True,))
    worker.start()
    worker.join()
    try:
        time.sleep(0.2)
        assert child.pid is not None and pid_alive(child.pid)
    finally:
        child.stop()


def test_child_that_exits_early_reports_its_log(tmp_path: Path) -> None:
    child = ManagedProcess(
        "failing", ["sh", "-c", "echo 'cannot bind: in use' >&2; exit 3"], log_path=tmp_path / "f"
    )
    with pytest.raises(LabError, match=r"exited with code 3(.|\n)*cannot bind: in use"):
        child.start(lambda: False, timeout=5)
    assert child.pid is None


def test_child_never_ready_is_stopped_on_timeout(tmp_path: Path) -> None:
    child = _sleeper(tmp_path)
    seen: list[int] = []

    def not_ready() -> bool:
        if child.pid is not None:
            seen.append(child.pid)
        return False

    with pytest.raises(LabError, match=r"not ready after 0\.3 s"):
        child.start(not_ready, timeout=0.3)
    assert seen and not pid_alive(seen[0])


def test_free_port_is_bindable_for_tcp_and_udp() -> None:
    port = free_port()
    with (
        socket.socket(socket.AF_INET, socket.SOCK_STREAM) as tcp,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp,
    ):
        tcp.bind(("127.0.0.1", port))
        udp.bind(("127.0.0.1", port))


def test_missing_binary_names_its_package() -> None:
    with pytest.raises(LabError, match="no-such-drills-tool not installed; apt-get install pkg"):
        require_binary("no-such-drills-tool", "pkg")


# --- BIND -----------------------------------------------------------------------------


# The suite's workers keep both cores busy, and a fresh server's first signed update once
# took over 2 s to answer there. These tests are about what BIND answers, not how fast.
ANSWER_WITHIN_S = 10.0


def _query(server: NamedServer, name: str, rdtype: str) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    return dns.query.udp(query, server.host, port=server.port, timeout=ANSWER_WITHIN_S)


def _soa_serial(server: NamedServer) -> int:
    reply = _query(server, server.zone, "SOA")
    return int(reply.answer[0][0].serial)


def _update(server: NamedServer, address: str, key_name: str, secret: str) -> dns.message.Message:
    keyring = dns.tsigkeyring.from_text({key_name: (server.tsig_algorithm, secret)})
    update = dns.update.Update(server.zone, keyring=keyring, keyalgorithm=server.tsig_algorithm)
    update.replace("api", 30, "A", address)
    return dns.query.tcp(update, server.host, port=server.port, timeout=ANSWER_WITHIN_S)


def _api_address(server: NamedServer) -> str:
    return str(_query(server, f"api.{server.zone}", "A").answer[0][0])


def test_named_fixture_serves_the_lab_zone(named_server: NamedServer) -> None:
    soa = _query(named_server, "drills.test.", "SOA")
    assert soa.rcode() == dns.rcode.NOERROR
    assert soa.answer[0].rdtype == dns.rdatatype.SOA
    api = _query(named_server, "api.drills.test.", "A")
    assert [str(rdata) for rdata in api.answer[0]] == ["127.0.0.2"]
    assert api.answer[0].ttl == 30


@pytest.fixture
def own_named(named_server: NamedServer, tmp_path: Path) -> Iterator[NamedServer]:
    # A server of its own: these tests change records the session fixture promises.
    with NamedServer(tmp_path, records=[LabDnsRecord("api", "A", 30, "127.0.0.2")]) as server:
        yield server


def test_tsig_signed_update_moves_record_and_serial(own_named: NamedServer) -> None:
    serial_before = _soa_serial(own_named)
    reply = _update(own_named, "127.0.0.3", own_named.tsig_name, own_named.tsig_secret)
    assert reply.rcode() == dns.rcode.NOERROR
    assert _api_address(own_named) == "127.0.0.3"
    assert _soa_serial(own_named) > serial_before


def test_update_with_wrong_secret_or_key_is_refused(own_named: NamedServer) -> None:
    wrong_secret = "d3JvbmctZHJpbGxzLXNlY3JldC13cm9uZy1kcmlsbHMtc2VjcmV0IQ=="
    with pytest.raises(dns.tsig.PeerBadSignature):
        _update(own_named, "127.0.0.9", own_named.tsig_name, wrong_secret)
    with pytest.raises(dns.tsig.PeerBadKey):
        _update(own_named, "127.0.0.9", "unknown-key", own_named.tsig_secret)
    assert _api_address(own_named) == "127.0.0.2"


def test_tsig_secret_file_is_private(own_named: NamedServer, tmp_path: Path) -> None:
    path = tmp_path / "tsig.key"
    own_named.write_tsig_secret(path)
    assert path.read_text().strip() == own_named.tsig_secret
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


# --- registries -----------------------------------------------------------------------


def _push_blob(client: httpx.Client, repo: str, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    started = client.post(f"/v2/{repo}/blobs/uploads/")
    assert started.status_code == 202
    # The Location carries a signed _state query; passing params= would replace it.
    location = httpx.URL(started.headers["Location"]).copy_add_param("digest", digest)
    done = client.put(location, content=data, headers={"Content-Type": "application/octet-stream"})
    assert done.status_code == 201, done.text
    return {"digest": digest, "size": len(data)}


def test_registries_answer_v2(registries: RegistryPair) -> None:
    assert registries.primary.url != registries.dr.url
    for registry in registries:
        assert httpx.get(f"{registry.url}/v2/").status_code == 200


def test_registry_push_and_head_manifest(registries: RegistryPair) -> None:
    repo = f"drills/app-{uuid.uuid4().hex[:8]}"
    with httpx.Client(base_url=registries.primary.url, timeout=5) as client:
        config = _push_blob(client, repo, b"{}")
        layer = _push_blob(client, repo, b"model weights, abridged")
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": {"mediaType": "application/vnd.oci.image.config.v1+json", **config},
                "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", **layer}],
            }
        ).encode()
        put = client.put(
            f"/v2/{repo}/manifests/v1",
            content=manifest,
            headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"},
        )
        assert put.status_code == 201, put.text
        expected = "sha256:" + hashlib.sha256(manifest).hexdigest()

        head = client.head(f"/v2/{repo}/manifests/v1", headers={"Accept": MANIFEST_ACCEPT})
        assert head.status_code == 200
        assert head.headers["Docker-Content-Digest"] == expected
        # distribution 2.8 hides an OCI manifest from a client that does not accept it.
        assert client.head(f"/v2/{repo}/manifests/v1").status_code == 404
    with httpx.Client(base_url=registries.dr.url, timeout=5) as dr:
        assert (
            dr.head(f"/v2/{repo}/manifests/v1", headers={"Accept": MANIFEST_ACCEPT}).status_code
            == 404
        )


def test_registry_with_htpasswd_asks_for_basic_auth(
    registries: RegistryPair, tmp_path: Path
) -> None:
    password = "drill-" + uuid.uuid4().hex
    with RegistryServer(tmp_path, htpasswd=("drill", password), name="auth") as registry:
        assert httpx.get(f"{registry.url}/v2/").status_code == 401
        assert httpx.get(f"{registry.url}/v2/", auth=("drill", password)).status_code == 200
        assert httpx.get(f"{registry.url}/v2/", auth=("drill", "wrong")).status_code == 401
        assert password not in (tmp_path / "htpasswd").read_text()


# --- moto -----------------------------------------------------------------------------


def _client(moto: MotoServer, service: str) -> Any:
    return boto3.client(service, endpoint_url=moto.url, region_name="us-east-1")


def test_moto_s3(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    s3 = _client(moto_server, "s3")
    bucket = f"drills-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="checkpoints/step-1.pt", Body=b"weights")
    listed = s3.list_objects_v2(Bucket=bucket)
    assert [item["Key"] for item in listed["Contents"]] == ["checkpoints/step-1.pt"]


@pytest.mark.serial
def test_moto_head_object_is_not_delayed_by_nagle(
    moto_server: MotoServer, aws_env: dict[str, str]
) -> None:
    s3 = _client(moto_server, "s3")
    bucket = f"drills-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="k", Body=b"x" * 100)
    started = time.monotonic()
    for _ in range(100):
        s3.head_object(Bucket=bucket, Key="k")
    mean_ms = (time.monotonic() - started) * 10
    log.info("moto head_object: %.1f ms per call over 100 calls", mean_ms)
    # Delayed ACKs would cost ~40 ms per call; the margin absorbs a busy shared CPU.
    assert mean_ms < 25


def test_moto_secrets_manager(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    sm = _client(moto_server, "secretsmanager")
    name = f"drills/{uuid.uuid4().hex[:8]}"
    sm.create_secret(Name=name, SecretString="lab-only-value")
    assert sm.get_secret_value(SecretId=name)["SecretString"] == "lab-only-value"


def test_moto_route53(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    r53 = _client(moto_server, "route53")
    zone_name = f"drills-{uuid.uuid4().hex[:8]}.example."
    zone_id = r53.create_hosted_zone(Name=zone_name, CallerReference=uuid.uuid4().hex)[
        "HostedZone"
    ]["Id"]
    record = {
        "Name": f"api.{zone_name}",
        "Type": "A",
        "TTL": 30,
        "ResourceRecords": [{"Value": "127.0.0.3"}],
    }
    r53.change_resource_record_sets(
        HostedZoneId=zone_id,
        ChangeBatch={"Changes": [{"Action": "UPSERT", "ResourceRecordSet": record}]},
    )
    sets = r53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
    api = [s for s in sets if s["Name"] == f"api.{zone_name}" and s["Type"] == "A"]
    assert api and api[0]["ResourceRecords"] == [{"Value": "127.0.0.3"}]


def test_moto_ecr(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    ecr = _client(moto_server, "ecr")
    repo = f"drills/app-{uuid.uuid4().hex[:8]}"
    ecr.create_repository(repositoryName=repo)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 2,
            "digest": "sha256:" + hashlib.sha256(b"{}").hexdigest(),
        },
        "layers": [],
    }
    ecr.put_image(repositoryName=repo, imageManifest=json.dumps(manifest), imageTag="v1")
    images = ecr.describe_images(repositoryName=repo)["imageDetails"]
    assert [image["imageTags"] for image in images] == [["v1"]]


# --- the whole lab at once ------------------------------------------------------------


def test_all_services_start_together(
    named_server: NamedServer,
    registries: RegistryPair,
    tmp_path: Path,
    record_property: Callable[[str, object], None],
) -> None:
    # The session fixtures prove the binaries exist; this times a cold start of fresh ones.
    named = NamedServer(tmp_path / "named", records=[LabDnsRecord("api", "A", 30, "127.0.0.2")])
    primary = RegistryServer(tmp_path / "primary", name="primary")
    dr = RegistryServer(tmp_path / "dr", name="dr")
    moto = MotoServer()
    services: list[NamedServer | RegistryServer | MotoServer] = [named, primary, dr, moto]
    started = time.monotonic()
    try:
        with ThreadPoolExecutor(max_workers=len(services)) as pool:
            for future in [pool.submit(service.start) for service in services]:
                future.result()
        elapsed = time.monotonic() - started
        log.info("named + 2 registries + moto started in %.2f s", elapsed)
        record_property("lab_start_seconds", round(elapsed, 3))
        assert _api_address(named) == "127.0.0.2"
        assert httpx.get(f"{primary.url}/v2/").status_code == 200
        assert httpx.get(f"{dr.url}/v2/").status_code == 200
        assert httpx.get(f"{moto.url}/moto-api/data.json").status_code == 200
    finally:
        for service in services:
            service.stop()
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{primary.url}/v2/", timeout=1)


def test_moto_reset_empties_the_backends(moto_server: MotoServer, aws_env: dict[str, str]) -> None:
    # Last on purpose: moto's backends are process-global, so this wipes every test's data.
    s3 = _client(moto_server, "s3")
    bucket = f"drills-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=bucket)
    moto_server.reset()
    assert bucket not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
