"""The RFC 2136 adapter against real BIND servers of its own (the shared lab stays untouched)."""

from __future__ import annotations

import base64
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import dns.flags
import dns.message
import dns.query
import pytest

from drills.errors import PermanentError, TemporaryError
from drills.plan import DrillPlan, Rfc2136Dns, plan_from_text
from drills.targets.dns import Rfc2136Target, dns_for, normalize_value, serial_newer
from drills_lab.named import LabDnsRecord, NamedServer
from tests.support.services import require_system_binary

ZONE = "drills.test."
VALID_PLAN = Path(__file__).parents[1] / "plan" / "plans" / "valid.yaml"
KEY = "drills-key"
READONLY_KEY = "readonly-key"
BIG_TXT = 60  # TXT records of 40+ bytes each: far over a 512-byte UDP answer
RECORDS = [LabDnsRecord("api", "A", 30, "127.0.0.2")] + [
    LabDnsRecord("big", "TXT", 30, f'"{"x" * 40}-{i:02d}"') for i in range(BIG_TXT)
]


def random_b64() -> str:
    return base64.b64encode(secrets.token_bytes(32)).decode()


class ReadOnlyKeyNamed(NamedServer):
    """named that also knows READONLY_KEY, which the zone's allow-update does not admit."""

    readonly_secret = random_b64()

    def _conf_text(self) -> str:
        return super()._conf_text() + (
            f'key "{READONLY_KEY}" {{ algorithm hmac-sha256; secret "{self.readonly_secret}"; }};\n'
        )


@pytest.fixture(scope="module")
def masters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NamedServer, NamedServer]]:
    """Two independent masters of one zone with the same records and the same TSIG key."""
    require_system_binary("named", "bind9")
    secret = random_b64()
    first = ReadOnlyKeyNamed(
        tmp_path_factory.mktemp("named-a"), zone=ZONE, records=RECORDS, tsig_secret=secret
    )
    second = NamedServer(
        tmp_path_factory.mktemp("named-b"), zone=ZONE, records=RECORDS, tsig_secret=secret
    )
    with first, second:
        yield first, second


def addr(server: NamedServer) -> str:
    return f"{server.host}:{server.port}"


def config(
    servers: list[str], *, key: str = KEY, zone: str = ZONE, record: str = "api.drills.test."
) -> Rfc2136Dns:
    return Rfc2136Dns.model_validate(
        {
            "provider": "rfc2136",
            "servers": servers,
            "zone": zone,
            "tsig": {"name": key, "algorithm": "hmac-sha256", "secret": "env:UNUSED_IN_TESTS"},
            "record": {"name": record, "type": "A"},
            "primary_value": "127.0.0.2",
            "dr_value": "127.0.0.3",
        }
    )


def target(
    servers: list[str], secret: str, *, key: str = KEY, timeout_s: float = 2.0
) -> Rfc2136Target:
    return Rfc2136Target(config(servers, key=key), secret, timeout_s=timeout_s)


def fresh_name() -> str:
    """A record no other test touches: the module's servers are shared by its tests."""
    return f"t-{secrets.token_hex(4)}.{ZONE}"


def test_read_answers_from_every_server(masters: tuple[NamedServer, NamedServer]) -> None:
    a, b = masters
    answers = target([addr(a), addr(b)], a.tsig_secret).read("api.drills.test.", "A")

    assert [x.server for x in answers] == [addr(a), addr(b)]
    for answer in answers:
        assert answer.values == ("127.0.0.2",)
        assert answer.ttl == 30
        assert answer.serial is not None and answer.serial >= 1


def test_read_of_a_missing_record_is_empty(masters: tuple[NamedServer, NamedServer]) -> None:
    a, _ = masters
    [answer] = target([addr(a)], a.tsig_secret).read(fresh_name(), "A")
    assert answer.values == () and answer.ttl is None and not answer.exists


def test_truncated_udp_answer_is_read_whole_over_tcp(
    masters: tuple[NamedServer, NamedServer],
) -> None:
    a, _ = masters
    # The premise: over plain UDP this answer comes back truncated, holding a part only.
    query = dns.message.make_query("big.drills.test.", "TXT")
    partial = dns.query.udp(query, a.host, port=a.port, timeout=2)
    assert partial.flags & dns.flags.TC

    [answer] = target([addr(a)], a.tsig_secret).read("big.drills.test.", "TXT")

    assert len(answer.values) == BIG_TXT
    assert answer.values[0] == f'"{"x" * 40}-00"'


