"""`drills metrics serve`: Prometheus metrics from the history store and the plans."""

from __future__ import annotations

import signal
import threading
from typing import Annotated

import typer
from rich.text import Text

from drills.cli.common import EXIT_FAILED, DbUrl, open_history
from drills.cli.console import err_console

metrics_app = typer.Typer(
    name="metrics",
    help="Prometheus metrics: readiness, drill cadence, RTO/RPO, serving site, runs.",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the `metrics` group to ``app``; a second call does nothing."""
    if any(group.typer_instance is metrics_app for group in app.registered_groups):
        return
    app.add_typer(metrics_app, name="metrics")


@metrics_app.command("serve")
def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to listen on (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port.")] = 9464,
    db: DbUrl = None,
    plans: Annotated[
        str | None,
        typer.Option(
            "--plans",
            envvar="DRILLS_PLANS",
            help="Plan files or globs, separated by ',' (default: .lab/plan.yaml, plans/*.yaml "
            "except *.example.yaml), as the dashboard reads them.",
            show_default=False,
        ),
    ] = None,
    readiness_interval: Annotated[
        float,
        typer.Option(
            "--readiness-interval",
            min=1,
            help="Seconds between scheduled readiness runs (the readiness-check deployment's "
            "interval), exposed for the stale-readiness alert.",
        ),
    ] = 900.0,
) -> None:
    """Serve /metrics until interrupted; each scrape reads the store and the plans anew, on a
    thread of its own (a listen backlog of 1024: a burst of scrapes waits, none is dropped).
    ?name[]=METRIC returns only those metrics; a name[] naming no metric of drills is a 400."""
    from drills.capacity import FiguresCache
    from drills.metrics import DrillsCollector, PlanCache, Snapshotter, start
    from drills.plan import default_plan_patterns, plan_paths

    def paths() -> tuple[str, ...]:
        defaults = default_plan_patterns()
        return plan_paths(plans, defaults)

    err = err_console(highlight=False)
    store = open_history(db)
    collector = DrillsCollector(
        Snapshotter(store, readiness_interval), PlanCache(paths), FiguresCache()
    )
    try:
        server, _thread = start(collector, host, port)
    except OSError as exc:
        err.print(Text(f"✗ cannot listen on {host}:{port}: {exc}", style="red"), soft_wrap=True)
        raise typer.Exit(EXIT_FAILED) from None
    where = store.shown_url
    err.print(Text(f"drills metrics on http://{host}:{port}/metrics (store {where})"))
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    store.close()
