"""The root Typer app; each command group lives in its own module."""

import typer

app = typer.Typer(
    name="drills",
    help="Disaster-recovery drills for GPU/AI platforms on Kubernetes.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
