"""Evidence packs: one zip per run, every file hashed, the hashes signed.

A pack holds the report (Markdown, JSON, PDF), the readiness snapshot at T0, the journal,
the timeline, the audit entries of the run, its links in the history's chain, the plan's
newest checkpoint of that chain, the control mapping and the findings, a
manifest of every file's SHA-256, and ``attestation.dsse.json``: a DSSE envelope signing an
in-toto Statement whose subjects are all those files. Verifying one needs the pack and the
public key only: no database, no network.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
import json
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from drills.evidence import dsse
from drills.evidence.checkpoints import pack_checkpoint, pack_problems
from drills.evidence.controls import auditor_answers
from drills.evidence.findings import findings_of_run
from drills.evidence.keys import Signer, Verifier
from drills.evidence.render import pack_markdown, to_html, to_pdf
from drills.store.chain_verify import run_evidence
from drills.store.history import HistoryStore
from drills.store.models import AuditEvent, DrillRun
from drills.store.report import report_data

ENVELOPE = "attestation.dsse.json"
MANIFEST = "manifest.json"
PACK_FORMAT = "drills-evidence-pack/1"
# Every file of a pack, in the order they are written; the envelope comes last.
CONTENT = (
    "report.md", "report.json", "report.pdf", "readiness-t0.json", "journal.json",
    "timeline.json", "audit.json", "chain.json", "checkpoint.json", "controls.json",
    "findings.json",
)  # fmt: skip
# A fixed time on every zip entry: the same pack twice holds the same bytes.
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)
MAX_MEMBER_BYTES = 64 * 1024 * 1024


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def audit_entries(store: HistoryStore, run: DrillRun) -> list[dict[str, Any]]:
    """The audit log's entries about ``run``: those naming it or its flow run, and those of
    its plan between its start and its end (a declaration comes just before the start)."""
    start = run.started_at - dt.timedelta(minutes=5)
    end = run.finished_at or dt.datetime.now(dt.UTC)
    query = (
        select(AuditEvent)
        .where(AuditEvent.plan == run.plan, AuditEvent.at >= start, AuditEvent.at <= end)
        .order_by(AuditEvent.at, AuditEvent.id)
    )
    with store.session() as s:
        rows = list(s.scalars(query).all())
    entries = []
    for e in rows:
        detail = e.detail or {}
        names_other = detail.get("run_id") not in (None, run.id) or (
            run.flow_run_id and detail.get("flow_run_id") not in (None, run.flow_run_id)
        )
        if not names_other:
            entries.append(
                {"at": e.at.isoformat(), "who": e.who, "action": e.action, "plan": e.plan,
                 "accepted": e.accepted, "reason": e.reason, "detail": detail}
            )  # fmt: skip
    return entries


@dataclass
class Pack:
    files: dict[str, bytes]
    signed: bool
    keyid: str | None


def build(store: HistoryStore, run: DrillRun, signer: Signer | None) -> Pack:
    """Every file of ``run``'s pack, rendered and signed. Raises RenderError without Chromium."""
    report = report_data(run, store)
    found = findings_of_run(store, run)
    answers = auditor_answers(report, found)
    report = report | {"evidence": answers}
    text = pack_markdown(report, answers)
    files = {
        "report.md": text.encode("utf-8"),
        "report.json": _json(report),
        "report.pdf": to_pdf(to_html(text, f"Drill report {run.id}")),
        "readiness-t0.json": _json(run.readiness or {}),
        "journal.json": _json(report["journal"]),
        "timeline.json": _json(run.timeline or []),
        "audit.json": _json(audit_entries(store, run)),
        # The run's links in the history's chain: what `drills evidence verify --db` checks.
        "chain.json": _json([link.to_json() for link in run_evidence(store, run.id)]),
        # The plan's newest checkpoint: the chain's length and head, to hold the store to.
        "checkpoint.json": pack_checkpoint(store, run.plan),
        "controls.json": _json({k: v for k, v in answers.items() if k != "open_findings"}),
        "findings.json": _json([f.to_json() for f in found]),
    }
    created = dt.datetime.now(dt.UTC).isoformat()
    files[MANIFEST] = _json(
        {
            "format": PACK_FORMAT,
            "run_id": run.id,
            "plan": run.plan,
            "created_at": created,
            "signed": signer is not None,
            "keyid": signer.keyid if signer else None,
            "files": {name: sha256(files[name]) for name in CONTENT},
        }
    )
    predicate = {
        "run_id": run.id, "plan": run.plan, "mode": run.mode, "verdict": run.verdict,
        "status": run.status, "created_at": created, "signed": signer is not None,
    }  # fmt: skip
    body = json.dumps(
        dsse.statement({n: sha256(d) for n, d in files.items()}, predicate), sort_keys=True
    ).encode("utf-8")
    files[ENVELOPE] = _json(dsse.envelope(body, signer))
    return Pack(files, signer is not None, signer.keyid if signer else None)


