"""No secret value ever reaches a log, the history store, Prefect, a report or the UI.

One lab of its own with distinctive secrets; everything an operator can run is run
against it (CLI readiness, drills that pass and fail, reports, history, plan
commands, the Prefect flows, the dashboard pages) with DEBUG logging captured; then
every byte written is scanned for every secret, plain and base64-encoded.
"""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import boto3
import httpx
import pytest
import yaml

from drills.evidence.keys import SIGNING_KEY_ENV, keygen
from drills.store.history import HistoryStore
from drills_lab.runtime import AWS_KEY_ID, SECRET_PREFIX, LabInfo
from tests.support.leak_scan import ROOT, Cli, Leak, SecretScanner, captured_logs, plan_variant
from tests.support.receivers import JsonReceiver, SmtpReceiver, json_receiver, smtp_receiver
from tests.support.services import own_lab

# The token in the notification target's URL: it must never leave the process either.
NOTIFY_TOKEN = "notify-token-9f2c41d7e0b3a6"


@dataclass
class LeakRun:
    info: LabInfo
    plan: Path
    out: Path
    db_file: Path
    scanner: SecretScanner
    cli: Cli
    messages: list[bytes] = field(default_factory=list)  # what the notification receivers got
    rendered: dict[str, bytes] = field(default_factory=dict)  # label -> what was read back


def lab_secrets(info: LabInfo) -> dict[str, str]:
    """Every secret the lab holds, read back the way an attacker with the lab's keys would."""
    state = Path(info.state_dir)
    found = {
        "tsig key": (state / "tsig.secret").read_text().strip(),
        "aws secret access key": (state / "aws" / "secret_access_key").read_text().strip(),
    }
    for site in ("primary", "dr"):
        kubeconfig = yaml.safe_load((state / f"{site}.kubeconfig").read_text())
        token = kubeconfig["users"][0]["user"]["token"]
        found["kubeconfig token"] = token
        reply = httpx.get(
            f"{info.kube[site]}/api/v1/secrets",
            headers={"Authorization": f"Bearer {token}"},
            verify=False,
            timeout=10,
        )
        reply.raise_for_status()
        for item in reply.json()["items"]:
            meta = item["metadata"]
            for key, encoded in (item.get("data") or {}).items():
                value = base64.b64decode(encoded).decode()
                if value.startswith(SECRET_PREFIX):
                    found[f"k8s {site} {meta['namespace']}/{meta['name']}[{key}]"] = value
    for region in ("us-east-1", "us-west-2"):
        client = boto3.client(
            "secretsmanager",
            endpoint_url=info.moto,
            region_name=region,
            aws_access_key_id=AWS_KEY_ID,
            aws_secret_access_key=found["aws secret access key"],
        )
        for entry in client.list_secrets()["SecretList"]:
            value = client.get_secret_value(SecretId=entry["ARN"])["SecretString"]
            found[f"secrets manager {region} {entry['Name']}"] = value
    return found


def failing_smoke(data: dict[str, Any]) -> None:
    data["smoke"][0]["expect_body"] = "a body no site ever serves"
    data["smoke"][0]["timeout"] = "2s"


@pytest.fixture(scope="module")
def leak_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "leak-lab", ready_delay=0.2) as info:
        yield info


@pytest.fixture(scope="module")
def leak_run(
    leak_lab: LabInfo, tmp_path_factory: pytest.TempPathFactory, prefect_harness: None
) -> Iterator[LeakRun]:
    """Everything an operator can do to the lab, done once, with all output kept."""
    # Every notification of every run goes to a chat hook and a mailbox, both scanned.
    with json_receiver() as hook, smtp_receiver() as mail:
        yield from _leak_run(leak_lab, tmp_path_factory, hook, mail)


