"""What the lab's plan asks of DR after the switch: two SLOs on DR's own series, read
from the lab's Prometheus, and a load probe through the public name.

Both are scoped to DR (``site="dr"``), so a practice, which moves no users, watches them
on the probe's traffic as a drill watches them on the users'. The numbers are the lab's:
DR scaled to the primary's peak with its reserve carries the peak and the probe; DR held
to its minimum replicas (``--drift-capacity``, users at their peak) cannot carry both.
"""

from __future__ import annotations

from typing import Any

from drills_lab.load import DURATION, REQUESTS, SERVICE_PATH

# Short, so a lab drill stays a short wait; a real plan holds for minutes (the default 5m).
SLO_HOLD = "10s"
# An edge of the lab's latency buckets, so the histogram's quantile is not smeared across
# one; it allows the queueing a busy DR shows.
SLO_P95_S = 0.5
# The probe's own p95 is exact. A DR held to its minimum at the peak queues the probe's
# excess toward the 0.5 s a request may wait (~0.48 s at p95); a DR scaled with its reserve
# answers in ~0.1 s, leaving room for a loaded machine.
LOAD_P95_S = 0.4
LOAD_RATE = 8  # requests a second on top of the users'
LOAD_DURATION = "5s"
LOAD_PATH = SERVICE_PATH

# Both read 0 while DR has no traffic (a practice's, before its load), rather than the
# NaN of 0/0, which Prometheus answers and drills counts as a failed read. The errors are
# the service's: the drill's own health checks of a standby DR (its preflight asks DR's
# endpoint whether it answers) are 503s too, and within the rate window of the switch.
_DR = 'site="dr"'
_SERVICE = f'{_DR},handler="{SERVICE_PATH}"'
ERROR_RATIO = (
    f'(sum(rate({REQUESTS}{{{_SERVICE},code!~"2.."}}[15s])) or vector(0))'
    f" / clamp_min(sum(rate({REQUESTS}{{{_SERVICE}}}[15s])), 1e-9)"
)
P95_LATENCY = (
    f"(histogram_quantile(0.95, sum by (le) (rate({DURATION}_bucket{{{_DR}}}[15s]))) >= 0)"
    " or vector(0)"
)


def lab_slos() -> list[dict[str, Any]]:
    return [
        {"name": "dr-error-ratio", "expr": ERROR_RATIO, "op": "<=", "threshold": 0.01,
         "hold": SLO_HOLD, "in_practice": True},
        {"name": "dr-p95-latency", "expr": P95_LATENCY, "op": "<", "threshold": SLO_P95_S,
         "hold": SLO_HOLD, "in_practice": True},
    ]  # fmt: skip


def lab_load(host: str, port: int) -> dict[str, Any]:
    return {
        "url": f"http://{host}:{port}{LOAD_PATH}",
        "rate": LOAD_RATE,
        "duration": LOAD_DURATION,
        "p95": f"{LOAD_P95_S * 1000:g}ms",
        "error_rate": 0.01,
    }
