"""A service's demand from Prometheus: its peak over a window, and when it was seen.

The peak is ``max_over_time((QUERY)[WINDOW:STEP])``, one instant query Prometheus answers
with one number; when it was seen comes from a range query of the same expression at a
step bounded to what Prometheus accepts (11,000 points). An unreachable Prometheus, an
error, or a query that gives no series or more than one raises TargetError: a figure that
cannot be trusted is never sized for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from drills.errors import TargetError
from drills.targets.http import new_client
from drills.targets.prometheus_api import ask

DAY_S = 86_400.0
T0_WINDOW_S = 300.0  # "demand at T0": the last 5 minutes
MAX_POINTS = 10_000  # Prometheus refuses a range query of more than 11,000 points
QUERY_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class Peak:
    value: float  # in the service's unit
    seen_at: float | None  # Unix time of the highest sample; None when not known
    window_s: float


def post(url: str, path: str, form: Mapping[str, str], timeout_s: float = QUERY_TIMEOUT_S) -> Any:
    """Prometheus's JSON answer to a form POSTed to ``path`` of its HTTP API; TargetError
    when it does not answer, or answers something that is not Prometheus's."""
    with new_client(read_timeout=timeout_s) as client:
        return ask(client, url, path, form).payload


def _answer(url: str, path: str, form: Mapping[str, str]) -> Any:
    source = f"prometheus ({url})"
    payload = post(url, path, form)
    if not isinstance(payload, Mapping) or payload.get("status") != "success":
        error = payload.get("error") if isinstance(payload, Mapping) else None
        raise TargetError(source, f"query failed: {str(error or 'not a Prometheus answer')[:200]}")
    return payload.get("data") or {}


def _one_series(data: Any, query: str, url: str) -> Mapping[str, Any]:
    result = data.get("result") or []
    source = f"prometheus ({url})"
    if not result:
        raise TargetError(source, f"{query} returned no series")
    if len(result) > 1:
        raise TargetError(source, f"{query} returned {len(result)} series; it must give one")
    return dict(result[0])


def _step(resolution_s: float) -> int:
    return max(1, math.ceil(resolution_s))


def peak_over(
    url: str, query: str, window_s: float, resolution_s: float, at: float | None = None
) -> Peak:
    """The highest value ``query`` took over the window that ends at ``at`` (now)."""
    at = time.time() if at is None else at
    step = _step(resolution_s)
    expr = f"max_over_time(({query})[{math.ceil(window_s)}s:{step}s])"
    series = _one_series(_answer(url, "/api/v1/query", {"query": expr, "time": f"{at:.3f}"}),
                         query, url)  # fmt: skip
    try:
        value = float(series["value"][1])
    except (KeyError, IndexError, TypeError, ValueError):
        raise TargetError(f"prometheus ({url})", f"{query}: not a number") from None
    if not math.isfinite(value):
        raise TargetError(f"prometheus ({url})", f"{query} gave {value}")
    return Peak(value, _seen_at(url, query, window_s, step, at, value), window_s)


def _seen_at(url: str, query: str, window_s: float, step: int, at: float, peak: float) -> float:
    """When the peak was seen: the highest sample of a range query at a step Prometheus
    accepts (the nearest step, when the peak's own step is finer)."""
    range_step = max(step, math.ceil(window_s / MAX_POINTS))
    form = {"query": query, "start": f"{at - window_s:.3f}", "end": f"{at:.3f}",
            "step": f"{range_step}s"}  # fmt: skip
    series = _one_series(_answer(url, "/api/v1/query_range", form), query, url)
    best_t, best_v = at, -math.inf
    for t, v in series.get("values") or []:
        value = float(v)
        if value >= peak:
            return float(t)
        if value > best_v:
            best_t, best_v = float(t), value
    return best_t


def demand_at(url: str, query: str, resolution_s: float, at: float | None = None) -> float:
    """The demand at T0: the highest value over the last 5 minutes."""
    return peak_over(url, query, T0_WINDOW_S, resolution_s, at).value
