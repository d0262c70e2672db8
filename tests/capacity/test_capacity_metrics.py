"""The DR figures in `drills metrics serve`: computed in the background from the lab's DR
pool, so a scrape never waits on a cluster, and equal to what `drills capacity` says."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from drills.capacity.figures import FiguresCache, compute
from drills.metrics.exporter import DrillsCollector
from drills.metrics.plans import PlanCache
from drills.metrics.snapshot import Snapshotter
from drills.plan import load_plan
from drills.store.history import HistoryStore
from drills_lab import topology
from drills_lab.runtime import LabInfo


def _samples(collector: DrillsCollector) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("drills_dr_")
    }


def test_dr_figures_appear_once_computed_and_match_the_report(
    capacity_lab: LabInfo, history: HistoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DRILLS_PRICING", raising=False)
    monkeypatch.delenv("DRILLS_PROMETHEUS_URL", raising=False)
    path = str(Path(capacity_lab.state_dir) / "plan.yaml")
    cache = FiguresCache()
    collector = DrillsCollector(Snapshotter(history, 600), PlanCache(lambda: [path]), cache)
    assert _samples(collector) == {}  # the first scrape starts the work, and does not wait
    cache.wait(60)
    samples = _samples(collector)
    report = compute(load_plan(path))  # the lab's own pricing file: a GPU-hour at 2.49 USD
    dr_gpus = sum(p.count * p.gpus for p in topology.SITES["dr"].pools)
    plan = ("plan", "lab")
    assert samples[("drills_dr_gpus_reserved", frozenset({plan}))] == dr_gpus
    minimum = sum(w.gpu * w.dr_replicas for w in topology.WORKLOADS if w.tier != "batch")
    assert samples[("drills_dr_gpus_needed", frozenset({plan, ("need", "minimum")}))] == minimum
    cost = samples[("drills_dr_standby_cost_per_hour", frozenset({plan, ("currency", "USD")}))]
    assert cost == pytest.approx(2.49 * dr_gpus) == float(report.cost_per_hour or 0)
    ratio = [v for (name, _), v in samples.items() if name == "drills_dr_gpu_idle_ratio"]
    assert ratio == [pytest.approx(report.idle_ratio)]
    # The lab's plan measures the LLM server's demand: the target is exported as the report
    # gives it (the peak may move between the two reads, never below the minimum).
    target = samples.get(("drills_dr_gpus_needed", frozenset({plan, ("need", "target")})), -1)
    assert report.inputs.needs.target is not None and target >= minimum, report.inputs.needs
