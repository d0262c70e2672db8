"""Bounded waits, retries and clear failures, proven through a fault proxy in front of
real services: the lab's Kubernetes API (over TLS, and plain HTTP for request-level
faults), a distribution registry, moto's S3 and BIND.

Each test gives its adapter short timeouts, so a hang costs a fraction of a second.
"""

from __future__ import annotations

import datetime as dt
import secrets
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from drills.errors import PermanentError, TargetError, TemporaryError
from drills.targets.aws import AwsEndpoint
from drills.targets.kube import KubeTarget
from drills.targets.objects import ObjectStore
from drills.targets.registry import OciDistribution
from drills.targets.retry import RetryPolicy, TimedOut, Waiting, retry_call, retry_until
from drills_lab.kubeapi import KubeApiServer, write_kubeconfig
from drills_lab.moto_server import MotoServer
from drills_lab.named import NamedServer
from drills_lab.registry import RegistryPair
from drills_lab.topology import LabWorkload
from tests.support.faultproxy import FaultProxy, UdpFaultProxy
from tests.support.kube_sites import plan_for
from tests.support.services import bind_target

TOKEN = "fault-token-" + secrets.token_hex(8)
TIMEOUT = 0.5  # every adapter's read timeout here
MARGIN = 0.6  # what a failure may take beyond its timeout: retries of other faults, setup
WEB = LabWorkload("apps", "web", "Deployment", "critical", "platform/web:1", 1, 1)


@pytest.fixture(scope="module")
def kube_tls() -> Iterator[KubeApiServer]:
    server = KubeApiServer(token=TOKEN, ready_delay=0.1, name="faults-tls", tls=True)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def kube_http() -> Iterator[KubeApiServer]:
    server = KubeApiServer(token=TOKEN, ready_delay=0.1, name="faults-http")
    server.start()
    yield server
    server.stop()


def upstream(url: str) -> str:
    return url.split("://", 1)[1].rstrip("/")


def kube_via(
    proxy: FaultProxy, server: KubeApiServer, tmp_path: Path, *, token: str = TOKEN
) -> KubeTarget:
    """A plan whose kubeconfigs point at the proxy, with the lab server's CA and token.

    The proxy listens on 127.0.0.1 like the server, whose certificate names that
    address, so TLS verifies through it unchanged.
    """
    scheme = server.url.split("://", 1)[0]
    for role in ("primary", "dr"):
        write_kubeconfig(
            tmp_path / f"{role}.kubeconfig",
            server_url=f"{scheme}://{proxy.address}",
            context=role,
            token=token,
            ca_pem=server.ca_pem if scheme == "https" else None,
        )
    plan = plan_for(tmp_path, workloads=[WEB])
    return KubeTarget.for_site(
        "dr", plan.sites.dr, plan, connect_timeout=TIMEOUT, read_timeout=TIMEOUT
    )


def assert_clear(exc: TargetError, where: str, *secrets_: str) -> None:
    """The message names the target and a cause, and echoes no credential."""
    assert where in exc.target and where in str(exc)
    assert exc.cause
    for value in secrets_:
        assert value not in str(exc)


# -- Kubernetes ------------------------------------------------------------------------
def test_kube_passes_through_the_proxy_with_latency(
    kube_tls: KubeApiServer, tmp_path: Path
) -> None:
    with FaultProxy(upstream(kube_tls.url)) as proxy:
        kube = kube_via(proxy, kube_tls, tmp_path)
        proxy.latency(0.1)
        started = time.monotonic()
        assert kube.version()[0] == 1
        assert time.monotonic() - started >= 0.1
        kube.close()


def test_kube_blackhole_fails_within_the_timeout(kube_tls: KubeApiServer, tmp_path: Path) -> None:
    with FaultProxy(upstream(kube_tls.url)) as proxy:
        kube = kube_via(proxy, kube_tls, tmp_path)
        proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(TimedOut, match="timed out") as caught:
            kube.version()
        assert time.monotonic() - started < TIMEOUT + MARGIN
        assert_clear(caught.value, proxy.address, TOKEN)
        assert proxy.counters.connections == 1  # a hung server is not asked again
        kube.close()


def test_kube_reset_is_retried(kube_tls: KubeApiServer, tmp_path: Path) -> None:
    with FaultProxy(upstream(kube_tls.url)) as proxy:
        kube = kube_via(proxy, kube_tls, tmp_path)
        proxy.reset_next(1)
        assert kube.nodes() == []
        assert proxy.counters.resets == 1
        assert proxy.counters.connections == 2
        kube.close()


