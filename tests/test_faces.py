"""The packages' faces: each name a face gives is its module's own, under the name the face
says, and importing a face, or a light name through it, loads no SDK."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every package whose face loads its names on use.
FACES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for init in (ROOT / "drills").rglob("__init__.py")
    if "lazy_face(" in init.read_text()
)
SDKS = {"kubernetes", "urllib3", "boto3", "botocore", "httpx", "dns", "azure", "sqlalchemy"}


def _declared(face: str) -> list[tuple[str, str, str]]:
    """(module, its name, the face's name) of each import the face declares for the type
    checker."""
    tree = ast.parse((ROOT / face.replace(".", "/") / "__init__.py").read_text())
    found: list[tuple[str, str, str]] = []
    for node in tree.body:
        if isinstance(node, ast.If):
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom) and inner.module
                found += [(inner.module, a.name, a.asname or a.name) for a in inner.names]
    return found


def test_the_faces_are_found() -> None:
    assert {"drills.store", "drills.takeover", "drills.targets.kube"} <= set(FACES)


@pytest.mark.parametrize("face", FACES)
def test_each_name_of_a_face_is_its_modules_own(face: str) -> None:
    package = importlib.import_module(face)
    declared = _declared(face)
    assert {given for _, _, given in declared} <= set(package.__all__)
    for module, own, given in declared:
        assert getattr(package, given) is getattr(importlib.import_module(module), own), given
    for name in package.__all__:
        assert getattr(package, name) is not None, name


@pytest.mark.parametrize("face", FACES)
def test_no_name_of_a_face_is_also_one_of_its_modules(face: str) -> None:
    # Once the module is imported, the package's attribute of that name is the module, and
    # the face would hand it out in place of the name.
    folder = ROOT / face.replace(".", "/")
    modules = {p.stem for p in folder.glob("*.py")} | {
        p.name for p in folder.iterdir() if p.is_dir()
    }
    assert not set(importlib.import_module(face).__all__) & modules


@pytest.mark.parametrize("face", FACES)
def test_a_name_a_face_does_not_give_is_an_attribute_error(face: str) -> None:
    package = importlib.import_module(face)
    with pytest.raises(AttributeError, match=f"{face}.*no_such_name"):
        _ = package.no_such_name


def _loaded(code: str) -> set[str]:
    report = "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    probe = f"import json, sys\n{code}\n{report}"
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_a_face_loads_no_sdk_until_a_name_needs_one() -> None:
    light = _loaded(
        "import drills.targets.kube, drills.targets.registry, drills.targets.objects\n"
        "import drills.targets.dns\n"
        "from drills.targets.kube import parse_quantity\n"
        "from drills.targets.registry import parse_image, registry_for\n"
        "from drills.targets.dns import dns_for, normalize_value"
    )
    assert not light & SDKS, sorted(light & SDKS)


def test_importing_every_face_loads_no_sdk() -> None:
    assert not _loaded("\n".join(f"import {face}" for face in FACES)) & SDKS


def test_the_probe_sees_an_sdk_a_name_needs() -> None:
    assert "kubernetes" in _loaded("from drills.targets.kube import KubeTarget")
    assert "httpx" in _loaded("from drills.targets.registry import OciDistribution")
    assert "sqlalchemy" in _loaded("from drills.store import HistoryStore")
