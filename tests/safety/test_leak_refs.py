"""Credentials come only from the references a plan names, and no message ever echoes one.

On the shared lab, read-only: a plan with inline credentials is refused by every
command and by the dashboard; references to missing variables and files fail naming
the reference; wrong TSIG and AWS keys fail (or pass) without being printed or logged.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from drills_lab.runtime import LabInfo
from tests.support.leak_scan import ROOT, Cli, Outcome, SecretScanner, plan_variant

INLINE_AWS = "inline-aws-secret-" + secrets.token_hex(12)
INLINE_TSIG = base64.b64encode(b"inline-tsig-" + secrets.token_bytes(20)).decode()
WRONG_AWS = "wrong-aws-secret-" + secrets.token_hex(12)
WRONG_TSIG = base64.b64encode(b"wrong-tsig-" + secrets.token_bytes(21)).decode()
ABSENT_ENV = "DRILLS_LEAK_TEST_ABSENT_TSIG"
EXIT_INVALID = 2
SCANNER = SecretScanner(
    {
        "inline aws key": INLINE_AWS,
        "inline tsig key": INLINE_TSIG,
        "wrong aws key": WRONG_AWS,
        "wrong tsig key": WRONG_TSIG,
    }
)


def inline(data: dict[str, Any]) -> None:
    data["sites"]["primary"]["aws"]["credentials"]["secret_access_key"] = INLINE_AWS
    data["dns"]["tsig"]["secret"] = INLINE_TSIG


def missing(data: dict[str, Any]) -> None:
    data["dns"]["tsig"]["secret"] = f"env:{ABSENT_ENV}"
    data["sites"]["dr"]["aws"]["credentials"]["secret_access_key"] = "file:aws/absent_secret"
    data["sites"]["primary"]["kubernetes"]["kubeconfig"] = "absent.kubeconfig"


def wrong_keys(names: tuple[str, str]) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["dns"]["tsig"]["secret"] = f"file:{names[0]}"
        for site in ("primary", "dr"):
            data["sites"][site]["aws"]["credentials"]["secret_access_key"] = f"file:{names[1]}"
            data["sites"][site]["objects"]["credentials"]["secret_access_key"] = f"file:{names[1]}"

    return change


@dataclass
class RefRuns:
    out: Path
    inline: Path
    missing: Path
    wrong: Path
    done: dict[str, Outcome]

    def of(self, *args: str | Path) -> Outcome:
        return self.done[" ".join(map(str, args))]


@pytest.fixture(scope="module")
def ref_runs(lab: LabInfo, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RefRuns]:
    """Every command on the three plans, in one CLI batch (one interpreter start)."""
    out = tmp_path_factory.mktemp("leak-refs")
    state = Path(lab.state_dir)
    wrong_files = (f"leak-wrong-tsig-{os.getpid()}.secret", f"leak-wrong-aws-{os.getpid()}")
    (state / wrong_files[0]).write_text(WRONG_TSIG + "\n")
    (state / wrong_files[1]).write_text(WRONG_AWS + "\n")
    plans = {
        "inline": plan_variant(lab, "leak-inline", inline),
        "missing": plan_variant(lab, "leak-missing", missing),
        "wrong": plan_variant(lab, "leak-wrong", wrong_keys(wrong_files)),
    }
    commands = [
        ["plan", "validate", str(plans["inline"])],
        ["readiness", str(plans["inline"])],
        ["run", "--yes", str(plans["inline"])],
        ["plan", "validate", "--resolve", str(plans["missing"])],
        ["readiness", "-v", "--only", "dns.control", str(plans["missing"])],
        ["plan", "validate", "--resolve", str(plans["wrong"])],
        ["readiness", "-v", "--no-store", "--only", "dns.control", "--only", "data.replicated",
         str(plans["wrong"])],
    ]  # fmt: skip
    env = os.environ | {"DRILLS_DB_URL": f"sqlite:///{out / 'history.db'}", "COLUMNS": "200"}
    env.pop(ABSENT_ENV, None)
    try:
        done = Cli(out, env).batch(commands)
        yield RefRuns(out, plans["inline"], plans["missing"], plans["wrong"], done)
    finally:  # the lab is shared: leave it as found
        for path in [*plans.values(), *(state / name for name in wrong_files)]:
            path.unlink(missing_ok=True)


def test_inline_credentials_are_refused_by_every_command(ref_runs: RefRuns) -> None:
    for command in ("plan validate", "readiness", "run --yes"):
        outcome = ref_runs.of(*command.split(), ref_runs.inline)
        assert outcome.code == EXIT_INVALID, (command, outcome)
        assert "looks like a literal credential" in outcome.stderr, (command, outcome.stderr)
        assert "sites.primary.aws.credentials.secret_access_key" in outcome.stderr
        assert "dns.tsig.secret" in outcome.stderr


def test_missing_references_fail_naming_the_reference(ref_runs: RefRuns) -> None:
    validate = ref_runs.of("plan", "validate", "--resolve", ref_runs.missing)
    assert validate.code == EXIT_INVALID
    assert f"environment variable {ABSENT_ENV} is not set" in validate.stderr
    assert "aws/absent_secret does not exist" in validate.stderr
    assert "absent.kubeconfig does not exist" in validate.stderr
    readiness = ref_runs.of("readiness", "-v", "--only", "dns.control", ref_runs.missing)
    assert readiness.code != 0
    assert ABSENT_ENV in readiness.stdout + readiness.stderr


def test_wrong_keys_resolve_but_fail_without_being_echoed(ref_runs: RefRuns) -> None:
    assert ref_runs.of("plan", "validate", "--resolve", ref_runs.wrong).code == 0
    readiness = next(o for c, o in ref_runs.done.items() if c.startswith("readiness -v --no-store"))
    assert readiness.code == 1
    line = next(x for x in readiness.stdout.splitlines() if "dns.control" in x)
    assert "TSIG key rejected (BADSIG)" in line, line


def test_no_command_printed_or_logged_a_credential(ref_runs: RefRuns) -> None:
    assert len(ref_runs.done) == 7
    leaks = list(SCANNER.scan_tree(ref_runs.out))
    assert not leaks, "credentials found in:\n" + "\n".join(map(str, leaks))


def test_the_dashboard_refuses_the_inline_plan_without_showing_it(
    ref_runs: RefRuns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not (ROOT / "ui" / "streamlit_app.py").exists():
        return
    import streamlit as st

    from tests.support.ui import open_page, shown

    monkeypatch.setenv("DRILLS_DB_URL", f"sqlite:///{tmp_path / 'ui.db'}")
    monkeypatch.setenv("PREFECT_API_URL", "")
    monkeypatch.setenv("DRILLS_PLANS", str(ref_runs.inline))
    st.cache_data.clear()
    try:
        at = open_page("plans")
    finally:
        st.cache_data.clear()
    text = shown(at)
    assert "problem" in text and "looks like a literal credential" in text, text
    rendered = b"\n".join(_protos(at._tree))
    assert not list(SCANNER.scan_bytes(rendered + text.encode(), "the plans page"))


def _protos(node: Any) -> list[bytes]:
    found = []
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "SerializeToString"):
        found.append(proto.SerializeToString())
    for child in (getattr(node, "children", None) or {}).values():
        found += _protos(child)
    return found