def test_update_then_confirm_sees_the_serial_move(
    masters: tuple[NamedServer, NamedServer],
) -> None:
    a, _ = masters
    dns_a = target([addr(a)], a.tsig_secret)
    name = fresh_name()
    [before] = dns_a.read(name, "A")
    assert before.serial is not None

    change = dns_a.update(name, "A", "127.0.0.3", 45)
    answers = dns_a.confirm(name, "A", "127.0.0.3", previous_serial=before.serial, deadline_s=5)

    assert change.sent_to == addr(a) and change.change_id is None
    [after] = answers
    assert after.values == ("127.0.0.3",) and after.ttl == 45
    assert after.serial is not None and serial_newer(after.serial, before.serial)
    # A confirm against a serial that has not moved would wait: the serial is checked too.
    with pytest.raises(TemporaryError, match="has not moved past"):
        dns_a.confirm(name, "A", "127.0.0.3", previous_serial=after.serial, deadline_s=0.3)


def test_confirm_waits_for_every_server(masters: tuple[NamedServer, NamedServer]) -> None:
    a, b = masters
    both = target([addr(a), addr(b)], a.tsig_secret)
    only_b = target([addr(b)], a.tsig_secret)
    name = fresh_name()

    both.update(name, "A", "127.0.0.3", 30)  # reaches the first server only
    started = time.monotonic()
    with pytest.raises(TemporaryError) as stale:
        both.confirm(name, "A", "127.0.0.3", deadline_s=0.6)
    assert time.monotonic() - started < 3
    assert f"{addr(b)}: has no such record" in stale.value.cause
    assert f"{addr(a)}:" not in stale.value.cause

    only_b.update(name, "A", "127.0.0.3", 30)
    answers = both.confirm(name, "A", "127.0.0.3", deadline_s=5)
    assert [(x.server, x.values) for x in answers] == [
        (addr(a), ("127.0.0.3",)),
        (addr(b), ("127.0.0.3",)),
    ]


def test_update_replaces_the_whole_record_set(masters: tuple[NamedServer, NamedServer]) -> None:
    a, _ = masters
    dns_a = target([addr(a)], a.tsig_secret)
    name = fresh_name()
    dns_a.update(name, "A", "127.0.0.2", 30)
    dns_a.update(name, "A", "127.0.0.3", 30)
    assert dns_a.read(name, "A")[0].values == ("127.0.0.3",)


def test_check_control_passes_and_changes_nothing(
    masters: tuple[NamedServer, NamedServer],
) -> None:
    a, _ = masters
    dns_a = target([addr(a)], a.tsig_secret)
    [before] = dns_a.read("api.drills.test.", "A")
    dns_a.check_control("api.drills.test.", "A")
    dns_a.check_control(fresh_name(), "A")  # an absent record: "does not exist" holds
    [after] = dns_a.read("api.drills.test.", "A")
    assert after == before  # same values, TTL and SOA serial


def test_wrong_tsig_secret_is_badsig_and_never_echoed(
    masters: tuple[NamedServer, NamedServer],
) -> None:
    a, _ = masters
    wrong = random_b64()
    dns_a = target([addr(a)], wrong)
    name = fresh_name()

    with pytest.raises(PermanentError, match=r"TSIG key rejected \(BADSIG\)") as refused:
        dns_a.check_control("api.drills.test.", "A")
    with pytest.raises(PermanentError, match="BADSIG") as refused_update:
        dns_a.update(name, "A", "127.0.0.3", 30)

    for exc in (refused.value, refused_update.value):
        assert wrong not in str(exc) and a.tsig_secret not in str(exc)
        assert exc.target == f"dns rfc2136 {addr(a)} zone {ZONE}"
    assert wrong not in repr(dns_a)
    assert dns_a.read(name, "A")[0].values == ()  # the refused update changed nothing


def test_unknown_key_name_is_badkey(masters: tuple[NamedServer, NamedServer]) -> None:
    a, _ = masters
    dns_a = target([addr(a)], a.tsig_secret, key="nobody-knows-this-key")
    with pytest.raises(PermanentError, match=r"TSIG key rejected \(BADKEY\)"):
        dns_a.check_control("api.drills.test.", "A")


def test_key_outside_the_update_acl_is_refused(masters: tuple[NamedServer, NamedServer]) -> None:
    a, _ = masters
    dns_a = target([addr(a)], ReadOnlyKeyNamed.readonly_secret, key=READONLY_KEY)
    with pytest.raises(PermanentError, match="REFUSED"):
        dns_a.check_control("api.drills.test.", "A")


