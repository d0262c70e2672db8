"""The `drills` command line."""

from drills.cli import (
    lab_cmd,
    plan_cmd,
    readiness_cmd,
    recover_cmd,
    run_cmd,
    serve_cmd,
    ui_cmd,
)
from drills.cli.app import app

for _group in (plan_cmd, readiness_cmd, run_cmd, recover_cmd, lab_cmd, serve_cmd, ui_cmd):
    _group.register(app)


def main() -> None:
    app()


__all__ = ["app", "main"]
