"""The providers page lists each built-in provider with what it really supports."""

from __future__ import annotations

from pathlib import Path

from drills.targets.providers import installed

PAGE = Path(__file__).parents[2] / "docs" / "how-to" / "providers.md"


def test_every_built_in_provider_is_listed_with_its_checks_and_takeover_support() -> None:
    rows = {
        line.split("|")[1].strip(" `"): line
        for line in PAGE.read_text().splitlines()
        if line.startswith("| `")
    }
    built_in = [i for i in installed() if i.package == "drills"]
    assert {i.name for i in built_in} == {"s3", "azure-blob", "oci", "ecr", "aws-secrets-manager",
                                          "rfc2136", "route53", "external-dns"}  # fmt: skip
    for entry in built_in:
        provider = entry.provider
        assert provider is not None, entry.error
        cells = [c.strip() for c in rows[entry.name].split("|")[1:-1]]
        assert cells[1] == provider.kind
        flags = ["yes" if on else "–" for on in (provider.switch, provider.confirm, provider.undo)]
        assert cells[3:7] == [*flags, "yes" if provider.readiness else "–"], entry.name
        assert cells[7] == ", ".join(f"`{c}`" for c in provider.checks), entry.name


def test_the_checks_a_built_in_provider_names_are_real_checks() -> None:
    from drills.checks.catalog import load_checks

    known = {spec.id for spec in load_checks().all()}
    for entry in installed():
        if entry.package == "drills" and entry.provider is not None:
            assert set(entry.provider.checks) <= known, entry.name
