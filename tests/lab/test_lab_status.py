"""`drills lab status` on a lab of its own: it trusts the lab's CA (both Kubernetes APIs answer
200), prints no response body, and exits 1 once a part stops answering."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from drills.processes import descendants
from drills_lab.runtime import LabInfo
from tests.support.cli import drills_process
from tests.support.services import own_lab


@pytest.fixture(scope="module")
def status_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabInfo]:
    with own_lab(tmp_path_factory, "status-lab") as info:
        yield info


def _status(info: LabInfo, *extra: str) -> tuple[int, str]:
    done = drills_process(
        ["lab", "status", "--state-dir", info.state_dir, *extra],
        timeout=60, env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def _one_registry(info: LabInfo) -> int:
    for pid in descendants(info.pid):
        try:
            exe = Path(f"/proc/{pid}/exe").resolve().name
        except OSError:
            continue
        if exe == "docker-registry":
            return pid
    raise AssertionError("the lab runs no docker-registry")


def test_lab_status_trusts_the_lab_ca_and_fails_when_a_part_is_down(status_lab: LabInfo) -> None:
    code, out = _status(status_lab, "--json")
    assert code == 0, out
    probes = {p["name"]: p for p in json.loads(out)["probes"]}
    for site in ("primary", "dr"):
        assert probes[f"kubernetes {site}"]["ok"], probes
        assert probes[f"kubernetes {site}"]["detail"].startswith("200"), probes
    assert probes["moto"]["ok"] and "<" not in probes["moto"]["detail"], probes

    code, table = _status(status_lab)
    assert code == 0, table
    for body in ("<!DOCTYPE", "<html", "ConnectError", "{"):
        assert body not in table, table

    registry = _one_registry(status_lab)
    os.kill(registry, signal.SIGKILL)  # its port closes with it
    code, out = _status(status_lab, "--json")
    assert code == 1, out
    down = [p for p in json.loads(out)["probes"] if not p["ok"]]
    assert len(down) == 1 and down[0]["name"].startswith("registry"), down
    code, table = _status(status_lab)
    assert code == 1 and "registry" in table, table
