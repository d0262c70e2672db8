"""`drills evidence`: signed evidence packs for auditors, and drill coverage.

Exit codes: 0 done (or verified), 1 failed (a pack that does not verify, a run that does
not exist, a PDF that could not be printed), 2 bad input (an unusable key or option).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.text import Text

from drills.cli import evidence_chain
from drills.cli.common import EXIT_FAILED, EXIT_INVALID, DbUrl, open_history
from drills.cli.console import err_console, out_console
from drills.text import first_line

if TYPE_CHECKING:
    from drills.evidence import UnreadablePlan, Verification

evidence_app = typer.Typer(
    name="evidence",
    help="Signed evidence packs of drills for auditors, and drill coverage per plan.",
    no_args_is_help=True,
)
err = err_console(highlight=False, soft_wrap=True)


evidence_app.command("checkpoint")(evidence_chain.checkpoint)


def register(app: typer.Typer) -> None:
    """Add the `evidence` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is evidence_app for group in app.registered_groups):
        return
    app.add_typer(evidence_app, name="evidence")


def _fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(Text(f"✗ {message}", style="red"))
    return typer.Exit(code)


@evidence_app.command("keygen")
def keygen(
    directory: Annotated[
        Path, typer.Argument(metavar="DIR", help="Where to write signing.key and signing.pub.")
    ],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace an existing key pair (packs it signed then no "
            "longer verify against the new public key).",
        ),
    ] = False,
) -> None:
    """Write an Ed25519 key pair: DIR/signing.key (mode 0600) and DIR/signing.pub. Exit 0, or 1
    when a key is already there (without --force); anything at either name counts, a symbolic
    link too, and --force replaces the link itself: the key is never written through one."""
    from drills.evidence import keygen as make_pair

    try:
        private, public, keyid = make_pair(directory, overwrite=force)
    except FileExistsError as exc:
        raise _fail(f"{exc}; give --force to replace it") from None
    except OSError as exc:
        raise _fail(f"cannot write the key pair in {directory}: {exc.strerror}") from None
    out = out_console(highlight=False, soft_wrap=True)
    out.print(Text(f"✓ private key {private} (mode 0600): keep it secret"))
    out.print(Text(f"✓ public key  {public}: give it to whoever verifies the packs"))
    out.print(Text(f"  key id {keyid}"))
    out.print(Text(f"  sign packs with: export DRILLS_SIGNING_KEY=file:{private.resolve()}"))


@evidence_app.command("export")
def export(
    run_id: Annotated[
        str, typer.Argument(metavar="RUN_ID", help="The run's id (or a unique prefix).")
    ],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="The pack to write (a .zip).", show_default=False)
    ],
    db: DbUrl = None,
) -> None:
    """Write a run's evidence pack: the report (Markdown, JSON, PDF), readiness at T0, journal,
    timeline, audit entries, control mapping and findings, a SHA-256 manifest, and a DSSE-signed
    in-toto Statement over them. Signed with the key DRILLS_SIGNING_KEY references (file:PATH,
    env:NAME or prefect:BLOCK); without one the pack is written unsigned, and says so. Exit 0
    written, 1 no such run or the PDF failed, 2 the configured key is unusable."""
    from drills.evidence import (
        RenderError,
        SigningKeyError,
        build,
        configured_reference,
        load_signer,
        write,
    )

    try:
        signer = load_signer(configured_reference())
    except SigningKeyError as exc:
        raise _fail(f"{exc}; no pack written", EXIT_INVALID) from None
    history = open_history(db)
    run = history.find_run(run_id)
    if run is None:
        raise _fail(f"no run {run_id!r} (or the prefix is ambiguous); see `drills history`")
    try:
        pack = build(history, run, signer)
        write(pack, out)
    except RenderError as exc:
        raise _fail(f"the report's PDF could not be printed: {exc}") from None
    except OSError as exc:
        raise _fail(f"cannot write {out}: {exc.strerror}") from None
    console = out_console(highlight=False, soft_wrap=True)
    console.print(Text(f"✓ evidence pack of run {run.id} written to {out}"))
    if pack.signed:
        console.print(Text(f"  signed with key {pack.keyid}"))
    else:
        err.print(
            Text("! UNSIGNED: no signing key configured (set DRILLS_SIGNING_KEY to a reference "
                 "to the key `drills evidence keygen` wrote)", style="yellow")
        )  # fmt: skip


def _print_verification(pack: Path, result: Verification, allow_unsigned: bool) -> bool:
    console = out_console(highlight=False, soft_wrap=True)
    for problem in result.problems:
        err.print(Text(f"✗ {problem}", style="red"))
    if result.files_ok:
        console.print(Text(f"✓ {len(result.checked)} files match the signed statement"))
    if not result.signed:
        err.print(Text(f"! {pack} is UNSIGNED: its files match its statement, but nothing "
                       "proves who made it", style="yellow"))  # fmt: skip
    elif result.signature_ok is None:
        err.print(Text(f"✗ signature: not checked; give --public-key (pack labelled as signed "
                       f"by key {result.keyid})", style="red"))  # fmt: skip
    elif result.signature_ok:
        # The id computed from the key that verified; a different label is a problem above.
        console.print(Text(f"✓ signature holds: key {result.keyid}"))
    return result.ok(allow_unsigned)


