"""Readiness of a fleet: every plan at once, shared targets asked once per run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from typer.testing import CliRunner

from drills.checks.areas.data import dataset_diff
from drills.checks.checkup import select_checks
from drills.cli import app
from drills.plan import DrillPlan, load_plan
from drills.store.history import HistoryStore
from drills.targets.shared import SharedTargets
from drills.targets.sites import Targets
from drills_lab.runtime import LabInfo


def _copies(lab: LabInfo, names: list[str], change: dict[str, object] | None = None) -> list[Path]:
    source = Path(lab.state_dir) / "plan.yaml"
    paths = []
    for name in names:
        data = yaml.safe_load(source.read_text())
        data["name"] = name
        path = Path(lab.state_dir) / f"fleet-{name}.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        paths.append(path)
    return paths


def test_plans_over_one_site_share_its_adapters_answers_and_bucket_comparisons(
    lab: LabInfo,
) -> None:
    a, b = (load_plan(p) for p in _copies(lab, ["share-a", "share-b"]))
    with SharedTargets() as shared, Targets(a, shared) as ta, Targets(b, shared) as tb:
        assert ta.dr.kube is tb.dr.kube and ta.primary.registry is tb.primary.registry
        assert ta.dr.kube is not ta.primary.kube  # another cluster: another identity
        nodes = ta.dr.kube.nodes()
        assert nodes and tb.dr.kube.nodes() is nodes  # asked once, answered twice
        ds = a.datasets[0]
        assert dataset_diff(ta, ds) is dataset_diff(tb, b.datasets[0])
    with Targets(a) as alone_a, Targets(b) as alone_b:  # alone (a drill's): nothing shared
        assert alone_a.dr.kube is not alone_b.dr.kube


def test_another_credential_to_the_same_endpoint_is_another_target(
    lab: LabInfo, tmp_path: Path, monkeypatch: object
) -> None:
    (path,) = _copies(lab, ["cred-a"])
    a = load_plan(path)
    data = yaml.safe_load(path.read_text())
    data["name"] = "cred-b"
    kubeconfig = Path(lab.state_dir) / "dr.kubeconfig"
    other = Path(lab.state_dir) / "dr-other.kubeconfig"
    other.write_text(kubeconfig.read_text().replace("token:", "token: x", 1))
    data["sites"]["dr"]["kubernetes"]["kubeconfig"] = str(other)
    b_path = Path(lab.state_dir) / "fleet-cred-b.yaml"
    b_path.write_text(yaml.safe_dump(data, sort_keys=False))
    b: DrillPlan = load_plan(b_path)
    with SharedTargets() as shared:
        ta, tb = Targets(a, shared), Targets(b, shared)
        assert ta.dr.identity("kube") != tb.dr.identity("kube")
        assert ta.primary.identity("kube") == tb.primary.identity("kube")
        assert ta.dr.identity("objects") == tb.dr.identity("objects")


def test_readiness_all_gives_one_result_per_plan_and_stores_each(
    lab: LabInfo, history: HistoryStore, tmp_path: Path
) -> None:
    paths = _copies(lab, [f"all-{i}" for i in range(4)])
    broken = tmp_path / "broken.yaml"
    broken.write_text("name: [\n")
    spec = ",".join(str(p) for p in [*paths, broken])
    started = time.perf_counter()
    result = CliRunner().invoke(
        app, ["readiness", "--all", "--json", "--plans", spec, "--db", history.url]
    )
    took = time.perf_counter() - started
    assert result.exit_code == 2, result.output  # the broken file
    body = json.loads(result.stdout)
    by_plan = {p["plan"]: p for p in body["plans"]}
    assert list(by_plan) == ["all-0", "all-1", "all-2", "all-3", "broken.yaml"]
    assert by_plan["broken.yaml"]["report"] is None and "invalid" in by_plan["broken.yaml"]["error"]
    check_count = len(select_checks())
    for name in ("all-0", "all-1", "all-2", "all-3"):
        report = by_plan[name]["report"]
        assert report["plan"] == name and len(report["results"]) == check_count
        assert history.latest_readiness(name) is not None
    ids = {r["id"]: r["status"] for r in by_plan["all-0"]["report"]["results"]}
    assert ids == {r["id"]: r["status"] for r in by_plan["all-3"]["report"]["results"]}
    assert took < 120
    both = CliRunner().invoke(app, ["readiness", str(paths[0]), "--all"])
    assert both.exit_code == 2 and "not both" in both.output
    way = CliRunner().invoke(app, ["readiness", "--all", "--direction", "failback"])
    assert way.exit_code == 2 and "--direction applies to one plan" in way.output
    narrowed = CliRunner().invoke(
        app, ["readiness", str(paths[0]), "--direction", "failback", "--only", "dns.control"]
    )
    assert narrowed.exit_code == 2 and "runs all its checks" in narrowed.output