def _leak_run(
    leak_lab: LabInfo,
    tmp_path_factory: pytest.TempPathFactory,
    hook: JsonReceiver,
    mail: SmtpReceiver,
) -> Iterator[LeakRun]:
    out = tmp_path_factory.mktemp("leak-out")
    db_file = out / "history.db"
    db_url = f"sqlite:///{db_file}"
    # The key that signs evidence packs: a secret too. Kept outside what is scanned.
    signing_key, _, _ = keygen(tmp_path_factory.mktemp("leak-keys"))
    found = lab_secrets(leak_lab) | {"evidence signing key": _pem_body(signing_key)}
    scanner = SecretScanner(found | {"notify url token": NOTIFY_TOKEN})
    notify_to = f"{hook.url(auth=f'drills:{NOTIFY_TOKEN}@')},{mail.url()}"
    env = os.environ | {
        "DRILLS_DB_URL": db_url, "PREFECT_API_URL": "", "COLUMNS": "200",
        "DRILLS_NOTIFY": notify_to, "DRILLS_UI_URL": "http://127.0.0.1:8501",
        SIGNING_KEY_ENV: f"file:{signing_key}",
    }  # fmt: skip
    cli = Cli(out, env)
    plan = Path(leak_lab.state_dir) / "plan.yaml"
    run = LeakRun(leak_lab, plan, out, db_file, scanner, cli)
    failing = plan_variant(leak_lab, "leak-failing-smoke", failing_smoke)
    drill = ["run", "--yes", "--tier-deadline", "20", "--reason", "leak scan"]
    codes = cli.batch(
        [
            ["plan", "validate", "--resolve", str(plan)],
            ["plan", "show", str(plan)],
            ["readiness", "-v", str(plan)],
            ["readiness", "--json", str(plan)],
            [*drill, str(plan)],
            [*drill, str(failing)],
            ["recover", "--plan", "lab"],  # when the CLI has it; nothing is unfinished
        ]
    )
    assert codes[f"plan validate --resolve {plan}"].code == 0
    assert codes[" ".join([*drill, str(plan)])].code == 0, "the drill failed"
    assert codes[" ".join([*drill, str(failing)])].code == 1, "the failing drill did not fail"

    with pytest.MonkeyPatch.context() as patch, captured_logs(out / "in-process.log"):
        patch.setenv("DRILLS_DB_URL", db_url)
        patch.setenv("DRILLS_NOTIFY", notify_to)
        run_flows(run)
        render_pages(run, patch)
    store = HistoryStore(db_url)
    try:
        run_ids = [r.id for r in store.list_runs()]
    finally:
        store.close()
    assert len(run_ids) >= 3, run_ids
    reports = [["history", "--json"]]
    for run_id in run_ids:
        reports += [["report", run_id], ["report", run_id, "--format", "json"]]
        # The run's evidence pack, signed: scanned file by file, its PDF's text too.
        reports += [["evidence", "export", run_id, "--out", str(out / f"pack-{run_id}.zip")]]
    reports += [["evidence", "coverage", "--plans", str(plan)], ["evidence", "verify", "--db",
                db_url]]  # fmt: skip
    done = cli.batch(reports)
    assert all(d.code == 0 for name, d in done.items() if "coverage" not in name), done
    assert len(list(out.glob("pack-*.zip"))) == len(run_ids)
    from drills.notify.deliver import sender

    sender().flush()  # the in-process flows' messages
    run.messages = hook.raw + mail.raw
    yield run


def _pem_body(key_file: Path) -> str:
    """The base64 body of a PEM key: the key itself, whatever its header."""
    return "".join(line for line in key_file.read_text().splitlines() if "-----" not in line)


def run_flows(run: LeakRun) -> None:
    """The readiness and takeover flows under the test server; then read back what they left."""
    from flows.drill import minimum_takeover_drill
    from flows.readiness import readiness_check

    ids: list[UUID] = []
    for flow, kwargs in (
        (readiness_check, {"plan": str(run.plan)}),
        (minimum_takeover_drill, {"plan": str(run.plan), "tier_deadline_s": 20.0}),
    ):
        state = flow(return_state=True, **kwargs)
        assert state.is_completed(), state
        assert state.state_details.flow_run_id is not None
        ids.append(state.state_details.flow_run_id)
    run.rendered |= asyncio.run(_prefect_records(ids))


async def _prefect_records(flow_run_ids: list[UUID]) -> dict[str, bytes]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        ArtifactFilter,
        ArtifactFilterFlowRunId,
        LogFilter,
        LogFilterFlowRunId,
    )
    from prefect.logging.handlers import APILogHandler

    await APILogHandler.aflush()
    records: dict[str, bytes] = {}
    async with get_client() as client:
        for run_id in flow_run_ids:
            artifacts = await client.read_artifacts(
                artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[run_id]))
            )
            assert artifacts, f"flow run {run_id} published no artifact"
            for artifact in artifacts:
                records[f"prefect artifact {artifact.key} of {run_id}"] = (
                    artifact.model_dump_json().encode()
                )
            logs = await client.read_logs(
                log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[run_id]))
            )
            assert logs, f"flow run {run_id} left no log"
            records[f"prefect logs of {run_id}"] = "\n".join(
                entry.model_dump_json() for entry in logs
            ).encode()
            flow_run = await client.read_flow_run(run_id)
            records[f"prefect flow run {run_id}"] = flow_run.model_dump_json().encode()
    return records


def render_pages(run: LeakRun, patch: pytest.MonkeyPatch) -> None:
    """Every dashboard page over the same store; keeps the serialised elements they show."""
    if not (ROOT / "ui" / "streamlit_app.py").exists():
        return
    import streamlit as st

    from tests.support.ui import open_page

    patch.setenv("DRILLS_PLANS", str(run.plan))
    patch.setenv("PREFECT_API_URL", "")
    patch.setenv("DRILLS_UI_LAB", "1")
    st.cache_data.clear()
    try:
        for page in sorted(p.stem for p in (ROOT / "ui" / "app_pages").glob("*.py")):
            at = open_page(page)
            run.rendered[f"ui page {page}"] = b"\n".join(_element_bytes(at._tree))
    finally:
        st.cache_data.clear()