@evidence_app.command("verify")
def verify(
    pack: Annotated[
        Path | None,
        typer.Argument(
            metavar="PACK", help="The pack (.zip) to verify; or give --db.", show_default=False
        ),
    ] = None,
    public_key: Annotated[
        Path | None,
        typer.Option(
            "--public-key", help="The signer's public key (signing.pub).", show_default=False
        ),
    ] = None,
    allow_unsigned: Annotated[
        bool,
        typer.Option(
            "--allow-unsigned",
            help="Exit 0 for an unsigned pack whose files match; ignored with --public-key "
            "(a key given asks for a signature by it).",
        ),
    ] = False,
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="Verify the history store's chain instead of a pack (a SQLAlchemy URL).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    checkpoints: evidence_chain.CheckpointsOption = None,
) -> None:
    """Verify a pack with no database and no network: every file against the signed statement,
    and the signature against --public-key. Exit 0 when all hold; 1 naming each file or the
    signature that does not (an unsigned pack is 1 unless --allow-unsigned and no key is
    given; a key id label that is not the verifying key's is 1); 2 bad input. The pack and
    the key must be regular files; a pack's members are bounded in size and inflation
    ratio, so a zip bomb is refused unread. With --db, verify the history store's
    tamper-evident chain instead, read-only (a store that does not exist is 2, never
    created): every record against its link, the chain against its checkpoints, and with
    --checkpoints against those kept outside the store (each signed by --public-key when
    given)."""
    from drills.evidence import SigningKeyError, load_verifier
    from drills.evidence import verify as verify_pack

    if (pack is None) == (db is None):
        raise _fail("give either a PACK or --db", EXIT_INVALID)
    if db is not None:
        evidence_chain.verify_db(db, checkpoints, public_key, as_json)
        return
    if checkpoints is not None:
        raise _fail("--checkpoints goes with --db", EXIT_INVALID)
    assert pack is not None
    try:
        verifier = load_verifier(public_key) if public_key else None
    except SigningKeyError as exc:
        raise _fail(str(exc), EXIT_INVALID) from None
    result = verify_pack(pack, verifier)
    if as_json:
        ok = result.ok(allow_unsigned)
        typer.echo(json.dumps({
            "ok": ok, "signed": result.signed, "signature_ok": result.signature_ok,
            "keyid": result.keyid, "keyid_label": result.keyid_label, "run_id": result.run_id,
            "problems": result.problems,
        }, indent=2))  # fmt: skip
    else:
        ok = _print_verification(pack, result, allow_unsigned)
    if not ok:
        raise typer.Exit(EXIT_FAILED)


def _plan_names(plans: str | None) -> tuple[list[str], list[UnreadablePlan]]:
    """The names of the plans configured, and the plan files that cannot be read."""
    from drills.errors import PlanError
    from drills.evidence import UnreadablePlan
    from drills.plan import default_plan_patterns, load_plan, plan_paths

    defaults = default_plan_patterns()
    names, unreadable = [], []
    for path in plan_paths(plans, defaults):
        try:
            names.append(load_plan(path).name)
        except (PlanError, OSError) as exc:
            # One line: the file and what is wrong; its plan's coverage is then unknown.
            first = first_line(exc)
            unreadable.append(UnreadablePlan(str(path), first))
            err.print(Text(f"✗ {path}: cannot be read as a plan: {first}", style="red"))
    return names, unreadable


@evidence_app.command("coverage")
def coverage_cmd(
    period: Annotated[
        str,
        typer.Option(
            "--period", help="How far back: days, weeks, months or years (90d, 12w, 12m, 1y)."
        ),
    ] = "12m",
    fmt: Annotated[str, typer.Option("--format", help="md, json or pdf (pdf needs --out).")] = "md",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Write to this file instead of standard output.", show_default=False
        ),
    ] = None,
    plans: Annotated[
        str | None,
        typer.Option(
            "--plans",
            envvar="DRILLS_PLANS",
            show_default=False,
            help="Plan files or globs, separated by ',' (default: .lab/plan.yaml, plans/*.yaml "
            "except *.example.yaml), as the dashboard reads them; plans in the history count too.",
        ),
    ] = None,
    db: DbUrl = None,
) -> None:
    """Per plan over the period: drilled or not and when last, failback drilled (a drill whose
    failback phase succeeded), incidents, open findings, whether the history's chain verifies;
    headed by one line a compliance officer can read. A plan file that cannot be read is a
    finding: counted in the headline, listed, and exit 1. Exit 0 when every plan was drilled
    in the period, 1 when one was not (or a plan file cannot be read, or the chain does not
    verify), 2 bad input."""
    from drills.evidence import (
        Period,
        RenderError,
        chain_status,
        coverage_markdown,
        coverage_over,
        to_html,
        to_pdf,
    )

    if fmt not in ("md", "json", "pdf"):
        raise _fail(f"--format must be md, json or pdf, not {fmt!r}", EXIT_INVALID)
    if fmt == "pdf" and out is None:
        raise _fail("--format pdf needs --out FILE", EXIT_INVALID)
    try:
        span = Period.parse(period)
    except ValueError as exc:
        raise _fail(str(exc), EXIT_INVALID) from None
    names, unreadable = _plan_names(plans)
    report = coverage_over(open_history(db), names, span, chain=chain_status, unreadable=unreadable)
    text = coverage_markdown(report)
    data: bytes
    if fmt == "json":
        data = (json.dumps(report.to_json(), indent=2) + "\n").encode()
    elif fmt == "pdf":
        try:
            data = to_pdf(to_html(text, "Drill coverage"))
        except RenderError as exc:
            raise _fail(f"the PDF could not be printed: {exc}") from None
    else:
        data = text.encode()
    if out is None:
        typer.echo(data.decode(), nl=False)
    else:
        out.write_bytes(data)
        err.print(Text(report.headline()))
    if not report.complete:
        raise typer.Exit(EXIT_FAILED)