def test_kube_503_burst_is_retried(kube_http: KubeApiServer, tmp_path: Path) -> None:
    with FaultProxy(upstream(kube_http.url), http=True) as proxy:
        kube = kube_via(proxy, kube_http, tmp_path)
        proxy.answer_next(2, 503)
        assert kube.version()[:2] == (1, 30)
        assert (proxy.counters.requests, proxy.counters.injected) == (3, 2)
        kube.close()


def test_kube_retries_are_bounded(kube_http: KubeApiServer, tmp_path: Path) -> None:
    with FaultProxy(upstream(kube_http.url), http=True) as proxy:
        kube = kube_via(proxy, kube_http, tmp_path)
        proxy.answer_next(50, 503)
        started = time.monotonic()
        with pytest.raises(TemporaryError, match=r"HTTP 503.*gave up after 3 attempts") as caught:
            kube.nodes()
        assert time.monotonic() - started < 2
        assert proxy.counters.requests == 3
        assert_clear(caught.value, proxy.address, TOKEN)
        kube.close()


def test_a_phase_retries_past_the_adapters_count_until_its_deadline(
    kube_http: KubeApiServer, tmp_path: Path
) -> None:
    """The adapter alone gives up after 3 attempts; a takeover's phase goes on until its
    own deadline, telling each wait, and never retries a permanent refusal."""
    with FaultProxy(upstream(kube_http.url), http=True) as proxy:
        kube = kube_via(proxy, kube_http, tmp_path)
        waits: list[Waiting] = []
        proxy.answer_next(8, 503)
        until = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=20)
        nodes = retry_until(kube.nodes, deadline=time.monotonic() + 20, on_wait=waits.append)
        assert nodes == [] and proxy.counters.injected == 8
        assert waits and all("HTTP 503" in w.cause for w in waits)
        assert all(abs((w.until - until).total_seconds()) < 1 for w in waits)
        assert "retrying until" in waits[-1].describe()

        # When an attempt starts is retry_until's to decide; how long one takes (the
        # adapter's own 3 requests) is the machine's. So the bounds are on the attempts.
        proxy.answer_next(1000, 503)
        spans: list[tuple[float, float]] = []

        def nodes_attempt() -> list[Any]:
            start = time.monotonic()
            try:
                return kube.nodes()
            finally:
                spans.append((start, time.monotonic()))

        deadline = time.monotonic() + 1.5
        with pytest.raises(TemporaryError, match=r"HTTP 503.*to the deadline"):
            retry_until(nodes_attempt, deadline=deadline)
        raised = time.monotonic()
        assert len(spans) > 1 and proxy.counters.requests > 8 + 3  # past the adapter's 3
        *earlier, (last_start, last_end) = spans
        assert all(end < deadline for _, end in earlier)  # each failed early: tried again
        assert raised >= deadline and last_start < deadline + MARGIN  # none begun past it
        assert raised - last_end < MARGIN  # given up once the last one failed

        proxy.pass_through()
        proxy.answer_next(1, 404)
        before = proxy.counters.requests
        with pytest.raises(PermanentError, match="HTTP 404"):
            retry_until(kube.nodes, deadline=time.monotonic() + 20)
        assert proxy.counters.requests == before + 1
        kube.close()


def test_a_stalled_api_is_waited_out_within_the_deadline(
    kube_tls: KubeApiServer, tmp_path: Path
) -> None:
    """Stalled past the read timeout (its connections held open and silent), then
    released: the phase's retry sees it again."""
    with FaultProxy(upstream(kube_tls.url)) as proxy:
        kube = kube_via(proxy, kube_tls, tmp_path)
        assert kube.version()[0] == 1
        proxy.stall()
        threading.Timer(TIMEOUT * 3, proxy.pass_through).start()
        waits: list[Waiting] = []
        major = retry_until(
            lambda: kube.version()[0], deadline=time.monotonic() + 10, on_wait=waits.append
        )
        assert major == 1
        assert any("timed out" in w.cause for w in waits), waits
        kube.close()


@pytest.mark.parametrize("status", [401, 403, 404])
def test_kube_permanent_status_fails_at_once(
    kube_http: KubeApiServer, tmp_path: Path, status: int
) -> None:
    with FaultProxy(upstream(kube_http.url), http=True) as proxy:
        kube = kube_via(proxy, kube_http, tmp_path)
        proxy.answer_next(1, status)
        with pytest.raises(PermanentError, match=f"HTTP {status}") as caught:
            kube.nodes()
        assert proxy.counters.requests == 1
        assert_clear(caught.value, proxy.address, TOKEN)
        kube.close()