def _element_bytes(node: Any) -> Iterator[bytes]:
    proto = getattr(node, "proto", None)
    if proto is not None and hasattr(proto, "SerializeToString"):
        yield proto.SerializeToString()
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            yield from _element_bytes(child)


def _table_dump(db_file: Path) -> bytes:
    import sqlalchemy as sa

    engine = sa.create_engine(f"sqlite:///{db_file}")
    try:
        with engine.connect() as conn:
            rows = []
            for table in sa.inspect(conn).get_table_names():
                for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')):
                    rows.append(f"{table}: {tuple(row)!r}")
            return "\n".join(rows).encode()
    finally:
        engine.dispose()


def _leaks(run: LeakRun) -> list[Leak]:
    found = list(run.scanner.scan_tree(run.out))
    found += run.scanner.scan_files([Path(run.info.state_dir) / "lab.log"])
    found += run.scanner.scan_bytes(_table_dump(run.db_file), "history tables")
    for label, data in run.rendered.items():
        found += run.scanner.scan_bytes(data, label)
    for i, message in enumerate(run.messages):
        found += run.scanner.scan_bytes(message, f"notification {i}")
    return found


# --- the scan -----------------------------------------------------------------------------


def test_the_lab_has_the_distinctive_secrets_the_scan_looks_for(leak_run: LeakRun) -> None:
    names = set(leak_run.scanner.secrets)
    assert {"tsig key", "aws secret access key", "kubeconfig token"} <= names
    assert "evidence signing key" in names
    assert any(n.startswith("k8s primary ") for n in names)
    assert any(n.startswith("k8s dr ") for n in names)
    assert any(n.startswith("secrets manager ") for n in names)


def test_everything_ran_and_left_something_to_scan(leak_run: LeakRun) -> None:
    assert leak_run.db_file.stat().st_size > 0
    assert _table_dump(leak_run.db_file)
    logs = [p for p in leak_run.out.glob("*.log") if p.stat().st_size]
    assert logs, "DEBUG logging captured nothing"
    assert any(label.startswith("prefect artifact") for label in leak_run.rendered)
    assert any(label.startswith("prefect logs") for label in leak_run.rendered)
    assert leak_run.messages, "no notification was received"
    if (ROOT / "ui" / "streamlit_app.py").exists():
        assert any(label.startswith("ui page") for label in leak_run.rendered)


def test_no_secret_value_appears_anywhere(leak_run: LeakRun) -> None:
    leaks = _leaks(leak_run)
    assert not leaks, "secret values found in:\n" + "\n".join(sorted(map(str, leaks)))


def test_the_scan_finds_a_planted_secret(leak_run: LeakRun) -> None:
    planted = leak_run.out / "planted" / "scratch.txt"
    planted.parent.mkdir()
    tsig = leak_run.scanner.secrets["tsig key"]
    k8s = next(v for n, v in leak_run.scanner.secrets.items() if n.startswith("k8s "))
    planted.write_bytes(
        b"noise " + tsig.encode() + b" more " + base64.b64encode(b"{x:" + k8s.encode() + b"}")
    )
    try:
        leaks = list(leak_run.scanner.scan_tree(leak_run.out / "planted"))
    finally:
        planted.unlink()
    assert {leak.secret for leak in leaks} >= {"tsig key"}
    assert any(leak.secret.startswith("k8s ") and "base64" in leak.form for leak in leaks)
    assert all(tsig not in str(leak) for leak in leaks)


def test_the_scan_reads_inside_packs_and_pdfs(leak_run: LeakRun) -> None:
    """A secret deflated in a zip, or drawn as text in a PDF, is found (never echoed)."""
    import io
    import zipfile

    from drills.evidence.render import to_html, to_pdf
    from tests.support.services import require_system_binary

    require_system_binary("chromium", "chromium")
    require_system_binary("pdftotext", "poppler-utils")
    tsig = leak_run.scanner.secrets["tsig key"]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("report.md", ("padding " * 50 + tsig).encode())
        zf.writestr("report.pdf", to_pdf(to_html(f"# Report\n\nvalue {tsig}\n", "t")))
    leaks = list(leak_run.scanner.scan_document(buffer.getvalue(), "pack.zip"))
    places = {leak.where for leak in leaks if leak.secret == "tsig key"}
    assert "pack.zip!report.md" in places
    assert any(p.startswith("pack.zip!report.pdf (text") for p in places), places
    assert all(tsig not in str(leak) for leak in leaks)
    packs = sorted(leak_run.out.glob("pack-*.zip"))
    assert packs and all(zipfile.is_zipfile(p) for p in packs)
