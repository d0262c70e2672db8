"""The `drills` command line. drills.cli.app lists the commands; each one's module is
imported only when it runs."""

from drills.cli.app import app


def main() -> None:
    app()


__all__ = ["app", "main"]
