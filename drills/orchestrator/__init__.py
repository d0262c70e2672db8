"""Prefect, seen from drills: a local server and worker (serve), the one REST client of a
server (rest), and what the CLI and the dashboard do with flow runs (flow_runs)."""
