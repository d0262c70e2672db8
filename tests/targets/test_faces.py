"""The faces of drills.targets' subpackages: each name they give is its module's own, and
importing a face, or a light name through it, loads no SDK."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FACES = ("kube", "registry", "objects", "dns")
SDKS = {"kubernetes", "urllib3", "boto3", "botocore", "httpx", "dns", "azure"}


def _declared(face: str) -> list[tuple[str, str]]:
    """(module, name) of each import the face declares for the type checker."""
    tree = ast.parse((ROOT / "drills" / "targets" / face / "__init__.py").read_text())
    found: list[tuple[str, str]] = []
    for node in tree.body:
        if isinstance(node, ast.If):
            for inner in node.body:
                assert isinstance(inner, ast.ImportFrom) and inner.module
                found += [(inner.module, alias.name) for alias in inner.names]
    return found


@pytest.mark.parametrize("face", FACES)
def test_each_name_of_a_face_is_its_modules_own(face: str) -> None:
    package = importlib.import_module(f"drills.targets.{face}")
    declared = _declared(face)
    assert sorted(name for _, name in declared) == sorted(package.__all__)
    for module, name in declared:
        assert getattr(package, name) is getattr(importlib.import_module(module), name), name


@pytest.mark.parametrize("face", FACES)
def test_a_name_a_face_does_not_give_is_an_attribute_error(face: str) -> None:
    package = importlib.import_module(f"drills.targets.{face}")
    with pytest.raises(AttributeError, match=f"drills.targets.{face}.*no_such_name"):
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


def test_the_probe_sees_an_sdk_a_name_needs() -> None:
    assert "kubernetes" in _loaded("from drills.targets.kube import KubeTarget")
    assert "httpx" in _loaded("from drills.targets.registry import OciDistribution")
