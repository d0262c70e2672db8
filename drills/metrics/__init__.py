"""`drills metrics serve`: readiness, cadence, RTO/RPO and runs, as Prometheus metrics.

snapshot.py computes the figures from the history store and the plans (no Prometheus);
plans.py keeps the parsed plans by file; exporter.py turns a snapshot into metrics.
"""
