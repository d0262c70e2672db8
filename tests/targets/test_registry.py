"""The registry adapters against real registries: distribution (open, basic, token) and ECR."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from drills.errors import PermanentError, PlanError, TemporaryError
from drills.plan import plan_from_text
from drills.targets.registry import OciDistribution, parse_image, registry_for
from drills_lab.httpserve import serve_in_thread
from drills_lab.images import Image, build_image, push_oci
from drills_lab.moto_server import MotoServer
from drills_lab.procs import free_port
from drills_lab.registry import RegistryPair, RegistryServer
from tests.support.token_server import TokenIssuer, TokenRegistry, TokenService

USER, PASSWORD = "drill", "s3cret-Pa55-for-tests"


@pytest.fixture(scope="module")
def prefix() -> str:
    return f"reg-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def pushed(registries: RegistryPair, prefix: str) -> dict[str, Image]:
    """A single-platform image and a multi-arch index in the primary registry."""
    images = {
        "single": build_image(f"{prefix}/app:1.0"),
        "index": build_image(f"{prefix}/multi:2.0", multi_arch=True),
    }
    with httpx.Client(timeout=10) as http:
        for image in images.values():
            push_oci(http, registries.primary.url, image)
    return images


@pytest.fixture()
def oci(registries: RegistryPair) -> Iterator[OciDistribution]:
    registry = OciDistribution(registries.primary.url, name="registry primary")
    yield registry
    registry.close()


# -- references -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "host", "repository", "reference"),
    [
        ("127.0.0.2:5000/platform/db:7.2", "127.0.0.2:5000", "platform/db", "7.2"),
        ("registry.example.com/a/b", "registry.example.com", "a/b", "latest"),
        ("localhost/app:1", "localhost", "app", "1"),
        ("platform/session-store:7.2.4", "", "platform/session-store", "7.2.4"),
        ("nginx", "", "nginx", "latest"),
        (f"r.io:443/app:1@sha256:{'a' * 64}", "r.io:443", "app", f"sha256:{'a' * 64}"),
    ],
)  # fmt: skip
def test_parse_image_strips_the_registry_host(
    text: str, host: str, repository: str, reference: str
) -> None:
    image = parse_image(text)
    assert (image.host, image.repository, image.reference) == (host, repository, reference)
    assert not str(image).startswith(host) or not host


# -- OCI Distribution, anonymous ----------------------------------------------------


def test_tag_and_digest_references(oci: OciDistribution, pushed: dict[str, Image]) -> None:
    image = pushed["single"]
    assert oci.digest(image.repository, image.tag) == image.top.digest
    assert oci.digest(image.repository, image.top.digest) == image.top.digest


def test_multi_arch_index_has_the_index_digest(
    oci: OciDistribution, pushed: dict[str, Image]
) -> None:
    index = pushed["index"]
    assert index.top.media_type.endswith("index.v1+json")
    assert oci.digest(index.repository, index.tag) == index.top.digest
    child = index.manifests[0]  # a platform manifest, addressed by digest only
    assert oci.digest(index.repository, child.digest) == child.digest


def test_missing_tag_and_missing_repository_are_none(
    oci: OciDistribution, pushed: dict[str, Image]
) -> None:
    image = pushed["single"]
    assert oci.digest(image.repository, "no-such-tag") is None
    assert oci.digest(f"{image.repository}-absent", image.tag) is None
    assert oci.digest(image.repository, "sha256:" + "0" * 64) is None


def test_digests_answers_each_unique_reference(
    oci: OciDistribution, pushed: dict[str, Image]
) -> None:
    single, index = pushed["single"], pushed["index"]
    refs = [
        (single.repository, single.tag),
        (index.repository, index.tag),
        (single.repository, single.tag),  # duplicates are looked up once
        (single.repository, "missing"),
    ]
    assert oci.digests(refs, concurrency=4) == {
        (single.repository, single.tag): single.top.digest,
        (index.repository, index.tag): index.top.digest,
        (single.repository, "missing"): None,
    }
    assert oci.digests([]) == {}


# -- basic auth ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def basic_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryServer]:
    server = RegistryServer(
        tmp_path_factory.mktemp("basic"), htpasswd=(USER, PASSWORD), name="basic"
    )
    server.start()
    with httpx.Client(timeout=10, auth=(USER, PASSWORD)) as http:
        push_oci(http, server.url, build_image("private/app:1.0"))
    yield server
    server.stop()


def test_basic_auth_with_the_right_password(basic_registry: RegistryServer) -> None:
    registry = OciDistribution(basic_registry.url, username=USER, password=PASSWORD)
    try:
        expected = build_image("private/app:1.0").top.digest
        assert registry.digests([("private/app", "1.0"), ("private/app", "2.0")]) == {
            ("private/app", "1.0"): expected,
            ("private/app", "2.0"): None,
        }
    finally:
        registry.close()


def test_basic_auth_wrong_password_fails_without_echoing_it(basic_registry: RegistryServer) -> None:
    wrong = "not-the-Pa55word-xyz"
    registry = OciDistribution(
        basic_registry.url, name="registry dr", username=USER, password=wrong
    )
    with pytest.raises(PermanentError) as caught:
        registry.digest("private/app", "1.0")
    message = str(caught.value)
    assert "authentication failed" in message
    assert "registry dr" in message and basic_registry.url in message
    assert wrong not in message and PASSWORD not in message


def test_basic_auth_required_but_not_configured(basic_registry: RegistryServer) -> None:
    with pytest.raises(PermanentError, match=r"auth\.username and auth\.password"):
        OciDistribution(basic_registry.url).digest("private/app", "1.0")


def test_registry_for_resolves_the_plan_credentials(
    basic_registry: RegistryServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRILLS_TEST_REGISTRY_PASSWORD", PASSWORD)
    plan = plan_from_text(_plan_yaml(basic_registry.url))
    registry = registry_for("primary", plan.sites.primary, plan)
    try:
        assert registry.target == f"registry primary ({basic_registry.url})"
        assert registry.host == basic_registry.url.removeprefix("http://")
        assert registry.digest("private/app", "1.0") == build_image("private/app:1.0").top.digest
    finally:
        registry.close()
    ecr = registry_for("dr", plan.sites.dr, plan)  # built without contacting AWS
    assert ecr.target == "registry dr (ECR 123456789012 in us-west-2)"
    assert ecr.host == "123456789012.dkr.ecr.us-west-2.amazonaws.com"
    ecr.close()


def test_registry_for_resolves_a_username_reference(
    basic_registry: RegistryServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DRILLS_TEST_REGISTRY_PASSWORD", PASSWORD)
    plan = plan_from_text(_plan_yaml(basic_registry.url, username="env:DRILLS_TEST_REGISTRY_USER"))
    assert ("sites.primary.registry.auth.username", "env:DRILLS_TEST_REGISTRY_USER") in list(
        plan.secret_refs()
    )
    monkeypatch.setenv("DRILLS_TEST_REGISTRY_USER", "not-" + USER)
    wrong_user = registry_for("primary", plan.sites.primary, plan)
    try:
        # The reference is what is sent: a wrong user behind it is refused by the registry.
        with pytest.raises(PermanentError, match="authentication failed"):
            wrong_user.digest("private/app", "1.0")
    finally:
        wrong_user.close()
    monkeypatch.setenv("DRILLS_TEST_REGISTRY_USER", USER)
    registry = registry_for("primary", plan.sites.primary, plan)
    try:
        assert registry.digest("private/app", "1.0") == build_image("private/app:1.0").top.digest
    finally:
        registry.close()


def test_a_mistyped_username_reference_is_refused_not_taken_literally(
    basic_registry: RegistryServer,
) -> None:
    with pytest.raises(PlanError, match="env: must be followed by an environment variable name"):
        plan_from_text(_plan_yaml(basic_registry.url, username="env:1-not-a-name"))


# -- bearer token challenge ------------------------------------------------------------


@pytest.fixture(scope="module")
def token_setup(
    registries: RegistryPair, pushed: dict[str, Image], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TokenRegistry, TokenService]]:
    """distribution with token auth over the primary registry's storage (it only reads)."""
    issuer = TokenIssuer()
    service = TokenService(issuer, USER, PASSWORD)
    server = TokenRegistry(
        tmp_path_factory.mktemp("token-registry"),
        registries.primary.storage_path,
        service.realm,
        issuer,
    )
    server.start()
    yield server, service
    server.stop()
    service.stop()


