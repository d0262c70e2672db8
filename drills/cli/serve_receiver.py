"""`drills serve receiver`: the Alertmanager webhook receiver, in the foreground.

`drills serve --receiver-token REF` starts it beside the Prefect server (and `drills serve
stop` stops it); this command runs it alone, as in a container of its own. It belongs to
the `drills serve` group (serve_group); serve_cmd imports this module when it registers
the group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.text import Text

from drills.cli.common import DbUrl, open_history
from drills.cli.serve_group import err, fail, serve_app
from drills.orchestrator import (
    RECEIVER_PATH,
    RECEIVER_PORT,
    RECEIVER_READY_LINE,
    PlanCache,
    Receiver,
    make_receiver_server,
)
from drills.plan import default_plan_patterns, plan_paths

TOKEN_HELP = (
    "The bearer token Alertmanager must send (its webhook_config's http_config.authorization), "
    "by reference: env:NAME, file:PATH or prefect:BLOCK. A request without it, or with "
    "another, is refused (401) and written to the audit log."
)


def resolve_token(reference: str, option: str = "--token") -> str:
    """The token its reference names, or one line of error naming ``option`` (exit 2);
    never the token."""
    from drills.errors import TargetError
    from drills.plan import SecretRef, resolve_secret

    try:
        return resolve_secret(SecretRef.parse(reference), Path.cwd())
    except ValueError as exc:  # not a reference: the message never holds the value
        raise fail(f"{option}: {exc}", 2) from None
    except TargetError as exc:
        raise fail(f"{option}: {exc}", 2) from None


def check_token_before_start(reference: str, option: str) -> None:
    """Exit 2 in one line if ``reference`` cannot be read now. A Prefect block is left to the
    receiver: it can be read only once the server that holds it runs."""
    from drills.plan import SecretRef

    try:
        kind = SecretRef.parse(reference).kind
    except ValueError as exc:  # not a reference: the message never holds the value
        raise fail(f"{option}: {exc}", 2) from None
    if kind != "prefect":
        resolve_token(reference, option)


@serve_app.command("receiver")
def run_receiver(
    token: Annotated[
        str,
        typer.Option(
            "--token", envvar="DRILLS_RECEIVER_TOKEN_REF", help=TOKEN_HELP, show_default=False
        ),
    ],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: a free one).")
    ] = RECEIVER_PORT,
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    plans: Annotated[
        str | None,
        typer.Option(
            "--plans",
            envvar="DRILLS_PLANS",
            help="Plan files or globs whose declare_on alerts are matched against, "
            "separated by , or : (default: the lab's plan, then plans/*.yaml).",
        ),
    ] = None,
    db: DbUrl = None,
) -> None:
    """Receive Alertmanager's webhook notifications at /alertmanager: an alert matching a
    plan's declare_on proposes an incident (stored, announced with a link to the Incident
    page); only an operator approving it there starts it. The same alert sent again
    (grouped, repeated) proposes nothing more; once resolved, a proposal nobody approved is
    withdrawn. Runs until interrupted."""
    secret = resolve_token(token)
    history = open_history(db)
    cache = PlanCache(lambda: plan_paths(plans, default_plan_patterns()))
    try:
        server = make_receiver_server(Receiver(secret, cache, history), host, port)
    except OSError as exc:
        raise fail(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    bound = server.server_address[1]
    # The line `drills serve` waits for; it names the address, never the token.
    err.print(Text(f"{RECEIVER_READY_LINE} http://{host}:{bound}{RECEIVER_PATH}"))
    try:
        server.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
