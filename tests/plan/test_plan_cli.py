"""`drills plan validate|show|schema`, through Typer's runner and once as a real process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from drills.cli.app import app
from drills.cli.plan_cmd import register

register(app)
register(app)  # harmless twice: the lead's wiring in drills.cli may have registered it already

HERE = Path(__file__).parent
VALID = HERE / "plans" / "valid.yaml"
BROKEN = HERE / "plans" / "many-problems.yaml"
EXAMPLE = HERE.parents[1] / "plans" / "gpu-platform.example.yaml"

runner = CliRunner()


def test_plan_group_is_registered_once() -> None:
    assert [g.name for g in app.registered_groups].count("plan") == 1


def test_validate_valid_plan_exits_0() -> None:
    result = runner.invoke(app, ["plan", "validate", str(VALID)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        f"✓ {VALID} is valid: 2 workloads (1 critical, 1 normal, 0 batch), 1 dataset, 1 smoke probe"
    )


def test_validate_example_plan_exits_0() -> None:
    result = runner.invoke(app, ["plan", "validate", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
    assert "7 workloads (4 critical, 1 normal, 2 batch)" in result.stdout


def test_validate_broken_plan_lists_every_problem_and_exits_2() -> None:
    result = runner.invoke(app, ["plan", "validate", str(BROKEN)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert lines[0] == f"✗ {BROKEN}: 8 problems"
    assert (
        f"{BROKEN}:17:65: workloads[0].tier: must be one of: critical, normal, batch "
        "(got 'critcal')" in lines
    )
    assert (
        f"{BROKEN}:26:13: dns.dr_value: must differ from primary_value, or the switch "
        "is a no-op" in lines
    )
    assert len(lines) == 9


def test_validate_missing_file_exits_2() -> None:
    result = runner.invoke(app, ["plan", "validate", "no-such-plan.yaml"])
    assert result.exit_code == 2
    assert "no-such-plan.yaml: the plan file does not exist" in result.stderr


def test_validate_resolve_reports_unresolved_references_without_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tmp_path / "plan.yaml"
    shutil.copy(VALID, plan)
    result = runner.invoke(app, ["plan", "validate", str(plan), "--resolve"])
    assert result.exit_code == 2
    assert (
        f"{plan}:62:60: dns.tsig.secret: file:tsig.secret does not resolve: file "
        f"{tmp_path / 'tsig.secret'} does not exist" in result.stderr
    )
    assert (
        f"{plan}:7:19: sites.primary.kubernetes.kubeconfig: {tmp_path / 'primary.kubeconfig'} "
        "does not exist" in result.stderr
    )

    secret_value = "tsig-value-must-not-appear"
    (tmp_path / "tsig.secret").write_text(secret_value + "\n", encoding="utf-8")
    for name in ("primary", "dr"):
        kubeconfig = {
            "clusters": [{"name": name, "cluster": {"server": "https://10.0.0.1:6443"}}],
            "contexts": [{"name": name, "context": {"cluster": name}}],
        }
        (tmp_path / f"{name}.kubeconfig").write_text(json.dumps(kubeconfig), encoding="utf-8")
    result = runner.invoke(app, ["plan", "validate", str(plan), "--resolve"])
    assert result.exit_code == 0, result.output
    assert "is valid and its references resolve" in result.stdout
    assert secret_value not in result.output


def test_validate_resolve_lists_every_reference_username_included(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = tmp_path / "plan.yaml"
    text = VALID.read_text(encoding="utf-8")
    auth = "      auth: {username: env:HARBOR_USER, password: env:HARBOR_PASSWORD}\n"
    dr_url = "      url: http://127.0.0.1:5002\n"
    text = text.replace(dr_url, dr_url + auth)
    plan.write_text(text, encoding="utf-8")
    (tmp_path / "tsig.secret").write_text("tsig-value\n", encoding="utf-8")
    for name in ("primary", "dr"):
        kubeconfig = {
            "clusters": [{"name": name, "cluster": {"server": "https://10.0.0.1:6443"}}],
            "contexts": [{"name": name, "context": {"cluster": name}}],
        }
        (tmp_path / f"{name}.kubeconfig").write_text(json.dumps(kubeconfig), encoding="utf-8")
    monkeypatch.setenv("HARBOR_PASSWORD", "harbor-password-must-not-appear")
    monkeypatch.delenv("HARBOR_USER", raising=False)
    result = runner.invoke(app, ["plan", "validate", str(plan), "--resolve"])
    assert result.exit_code == 2
    assert (
        "sites.dr.registry.auth.username: env:HARBOR_USER does not resolve: environment "
        "variable HARBOR_USER is not set" in result.stderr
    )

    monkeypatch.setenv("HARBOR_USER", "harbor-user-value")
    result = runner.invoke(app, ["plan", "validate", str(plan), "--resolve"])
    assert result.exit_code == 0, result.output
    listed = [line.strip() for line in result.stdout.splitlines()[1:]]
    assert listed == [
        "✓ sites.dr.registry.auth.username: env:HARBOR_USER",
        "✓ sites.dr.registry.auth.password: env:HARBOR_PASSWORD",
        "✓ dns.tsig.secret: file:tsig.secret",
    ]
    assert "harbor-user-value" not in result.output
    assert "harbor-password-must-not-appear" not in result.output


def test_show_summarises_the_plan() -> None:
    result = runner.invoke(app, ["plan", "show", str(EXAMPLE)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        "Plan gpu-platform",
        "context prod-use1 in kubeconfigs/prod-use1.yaml",
        "ECR 123456789012 (us-west-2)",
        "close Ingress gateway/public-api, gateway/public-api-grpc",
        "serving/llm-vllm",
        "critical total",
        "ml-checkpoints-use1 → ml-checkpoints-usw2",
        "Route 53 hosted zone Z0123456789ABCDEFGHIJ",
        "api.prod-use1.ml.example.com. → api.dr-usw2.ml.example.com.",
        "0 3 1 1,4,7,10 * (UTC)",
        "required, times out after 2 h",
    ):
        assert expected in out, expected
    # critical tier: 3 + 4 + 2 + 3 replicas and 4 + 2 GPUs
    critical_total = next(line for line in out.splitlines() if "critical total" in line)
    assert [c.strip() for c in critical_total.split("│") if c.strip()] == [
        "critical total",
        "12",
        "6",
    ]


def test_show_broken_plan_exits_2() -> None:
    result = runner.invoke(app, ["plan", "show", str(BROKEN)])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_schema_to_stdout_and_file(tmp_path: Path) -> None:
    result = runner.invoke(app, ["plan", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert "sites" in schema["properties"]
    target = tmp_path / "plan.schema.json"
    result = runner.invoke(app, ["plan", "schema", "--output", str(target)])
    assert result.exit_code == 0
    assert json.loads(target.read_text(encoding="utf-8")) == schema


def test_every_option_has_help() -> None:
    for command in ("validate", "show", "schema"):
        result = runner.invoke(app, ["plan", command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0
    assert (
        "credential reference resolves"
        in runner.invoke(app, ["plan", "validate", "--help"], env={"COLUMNS": "200"}).stdout
    )
    assert (
        "Write the JSON Schema to this file"
        in runner.invoke(app, ["plan", "schema", "--help"], env={"COLUMNS": "200"}).stdout
    )


# The real entry point, in a real process: exit codes and output as a shell sees them.
_MAIN = (
    "from drills.cli.app import app; from drills.cli.plan_cmd import register; register(app); "
    "from drills.cli import main; main()"
)


def _drills(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _MAIN, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_real_process_validate_and_schema() -> None:
    ok = _drills("plan", "validate", str(VALID))
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith(f"✓ {VALID} is valid")
    bad = _drills("plan", "validate", str(BROKEN))
    assert bad.returncode == 2
    assert "Traceback" not in bad.stdout + bad.stderr
    assert (
        f"{BROKEN}:6:15: sites.primary.registry: unknown registry kind 'gcr'; "
        "expected oci or ecr" in bad.stderr
    )
    schema = _drills("plan", "schema")
    assert schema.returncode == 0
    assert "sites" in json.loads(schema.stdout)["properties"]


def test_validate_all_checks_every_plan_and_warns_about_shared_targets(
    tmp_path: Path,
) -> None:
    import yaml

    from tests.support.drill import offline_lab_plan_data

    for name in ("team-a", "team-b"):
        data = offline_lab_plan_data()
        data["name"] = name
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    (tmp_path / "broken.yaml").write_text(BROKEN.read_text())
    plans = f"{tmp_path / 'team-*.yaml'},{VALID}"
    result = runner.invoke(app, ["plan", "validate", "--all", "--plans", plans])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    assert words.count("is valid") == 3
    # valid.yaml switches the same record, not the same workloads.
    assert "plans team-a, team-b, test-plan claim the same 1 target(s): dns api.drills." in words
    # 25 workloads and ingress fences, and 6 buckets (3 datasets, both sides).
    assert "plans team-a, team-b claim the same 31 target(s): bucket" in words
    assert "bucket http://127.0.0.1:5999 ckpt-dr;" in words and "and 28 more" in words
    assert "3 plan file(s): 0 invalid, 2 fleet warning(s)" in words
    strict = runner.invoke(app, ["plan", "validate", "--all", "--strict", "--plans", plans])
    assert strict.exit_code == 2
    with_broken = runner.invoke(
        app, ["plan", "validate", "--all", "--plans", f"{plans},{tmp_path / 'broken.yaml'}"]
    )
    assert with_broken.exit_code == 2 and "4 plan file(s): 1 invalid" in with_broken.output
    both = runner.invoke(app, ["plan", "validate", str(VALID), "--all"])
    assert both.exit_code == 2 and "not both" in both.output


def test_the_cli_and_the_plans_page_describe_a_site_alike(tmp_path: Path) -> None:
    """One description of a site for `drills plan show` and the Plans page (they had
    drifted: one redacted URLs, one did not)."""
    from drills.plan import load_plan
    from drills.plan.describe import describe_site
    from tests.support.drill import offline_lab_plan_data
    from ui import plan_summary

    plan_file = tmp_path / "plan.yaml"
    plan_file.write_text(json.dumps(offline_lab_plan_data()))
    plan = load_plan(plan_file)
    for site in ("primary", "dr"):
        described = describe_site(getattr(plan.sites, site))
        assert {row[""]: row[site] for row in plan_summary.sites(plan)} == described
    shown = runner.invoke(app, ["plan", "show", str(plan_file)], env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    for value in describe_site(plan.sites.dr).values():
        assert value in shown.stdout, value