def zip_bytes(pack: Pack) -> bytes:
    """The pack as a zip: the same files in the same order, with fixed times."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name in [*CONTENT, MANIFEST, ENVELOPE]:
            info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, pack.files[name])
    return buffer.getvalue()


def write(pack: Pack, out: Path) -> None:
    """The zip, written beside ``out`` and renamed onto it: never half a pack."""
    tmp = out.with_name(f".{out.name}.partial")
    tmp.write_bytes(zip_bytes(pack))
    tmp.replace(out)


# --- verifying ----------------------------------------------------------------------------


@dataclass
class Verification:
    """What verify found. ``problems`` name the file or the signature at fault."""

    signed: bool = False
    signature_ok: bool | None = None  # None: not checked (unsigned, or no key given)
    keyid: str | None = None
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    run_id: str | None = None

    @property
    def files_ok(self) -> bool:
        return not self.problems


def _members(zf: zipfile.ZipFile, result: Verification) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for info in zf.infolist():
        name = info.filename
        if name in files:
            result.problems.append(f"{name}: appears twice in the pack")
            continue
        if info.file_size > MAX_MEMBER_BYTES:
            result.problems.append(f"{name}: larger than any pack file ({info.file_size} bytes)")
            continue
        try:
            files[name] = zf.read(info)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            # zipfile checks each entry's CRC-32: a changed byte is caught here too.
            result.problems.append(f"{name}: damaged in the zip ({exc})")
    return files


def _check_files(files: dict[str, bytes], signed: dict[str, str], result: Verification) -> None:
    for name, digest in sorted(signed.items()):
        if name == ENVELOPE:
            result.problems.append(f"{name}: the envelope cannot be its own subject")
        elif name not in files:
            result.problems.append(f"{name}: missing from the pack")
        elif sha256(files[name]) != digest:
            result.problems.append(f"{name}: SHA-256 differs from the signed statement")
        else:
            result.checked.append(name)
    for name in sorted(set(files) - set(signed) - {ENVELOPE}):
        result.problems.append(f"{name}: not in the signed statement (added to the pack)")


def _check_manifest(files: dict[str, bytes], signed: dict[str, str], result: Verification) -> None:
    try:
        manifest = json.loads(files[MANIFEST])
        listed = manifest["files"]
        result.run_id = manifest.get("run_id")
    except (KeyError, ValueError, TypeError):
        result.problems.append(f"{MANIFEST}: missing or not a manifest")
        return
    expected = {n: d for n, d in signed.items() if n != MANIFEST}
    if listed != expected:
        result.problems.append(f"{MANIFEST}: its SHA-256 list differs from the signed statement")


def _check_signature(opened: dsse.Opened, verifier: Verifier | None, result: Verification) -> None:
    keyids = [s.get("keyid") for s in opened.signatures]
    result.signed = bool(opened.signatures)
    result.keyid = next((k for k in keyids if isinstance(k, str)), None)
    if not result.signed or verifier is None:
        return
    result.signature_ok = dsse.signed_by(opened, verifier)
    if not result.signature_ok:
        who = f" (signed by key {result.keyid})" if result.keyid != verifier.keyid else ""
        result.problems.append(
            f"signature: {ENVELOPE} does not verify with public key {verifier.keyid}{who}"
        )


def verify(path: Path, verifier: Verifier | None) -> Verification:
    """Check every file of the pack at ``path`` against the Statement, and the Statement's
    signature against ``verifier`` (when given). Reads nothing but the pack."""
    result = Verification()
    try:
        with zipfile.ZipFile(path) as zf:
            files = _members(zf, result)
    except (zipfile.BadZipFile, OSError) as exc:
        result.problems.append(f"{path.name}: not a readable zip ({exc})")
        return result
    if ENVELOPE not in files:
        result.problems.append(f"{ENVELOPE}: missing from the pack")
        return result
    try:
        opened = dsse.open_envelope(files[ENVELOPE])
        signed = dsse.subjects(opened.statement)
    except dsse.EnvelopeError as exc:
        result.problems.append(f"{ENVELOPE}: {exc}")
        return result
    _check_signature(opened, verifier, result)
    _check_files(files, signed, result)
    result.problems += pack_problems(files, verifier)
    if MANIFEST in files:
        _check_manifest(files, signed, result)
    return result
