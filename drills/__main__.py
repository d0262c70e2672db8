"""`python -m drills` runs the CLI."""

from drills.cli import main

main()
