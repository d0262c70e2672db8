"""Where `drills ui` and `drills serve` find the dashboard, the flows and prefect.yaml when run
from the checkout (tests/test_packaging.py covers an installed wheel)."""

from __future__ import annotations

import os
from pathlib import Path

from drills import apps

ROOT = Path(__file__).resolve().parents[2]


def test_a_checkout_is_its_own_apps_directory() -> None:
    assert apps.apps_root() == ROOT
    assert apps.streamlit_script() == ROOT / "ui" / "streamlit_app.py"


def test_a_project_without_prefect_yaml_deploys_the_shipped_one(tmp_path: Path) -> None:
    assert apps.prefect_file(tmp_path) == ROOT / "prefect.yaml"


def test_a_projects_own_prefect_yaml_wins(tmp_path: Path) -> None:
    own = tmp_path / "prefect.yaml"
    own.write_text("name: mine\n")
    assert apps.prefect_file(tmp_path) == own


def test_the_apps_directory_goes_first_on_pythonpath_once() -> None:
    env = apps.on_pythonpath({"PYTHONPATH": os.pathsep.join(["/elsewhere", str(ROOT)])})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/elsewhere"]
    assert apps.on_pythonpath({})["PYTHONPATH"] == str(ROOT)
