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

from drills.evidence import dsse
from drills.evidence.checkpoints import PACK_NAME as CHECKPOINT
from drills.evidence.checkpoints import pack_checkpoint, pack_problems
from drills.evidence.controls import auditor_answers
from drills.evidence.findings import findings_of_run
from drills.evidence.keys import Signer, Verifier
from drills.evidence.render import pack_markdown, to_html, to_pdf
from drills.plan.files import FileRefusedError, open_regular_file
from drills.store.audit import events_of_plan
from drills.store.chain_report import run_evidence
from drills.store.history import HistoryStore
from drills.store.models import DrillRun
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
# What verify reads of a pack, however the zip describes itself: hostile input is refused
# before it is inflated. Each bound is far above a real pack (a few MiB in all).
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_PACK_BYTES = 256 * 1024 * 1024  # every member inflated, and the zip itself
MAX_MEMBERS = 100
MAX_JSON_BYTES = 8 * 1024 * 1024  # each member kept whole: small JSON read after hashing
# The members read whole: the manifest and the envelope, and the checkpoint with the links it
# must cover. The others are only hashed.
KEPT_WHOLE = (MANIFEST, ENVELOPE, CHECKPOINT, "chain.json")
# Deflate inflates zeros about 1000-fold, JSON 5 to 20-fold: beyond its first MiB, a member
# that inflates more than this is a bomb, not a report.
MAX_RATIO = 100
_RATIO_FROM = 1024 * 1024
_CHUNK = 1024 * 1024


def _json(value: Any) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def audit_entries(store: HistoryStore, run: DrillRun) -> list[dict[str, Any]]:
    """The audit log's entries about ``run``: those naming it or its flow run, and those of
    its plan between its start and its end (a declaration comes just before the start)."""
    start = run.started_at - dt.timedelta(minutes=5)
    end = run.finished_at or dt.datetime.now(dt.UTC)
    entries = []
    for e in events_of_plan(store, run.plan, start, end):
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
    # The key that verified (its id computed from the key itself); until one does, the
    # label the envelope gives, which DSSE does not authenticate.
    keyid: str | None = None
    keyid_label: str | None = None  # the label on the signature that verified
    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    run_id: str | None = None

    @property
    def files_ok(self) -> bool:
        return not self.problems

    def ok(self, allow_unsigned: bool) -> bool:
        """Everything holds: files, and a signature that verified, or (``allow_unsigned``,
        and no key given to check one) no signature at all."""
        if self.problems:
            return False
        return self.signature_ok is True or (not self.signed and allow_unsigned)


@dataclass
class _Members:
    named: set[str] = field(default_factory=set)  # every name in the zip, read or not
    digests: dict[str, str] = field(default_factory=dict)  # name -> SHA-256, every member
    whole: dict[str, bytes] = field(default_factory=dict)  # the manifest and the envelope


def _refusal(info: zipfile.ZipInfo) -> str | None:
    """Why a member is not read at all, from what the zip says of it; None to read it.

    zipfile stops inflating at the size the entry declares, so these bounds hold even for
    an entry that lies about it (its CRC then fails)."""
    size = info.file_size
    if size > MAX_MEMBER_BYTES:
        return f"larger than any pack file ({size} bytes)"
    if info.filename in KEPT_WHOLE and size > MAX_JSON_BYTES:
        return f"larger than any {info.filename} ({size} bytes)"
    if size > _RATIO_FROM and size > MAX_RATIO * max(info.compress_size, 1):
        ratio = size // max(info.compress_size, 1)
        return f"inflates {ratio}-fold, more than {MAX_RATIO}-fold: a zip bomb, not a pack file"
    return None


def _hash_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, members: _Members) -> None:
    """Hash a member as it inflates, a chunk at a time; keep it only if it is small JSON."""
    digest = hashlib.sha256()
    keep = info.filename in KEPT_WHOLE
    kept = []
    with zf.open(info) as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
            if keep:
                kept.append(chunk)
    members.digests[info.filename] = digest.hexdigest()
    if keep:
        members.whole[info.filename] = b"".join(kept)