def test_bearer_challenge_gets_one_token_per_scope(
    token_setup: tuple[TokenRegistry, TokenService], pushed: dict[str, Image]
) -> None:
    server, service = token_setup
    single, index = pushed["single"], pushed["index"]
    registry = OciDistribution(server.url, username=USER, password=PASSWORD)
    try:
        refs = [(single.repository, single.tag), (index.repository, index.tag)]
        assert registry.digests(refs) == {refs[0]: single.top.digest, refs[1]: index.top.digest}
        assert registry.digest(single.repository, "absent") is None
    finally:
        registry.close()
    scope = f"repository:{single.repository}:pull"
    assert service.requests[scope] == 1  # cached for the second lookup in the repository
    assert service.requests[f"repository:{index.repository}:pull"] == 1


def test_bearer_wrong_password_fails_without_echoing_it(
    token_setup: tuple[TokenRegistry, TokenService], pushed: dict[str, Image]
) -> None:
    server, _ = token_setup
    wrong = "wrong-Pa55-for-token"
    registry = OciDistribution(server.url, username=USER, password=wrong)
    with pytest.raises(PermanentError) as caught:
        registry.digest(pushed["single"].repository, pushed["single"].tag)
    assert "authentication failed" in str(caught.value)
    assert wrong not in str(caught.value) and server.url in str(caught.value)


