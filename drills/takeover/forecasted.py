"""The forecast a drill's preflight made, recorded beside the RTO the drill measured."""

from __future__ import annotations

from drills.checks.areas.forecast_rto import FORECAST_CHECK
from drills.checks.runner import ReadinessReport
from drills.forecast.model import forecast_error
from drills.store.details import ForecastRecord


def forecast_record(
    readiness: ReadinessReport | None, measured_rto: float
) -> ForecastRecord | None:
    """None when the preflight made no forecast (an incident's may still be running)."""
    if readiness is None:
        return None
    predicted = next((dict(r.evidence) for r in readiness.results if r.id == FORECAST_CHECK), None)
    if not predicted or predicted.get("rto_seconds") is None:
        return None
    error = forecast_error(predicted, measured_rto) or {}
    return ForecastRecord(
        rto_seconds=predicted["rto_seconds"],
        interval=list(predicted.get("interval") or []),
        client_rto_seconds=predicted.get("client_rto_seconds"),
        full_capacity_seconds=predicted.get("full_capacity_seconds"),
        basis=str(predicted.get("basis") or ""),
        drills=int(predicted.get("drills") or 0),
        measured_rto_seconds=round(measured_rto, 3),
        error_seconds=error.get("error_seconds"),
        inside_interval=error.get("inside_interval"),
    )
