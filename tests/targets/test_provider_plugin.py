"""An out-of-tree provider: a tiny package built here, installed into a venv of its own (offline,
no build isolation), listed by `drills providers list` and read by `secrets.synced`.

The venv sees this project's environment through a .pth file that adds its site-packages,
so drills itself is the one under test; the plugin lands in the venv's own site-packages
and reaches drills only through its ``drills.providers`` entry points.
"""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.checks import UNUSED_DNS

PLUGIN = '''
"""Secrets from a JSON file per site: {"id": value or {"key": value}}."""

import json
from pathlib import Path

from drills.targets.provider_api import Provider


class FileSecrets:
    def __init__(self, path, role):
        self.path = Path(path)
        self.target = f"filesecrets {role} ({path})"

    def _all(self):
        return json.loads(self.path.read_text())

    def value(self, secret_id):
        found = self._all().get(secret_id)
        if found is None:
            return None
        return (json.dumps(found) if isinstance(found, dict) else str(found)).encode()

    def describe(self, secret_id):
        return {} if secret_id in self._all() else None

    def close(self):
        pass


PROVIDER = Provider(
    "secrets",
    lambda where: FileSecrets(where.path(str(where.settings["path"])), where.role),
    "Secrets read from a JSON file at each site.",
    checks=("secrets.synced",),
)
'''

PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "drills-filesecrets"
version = "0.3.1"

[tool.setuptools]
py-modules = ["drills_filesecrets"]

[project.entry-points."drills.providers"]
filesecrets = "drills_filesecrets:PROVIDER"
half-done = "drills_filesecrets:NOT_WRITTEN_YET"
"""


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A venv that sees this project's packages and holds the plugin package, installed."""
    root = tmp_path_factory.mktemp("plugin")
    package = root / "drills-filesecrets"
    package.mkdir()
    (package / "pyproject.toml").write_text(PYPROJECT)
    (package / "drills_filesecrets.py").write_text(PLUGIN)
    env_dir = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", env_dir], check=True)
    [own] = (env_dir / "lib").glob("python3*/site-packages")
    ours = [p for p in site.getsitepackages() if Path(p, "drills-0.1.0.dist-info").exists()]
    # `import` lines of a .pth run at start-up: addsitedir also runs the project's own .pth
    # files there (the editable install of drills).
    (own / "project.pth").write_text(f"import site; site.addsitedir({ours[0]!r})\n")
    python = env_dir / "bin" / "python"
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--no-index", str(package)],
        check=True, cwd=root, env=_env(),
    )  # fmt: skip
    assert (own / "drills_filesecrets.py").exists()  # in the venv, not the project's env
    yield env_dir


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    return env | {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "NO_COLOR": "1", "COLUMNS": "200"}


def drills(venv: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [venv / "bin" / "python", "-m", "drills", *map(str, args)],
        capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120,
    )  # fmt: skip


def test_the_plugin_is_listed_beside_the_built_in_providers(venv: Path, tmp_path: Path) -> None:
    listed = drills(venv, "providers", "list", "--json", cwd=tmp_path)
    # The half-done entry point cannot load: listed with its error, and the command says so.
    assert listed.returncode == 1, listed.stderr
    by_name = {p["name"]: p for p in json.loads(listed.stdout)["providers"]}
    plugin = by_name["filesecrets"]
    assert (plugin["kind"], plugin["package"], plugin["version"]) == (
        "secrets",
        "drills-filesecrets",
        "0.3.1",
    )
    assert (plugin["supports"], plugin["checks"]) == (["readiness"], ["secrets.synced"])
    broken = by_name["half-done"]
    assert broken["kind"] is None and "NOT_WRITTEN_YET" in broken["error"]
    assert broken["package"] == "drills-filesecrets"
    built_in = {n: p["kind"] for n, p in by_name.items() if p["package"] == "drills"}
    assert built_in == {
        "s3": "objects",
        "azure-blob": "objects",
        "oci": "registry",
        "ecr": "registry",
        "aws-secrets-manager": "secrets",
        "rfc2136": "dns",
        "route53": "dns",
        "external-dns": "dns",
    }
    table = drills(venv, "providers", "list", cwd=tmp_path).stdout
    assert "drills-filesecrets 0.3.1" in table and "failed to load" in table


