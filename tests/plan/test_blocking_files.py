"""Files whose read blocks: a FIFO with no writer, and /proc/kmsg, a "regular file" that
waits for the next kernel message. Given as the plan, as a `file:` secret or as a
kubeconfig (or as a file the kubeconfig names), each once hung `plan validate` and
`readiness` for ever. One bounded reader reads every file a plan names: kernel file
systems are refused unread, and a read has a deadline. Each answer is one clear line
within seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from drills.plan.files import KERNEL_FILE_SYSTEMS, FileRefusedError, call_within, read_regular_file
from drills.plan.kubeconfig import KubeconfigError, load_kubeconfig
from tests.support.cli import drills_process
from tests.support.drill import offline_lab_plan_data

# Each command must answer well within this; the hang it guards against never ends.
ANSWER_S = 30.0
FIFO_REASON = "is a FIFO (named pipe), not a regular file"
KERNEL_REASON = "is under /proc or /sys: a kernel interface, not a file"


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "blocks"
    os.mkfifo(path)
    yield path


def drills(*args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = drills_process(args, timeout=ANSWER_S * 2)
    return done, time.monotonic() - started


def plan_naming(tmp_path: Path, where: str, path: Path | str) -> Path:
    """The lab-shaped plan with ``path`` as its ``where`` (secret or kubeconfig)."""
    data: dict[str, Any] = offline_lab_plan_data()
    if where == "secret":
        data["dns"]["tsig"]["secret"] = f"file:{path}"
    else:
        data["sites"]["dr"]["kubernetes"] = {"kubeconfig": str(path)}
    plan = tmp_path / f"plan-{where}.yaml"
    plan.write_text(yaml.safe_dump(data, sort_keys=False))
    return plan


def assert_one_clear_line(done: subprocess.CompletedProcess[str], took: float, says: str) -> None:
    output = done.stdout + done.stderr
    assert took < ANSWER_S, f"took {took:.1f}s"
    assert done.returncode != 0, output
    assert "Traceback" not in output
    assert any(says in line for line in output.splitlines()), output


@pytest.mark.parametrize("blocking", ["fifo", "/proc/kmsg"])
def test_the_plan_itself(blocking: str, fifo: Path) -> None:
    path, says = (fifo, FIFO_REASON) if blocking == "fifo" else (Path(blocking), KERNEL_REASON)
    for command in (["plan", "validate"], ["readiness", "--no-store"]):
        done, took = drills(*command, str(path))
        assert_one_clear_line(done, took, f"this {says}; give a plan file")
        assert done.returncode == 2


@pytest.mark.serial
@pytest.mark.parametrize("where", ["secret", "kubeconfig"])
@pytest.mark.parametrize("blocking", ["fifo", "/proc/kmsg"])
def test_a_file_the_plan_names(tmp_path: Path, fifo: Path, where: str, blocking: str) -> None:
    path, says = (fifo, FIFO_REASON) if blocking == "fifo" else (Path(blocking), KERNEL_REASON)
    plan = plan_naming(tmp_path, where, path)
    field = "dns.tsig.secret" if where == "secret" else "sites.dr.kubernetes.kubeconfig"
    done, took = drills("plan", "validate", "--resolve", str(plan))
    assert_one_clear_line(done, took, f"{path} {says}")
    assert done.returncode == 2
    assert any(field in line and f"{path} {says}" in line for line in done.stderr.splitlines())
    # Readiness reads it too (the DNS checks the key, the DR cluster's checks the
    # kubeconfig): each says why, in bounded time, and none passes on it.
    done, took = drills("readiness", "--no-store", "--json", str(plan))
    assert_one_clear_line(done, took, says)
    readers = [r for r in json.loads(done.stdout)["results"] if says in r["summary"]]
    assert readers and not [r["id"] for r in readers if r["status"] in ("pass", "warn")], readers
    assert any(r["status"] == "error" for r in readers), readers


@pytest.mark.parametrize(
    "path",
    [
        "/proc/kmsg",  # never opened: reading it would also take the kernel's messages
        "/proc/self/status",
        "/sys/kernel/mm/transparent_hugepage/enabled",
        "/proc",
        "/sys",
    ],
)
def test_kernel_file_systems_are_refused_unread(path: str) -> None:
    started = time.monotonic()
    with pytest.raises(FileRefusedError) as info:
        read_regular_file(Path(path), 1024)
    assert info.value.reason == KERNEL_REASON
    assert time.monotonic() - started < 1


def test_a_link_to_a_kernel_file_is_refused(tmp_path: Path) -> None:
    link = tmp_path / "innocent.kubeconfig"
    link.symlink_to("/proc/self/environ")  # would hand over this process's environment
    with pytest.raises(FileRefusedError) as info:
        read_regular_file(link, 1024)
    assert info.value.reason == KERNEL_REASON
    assert set(KERNEL_FILE_SYSTEMS) == {"/proc", "/sys"}


def test_a_read_that_blocks_is_given_up_at_its_deadline() -> None:
    """What the deadline does for a regular file whose read blocks, on a pipe (a FIFO is
    refused before any read, and no other blocking file can be made without root)."""
    read_end, write_end = os.pipe()
    try:
        started = time.monotonic()
        with pytest.raises(TimeoutError, match=r"read pipe: no answer in 0.5s"):
            call_within(0.5, lambda: os.read(read_end, 1), "read pipe")
        assert 0.4 < time.monotonic() - started < 3
    finally:
        os.write(write_end, b"x")  # the abandoned read returns, and its thread ends
        os.close(write_end)
        time.sleep(0.1)
        os.close(read_end)


def test_an_ordinary_file_is_still_read(tmp_path: Path) -> None:
    path = tmp_path / "ok.secret"
    path.write_bytes(b"value\n")
    assert read_regular_file(path, 1024) == b"value\n"
    with pytest.raises(FileRefusedError, match="is larger than 4 bytes"):
        read_regular_file(path, 4)


@pytest.mark.parametrize("field", ["certificate-authority", "client-key", "tokenFile"])
@pytest.mark.parametrize("blocking", ["fifo", "/proc/kmsg"])
def test_a_file_the_kubeconfig_names(tmp_path: Path, fifo: Path, field: str, blocking: str) -> None:
    """The Kubernetes client reads these itself: each is read first, bounded."""
    path, says = (fifo, FIFO_REASON) if blocking == "fifo" else (Path(blocking), KERNEL_REASON)
    kind = "cluster" if field == "certificate-authority" else "user"
    config = {
        "apiVersion": "v1",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.3:6443"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": "dr", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "dr",
    }
    entries = config["clusters" if kind == "cluster" else "users"]
    assert isinstance(entries, list)
    entries[0][kind][field] = str(path)
    kubeconfig = tmp_path / "dr.kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    started = time.monotonic()
    with pytest.raises(KubeconfigError) as info:
        load_kubeconfig(kubeconfig, None)
    assert time.monotonic() - started < 5
    assert str(info.value) == f"{kubeconfig}: {kind} {field} {path} {says}"
