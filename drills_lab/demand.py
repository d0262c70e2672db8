"""The lab's users: demand with a daily shape, a 24 h day compressed into ``day_s`` seconds.

Demand is lowest at midnight and highest at noon (a raised cosine between ``TROUGH_RPS``
and ``PEAK_RPS``), so "the peak of the last 24 h" of the lab's Prometheus is a real
query. The generator offers its requests to the capacity model of the site that serves
(the primary, and DR once the primary no longer serves, as clients follow the DNS name)
directly, not through sockets: a lab at its peak costs the machine almost nothing, and
the counters, the queue and the 503s are the very ones the HTTP endpoint uses.

Users are offered every TICK_S, and also just before the endpoint admits a request of its
own (``offer``), so a probe's request queues behind the users who arrived before it, as at a
real gateway. Offered only on the tick, a late or starved tick let a probe's requests pass
up to a tick of users (a quarter of a second of queue, at the peak), and a DR too small for
the peak read as one that carries it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Mapping

from drills_lab.load import SiteLoad

TROUGH_RPS = 6.0
PEAK_RPS = 36.0
DEFAULT_DAY_S = 240.0
# Where in its day the lab starts: shortly before noon, so the peak is in the first minute
# of history and a test does not wait a compressed morning for it.
START_PHASE = 0.42
TICK_S = 0.25


def demand_rps(phase: float) -> float:
    """Requests a second at ``phase`` of the day (0 = midnight, 0.5 = noon)."""
    return TROUGH_RPS + (PEAK_RPS - TROUGH_RPS) * (1 - math.cos(2 * math.pi * phase)) / 2


class DemandGenerator:
    """Offers the day's demand to whichever site serves, every TICK_S."""

    def __init__(
        self,
        loads: Mapping[str, SiteLoad],
        serving: Callable[[str], float | None],
        day_s: float = DEFAULT_DAY_S,
        *,
        at_peak: bool = False,
    ) -> None:
        """``serving(site)`` is the site's capacity in requests a second when it serves,
        None when it does not. ``at_peak``: the users stay at the day's peak."""
        if day_s <= 0:
            raise ValueError("day_s must be above 0")
        self.loads = loads
        self.serving = serving
        self.day_s = day_s
        self.at_peak = at_peak
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started = time.monotonic()
        self._lock = threading.Lock()  # the tick and every endpoint request offer users
        self._offered_to = self._started  # users up to this moment have been offered
        self._owed = 0.0  # a fraction of a request carried to the next offer

    def phase(self, now: float) -> float:
        return (START_PHASE + (now - self._started) / self.day_s) % 1.0

    def rps(self, now: float) -> float:
        return PEAK_RPS if self.at_peak else demand_rps(self.phase(now))

    def wait_recorded(self) -> None:
        """Until the records' rate window holds a whole window of this demand: a drill at
        once would size DR for a fraction of it (and the plan's SLOs would see the rest
        overload DR)."""
        # Two seconds more: a scrape and a rule evaluation, each every second.
        time.sleep(max(0.0, self._started + RATE_WINDOW_S + 2 - time.monotonic()))

    def start(self) -> None:
        self._started = self._offered_to = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="lab-demand", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)

    def _target(self) -> tuple[str, float | None]:
        capacity = self.serving("primary")
        if capacity is None and "dr" in self.loads:
            dr = self.serving("dr")
            if dr is not None:
                return "dr", dr
        return "primary", capacity

    def offer(self, now: float | None = None) -> int:
        """Offer the users who arrived since the last offer, spread over that time, to the
        site that serves; how many there were."""
        with self._lock:
            now = time.monotonic() if now is None else now
            last = self._offered_to
            if now <= last:
                return 0
            self._owed += self.rps(now) * (now - last)
            count = int(self._owed)
            self._owed -= count
            self._offered_to = now
            if count == 0:  # the endpoint's own requests come every few ms: no store read
                return 0
            site, capacity = self._target()
            load = self.loads[site]
            for i in range(count):
                at = last + (i + 0.5) * (now - last) / count  # users do not arrive in one burst
                if capacity is None:
                    load.refuse()
                else:
                    load.admit(capacity, at)
            return count

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            self.offer()


# The lab's Prometheus records demand, so it has a history of its own: the primary's peak
# over 24 h is then a max_over_time of one series.
DEMAND_RECORD = "site:drills_lab_requests:rate15s"
TOKENS_RECORD = "site:drills_lab_tokens:rate15s"
RATE_WINDOW_S = 15  # the records' rate window: until it is full, they read below the demand
RULES = {
    DEMAND_RECORD: f"sum by (site) (rate(drills_lab_requests_total[{RATE_WINDOW_S}s]))",
    TOKENS_RECORD: f"sum by (site) (rate(drills_lab_tokens_generated_total[{RATE_WINDOW_S}s]))",
}
# What the lab's plan says of the LLM server's demand: its query, and what one replica
# carries by the team's "load test" (the lab's own per-replica rate).
DEMAND_QUERY = f'sum({DEMAND_RECORD}{{site="primary"}})'
DEMAND_RESOLUTION = "2s"  # the lab plan's demand.resolution
# The peak as `capacity.carry` reads it: a subquery at the plan's resolution, which has no
# point until a step boundary follows the first sample.
DEMAND_PEAK_QUERY = f"max_over_time(({DEMAND_QUERY})[1d:{DEMAND_RESOLUTION}])"


def describe(day_s: float, recorded: bool, *, at_peak: bool = False) -> str:
    """What `lab up` and `lab status` say of the demand."""
    shape = f"a day every {day_s:g}s, {TROUGH_RPS:g}-{PEAK_RPS:g} requests/s"
    if at_peak:
        shape = f"at its peak all day, {PEAK_RPS:g} requests/s"
    if recorded:
        return f"generated ({shape}), recorded in Prometheus as {DEMAND_RECORD}"
    static = f"the plan's demand is static ({PEAK_RPS:g} requests/s)"
    return f"generated ({shape}); prometheus not installed: {static}"