def test_static_bearer_token(
    token_setup: tuple[TokenRegistry, TokenService], pushed: dict[str, Image]
) -> None:
    server, service = token_setup
    single = pushed["single"]
    before = sum(service.requests.values())
    good = OciDistribution(
        server.url, token=service.issuer.mint(f"repository:{single.repository}:pull")
    )
    assert good.digest(single.repository, single.tag) == single.top.digest
    assert sum(service.requests.values()) == before  # the plan's token is used as it is
    forged = TokenIssuer().mint(f"repository:{single.repository}:pull")  # an untrusted key
    with pytest.raises(PermanentError, match="authentication failed"):
        OciDistribution(server.url, token=forged).digest(single.repository, single.tag)


# -- failures of the registry itself ------------------------------------------------------


def test_unreachable_registry_is_a_temporary_error(closed_port: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="connection refused"):
        OciDistribution(f"http://{closed_port}", name="registry dr").digest("a/b", "1")
    assert time.monotonic() - started < 2


def test_hung_registry_times_out(blackhole: str) -> None:
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="timed out"):
        OciDistribution(f"http://{blackhole}", read_timeout=0.5).digest("a/b", "1")
    assert time.monotonic() - started < 2


def test_server_error_is_a_temporary_error() -> None:
    class Unavailable(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(503)
            self.send_header("Retry-After", "3")
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server, _ = serve_in_thread("127.0.0.1", port, Unavailable, "unavailable")
    try:
        with pytest.raises(TemporaryError, match="503") as caught:
            OciDistribution(f"http://127.0.0.1:{port}").digest("a/b", "1")
        assert caught.value.delay == 3
    finally:
        server.shutdown()
        server.server_close()


def test_registry_without_the_digest_header(
    registries: RegistryPair, pushed: dict[str, Image]
) -> None:
    """The OCI spec makes Docker-Content-Digest optional: then the manifest is hashed."""
    upstream = httpx.Client(base_url=registries.primary.url, timeout=5)

    class StripDigest(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            answer = upstream.request(
                self.command, self.path, headers={"Accept": self.headers.get("Accept", "")}
            )
            self.send_response(answer.status_code)
            for name in ("Content-Type", "WWW-Authenticate"):
                if name in answer.headers:
                    self.send_header(name, answer.headers[name])
            self.send_header("Content-Length", str(len(answer.content)))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(answer.content)

        do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    port = free_port()
    server, _ = serve_in_thread("127.0.0.1", port, StripDigest, "strip-digest")
    registry = OciDistribution(f"http://127.0.0.1:{port}")
    try:
        for image in pushed.values():
            assert registry.digest(image.repository, image.tag) == image.top.digest
            assert registry.digest(image.repository, image.top.digest) == image.top.digest
        assert registry.digest(pushed["single"].repository, "absent") is None
    finally:
        registry.close()
        server.shutdown()
        server.server_close()
        upstream.close()


def test_not_a_registry_is_a_permanent_error(moto_server: MotoServer) -> None:
    with pytest.raises(PermanentError, match="not an OCI Distribution"):
        OciDistribution(moto_server.url).digest("a/b", "1")


def _plan_yaml(primary_url: str, username: str = USER) -> str:
    return f"""
name: registry-test
sites:
  primary:
    kubernetes: {{kubeconfig: primary.kubeconfig}}
    registry:
      kind: oci
      url: {primary_url}
      auth: {{username: "{username}", password: "env:DRILLS_TEST_REGISTRY_PASSWORD"}}
    objects: {{endpoint_url: "http://127.0.0.1:9", region: us-east-1}}
    ingress: {{mode: controller, deployment: {{namespace: ingress, name: controller}}}}
    endpoint: http://127.0.0.2:18080/healthz
  dr:
    kubernetes: {{kubeconfig: dr.kubeconfig}}
    registry: {{kind: ecr, region: us-west-2, registry_id: "123456789012"}}
    objects: {{endpoint_url: "http://127.0.0.1:9", region: us-east-1}}
    ingress: {{mode: controller, deployment: {{namespace: ingress, name: controller}}}}
    endpoint: http://127.0.0.3:18080/healthz
workloads:
  - {{name: app, namespace: serving, kind: Deployment, tier: critical, dr_replicas: 1}}
dns:
  provider: rfc2136
  servers: ["127.0.0.1:5353"]
  zone: drills.test.
  tsig: {{name: drills-key, secret: "env:DRILLS_TEST_TSIG"}}
  record: {{name: api.drills.test., type: A}}
  primary_value: 127.0.0.2
  dr_value: 127.0.0.3
objectives: {{rto: 15m, rpo: 5m}}
"""