def _members(zf: zipfile.ZipFile, result: Verification) -> _Members:
    infos = zf.infolist()
    members = _Members({info.filename for info in infos})
    total = sum(info.file_size for info in infos)
    if len(infos) > MAX_MEMBERS or total > MAX_PACK_BYTES:
        result.problems.append(
            f"the pack holds {len(infos)} files of {total} bytes in all, more than any pack "
            f"({MAX_MEMBERS} files, {MAX_PACK_BYTES >> 20} MiB): not read"
        )
        return members
    for info in infos:
        name = info.filename
        if name in members.digests:
            result.problems.append(f"{name}: appears twice in the pack")
            continue
        refused = _refusal(info)
        if refused:
            result.problems.append(f"{name}: {refused}")
            continue
        try:
            _hash_member(zf, info, members)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError, zlib.error) as exc:
            # zipfile checks each entry's CRC-32: a changed byte is caught here too.
            result.problems.append(f"{name}: damaged in the zip ({exc})")
    return members


def _check_files(digests: dict[str, str], signed: dict[str, str], result: Verification) -> None:
    for name, digest in sorted(signed.items()):
        if name == ENVELOPE:
            result.problems.append(f"{name}: the envelope cannot be its own subject")
        elif name not in digests:
            result.problems.append(f"{name}: missing from the pack")
        elif digests[name] != digest:
            result.problems.append(f"{name}: SHA-256 differs from the signed statement")
        else:
            result.checked.append(name)
    for name in sorted(set(digests) - set(signed) - {ENVELOPE}):
        result.problems.append(f"{name}: not in the signed statement (added to the pack)")


def _check_manifest(raw: bytes, signed: dict[str, str], result: Verification) -> None:
    try:
        manifest = json.loads(raw)
        listed = manifest["files"]
        result.run_id = manifest.get("run_id")
    except RecursionError:
        result.problems.append(f"{MANIFEST}: JSON nested too deeply to be a manifest")
        return
    except (KeyError, ValueError, TypeError, AttributeError):
        result.problems.append(f"{MANIFEST}: missing or not a manifest")
        return
    expected = {n: d for n, d in signed.items() if n != MANIFEST}
    if listed != expected:
        result.problems.append(f"{MANIFEST}: its SHA-256 list differs from the signed statement")


def _check_signature(opened: dsse.Opened, verifier: Verifier | None, result: Verification) -> None:
    labels = [s.get("keyid") for s in opened.signatures]
    result.signed = bool(opened.signatures)
    result.keyid = next((k for k in labels if isinstance(k, str)), None)
    if verifier is None:
        return
    if not result.signed:
        # A key given asks for a signature by it: no option makes an unsigned pack pass then.
        result.signature_ok = False
        result.problems.append(
            f"signature: none in {ENVELOPE}, but a public key was given: a pack checked "
            f"against key {verifier.keyid} must be signed by it"
        )
        return
    verified = dsse.verified_signature(opened, verifier)
    result.signature_ok = verified is not None
    if verified is None:
        who = f" (labelled key {result.keyid})" if result.keyid != verifier.keyid else ""
        result.problems.append(
            f"signature: {ENVELOPE} does not verify with public key {verifier.keyid}{who}"
        )
        return
    # Report the key that verified, by the id computed from it, never the label alone.
    result.keyid, result.keyid_label = verifier.keyid, verified.get("keyid")
    if result.keyid_label != verifier.keyid:
        result.problems.append(
            f"signature: labelled key {result.keyid_label!s:.80}, but it verifies with key "
            f"{verifier.keyid}: the envelope's key id was changed after signing"
        )


def verify(path: Path, verifier: Verifier | None) -> Verification:
    """Check every file of the pack at ``path`` against the Statement, and the Statement's
    signature against ``verifier`` (when given: then a signature by it is required). Reads
    nothing but the pack: a regular file, within bounds, its members hashed as they inflate."""
    result = Verification()
    try:
        with open_regular_file(path, MAX_PACK_BYTES) as raw, zipfile.ZipFile(raw) as zf:
            members = _members(zf, result)
    except FileRefusedError as exc:
        result.problems.append(f"{path.name}: {exc.reason}")
        return result
    except (zipfile.BadZipFile, OSError) as exc:
        result.problems.append(f"{path.name}: not a readable zip ({exc})")
        return result
    if ENVELOPE not in members.whole:
        if ENVELOPE not in members.named:  # else the reason it was not read is given
            result.problems.append(f"{ENVELOPE}: missing from the pack")
        return result
    try:
        opened = dsse.open_envelope(members.whole[ENVELOPE])
        signed = dsse.subjects(opened.statement)
    except dsse.EnvelopeError as exc:
        result.problems.append(f"{ENVELOPE}: {exc}")
        return result
    _check_signature(opened, verifier, result)
    _check_files(members.digests, signed, result)
    result.problems += pack_problems(members.whole, verifier)
    if MANIFEST in members.whole:
        _check_manifest(members.whole[MANIFEST], signed, result)
    return result
