"""Looking at local processes: the lab daemon, the Prefect server and worker, their children."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie nobody has reaped yet counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    return True


def descendants(*roots: int) -> list[int]:
    """Every process below the roots, even those that left its session (flow-run processes do)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found: list[int] = []
    stack = list(roots)  # one reading of /proc serves all the roots
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def marked(name: str, value: str) -> list[int]:
    """The processes whose environment has ``name=value`` (ours to read: the same user's).

    An environment is inherited through forks, new sessions and re-parenting alike, so this
    finds every process a service started, where a walk down the parent links would miss
    those whose parent died first."""
    wanted = f"{name}={value}".encode()
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if wanted in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
    return [pid for pid in found if pid_alive(pid)]
