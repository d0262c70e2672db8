"""Signed evidence packs: a drill's report and records, hashed, in a DSSE-signed in-toto
Statement, for an auditor to verify with no database and no network; the findings a run
leaves open; and the coverage of every plan over a period."""

from __future__ import annotations

from typing import TYPE_CHECKING

from drills.faces import lazy_face

if TYPE_CHECKING:
    from drills.evidence.checkpoints import (
        CheckpointPlaceError,
        Found,
        configured_sign,
        export_if_due,
        read_checkpoints,
        signature_problem,
        signed_history,
        write_checkpoints,
    )
    from drills.evidence.coverage import (
        Coverage,
        Period,
        PlanCoverage,
        UnreadablePlan,
        chain_not_checked,
        coverage_markdown,
        coverage_over,
    )
    from drills.evidence.findings import (
        Finding,
        findings_of_run,
        history_version,
        open_counts,
        open_findings,
    )
    from drills.evidence.history_chain import chain_status
    from drills.evidence.keys import (
        SigningKeyError,
        configured_reference,
        keygen,
        load_signer,
        load_verifier,
    )
    from drills.evidence.pack import Verification, build, verify, write, zip_bytes
    from drills.evidence.render import (
        RenderError,
        chromium_problem,
        findings_markdown,
        to_html,
        to_pdf,
    )

__all__ = [
    "CheckpointPlaceError",
    "Coverage",
    "Finding",
    "Found",
    "Period",
    "PlanCoverage",
    "RenderError",
    "SigningKeyError",
    "UnreadablePlan",
    "Verification",
    "build",
    "chain_not_checked",
    "chain_status",
    "chromium_problem",
    "configured_reference",
    "configured_sign",
    "coverage_markdown",
    "coverage_over",
    "export_if_due",
    "findings_markdown",
    "findings_of_run",
    "history_version",
    "keygen",
    "load_signer",
    "load_verifier",
    "open_counts",
    "open_findings",
    "read_checkpoints",
    "signature_problem",
    "signed_history",
    "to_html",
    "to_pdf",
    "verify",
    "write",
    "write_checkpoints",
    "zip_bytes",
]

# Each name is imported from its module when first asked for, so that importing the
# package costs nothing until one is used.
__getattr__ = lazy_face(
    __name__,
    {
        "checkpoints": [
            "CheckpointPlaceError",
            "Found",
            "configured_sign",
            "export_if_due",
            "read_checkpoints",
            "signature_problem",
            "signed_history",
            "write_checkpoints",
        ],
        "coverage": [
            "Coverage",
            "Period",
            "PlanCoverage",
            "UnreadablePlan",
            "chain_not_checked",
            "coverage_markdown",
            "coverage_over",
        ],
        "findings": [
            "Finding",
            "findings_of_run",
            "history_version",
            "open_counts",
            "open_findings",
        ],
        "history_chain": ["chain_status"],
        "keys": [
            "SigningKeyError",
            "configured_reference",
            "keygen",
            "load_signer",
            "load_verifier",
        ],
        "pack": ["Verification", "build", "verify", "write", "zip_bytes"],
        "render": ["RenderError", "chromium_problem", "findings_markdown", "to_html", "to_pdf"],
    },
)
