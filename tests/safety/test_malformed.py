"""Malformed answers from each target are clear errors naming the target, never tracebacks.

Where a real service cannot be made to answer wrongly (a Kubernetes API serving
garbage, a registry serving a manifest type it would refuse to store, an S3 store
whose pages never end), a small stub on loopback stands in; BIND's answers are
spoilt on their way back by the UDP fault proxy.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from drills.errors import PermanentError, TemporaryError
from drills.targets.aws import AwsEndpoint
from drills.targets.kube import KubeTarget
from drills.targets.objects import ObjectStore
from drills.targets.registry import OciDistribution
from drills_lab.httpserve import serve_in_thread
from drills_lab.kubeapi import write_kubeconfig
from drills_lab.named import NamedServer
from drills_lab.procs import free_port
from drills_lab.topology import LabWorkload
from tests.support.faultproxy import UdpFaultProxy
from tests.support.kube_sites import plan_for
from tests.support.services import bind_target

TOKEN = "malformed-token-" + secrets.token_hex(8)
WEB = LabWorkload("apps", "web", "Deployment", "critical", "platform/web:1", 1, 1)

# (status, headers, body) for a request's method and path (query included)
Answer = tuple[int, dict[str, str], bytes]
Responder = Callable[[str, str], Answer]


class Stub:
    """An HTTP server on loopback answering whatever ``respond`` says; counts requests."""

    def __init__(self, respond: Responder) -> None:
        self.requests = 0
        lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                with lock:
                    stub.requests += 1
                status, headers, body = respond(self.command, self.path)
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            do_GET = do_HEAD = do_PATCH = _answer  # noqa: N815

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server, _ = serve_in_thread("127.0.0.1", self.port, Handler, "stub")

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def stub_factory() -> Iterator[Callable[[Responder], Stub]]:
    made: list[Stub] = []

    def make(respond: Responder) -> Stub:
        made.append(Stub(respond))
        return made[-1]

    yield make
    for stub in made:
        stub.close()


def assert_clear(exc: PermanentError, where: str) -> None:
    assert where in exc.target and where in str(exc) and exc.cause
    assert TOKEN not in str(exc)
    assert "Traceback" not in str(exc)


# -- Kubernetes ---------------------------------------------------------------------------
def kube_at(url: str, tmp_path: Path) -> KubeTarget:
    for role in ("primary", "dr"):
        write_kubeconfig(tmp_path / f"{role}.kubeconfig", server_url=url, context=role, token=TOKEN)
    plan = plan_for(tmp_path, workloads=[WEB])
    return KubeTarget.for_site("dr", plan.sites.dr, plan, connect_timeout=1, read_timeout=1)


SECRET_B64 = "c2VjcmV0LXZhbHVlLW5ldmVyLXNob3du"  # a Secret's value, base64 as the API sends


def kube_garbage(method: str, path: str) -> Answer:
    if "/secrets/" in path:  # a Secret cut short: none of it may reach the error
        return 200, {"Content-Type": "application/json"}, b'{"data":{"k":"' + SECRET_B64.encode()
    if path.startswith("/api/v1/nodes"):
        return 200, {"Content-Type": "application/json"}, b"[1, 2, 3]"  # JSON, not an object
    if "watch=true" in path:
        return 200, {"Content-Type": "application/json"}, b'{"type": "ADDED", "obj\n'
    if "fieldSelector" in path:
        listing = b'{"kind": "DeploymentList", "items": [], "metadata": {"resourceVersion": "7"}}'
        return 200, {"Content-Type": "application/json"}, listing
    return 200, {"Content-Type": "text/html"}, b"<html><body>Gateway says hello</body></html>"


def test_kube_non_json_is_a_clear_error(
    stub_factory: Callable[[Responder], Stub], tmp_path: Path
) -> None:
    stub = stub_factory(kube_garbage)
    kube = kube_at(stub.url, tmp_path)
    with pytest.raises(PermanentError, match=r"GET /version: the reply is not JSON") as caught:
        kube.version()
    assert "Gateway says hello" in caught.value.cause  # shows what answered instead
    assert_clear(caught.value, stub.url)
    assert stub.requests == 1  # garbage is not asked for again

    with pytest.raises(PermanentError, match="truncated or invalid JSON") as cut:
        kube.secret("apps", "creds")
    assert SECRET_B64 not in str(cut.value) and SECRET_B64[:8] not in str(cut.value)
    assert_clear(cut.value, stub.url)

    with pytest.raises(PermanentError, match="JSON list, not an object") as listed:
        kube.nodes()
    assert_clear(listed.value, stub.url)

    with pytest.raises(PermanentError, match="not JSON") as patched:
        kube.scale("apps", "Deployment", "web", 2)
    assert_clear(patched.value, stub.url)

    with pytest.raises(PermanentError, match="a watch event is not JSON") as watched:
        kube.wait_ready("apps", "Deployment", "web", 1, deadline_s=2)
    assert_clear(watched.value, stub.url)
    kube.close()


# -- a registry -------------------------------------------------------------------------
UNKNOWN_TYPE = "application/vnd.example.mystery.v1+json"
DIGEST = "sha256:" + "ab" * 32


def registry_unknown_type(method: str, path: str) -> Answer:
    if path == "/v2/":
        return 200, {"Content-Type": "application/json"}, b"{}"
    headers = {"Content-Type": UNKNOWN_TYPE, "Docker-Content-Digest": DIGEST}
    return 200, headers, b'{"mystery": true}'


def test_registry_manifest_of_unknown_media_type(
    stub_factory: Callable[[Responder], Stub],
) -> None:
    stub = stub_factory(registry_unknown_type)
    registry = OciDistribution(stub.url, name="dr registry", read_timeout=1)
    with pytest.raises(PermanentError, match="unknown media type") as caught:
        registry.digest("models/llm", "0.6")
    assert UNKNOWN_TYPE in caught.value.cause and "models/llm:0.6" in caught.value.cause
    assert_clear(caught.value, stub.url)
    assert stub.requests == 2  # /v2/ and the one HEAD: not retried
    registry.close()


# -- DNS ----------------------------------------------------------------------------------
@pytest.mark.parametrize("spoil", ["short", "garble"])
def test_dns_short_or_garbled_answer(named_server: NamedServer, spoil: str) -> None:
    with UdpFaultProxy(f"{named_server.host}:{named_server.port}") as proxy:
        dns = bind_target(named_server, [proxy.address])
        proxy.set("short" if spoil == "short" else "garble", 1)
        started = time.monotonic()
        with pytest.raises(PermanentError, match="malformed answer") as caught:
            dns.read(f"api.{named_server.zone}", "A")
        assert time.monotonic() - started < 0.5  # at once, not at the timeout
        assert_clear(caught.value, proxy.address)
        assert named_server.tsig_secret not in str(caught.value)
        assert proxy.datagrams == 1
        [answer] = dns.read(f"api.{named_server.zone}", "A")  # unspoilt again
        assert answer.values == ("127.0.0.2",)


# -- S3 -----------------------------------------------------------------------------------
def s3_page(key: str, token: str | None) -> bytes:
    more = f"<NextContinuationToken>{token}</NextContinuationToken>" if token else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>'
        '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        "<Name>b</Name><Prefix></Prefix><KeyCount>1</KeyCount><MaxKeys>1000</MaxKeys>"
        f"<IsTruncated>{'true' if token else 'false'}</IsTruncated>{more}"
        f"<Contents><Key>{key}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified>"
        '<ETag>"0cc175b9c0f1b6a831c399e269772661"</ETag><Size>1</Size>'
        "<StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>"
    ).encode()


def s3_looping(method: str, path: str) -> Answer:
    bucket = urlsplit(path).path.strip("/")
    xml = {"Content-Type": "application/xml"}
    if bucket == "same-token":  # the same page and the same token, forever
        return 200, xml, s3_page("a", "same")
    if bucket == "fresh-tokens":  # the same page under a new token each time
        return 200, xml, s3_page("a", secrets.token_hex(4))
    if bucket == "garbage":
        return 200, xml, b"<ListBucketResult><Contents><Key>a</Ke"
    return 200, xml, s3_page("z", None)


@pytest.mark.parametrize(
    ("bucket", "cause"),
    [
        ("same-token", "repeats: a page handed back a continuation token already used"),
        ("fresh-tokens", "does not move forward"),
    ],
)
def test_s3_listing_whose_pages_repeat(
    stub_factory: Callable[[Responder], Stub], bucket: str, cause: str
) -> None:
    stub = stub_factory(s3_looping)
    store = ObjectStore(AwsEndpoint("us-east-1", stub.url, "testing", "testing"), "dr")
    started = time.monotonic()
    with pytest.raises(PermanentError, match=cause) as caught:
        list(store.objects(bucket))
    assert time.monotonic() - started < 2
    assert stub.requests <= 4  # it stopped at the repeat instead of spinning
    assert_clear(caught.value, stub.url)
    assert f"bucket {bucket}" in str(caught.value)
    store.close()


def test_s3_unparsable_listing(stub_factory: Callable[[Responder], Stub]) -> None:
    """botocore takes an unparsable 200 from S3 for a stream cut short: retried, bounded."""
    stub = stub_factory(s3_looping)
    store = ObjectStore(AwsEndpoint("us-east-1", stub.url, "testing", "testing"), "dr")
    with pytest.raises(TemporaryError, match="truncated or malformed answer") as caught:
        list(store.objects("garbage"))
    assert "gave up after 3 attempts" in caught.value.cause
    assert stub.requests == 3
    assert caught.value.target.startswith("s3 dr") and stub.url in str(caught.value)
    store.close()
