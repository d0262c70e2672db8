"""The wheel, installed outside the checkout: every command works or says what to install.

The wheel is built offline from a copy of the sources, with this environment's setuptools,
and installed without its dependencies into a fresh virtual environment in a temporary
directory. The dependencies are borrowed from this environment through a directory of
links named in a .pth file, so nothing is downloaded; drills itself and this checkout are
not among them, which the first test proves. Every command then runs from a directory
that holds no part of the repository.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from drills_lab.procs import free_port

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "prefect.yaml", "drills", "drills_lab", "flows", "ui")
SITE = Path(sysconfig.get_paths()["purelib"])
# Borrowed from this environment's site-packages: everything except drills itself (its
# editable install would lead back to the checkout) and, for the environment without the
# `lab` extra, moto.
OWN = ("drills", "__editable__", "__pycache__", "_distutils_hack", "distutils-precedence")
LAB_EXTRA = ("moto", "moto-")
# The dependencies' console scripts that drills runs by path, as pip would write them.
SCRIPTS = ("prefect",)
LAB_HINT = "✗ the lab needs moto: pip install 'drills[lab]'"


@dataclass
class Installed:
    """A virtual environment with the wheel installed, and a directory to run it from."""

    venv: Path
    work: Path
    deps_pth: Path
    deps: Path
    deps_without_lab: Path

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def borrow(self, deps: Path) -> None:
        self.deps_pth.write_text(f"{deps}\n")

    def env(self) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("DRILLS_", "PREFECT_", "PYTHON", "VIRTUAL_ENV", "STREAMLIT_"))
        }
        return keep | {
            "PATH": f"{self.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(self.work / "home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        }

    def run(
        self, *argv: str, timeout: float = 60, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            argv, cwd=self.work, env=self.env() | (env or {}), capture_output=True, text=True,
            timeout=timeout, check=False,
        )  # fmt: skip

    def drills(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return self.run(str(self.venv / "bin" / "drills"), *args, timeout=timeout)


def _build_wheel(out: Path) -> Path:
    """Build from a copy, so that the checkout gets no build/ or egg-info of ours."""
    src = out / "src"
    src.mkdir()
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".keep")
            shutil.copytree(source, src / name, ignore=ignore)
        else:
            shutil.copy2(source, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-index",
         "--no-build-isolation", "--wheel-dir", str(out / "dist"), str(src)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    (wheel,) = (out / "dist").glob("drills-*.whl")
    return wheel


def _links(parent: Path, skip: tuple[str, ...]) -> Path:
    # Named as a real one: Streamlit takes a copy outside any site-packages for its own
    # development checkout, and refuses --server.port then.
    target = parent / "site-packages"
    target.mkdir(parents=True)
    for entry in SITE.iterdir():
        if not entry.name.startswith(skip):
            (target / entry.name).symlink_to(entry)
    return target


def _venv(root: Path, wheel: Path) -> Path:
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install",
         "--quiet", "--no-deps", "--no-index", str(wheel)],
        check=True, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    for name in SCRIPTS:
        code = (Path(sys.executable).parent / name).read_text().split("\n", 1)[1]
        script = venv / "bin" / name
        script.write_text(f"#!{venv / 'bin' / 'python'}\n{code}")
        script.chmod(0o755)
    return venv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build_wheel(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Installed:
    root = tmp_path_factory.mktemp("installed")
    venv = _venv(root, wheel)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.check_output([venv / "bin" / "python", "-c", purelib], text=True).strip()
    work = root / "work"
    (work / "home").mkdir(parents=True)
    shutil.copy2(ROOT / "plans" / "gpu-platform.example.yaml", work / "plan.yaml")
    found = Installed(
        venv=venv,
        work=work,
        deps_pth=Path(site) / "zz_borrowed_dependencies.pth",
        deps=_links(root / "deps", OWN),
        deps_without_lab=_links(root / "deps-without-lab", OWN + LAB_EXTRA),
    )
    found.borrow(found.deps)
    return found


def test_wheel_carries_every_module_and_the_apps(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    # The lab ships beside the product, as a package of its own (its dependencies: the lab extra).
    expected = {
        p.relative_to(ROOT).as_posix()
        for package in ("drills", "drills_lab")
        for p in (ROOT / package).rglob("*.py")
    }
    for app in ("flows", "ui"):
        expected |= {
            f"drills/_apps/{p.relative_to(ROOT).as_posix()}" for p in (ROOT / app).rglob("*.py")
        }
    expected |= {"drills/_apps/prefect.yaml", "drills/py.typed"}
    assert not {n for n in expected if "__pycache__" not in n} - names
    # The apps live under drills/ only: no top-level `ui` or `flows` to clash with others'.
    assert not {n for n in names if n.startswith(("ui/", "flows/"))}


def test_drills_comes_from_the_wheel_not_the_checkout(installed: Installed) -> None:
    probe = installed.run(
        str(installed.python), "-c",
        "import drills, drills.apps as a; print(drills.__file__); print(a.apps_root())",
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    module, apps = probe.stdout.split()
    assert Path(module).is_relative_to(installed.venv)
    assert Path(apps) == Path(module).parent / "_apps"
    assert str(ROOT) not in probe.stdout


def test_help_and_plan_validate(installed: Installed) -> None:
    helped = installed.drills("--help")
    assert helped.returncode == 0, helped.stderr
    for command in ("plan", "lab", "serve", "ui"):
        assert command in helped.stdout
    valid = installed.drills("plan", "validate", "plan.yaml")
    assert valid.returncode == 0, valid.stderr
    assert valid.stdout.startswith("✓ plan.yaml is valid")


def test_lab_up_without_the_lab_extra_says_what_to_install(installed: Installed) -> None:
    installed.borrow(installed.deps_without_lab)
    try:
        up = installed.drills("lab", "up", "--state-dir", "lab-missing")
    finally:
        installed.borrow(installed.deps)
    assert up.returncode == 2
    assert up.stderr.strip() == LAB_HINT
    assert up.stdout == ""
    assert not (installed.work / "lab-missing").exists()


@pytest.fixture(scope="module")
def lab(installed: Installed) -> Iterator[Path]:
    """The lab, started by the installed CLI; yields its plan. Without BIND and the
    registries, which have nothing to do with how drills is installed."""
    up = installed.drills("lab", "up", "--state-dir", "lab", "--no-system-services")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield installed.work / "lab" / "plan.yaml"
    finally:
        down = installed.drills("lab", "down", "--state-dir", "lab")
        assert down.returncode == 0, down.stderr


def test_lab_up_then_its_plan_resolves(installed: Installed, lab: Path) -> None:
    valid = installed.drills("plan", "validate", str(lab), "--resolve")
    assert valid.returncode == 0, valid.stderr
    status = installed.drills("lab", "status", "--state-dir", "lab", "--json")
    assert status.returncode == 0, status.stderr


def test_serve_deploys_the_shipped_flows_and_runs_one(installed: Installed, lab: Path) -> None:
    """prefect.yaml, flows/ and their imports come from the wheel: the worker's flow run
    imports flows.readiness from drills/_apps, with the lab's plan in the working dir."""
    state = ["--state-dir", "serve"]
    started = installed.drills("serve", *state, "--port", str(free_port()), timeout=300)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        ran = installed.drills(
            "serve", "run", "readiness-check", *state, "-p", f"plan={lab}", "--timeout", "240",
            timeout=300,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "Completed" in ran.stderr
    finally:
        stopped = installed.drills("serve", "stop", *state, "--force", timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert "stopped" in stopped.stdout


def test_ui_serves_and_its_app_runs_from_the_wheel(installed: Installed) -> None:
    port = free_port()
    log = installed.work / "ui.log"
    with log.open("w") as out:
        ui = subprocess.Popen(
            [str(installed.venv / "bin" / "drills"), "ui", "--port", str(port), "--lab",
             "--plans", "plan.yaml"],
            cwd=installed.work, env=installed.env(), stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
    try:
        assert _answers(f"http://127.0.0.1:{port}/_stcore/health", ui), log.read_text()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(ui.pid, signal.SIGTERM)
        ui.wait(timeout=30)
    # Streamlit runs a page only for a session; AppTest is one, in the installed environment.
    page = installed.run(
        str(installed.python), "-c",
        "from streamlit.testing.v1 import AppTest\n"
        "from drills.apps import streamlit_script\n"
        "at = AppTest.from_file(str(streamlit_script()), default_timeout=60).run()\n"
        "assert not at.exception, [e.value for e in at.exception]\n"
        "print(at.title[0].value if at.title else '')\n",
        timeout=120,
        env={"DRILLS_UI_LAB": "1", "DRILLS_PLANS": "plan.yaml"},
    )  # fmt: skip
    assert page.returncode == 0, page.stderr
    assert page.stdout.strip(), "the readiness page showed no title"


def _answers(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if httpx.get(url, timeout=2, trust_env=False).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    return False