def test_kube_wrong_token_and_absent_object_fail_at_once(
    kube_tls: KubeApiServer, tmp_path: Path
) -> None:
    wrong = "wrong-token-" + secrets.token_hex(8)
    with FaultProxy(upstream(kube_tls.url)) as proxy:
        kube = kube_via(proxy, kube_tls, tmp_path, token=wrong)
        with pytest.raises(PermanentError, match="HTTP 401") as caught:
            kube.version()
        assert_clear(caught.value, proxy.address, wrong, TOKEN)
        kube.close()
        kube = kube_via(proxy, kube_tls, tmp_path)
        before = proxy.counters.connections
        with pytest.raises(PermanentError, match="HTTP 404"):
            kube.scale("default", "Deployment", "absent", 1)
        assert proxy.counters.connections == before + 1
        kube.close()


# -- a registry ----------------------------------------------------------------------
def test_registry_503_burst_is_retried_and_blackhole_times_out(registries: RegistryPair) -> None:
    with FaultProxy(upstream(registries.dr.url), http=True) as proxy:
        registry = OciDistribution(f"http://{proxy.address}", name="dr", read_timeout=TIMEOUT)
        proxy.answer_next(2, 503)
        assert registry.digest("absent/repo", "1") is None
        # /v2/ twice refused, then answered; then the manifest HEAD (404), and the GET
        # whose error code says the manifest is absent
        assert (proxy.counters.requests, proxy.counters.injected) == (5, 2)
        registry.close()

        registry = OciDistribution(f"http://{proxy.address}", name="dr", read_timeout=TIMEOUT)
        proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(TimedOut, match="timed out") as caught:
            registry.digest("absent/repo", "1")
        assert time.monotonic() - started < TIMEOUT + MARGIN
        assert_clear(caught.value, proxy.address)
        registry.close()


@pytest.mark.parametrize("status", [401, 403])
def test_registry_refusal_fails_at_once(registries: RegistryPair, status: int) -> None:
    with FaultProxy(upstream(registries.dr.url), http=True) as proxy:
        registry = OciDistribution(f"http://{proxy.address}", name="dr", read_timeout=TIMEOUT)
        assert registry.digest("absent/repo", "1") is None  # learns the API first
        proxy.answer_next(1, status)
        with pytest.raises(PermanentError, match="authentication failed") as caught:
            registry.digest("absent/repo", "2")
        # /v2/, the HEAD and the GET that proved "1" absent; then the refused HEAD, alone
        assert proxy.counters.requests == 4
        assert_clear(caught.value, proxy.address)
        registry.close()