def plan_file(tmp_path: Path, provider: str) -> Path:
    def site(role: str, addr: str) -> dict[str, Any]:
        (tmp_path / f"{role}.kubeconfig").write_text("")  # never read by secrets.synced
        return {
            "kubernetes": {"kubeconfig": f"{role}.kubeconfig"},
            "registry": {"kind": "oci", "url": f"http://{addr}:5000"},
            "objects": {"endpoint_url": f"http://{addr}:9000"},
            "secret_store": {"provider": provider, "settings": {"path": f"{role}.json"}},
            "ingress": {"mode": "controller", "deployment": {"namespace": "i", "name": "c"}},
            "endpoint": f"http://{addr}:18080/healthz",
        }

    plan = {
        "name": "plugin-test",
        "sites": {"primary": site("primary", "127.0.0.2"), "dr": site("dr", "127.0.0.3")},
        "workloads": [
            {"name": "api", "namespace": "s", "kind": "Deployment", "tier": "critical",
             "dr_replicas": 1}
        ],
        "secrets": {"store": [{"id": "db"}, {"id": "api-key"}]},
        "dns": UNUSED_DNS,
        "objectives": {"rto": "15m", "rpo": "5m"},
    }  # fmt: skip
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan))
    return path


def synced(venv: Path, plan: Path) -> tuple[int, dict[str, Any]]:
    ran = drills(
        venv, "readiness", plan, "--only", "secrets.synced", "--no-store", "--json",
        cwd=plan.parent,
    )  # fmt: skip
    assert ran.returncode in (0, 1), ran.stderr
    [result] = json.loads(ran.stdout)["results"]
    return ran.returncode, result


def test_secrets_synced_reads_through_the_plugin(venv: Path, tmp_path: Path) -> None:
    primary = {"db": {"user": "app", "password": "s3cret-primary"}, "api-key": "k-123"}
    (tmp_path / "primary.json").write_text(json.dumps(primary))
    (tmp_path / "dr.json").write_text(json.dumps({"db": {"user": "app", "password": "stale"}}))
    plan = plan_file(tmp_path, "filesecrets")

    code, result = synced(venv, plan)
    assert (code, result["status"], result["blocking"]) == (1, "fail", True)
    assert "api-key" in result["summary"] and "db" in result["summary"]
    by_id = {s["secret"]: s for s in result["evidence"]["secrets"]}
    assert (by_id["api-key"]["kind"], by_id["api-key"]["status"]) == ("store", "missing_at_dr")
    assert by_id["db"]["differing"] == ["password"]  # the key named, its value never shown
    assert "s3cret-primary" not in json.dumps(result) and "stale" not in json.dumps(result)

    (tmp_path / "dr.json").write_text(json.dumps(primary))
    code, result = synced(venv, plan)
    assert (code, result["status"]) == (0, "pass"), result["summary"]
    assert result["summary"] == "all 2 secrets identical at DR"


@pytest.mark.parametrize(
    ("provider", "why"),
    [("vault", "is not installed"), ("half-done", "failed to load (cannot be imported")],
)
def test_a_plan_naming_an_unusable_provider_is_refused_in_one_line(
    venv: Path, tmp_path: Path, provider: str, why: str
) -> None:
    plan = plan_file(tmp_path, provider)
    ran = drills(venv, "readiness", plan, "--only", "secrets.synced", "--no-store", cwd=tmp_path)
    assert ran.returncode == 2
    lines = [line for line in ran.stderr.splitlines() if line.strip()]
    assert lines[0].endswith("2 problems")  # one per site, each at its own field
    assert "sites.primary.secret_store.provider: secrets provider" in lines[1]
    assert f"{provider!r} {why}" in lines[1]
    assert lines[1].endswith("installed secrets providers: aws-secrets-manager, filesecrets")
    assert "Traceback" not in ran.stderr
    assert drills(venv, "plan", "validate", plan, cwd=tmp_path).returncode == 2
