"""How idle the DR pool's GPUs were over a window, from DCGM's ``DCGM_FI_DEV_GPU_UTIL`` in
Prometheus (percent busy, per GPU).

One bounded instant query: ``avg_over_time(...[WINDOW:STEP])``, a subquery Prometheus
evaluates at most 2,016 steps a series (5 minutes over 7 days), averaged there; the answer
is one number a GPU, never the raw samples.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from drills.errors import TargetError
from drills.targets.http import new_client
from drills.targets.prometheus_api import QUERY_PATH, ask

METRIC = "DCGM_FI_DEV_GPU_UTIL"
MAX_STEPS = 2016  # 7 days at 5 minutes
QUERY_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class GpuUtilisation:
    hostname: str
    gpu: str
    model: str
    percent: float  # mean over the window, 0-100


def step_for(window_s: float) -> int:
    """The subquery's step: the window in at most MAX_STEPS, at least one second."""
    return max(1, math.ceil(window_s / MAX_STEPS))


def _regex_of(names: Iterable[str]) -> str:
    # Node names are DNS labels; a dot is the only regex character they can hold, escaped
    # once for the regex and once for PromQL's double-quoted string.
    return "|".join(sorted(n.replace(".", "\\\\.") for n in names))


def utilisation_query(hostnames: Iterable[str], window_s: float) -> str:
    window = max(1, math.ceil(window_s))
    return (
        f'avg_over_time({METRIC}{{Hostname=~"{_regex_of(hostnames)}"}}'
        f"[{window}s:{step_for(window_s)}s])"
    )


def parse_vector(payload: Any, source: str) -> list[GpuUtilisation]:
    """The per-GPU means of an instant query's answer; TargetError when it is not one."""
    if not isinstance(payload, Mapping) or payload.get("status") != "success":
        error = payload.get("error") if isinstance(payload, Mapping) else None
        raise TargetError(source, f"query failed: {str(error or 'not a Prometheus answer')[:200]}")
    data = payload.get("data") or {}
    if data.get("resultType") != "vector":
        raise TargetError(source, f"expected a vector, got {data.get('resultType')!r}")
    out = []
    for item in data.get("result") or []:
        labels = item.get("metric") or {}
        try:
            value = float(item["value"][1])
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        if math.isnan(value):
            continue
        out.append(
            GpuUtilisation(
                hostname=str(labels.get("Hostname", "")),
                gpu=str(labels.get("gpu", "")),
                model=str(labels.get("modelName", "")),
                percent=min(max(value, 0.0), 100.0),
            )
        )
    return out


def query_utilisation(
    url: str, hostnames: Iterable[str], window_s: float, at: float | None = None
) -> list[GpuUtilisation]:
    """Each DR GPU's mean utilisation over the window; TargetError when Prometheus does not
    answer or answers something else."""
    form = {"query": utilisation_query(hostnames, window_s), "time": f"{at or time.time():.3f}"}
    with new_client(read_timeout=QUERY_TIMEOUT_S) as client:
        answer = ask(client, url, QUERY_PATH, form)
    return parse_vector(answer.payload, f"prometheus ({url})")


def idle_ratio_of(samples: Iterable[GpuUtilisation]) -> tuple[float, int]:
    """1 − mean utilisation over the GPUs measured, and how many GPUs that was."""
    values = [s.percent for s in samples]
    if not values:
        return math.nan, 0
    return 1.0 - sum(values) / len(values) / 100.0, len(values)


def busy_over_time(
    url: str, hostnames: Iterable[str], window_s: float, points: int = 200
) -> list[tuple[float, float]]:
    """(time, GPUs busy) over the window: the sum of DCGM_FI_DEV_GPU_UTIL ÷ 100 across the
    DR GPU nodes, as one bounded range query of at most ``points`` steps."""
    source = f"prometheus ({url})"
    now = time.time()
    step = max(1, math.ceil(window_s / points))
    form = {
        "query": f'sum({METRIC}{{Hostname=~"{_regex_of(hostnames)}"}}) / 100',
        "start": f"{now - window_s:.3f}",
        "end": f"{now:.3f}",
        "step": f"{step}s",
    }
    with new_client(read_timeout=QUERY_TIMEOUT_S) as client:
        payload = ask(client, url, "/api/v1/query_range", form).payload
    if not isinstance(payload, Mapping) or payload.get("status") != "success":
        raise TargetError(source, "range query failed")
    result = (payload.get("data") or {}).get("result") or []
    values = result[0].get("values") or [] if result else []
    return [(float(t), float(v)) for t, v in values]
