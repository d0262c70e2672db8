"""The snapshot as Prometheus metrics: a collector that computes on each scrape.

Every name is documented by its help here, which the docs' metrics reference is generated
from; tests/metrics checks that the table of docs/how-to/alerts-and-notifications.md names the
same metrics.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from threading import Thread
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.registry import Collector

from drills.capacity.figures import DrFigures, FiguresCache
from drills.metrics.plans import PlanCache
from drills.metrics.snapshot import SITES, MetricsSnapshot, PlanMetrics, RunFigures, Snapshotter


@dataclass(frozen=True)
class Spec:
    name: str
    help: str
    labels: tuple[str, ...]


def _spec(name: str, help: str, *labels: str) -> Spec:
    return Spec(name, help, labels)


P = "plan"
SPECS = (
    _spec("drills_plan_rto_target_seconds", "The plan's RTO objective.", P),
    _spec("drills_plan_rpo_target_seconds", "The plan's RPO objective.", P),
    _spec(
        "drills_plan_serving_site",
        "1 for the site that serves the plan (primary, dr or in-transition), 0 for the others; "
        "derived from the history.",
        P, "site",
    ),
    _spec(
        "drills_readiness_check_status",
        "1 for each check of the plan's latest readiness run, its status as a label.",
        P, "check", "category", "blocking", "status",
    ),
    _spec(
        "drills_readiness_blocking_checks",
        "Checks that block a takeover in the plan's latest readiness run.",
        P,
    ),
    _spec(
        "drills_readiness_last_run_timestamp_seconds",
        "When the plan's latest stored readiness run checked (0: never).",
        P,
    ),
    _spec(
        "drills_readiness_interval_seconds",
        "How often readiness is scheduled to run (--readiness-interval).",
        P,
    ),
    _spec(
        "drills_dataset_replication_lag_seconds",
        "Replication lag of a dataset, as the latest readiness run measured it (data.rpo).",
        P, "dataset",
    ),
    _spec("drills_dataset_rpo_target_seconds", "A dataset's rpo_target in the plan.", P, "dataset"),
    _spec(
        "drills_drill_last_success_timestamp_seconds",
        "When the plan's last drill that counts for the cadence ended (0: never).",
        P,
    ),
    _spec("drills_drill_cadence_seconds", "The longest a plan may go without a drill.", P),
    _spec(
        "drills_drill_due_in_seconds",
        "Time left until the cadence limit; negative when the drill is overdue.",
        P,
    ),
    _spec(
        "drills_run_last_finished_timestamp_seconds",
        "When the plan's last run with a measured RTO, per mode, finished.",
        P, "mode",
    ),
    _spec("drills_run_last_rto_seconds", "RTO of that run.", P, "mode"),
    _spec("drills_run_last_client_rto_seconds", "Client-visible RTO of that run.", P, "mode"),
    _spec(
        "drills_run_last_full_capacity_seconds",
        "When that run's normal tier was ready too, seconds after T0.",
        P, "mode",
    ),
    _spec(
        "drills_run_last_preemption_seconds",
        "How long that run's critical tier waited for DR's low-priority work to free GPUs.",
        P, "mode",
    ),
    _spec("drills_run_last_rpo_seconds", "RPO of each dataset in that run.", P, "mode", "dataset"),
    _spec(
        "drills_dr_carry_ratio",
        "Share of the primary's demand at T0 that DR carried in that run (1 = all of it).",
        P, "mode",
    ),
    _spec(
        "drills_run_last_detection_seconds",
        "From detection to declaration (T0) of that run, an incident whose detection is known.",
        P, "mode",
    ),
    _spec(
        "drills_run_last_slo_ok",
        "1 when an SLO held after the switch in the plan's newest finished run of that mode, "
        "else 0; its status (held, breached, unverified, stopped) a label.",
        P, "mode", "slo", "status",
    ),
    _spec(
        "drills_run_last_slo_value",
        "The last value that run read of the SLO's expression.",
        P, "mode", "slo",
    ),
    _spec(
        "drills_runs_in_progress",
        "Runs not finished whose process still holds the plan's lease.",
        P, "mode",
    ),
    _spec(
        "drills_runs_stuck",
        "Runs not finished that nobody holds the lease of: they need `drills recover`.",
        P, "mode",
    ),
    _spec(
        "drills_run_oldest_unfinished_start_timestamp_seconds",
        "When the oldest run of the plan that has not finished started.",
        P,
    ),
    _spec(
        "drills_evidence_chain_length",
        "Links in the plan's evidence chain: a drop means links were removed (compare "
        "with the checkpoints kept outside the store).",
        P,
    ),
    _spec(
        "drills_incident_proposals_pending",
        "Incidents proposed by alerts (declare_on) that wait for an operator's approval.",
        P,
    ),
    _spec(
        "drills_dr_standby_cost_per_hour",
        "What the GPUs reserved at DR for the plan's standbys cost an hour (drills capacity).",
        P, "currency",
    ),
    _spec(
        "drills_dr_gpu_idle_ratio",
        "The part of DR's GPUs idle: over 7 days from DCGM, else now from allocation.",
        P, "source",
    ),
    _spec(
        "drills_dr_gpus_needed",
        "GPUs a takeover needs at DR: at minimum, and for the plan's target part of demand.",
        P, "need",
    ),
    _spec("drills_dr_gpus_reserved", "GPUs at DR held for the plan's standbys.", P),
    _spec("drills_plan_files_invalid", "Plan files configured that do not load."),
    _spec("drills_metrics_scrape_duration_seconds", "Time this scrape took to compute."),
)  # fmt: skip
MODES = ("drill", "incident")


class Families:
    """One gauge family per spec, filled plan by plan."""

    def __init__(self) -> None:
        self._by_name = {
            s.name: GaugeMetricFamily(s.name, s.help, labels=list(s.labels)) for s in SPECS
        }

    def add(self, name: str, value: float, *labels: str) -> None:
        self._by_name[name].add_metric(list(labels), value)

    def __iter__(self) -> Iterator[Metric]:
        return iter(self._by_name.values())


def _plan_families(out: Families, p: PlanMetrics, now: float) -> None:
    plan = p.plan
    out.add("drills_plan_rto_target_seconds", p.rto_target_s, plan)
    out.add("drills_plan_rpo_target_seconds", p.rpo_target_s, plan)
    for site in SITES:
        out.add("drills_plan_serving_site", float(site == p.serving_site), plan, site)
    out.add("drills_evidence_chain_length", float(p.chain_length), plan)
    out.add("drills_incident_proposals_pending", float(p.proposals_pending), plan)
    _readiness_families(out, p)
    _run_families(out, p, now)


def _readiness_families(out: Families, p: PlanMetrics) -> None:
    plan = p.plan
    for c in p.checks:
        # One series a check (its status a label), not one a status: a scrape of 200 plans
        # renders a quarter as many lines.
        labels = (plan, c.check, c.category, str(c.blocking).lower(), c.status)
        out.add("drills_readiness_check_status", 1.0, *labels)
    out.add("drills_readiness_blocking_checks", sum(c.blocking for c in p.checks), plan)
    out.add("drills_readiness_last_run_timestamp_seconds", p.readiness_at, plan)
    out.add("drills_readiness_interval_seconds", p.readiness_interval_s, plan)
    for lag in p.lags:
        out.add("drills_dataset_rpo_target_seconds", lag.rpo_target_s, plan, lag.dataset)
        if lag.lag_s is not None:
            out.add("drills_dataset_replication_lag_seconds", lag.lag_s, plan, lag.dataset)


def _last_run_families(out: Families, plan: str, run: RunFigures) -> None:
    out.add("drills_run_last_finished_timestamp_seconds", run.finished_at, plan, run.mode)
    out.add("drills_run_last_rto_seconds", run.rto_s, plan, run.mode)
    if run.client_rto_s is not None:
        out.add("drills_run_last_client_rto_seconds", run.client_rto_s, plan, run.mode)
    if run.full_capacity_s is not None:
        out.add("drills_run_last_full_capacity_seconds", run.full_capacity_s, plan, run.mode)
    if run.preemption_s is not None:
        out.add("drills_run_last_preemption_seconds", run.preemption_s, plan, run.mode)
    for dataset, rpo in sorted(run.rpo_s.items()):
        out.add("drills_run_last_rpo_seconds", rpo, plan, run.mode, dataset)
    if run.detection_s is not None:
        out.add("drills_run_last_detection_seconds", run.detection_s, plan, run.mode)
    if run.carry_ratio is not None:
        out.add("drills_dr_carry_ratio", run.carry_ratio, plan, run.mode)


def _run_families(out: Families, p: PlanMetrics, now: float) -> None:
    plan = p.plan
    out.add("drills_drill_last_success_timestamp_seconds", p.last_drill_success, plan)
    out.add("drills_drill_cadence_seconds", p.cadence_s, plan)
    out.add("drills_drill_due_in_seconds", p.last_drill_success + p.cadence_s - now, plan)
    for run in p.last_runs:
        _last_run_families(out, plan, run)
    for s in p.slos:
        out.add("drills_run_last_slo_ok", float(s.status == "held"), plan, s.mode, s.slo, s.status)
        if s.value is not None:
            out.add("drills_run_last_slo_value", s.value, plan, s.mode, s.slo)
    for mode in MODES:
        out.add("drills_runs_in_progress", p.in_progress.get(mode, 0), plan, mode)
        out.add("drills_runs_stuck", p.stuck.get(mode, 0), plan, mode)
    if p.oldest_unfinished_start is not None:
        oldest = "drills_run_oldest_unfinished_start_timestamp_seconds"
        out.add(oldest, p.oldest_unfinished_start, plan)


def _dr_families(out: Families, f: DrFigures) -> None:
    if f.cost_per_hour is not None and f.currency:
        out.add("drills_dr_standby_cost_per_hour", f.cost_per_hour, f.plan, f.currency)
    out.add("drills_dr_gpu_idle_ratio", f.idle_ratio, f.plan, f.idle_source)
    out.add("drills_dr_gpus_needed", f.needed_minimum_gpus, f.plan, "minimum")
    if f.needed_target_gpus is not None:
        out.add("drills_dr_gpus_needed", f.needed_target_gpus, f.plan, "target")
    out.add("drills_dr_gpus_reserved", f.reserved_gpus, f.plan)


def families(
    snapshot: MetricsSnapshot, took_s: float = 0.0, dr: Mapping[str, DrFigures] | None = None
) -> Families:
    out = Families()
    for plan in snapshot.plans:
        _plan_families(out, plan, snapshot.taken_at)
        if dr and plan.plan in dr:
            _dr_families(out, dr[plan.plan])
    out.add("drills_plan_files_invalid", len(snapshot.invalid_files))
    out.add("drills_metrics_scrape_duration_seconds", took_s)
    return out


class DrillsCollector(Collector):
    """Computes the metrics on each scrape, from the store and the plans as they are then."""

    def __init__(
        self, snapshotter: Snapshotter, plans: PlanCache, dr: FiguresCache | None = None
    ) -> None:
        self.snapshotter = snapshotter
        self.plans = plans
        self.dr = dr  # the DR figures of plans with a cost section, refreshed in the background

    def describe(self) -> Iterator[Metric]:
        # The names, without a scrape: what a `?name[]=` filter is checked against.
        return iter(Families())

    def collect(self) -> Iterator[Metric]:
        began = time.perf_counter()
        loaded = self.plans.load()
        snapshot = self.snapshotter.take(loaded.plans, loaded.invalid)
        dr = self.dr.get(loaded.plans) if self.dr is not None else None
        return iter(families(snapshot, time.perf_counter() - began, dr))


class _Server(ThreadingWSGIServer):
    """A thread a scrape, and a listen backlog for bursts: socketserver's default of 5 let
    a burst of 200 connections time out at the kernel's door while the server was idle."""

    request_queue_size = 1024  # the kernel caps it at net.core.somaxconn


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged: one a few seconds per Prometheus replica."""


_KNOWN = frozenset(spec.name for spec in SPECS)
Start = Callable[[str, list[tuple[str, str]]], Any]


def metrics_app(registry: CollectorRegistry) -> Callable[[dict[str, Any], Start], Iterable[bytes]]:
    """prometheus_client's WSGI app, but for a ``name[]`` filter naming no metric of ours.

    prometheus_client answers such a filter (``?name[]=``, a typo) with 200 and an empty
    body, which reads as "every figure gone"; here it is a 400 that names the metrics."""
    inner = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: Start) -> Iterable[bytes]:
        query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        asked = query.get("name[]")
        unknown = sorted({n for n in asked or [] if n not in _KNOWN})
        if asked is not None and unknown:
            body = (
                f"name[] {', '.join(map(repr, unknown))} names no metric of drills; give one "
                "or more of the drills_* names (see the metrics reference), or leave name[] "
                "out for them all\n"
            ).encode()
            start_response("400 Bad Request", [("Content-Type", "text/plain; charset=utf-8")])
            return [body]
        return inner(environ, start_response)

    return app


def start(collector: DrillsCollector, host: str, port: int) -> tuple[WSGIServer, Thread]:
    """Serve ``/metrics`` on ``host:port`` from a daemon thread, a thread per scrape."""
    registry = CollectorRegistry(auto_describe=False)  # no collect at registration
    registry.register(collector)
    family, _, _, _, address = next(
        iter(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE))
    )

    class Server(_Server):  # IPv4 or IPv6, as the host asks
        address_family = family

    server = make_server(str(address[0]), port, metrics_app(registry), Server, _Quiet)
    thread = Thread(target=server.serve_forever, name="metrics-server", daemon=True)
    thread.start()
    return server, thread
