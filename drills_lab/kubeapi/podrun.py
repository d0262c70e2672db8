"""What a finished pod's container did: its exit code and its log.

The lab runs no containers. A pod of a Job "runs" through a :class:`PodRunner`
chosen by its image (the lab's trainer registers one that really reads and writes
checkpoints); any other image runs as its annotations say:
``lab.drills.dev/exit-code`` (default 0) after ``lab.drills.dev/run-seconds``
(default 0). What it printed is kept in a :class:`LogBook`, served as ``pods/log``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drills_lab.kubeapi.objects import annotation, dig

EXIT_CODE_ANNOTATION = "lab.drills.dev/exit-code"
RUN_SECONDS_ANNOTATION = "lab.drills.dev/run-seconds"
LOG_ANNOTATION = "lab.drills.dev/log"


@dataclass(frozen=True)
class PodRun:
    exit_code: int
    log: list[str]


# (the pod, the node it is bound to) -> what its container did; may take its time.
PodRunner = Callable[[dict[str, Any], dict[str, Any]], PodRun]


def image_of(pod: dict[str, Any]) -> str:
    containers = dig(pod, "spec", "containers") or [{}]
    return str(containers[0].get("image") or "")


def _number(text: str | None, default: float) -> float:
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def annotated_run(pod: dict[str, Any], node: dict[str, Any]) -> PodRun:
    """Any image the lab has no runner for: it does what the pod's annotations say."""
    time.sleep(max(0.0, _number(annotation(pod, RUN_SECONDS_ANNOTATION), 0.0)))
    code = int(_number(annotation(pod, EXIT_CODE_ANNOTATION), 0))
    lines = [f"lab: ran {image_of(pod)} on {node['metadata']['name']}"]
    extra = annotation(pod, LOG_ANNOTATION)
    if extra:
        lines += extra.splitlines()
    lines.append(f"exit code {code}")
    return PodRun(code, lines)


class Runners:
    """The runners by image repository (the image without its registry host and tag)."""

    def __init__(self) -> None:
        self._by_repository: dict[str, PodRunner] = {}

    def register(self, repository: str, runner: PodRunner) -> None:
        self._by_repository[repository] = runner

    def for_pod(self, pod: dict[str, Any]) -> PodRunner:
        name = image_of(pod).split("@", 1)[0]
        host, _, rest = name.partition("/")
        path = rest if rest and ("." in host or ":" in host) else name
        repository = path.rsplit(":", 1)[0] if ":" in path.rsplit("/", 1)[-1] else path
        return self._by_repository.get(repository, annotated_run)


class LogBook:
    """Each pod's log, by (namespace, name), for the ``pods/log`` subresource."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._logs: dict[tuple[str, str], list[str]] = {}

    def write(self, namespace: str, name: str, lines: list[str]) -> None:
        with self._lock:
            self._logs[(namespace, name)] = list(lines)

    def read(self, namespace: str, name: str, tail: int | None = None) -> str:
        with self._lock:
            lines = self._logs.get((namespace, name), [])
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return "".join(line + "\n" for line in lines)

    def forget(self, namespace: str, name: str) -> None:
        with self._lock:
            self._logs.pop((namespace, name), None)
