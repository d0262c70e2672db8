"""external-dns's TXT registry names and values, as its registry/txt.go maps and writes them,
and ESO's refreshInterval durations."""

from __future__ import annotations

import pytest

from drills.targets.dns import parse_labels, txt_names
from drills.targets.external_secrets import go_duration


@pytest.mark.parametrize(
    ("name", "rtype", "prefix", "expected"),
    [
        ("api.drills.test.", "A", "", ("a-api.drills.test.", "api.drills.test.")),
        ("api.drills.test.", "CNAME", "", ("cname-api.drills.test.", "api.drills.test.")),
        ("api.drills.test.", "AAAA", "reg-", ("reg-aaaa-api.drills.test.", "reg-api.drills.test.")),
        ("single.", "A", "", ("a-single.", "single.")),
    ],
)
def test_txt_names_follow_the_registrys_old_and_new_formats(
    name: str, rtype: str, prefix: str, expected: tuple[str, str]
) -> None:
    assert txt_names(name, rtype, prefix) == expected


def test_registry_labels_are_read_only_from_external_dns_heritage() -> None:
    value = '"heritage=external-dns,external-dns/owner=dr,external-dns/resource=crd/ns/api"'
    assert parse_labels(value) == {
        "external-dns/owner": "dr",
        "external-dns/resource": "crd/ns/api",
    }
    assert parse_labels('"v=spf1 -all"') is None
    assert parse_labels('"external-dns/owner=dr,heritage=external-dns"') is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("1h", 3600.0), ("15m", 900.0), ("1h30m", 5400.0), ("0", 0.0), ("500ms", 0.5),
     ("1.5h", 5400.0), ("soon", None), ("1h junk", None), ("", None)],
)  # fmt: skip
def test_go_durations(text: str, seconds: float | None) -> None:
    assert go_duration(text) == seconds
