"""`drills evidence verify --db` and `drills evidence checkpoint`: the history store's chain,
read only, against the checkpoints kept outside it; and keeping those checkpoints."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from drills.cli.common import EXIT_FAILED, EXIT_INVALID, DbUrl, open_history
from drills.cli.console import err_console, out_console

if TYPE_CHECKING:
    from drills.evidence import Found
    from drills.store import ChainReport

err = err_console(highlight=False, soft_wrap=True)

CheckpointsOption = Annotated[
    str | None,
    typer.Option(
        "--checkpoints",
        metavar="DIR|s3://BUCKET/PREFIX",
        help="With --db: also check the chain against every checkpoint kept there "
        "(`drills evidence checkpoint` writes them); fails when the chain is shorter than, "
        "or differs from, any of them.",
        show_default=False,
    ),
]


def _fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(Text(f"✗ {message}", style="red"))
    return typer.Exit(code)


def _external(place: str, public_key: Path | None) -> tuple[Found, list[str]]:
    """The checkpoints at ``place``, and why any cannot be trusted (unreadable; with a
    public key, not signed by it)."""
    from drills.evidence import (
        CheckpointPlaceError,
        SigningKeyError,
        load_verifier,
        read_checkpoints,
        signature_problem,
    )

    try:
        verifier = load_verifier(public_key) if public_key else None
        found = read_checkpoints(place)
    except (CheckpointPlaceError, SigningKeyError) as exc:
        raise _fail(str(exc), EXIT_INVALID) from None
    problems = list(found.problems)
    if verifier is not None:
        for name, cp in found.checkpoints:
            problem = signature_problem(cp, verifier)
            if problem:
                problems.append(f"{name}: {problem}")
    if not found.checkpoints and not problems:
        problems.append(f"{place} holds no checkpoint: nothing to check the chain against")
    return found, problems


def verify_db(db: str, place: str | None, public_key: Path | None, as_json: bool) -> None:
    """The store's chain, opened read-only, against its own checkpoints and ``place``'s."""
    from drills.store import verify_store

    found, untrusted = _external(place, public_key) if place else (None, [])
    store = open_history(db, read_only=True)
    try:
        report = verify_store(store, found.checkpoints if found else ())
    finally:
        store.close()
    ok = report.ok and not untrusted
    if as_json:
        body = report.to_json() | {"ok": ok, "checkpoint_problems": untrusted}
        body["checkpoints_checked"] = len(found.checkpoints) if found else 0
        typer.echo(json.dumps(body, indent=2, default=str))
    else:
        _print(report, untrusted, len(found.checkpoints) if found else None)
    if not ok:
        raise typer.Exit(EXIT_FAILED)


def _print(report: ChainReport, untrusted: list[str], external: int | None) -> None:
    for problem in report.problems:
        err.print(Text(f"✗ {problem.describe()}", style="red"))
    for line in untrusted:
        err.print(Text(f"✗ checkpoint {line}", style="red"))
    if not report.ok or untrusted:
        return
    pre = f"; {report.pre_chain} sealed at upgrade (pre-chain)" if report.pre_chain else ""
    pre += f"; {report.pruned} pruned, as sealed" if report.pruned else ""
    if external is not None:
        pre += f"; agrees with {external} checkpoint(s) kept outside the store"
    out_console(highlight=False, soft_wrap=True).print(
        Text(f"✓ the history verifies: {report.links} links over {len(report.plans)} plan(s){pre}")
    )
    if external is None:
        err.print(
            Text("! without --checkpoints, newest links removed together with their records "
                 "cannot be seen", style="yellow")
        )  # fmt: skip


def checkpoint(
    out: Annotated[
        str | None,
        typer.Option(
            "--out", metavar="DIR|s3://BUCKET/PREFIX",
            help="Where to keep them: a directory, or an S3 bucket (Object Lock used where "
            "the bucket has it). Default: the plan's evidence.checkpoints.",
            show_default=False,
        ),
    ] = None,
    plan: Annotated[
        Path | None,
        typer.Option(
            "--plan", metavar="PLAN",
            help="A drill plan: its evidence.checkpoints is the place, and only its "
            "chain is checkpointed.", show_default=False,
        ),
    ] = None,
    db: DbUrl = None,
) -> None:  # fmt: skip
    """Copy the newest checkpoint of each plan's evidence chain (its length and head hash,
    signed with DRILLS_SIGNING_KEY when one is set) to a place the store's owner cannot
    rewrite. `drills evidence verify --db URL --checkpoints PLACE` then fails if the chain
    was later cut short or rebuilt. A new checkpoint of each head is taken now; those
    already at the place are kept. Exit 0 written, 1 the store was tampered with or the
    place cannot be written, 2 bad input."""
    from drills.cli.common import load_plan_or_exit
    from drills.evidence import CheckpointPlaceError, write_checkpoints

    chosen = load_plan_or_exit(plan) if plan is not None else None
    place = out or (chosen.evidence.checkpoints if chosen else None)
    if not place:
        raise _fail("give --out DIR|s3://bucket/prefix, or a --plan with evidence.checkpoints",
                    EXIT_INVALID)  # fmt: skip
    store = open_history(db)
    try:
        taken = store.take_checkpoints([chosen.name] if chosen else None)
    finally:
        store.close()
    try:
        written = write_checkpoints(place, taken)
    except CheckpointPlaceError as exc:
        raise _fail(str(exc)) from None
    for cp in taken:
        signed = f"signed by key {cp.keyid}" if cp.keyid else "UNSIGNED (no DRILLS_SIGNING_KEY)"
        out_console(highlight=False, soft_wrap=True).print(
            Text(f"✓ {cp.plan}: length {cp.length}, head {cp.head_sha256[:12]}…, {signed}")
        )
    out_console(highlight=False, soft_wrap=True).print(
        Text(f"✓ {written} checkpoint(s) written to {place}")
    )


__all__ = ["CheckpointsOption", "checkpoint", "verify_db"]