# -- S3 --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def bucket(moto_server: MotoServer) -> str:
    name = f"faults-{secrets.token_hex(6)}"
    s3 = boto3.client(
        "s3",
        endpoint_url=moto_server.url,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    s3.create_bucket(Bucket=name)
    s3.put_object(Bucket=name, Key="a/1", Body=b"x")
    return name


def s3_via(proxy: FaultProxy) -> ObjectStore:
    where = AwsEndpoint("us-east-1", f"http://{proxy.address}", "testing", "s3-secret-key")
    return ObjectStore(where, "dr", read_timeout=TIMEOUT)


# A read timeout of seconds against moto: a loaded machine alone makes it time out.
@pytest.mark.serial
def test_s3_faults(moto_server: MotoServer, bucket: str) -> None:
    with FaultProxy(upstream(moto_server.url), http=True) as proxy:
        store = s3_via(proxy)
        proxy.answer_next(2, 503)
        assert store.versioning(bucket) == "Disabled"
        assert (proxy.counters.requests, proxy.counters.injected) == (3, 2)

        proxy.pass_through()
        proxy.reset_next(1)
        assert [o.key for o in store.objects(bucket)] == ["a/1"]
        assert proxy.counters.resets == 1

        proxy.answer_next(1, 403)
        requests = proxy.counters.requests
        with pytest.raises(PermanentError, match="403") as caught:
            store.versioning(bucket)
        assert proxy.counters.requests == requests + 1
        assert_clear(caught.value, proxy.address, "s3-secret-key")

        with pytest.raises(PermanentError, match="does not exist") as absent:
            store.versioning("no-such-bucket-" + secrets.token_hex(4))
        assert proxy.counters.requests == requests + 2
        assert_clear(absent.value, proxy.address)
        store.close()

        store = s3_via(proxy)
        proxy.blackhole()
        started = time.monotonic()
        with pytest.raises(TimedOut, match="timed out") as hung:
            store.versioning(bucket)
        assert time.monotonic() - started < TIMEOUT + MARGIN
        assert_clear(hung.value, proxy.address, "s3-secret-key")
        store.close()


# -- DNS (BIND) --------------------------------------------------------------------------
def test_dns_lost_datagram_is_asked_again(named_server: NamedServer) -> None:
    with UdpFaultProxy(f"{named_server.host}:{named_server.port}") as proxy:
        dns = bind_target(named_server, [proxy.address], timeout_s=0.9)
        proxy.set("drop", 1)
        [answer] = dns.read(f"api.{named_server.zone}", "A")
        assert answer.values == ("127.0.0.2",)
        assert proxy.datagrams == 3  # the dropped query, its retransmission, the SOA query


def test_dns_bad_tsig_fails_at_once(named_server: NamedServer) -> None:
    wrong = "d3Jvbmcgc2VjcmV0IG9mIHRoaXJ0eS10d28gYnl0ZXMhIQ=="
    with FaultProxy(f"{named_server.host}:{named_server.port}") as proxy:
        dns = bind_target(named_server, [proxy.address], secret=wrong)
        with pytest.raises(PermanentError, match="BADSIG") as caught:
            dns.update(f"api.{named_server.zone}", "A", "127.0.0.3", 30)
        assert proxy.counters.connections == 1
        assert_clear(caught.value, proxy.address, wrong, named_server.tsig_secret)
    direct = bind_target(named_server, [f"{named_server.host}:{named_server.port}"], secret=wrong)
    [answer] = direct.read(f"api.{named_server.zone}", "A")
    assert answer.values == ("127.0.0.2",)  # nothing changed


def test_dns_confirm_with_a_hung_server_ends_at_its_deadline(named_server: NamedServer) -> None:
    """The dns phase's wait: one authoritative server hangs, confirm still ends in time."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as hung:
        hung.bind(("127.0.0.1", 0))  # bound, so datagrams vanish without an ICMP refusal
        silent = "{}:{}".format(*hung.getsockname())
        live = f"{named_server.host}:{named_server.port}"
        dns = bind_target(named_server, [live, silent], timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(TemporaryError, match=r"not yet 127\.0\.0\.2 on every server") as caught:
            dns.confirm(f"api.{named_server.zone}", "A", "127.0.0.2", deadline_s=1.0)
        # the deadline, plus at most one poll's query to the hung server
        assert time.monotonic() - started < 1.0 + 0.3 + MARGIN
        assert f"{silent}: timed out" in caught.value.cause


# -- the retry policy itself --------------------------------------------------------------
def flaky(errors: list[Exception]) -> tuple[list[int], Callable[[], str]]:
    """A call that raises ``errors`` in turn, then answers; and how often it was called."""
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    return calls, call


def test_retry_policy_bounds_and_hints() -> None:
    waits: list[float] = []
    policy = RetryPolicy(attempts=4, base_delay_s=0.1, max_delay_s=1.0, deadline_s=5.0)
    hinted = TemporaryError("t", "HTTP 503", delay=0.7)
    calls, call = flaky([TemporaryError("t", "reset", delay=0.0), hinted])
    assert retry_call(call, policy=policy, sleep=waits.append, draw=lambda: 1.0) == "ok"
    assert len(calls) == 3 and waits == [0.1, 0.7]  # full-jitter ceiling, then Retry-After

    for error in (PermanentError("t", "HTTP 403"), TimedOut("t", "timed out", delay=0.0)):
        calls, call = flaky([error])
        with pytest.raises(type(error)):
            retry_call(call, policy=policy, sleep=waits.append)
        assert len(calls) == 1  # never retried

    calls, call = flaky([TemporaryError("t", "slow down", delay=30.0)])
    with pytest.raises(TemporaryError, match=r"slow down$"):
        retry_call(call, policy=policy, sleep=waits.append)
    assert len(calls) == 1  # the server asks for longer than this call may wait

    calls, call = flaky([TemporaryError("t", "HTTP 503", delay=0.0)] * 10)
    with pytest.raises(TemporaryError, match="gave up after 4 attempts"):
        retry_call(call, policy=policy, sleep=lambda _: None)
    assert len(calls) == 4

    outer_calls: list[int] = []

    def nested() -> str:
        outer_calls.append(1)
        return retry_call(call, policy=policy, sleep=lambda _: None)

    calls.clear()
    with pytest.raises(TemporaryError, match=r"gave up after 4 attempts in [0-9.]+s\)$"):
        retry_call(nested, policy=policy, sleep=lambda _: None)
    assert len(outer_calls) == 1 and len(calls) == 4  # nesting does not multiply attempts


def test_retry_deadline_cuts_attempts_short() -> None:
    policy = RetryPolicy(attempts=100, base_delay_s=0.05, max_delay_s=0.05, deadline_s=0.3)
    calls, call = flaky([TemporaryError("t", "HTTP 503", delay=0.0)] * 100)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="gave up after"):
        retry_call(call, policy=policy)
    assert time.monotonic() - started < 0.3 + 0.1
    assert 1 < len(calls) < 100
