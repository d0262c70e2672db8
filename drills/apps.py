"""Where the dashboard (ui/), the flows (flows/) and prefect.yaml are.

In a checkout they sit beside the drills package, where Streamlit and Prefect expect them.
An installed wheel carries the same three under drills/_apps/ (pyproject.toml maps them),
so `drills ui` and `drills serve` work without the repository. Either way the directory
returned here holds `ui/`, `flows/` and `prefect.yaml`, and must be on sys.path for
`import ui...` and `import flows...` to work.
"""

from __future__ import annotations

import os
from pathlib import Path

from drills.errors import LabError

PACKAGE = Path(__file__).resolve().parent


class AppsNotFoundError(LabError):
    """Neither an installed drills/_apps nor a checkout holds the dashboard and the flows."""


def _complete(root: Path) -> bool:
    return (root / "ui" / "streamlit_app.py").is_file() and (root / "flows" / "drill.py").is_file()


def apps_root() -> Path:
    """The directory that holds ui/, flows/ and prefect.yaml."""
    # The installed copy first: a wheel's drills/_apps is the one matching its drills.
    for root in (PACKAGE / "_apps", PACKAGE.parent):
        if _complete(root):
            return root
    raise AppsNotFoundError(
        f"neither {PACKAGE / '_apps'} nor {PACKAGE.parent} holds ui/ and flows/: "
        "reinstall drills (pip install drills)"
    )


def streamlit_script() -> Path:
    return apps_root() / "ui" / "streamlit_app.py"


def prefect_file(project_dir: Path) -> Path:
    """The project's own prefect.yaml if it has one (its deployments, its schedules),
    else the one that ships with drills."""
    own = project_dir / "prefect.yaml"
    return own if own.is_file() else apps_root() / "prefect.yaml"


def on_pythonpath(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the apps' directory first on PYTHONPATH. prefect.yaml names its flows as
    modules (``flows.drill:...``), which `prefect deploy`, the worker's flow runs and the
    dashboard import from wherever drills is: the checkout, or an installed wheel."""
    paths = [str(apps_root()), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return {**env, "PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}
