"""The kinds of change a drill makes, each as a read and a write of one piece of state.

Applying a change writes the intended state; undoing it writes the original
back. Both are the same idempotent ``write``, so an undo that runs twice, or
after a crash that may or may not have applied the change, is safe. A change is
addressed by a plain string so the journal alone is enough to undo it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from drills.errors import DrillError, StepFailed
from drills.takeover.steps import job_changes
from drills.targets.sites import Role, Targets

State = dict[str, Any]


def _any_state(address: str, state: State) -> None:
    return None


@dataclass(frozen=True)
class ChangeKind:
    name: str
    read: Callable[[Targets, str], State]
    write: Callable[[Targets, str, State], None]
    # Raises StepFailed when ``write`` could not put this state back: checked on the
    # original before a change that must be undone is journalled or written.
    restorable: Callable[[str, State], None] = _any_state


def _split(address: str, parts: int) -> list[str]:
    pieces = address.split("/")
    if len(pieces) != parts:
        raise DrillError(f"malformed change address {address!r}")
    return pieces


def _role(value: str) -> Role:
    if value not in ("primary", "dr"):
        raise DrillError(f"unknown site {value!r} in a change address")
    return value  # type: ignore[return-value]


# -- workload replicas: "site/Kind/namespace/name" ---------------------------------
def workload_address(site: Role, kind: str, namespace: str, name: str) -> str:
    return f"{site}/{kind}/{namespace}/{name}"


def _read_replicas(targets: Targets, address: str) -> State:
    site, kind, namespace, name = _split(address, 4)
    obj = targets.site(_role(site)).kube.workload(namespace, kind, name)
    if obj is None:
        raise DrillError(f"{address} does not exist")
    return {"replicas": int(obj.get("spec", {}).get("replicas") or 0)}


def _write_replicas(targets: Targets, address: str, state: State) -> None:
    site, kind, namespace, name = _split(address, 4)
    targets.site(_role(site)).kube.scale(namespace, kind, name, int(state["replicas"]))


# -- ingress class: "site/namespace/name" ---------------------------------------
def ingress_address(site: Role, namespace: str, name: str) -> str:
    return f"{site}/{namespace}/{name}"


def _read_ingress(targets: Targets, address: str) -> State:
    site, namespace, name = _split(address, 3)
    obj = targets.site(_role(site)).kube.ingress(namespace, name)
    if obj is None:
        raise DrillError(f"ingress {address} does not exist")
    return {"ingressClassName": obj.get("spec", {}).get("ingressClassName")}


def _write_ingress(targets: Targets, address: str, state: State) -> None:
    site, namespace, name = _split(address, 3)
    targets.site(_role(site)).kube.patch_ingress_class(
        namespace, name, state.get("ingressClassName")
    )


# -- DNS record: "name/type" ----------------------------------------------------
def record_address(name: str, rtype: str) -> str:
    return f"{name}/{rtype}"


def _read_record(targets: Targets, address: str) -> State:
    name, rtype = _split(address, 2)
    first = targets.dns.read(name, rtype)[0]
    if first.ttl is None:
        raise DrillError(f"DNS record {address} does not exist on {first.server}")
    return {"values": list(first.values), "ttl": first.ttl} | _resource_part(targets, name, rtype)


def _resource_part(targets: Targets, name: str, rtype: str) -> State:
    """A provider that switches through a resource another controller reads (external-dns)
    keeps that resource's part in the state too, so that an undo restores the resource
    exactly, not only the answer."""
    snapshot = getattr(targets.dns, "snapshot", None)
    return {"resource": snapshot(name, rtype)} if snapshot is not None else {}


def _restored(targets: Targets, name: str, rtype: str, state: State) -> bool:
    restore = getattr(targets.dns, "restore", None)
    if restore is None or "resource" not in state:
        return False
    restore(name, rtype, state["resource"])
    return True


def _restorable_record(address: str, state: State) -> None:
    values = state["values"]
    if len(values) != 1:
        raise StepFailed(
            f"dns.record {address}",
            f"holds {len(values)} values {values}: only a single-value record can be "
            "switched and switched back",
        )


def _write_record(targets: Targets, address: str, state: State) -> None:
    name, rtype = _split(address, 2)
    _restorable_record(address, state)
    if not _restored(targets, name, rtype, state):
        targets.dns.update(name, rtype, state["values"][0], int(state["ttl"]))


# -- a practice name: "name/type", whose absence is a state like any value ---------------
def _read_name(targets: Targets, address: str) -> State:
    name, rtype = _split(address, 2)
    first = targets.dns.read(name, rtype)[0]
    return {"values": list(first.values), "ttl": first.ttl} | _resource_part(targets, name, rtype)


def _restorable_name(address: str, state: State) -> None:
    if len(state["values"]) > 1:
        _restorable_record(address, state)


def _write_name(targets: Targets, address: str, state: State) -> None:
    name, rtype = _split(address, 2)
    _restorable_name(address, state)
    if _restored(targets, name, rtype, state):
        return
    if not state["values"]:  # it was not there: removing it restores exactly that
        targets.dns.delete(name, rtype)
        return
    targets.dns.update(name, rtype, state["values"][0], int(state["ttl"]))


KINDS: dict[str, ChangeKind] = {
    kind.name: kind
    for kind in (
        ChangeKind("workload.scale", _read_replicas, _write_replicas),
        ChangeKind("ingress.class", _read_ingress, _write_ingress),
        ChangeKind("dns.record", _read_record, _write_record, _restorable_record),
        ChangeKind("dns.name", _read_name, _write_name, _restorable_name),
        ChangeKind(job_changes.KIND, job_changes.read_job, job_changes.write_job),
    )
}
