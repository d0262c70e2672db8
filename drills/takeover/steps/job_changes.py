"""A validation Job as a change: "dr/namespace/name", whose state is whether it exists.

Applying it creates the Job from the manifest in the intended state; undoing it writes
back ``{"present": False}``, which deletes the Job and its pods. So the journal alone is
enough for a rollback, or `drills recover` after a crash, to leave no Job behind.
"""

from __future__ import annotations

from typing import Any

from drills.errors import DrillError
from drills.targets.kube import jobs as kube_jobs
from drills.targets.sites import Role, Targets

KIND = "job.run"


def job_address(site: Role, namespace: str, name: str) -> str:
    return f"{site}/{namespace}/{name}"


def _parts(address: str) -> tuple[Role, str, str]:
    pieces = address.split("/")
    if len(pieces) != 3 or pieces[0] not in ("primary", "dr"):
        raise DrillError(f"malformed change address {address!r}")
    return pieces[0], pieces[1], pieces[2]  # type: ignore[return-value]


def read_job(targets: Targets, address: str) -> dict[str, Any]:
    site, namespace, name = _parts(address)
    return {"present": kube_jobs.job(targets.site(site).kube, namespace, name) is not None}


def write_job(targets: Targets, address: str, state: dict[str, Any]) -> None:
    site, namespace, name = _parts(address)
    kube = targets.site(site).kube
    if not state.get("present"):
        kube_jobs.delete_job(kube, namespace, name)
        return
    manifest = state.get("manifest")
    if not isinstance(manifest, dict):
        raise DrillError(f"{KIND} {address}: no manifest to create the Job from")
    kube_jobs.create_job(kube, namespace, manifest)
