"""Watching one workload settle: the watch stream's events, read until it has.

:meth:`~drills.targets.kube.client.KubeTarget.wait_ready` lists the workload, then follows
its watch stream here, window after window, until it settles or the deadline passes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3.exceptions
from kubernetes.client.exceptions import ApiException
from kubernetes.client.rest import RESTResponse

from drills.errors import PermanentError
from drills.targets.kube.errors import translate


def settled(obj: dict[str, Any], replicas: int) -> tuple[int, bool]:
    """Ready replicas, and whether the workload has settled at ``replicas`` ready.

    Settled means the controller has seen the latest spec (observedGeneration)
    and, for ``replicas`` > 0, at least that many are ready; for 0, none remain.
    """
    status = obj.get("status") or {}
    meta = obj.get("metadata") or {}
    ready = int(status.get("readyReplicas") or 0)
    observed = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    if replicas == 0:
        return ready, observed and int(status.get("replicas") or 0) == 0
    return ready, observed and ready >= replicas


def watch_lines(resp: RESTResponse) -> Iterator[bytes]:
    """A watch stream's JSON lines, as they arrive."""
    buffer = b""
    for chunk in resp.response.stream(amt=None, decode_content=False):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        yield buffer


@dataclass(frozen=True)
class Watched:
    """The one workload ``wait_ready`` lists and watches."""

    collection: str
    namespace: str
    name: str

    @property
    def params(self) -> dict[str, str]:
        return {"namespace": self.namespace}

    @property
    def selector(self) -> tuple[str, str]:
        return ("fieldSelector", f"metadata.name={self.name}")


def follow(
    target: str, resp: RESTResponse, last: dict[str, Any] | None, rv: str | None, replicas: int
) -> tuple[bool, dict[str, Any] | None, str | None]:
    """Read one watch stream: (settled?, last object seen, resourceVersion to resume at).

    A None resourceVersion asks the caller to re-list (the watch expired).
    """
    try:
        for line in watch_lines(resp):
            event = json.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    return False, last, None
                error = ApiException(status=obj.get("code"), reason=obj.get("message"))
                raise translate(target, error)
            rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
            if kind == "BOOKMARK":
                continue
            last = None if kind == "DELETED" else obj
            if last is not None and settled(last, replicas)[1]:
                return True, last, rv
    except urllib3.exceptions.ReadTimeoutError:
        raise  # wait_ready tells a quiet stream at the deadline from a hung server
    except urllib3.exceptions.HTTPError as exc:
        raise translate(target, exc) from exc
    except ValueError:
        raise PermanentError(target, "a watch event is not JSON") from None
    finally:
        # Close before releasing: a half-read stream must not go back into the pool.
        resp.response.close()
        resp.response.release_conn()
    return False, last, rv