def _plan_with_tsig_name_by_reference(server: str) -> DrillPlan:
    text = VALID_PLAN.read_text(encoding="utf-8")
    text = text.replace('servers: ["127.0.0.1:5353"]', f'servers: ["{server}"]')
    text = text.replace(
        "tsig: {name: drills-key, algorithm: hmac-sha256, secret: file:tsig.secret}",
        "tsig: {name: env:DRILLS_TEST_TSIG_NAME, secret: env:DRILLS_TEST_TSIG_SECRET}",
    )
    return plan_from_text(text)


def test_a_tsig_key_name_by_reference_is_resolved_and_used(
    masters: tuple[NamedServer, NamedServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, _ = masters
    plan = _plan_with_tsig_name_by_reference(addr(a))
    assert ("dns.tsig.name", "env:DRILLS_TEST_TSIG_NAME") in list(plan.secret_refs())
    monkeypatch.setenv("DRILLS_TEST_TSIG_SECRET", a.tsig_secret)
    monkeypatch.setenv("DRILLS_TEST_TSIG_NAME", "nobody-knows-this-key")
    with pytest.raises(PermanentError, match=r"TSIG key rejected \(BADKEY\)"):
        dns_for(plan, timeout_s=2.0).check_control("api.drills.test.", "A")
    monkeypatch.setenv("DRILLS_TEST_TSIG_NAME", KEY)
    dns_for(plan, timeout_s=2.0).check_control("api.drills.test.", "A")  # the server's key
    monkeypatch.setenv("DRILLS_TEST_TSIG_NAME", "not a name!")
    with pytest.raises(PermanentError, match="not a valid DNS name") as refused:
        dns_for(plan, timeout_s=2.0)
    assert "not a name!" not in str(refused.value)


def test_secret_that_is_not_base64_is_refused_without_echo() -> None:
    with pytest.raises(PermanentError, match="not valid base64") as refused:
        target(["127.0.0.1:53"], "not*base64*at%all")
    assert "not*base64" not in str(refused.value)


def test_a_server_not_serving_the_zone_is_not_authoritative(
    masters: tuple[NamedServer, NamedServer],
) -> None:
    a, _ = masters
    other = config([addr(a)], zone="other.test.", record="x.other.test.")
    with pytest.raises(PermanentError, match="REFUSED"):
        Rfc2136Target(other, a.tsig_secret, timeout_s=1).read("x.other.test.", "A")


def test_closed_port_fails_at_once(closed_port: str) -> None:
    dns_closed = target([closed_port], random_b64(), timeout_s=5)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="connection refused"):
        dns_closed.read("api.drills.test.", "A")
    with pytest.raises(TemporaryError, match="connection refused"):
        dns_closed.update("api.drills.test.", "A", "127.0.0.3", 30)
    assert time.monotonic() - started < 1  # refused, not timed out


def test_silent_udp_server_times_out(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as silent:
        silent.bind(("127.0.0.1", 0))  # bound, so no ICMP refusal: datagrams just vanish
        host, port = silent.getsockname()
        dns_silent = target([f"{host}:{port}"], random_b64(), timeout_s=0.3)
        started = time.monotonic()
        with pytest.raises(TemporaryError, match=r"no answer within 0.3s"):
            dns_silent.read("api.drills.test.", "A")
        assert time.monotonic() - started < 2


def test_hung_tcp_server_times_out_an_update(blackhole: str) -> None:
    dns_hung = target([blackhole], random_b64(), timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(TemporaryError, match="no answer within"):
        dns_hung.update("api.drills.test.", "A", "127.0.0.3", 30)
    assert time.monotonic() - started < 2


def test_confirm_names_a_server_that_went_down(
    masters: tuple[NamedServer, NamedServer], closed_port: str
) -> None:
    a, _ = masters
    dns_two = target([addr(a), closed_port], a.tsig_secret)
    with pytest.raises(TemporaryError) as stale:
        dns_two.confirm("api.drills.test.", "A", "127.0.0.2", deadline_s=0.3)
    assert f"{closed_port}: connection refused" in stale.value.cause


@pytest.mark.parametrize(
    ("rtype", "raw", "canonical"),
    [
        ("A", " 127.0.0.3 ", "127.0.0.3"),
        ("AAAA", "2001:DB8:0:0::1", "2001:db8::1"),
        ("CNAME", "Edge.Example.COM", "edge.example.com."),
    ],
)
def test_values_are_normalised(rtype: str, raw: str, canonical: str) -> None:
    assert normalize_value(rtype, raw) == canonical


def test_serials_compare_across_wraparound() -> None:
    assert serial_newer(2, 1) and not serial_newer(1, 2) and not serial_newer(5, 5)
    assert serial_newer(3, 2**32 - 2)  # RFC 1982: 3 follows 4294967294
