"""Names the local server, the warm runner (flows/warm.py) and the dashboard share."""

from __future__ import annotations

# The incident deployment of prefect.yaml: the one the warm runner serves.
INCIDENT_DEPLOYMENT = "minimum-takeover-drill/declare-incident"
# What the warm runner logs once a standby has everything imported and can take a run;
# `drills serve` waits for it in warm.log.
WARM_READY = "ready (standby pid"

__all__ = ["INCIDENT_DEPLOYMENT", "WARM_READY"]
