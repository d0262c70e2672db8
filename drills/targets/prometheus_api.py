"""Prometheus's HTTP API, for expressions of the plan's own: is one valid PromQL (asked of
Prometheus's own parser), and what one instant query's single sample is.

An answer that cannot be trusted is an error, never a value: no answer, a body that is not
JSON, a 404 (not a Prometheus, or a path in front of one), ``status: error``, or no sample
where one is wanted.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import httpx

from drills.errors import TargetError
from drills.plan import DrillPlan
from drills.targets.http import new_client, translate

QUERY_TIMEOUT_S = 10.0
PARSE_PATH = "/api/v1/parse_query"  # Prometheus 2.46 and later; older ones answer 404
QUERY_PATH = "/api/v1/query"


def prometheus_for(plan: DrillPlan, override: str | None) -> str | None:
    """The Prometheus an option or the environment names, else the plan's cost.prometheus."""
    if override:
        return override
    return plan.cost.prometheus if plan.cost is not None else None


def prometheus_url(plan: DrillPlan) -> str | None:
    """The plan's Prometheus: DRILLS_PROMETHEUS_URL, else cost.prometheus (as `drills
    capacity` reads them)."""
    return prometheus_for(plan, os.environ.get("DRILLS_PROMETHEUS_URL"))


@dataclass(frozen=True)
class Answer:
    http_status: int
    payload: Mapping[str, Any]

    @property
    def error_type(self) -> str:
        return str(self.payload.get("errorType") or "")

    @property
    def error(self) -> str:
        return str(self.payload.get("error") or "")


def ask(client: httpx.Client, url: str, path: str, form: Mapping[str, str]) -> Answer:
    """One POST to Prometheus's API; TargetError when what answers is not Prometheus."""
    source = f"prometheus ({url})"
    try:
        response = client.post(url.rstrip("/") + path, data=dict(form))
    except httpx.HTTPError as exc:
        raise translate(source, exc) from None
    try:
        payload = response.json()
    except ValueError:
        raise TargetError(source, f"HTTP {response.status_code}: not a Prometheus answer") from None
    if not isinstance(payload, Mapping) or payload.get("status") not in ("success", "error"):
        raise TargetError(source, f"HTTP {response.status_code}: not a Prometheus answer")
    return Answer(response.status_code, payload)


def parse_problem(url: str, expr: str, client: httpx.Client | None = None) -> str | None:
    """Prometheus's parser's message for ``expr``, None when it parses; TargetError when
    Prometheus cannot be asked. Asked of /api/v1/parse_query where the server has it, else
    of an instant query, which parses the expression first and answers the same
    ``bad_data`` with the same message."""
    with _client(client) as http:
        try:
            answer = ask(http, url, PARSE_PATH, {"query": expr})
        except TargetError as exc:
            if "HTTP 404" not in exc.cause:
                raise
            answer = ask(http, url, QUERY_PATH, {"query": expr, "time": f"{time.time():.3f}"})
    if answer.payload.get("status") == "success":
        return None
    if answer.error_type == "bad_data":
        return answer.error.removeprefix('invalid parameter "query": ')
    raise TargetError(f"prometheus ({url})", f"{answer.error_type}: {answer.error[:200]}")


def instant_value(url: str, expr: str, client: httpx.Client | None = None) -> float:
    """The one sample ``expr`` gives now (a scalar, or a vector of one series); TargetError
    for anything else, an empty result included: an SLO with no sample is not verified."""
    source = f"prometheus ({url})"
    with _client(client) as http:
        answer = ask(http, url, QUERY_PATH, {"query": expr, "time": f"{time.time():.3f}"})
    if answer.payload.get("status") != "success":
        raise TargetError(source, f"query failed: {answer.error_type}: {answer.error[:200]}")
    data = answer.payload.get("data") or {}
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar" and isinstance(result, list):
        return _sample_value(result, source)
    if kind != "vector" or not isinstance(result, list):
        raise TargetError(source, f"expected one sample, got a {kind!r} result")
    if len(result) != 1:
        raise TargetError(
            source,
            "no sample: the expression returned nothing"
            if not result
            else f"{len(result)} series where one sample is wanted (aggregate the expression)",
        )
    return _sample_value((result[0] or {}).get("value"), source)


def _sample_value(pair: Any, source: str) -> float:
    try:
        value = float(pair[1])
    except (IndexError, TypeError, ValueError):
        raise TargetError(source, f"not a sample: {str(pair)[:80]}") from None
    if math.isnan(value):
        raise TargetError(source, "the sample is NaN")
    return value


def _client(given: httpx.Client | None) -> AbstractContextManager[httpx.Client]:
    """The caller's client (left open), or one of our own for this call."""
    return nullcontext(given) if given is not None else new_client(read_timeout=QUERY_TIMEOUT_S)


__all__ = ["Answer", "ask", "instant_value", "parse_problem", "prometheus_url"]
