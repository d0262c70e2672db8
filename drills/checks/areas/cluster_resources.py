"""What the cluster checks reason about: usable nodes, and what the plan's workloads need.

Pure functions over the plain dicts :class:`~drills.targets.kube.KubeTarget`
returns, plus one fetch helper; no check is registered here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from drills.errors import TargetError
from drills.plan import DrillPlan, Workload
from drills.targets.kube import KubeTarget, cores, gib, parse_quantity
from drills.targets.sites import Role, Targets

GPU = "nvidia.com/gpu"
RESOURCES = ("cpu", "memory", GPU)
ZERO = Decimal(0)
# Taints that mean "nothing new lands here", whatever the pod tolerates.
_UNSCHEDULABLE_TAINTS = frozenset(
    {
        "node.kubernetes.io/unschedulable",
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
)

Resources = dict[str, Decimal]


@dataclass(frozen=True)
class NodeFacts:
    name: str
    ready: bool
    schedulable: bool
    allocatable: Resources
    labels: Mapping[str, str]

    @property
    def gpus(self) -> int:
        return int(self.allocatable.get(GPU, ZERO))

    @property
    def usable(self) -> bool:
        """Ready and accepting new pods: where a takeover's pods can land."""
        return self.ready and self.schedulable


def ready_condition(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A node's or pod's Ready condition when it is True; None when it is not Ready."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next(
        (c for c in conditions if c.get("type") == "Ready" and c.get("status") == "True"), None
    )


def node_facts(node: Mapping[str, Any]) -> NodeFacts:
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    spec = node.get("spec") or {}
    ready = ready_condition(node) is not None
    tainted = any(
        t.get("key") in _UNSCHEDULABLE_TAINTS and t.get("effect") in ("NoSchedule", "NoExecute")
        for t in spec.get("taints") or []
    )
    allocatable: Resources = {}
    for name, value in (status.get("allocatable") or {}).items():
        try:
            allocatable[name] = parse_quantity(value)
        except ValueError:
            continue  # a resource we cannot read is one we do not count on
    return NodeFacts(
        name=str(meta.get("name", "?")),
        ready=ready,
        schedulable=not spec.get("unschedulable", False) and not tainted,
        allocatable=allocatable,
        labels=dict(meta.get("labels") or {}),
    )


def _container_requests(container: Mapping[str, Any]) -> Resources:
    """A container's requests; a resource with only a limit requests its limit (API default)."""
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    out: Resources = {}
    for name in RESOURCES:
        if name in merged:
            out[name] = parse_quantity(merged[name])
    return out


def pod_requests(template: Mapping[str, Any]) -> Resources:
    """Effective per-pod requests of a pod template, as the scheduler counts them.

    Per resource: the larger of the sum over containers and the largest init
    container (init containers run one at a time, before the others).
    """
    spec = template.get("spec") or {}
    total: Resources = dict.fromkeys(RESOURCES, ZERO)
    for container in spec.get("containers") or []:
        for name, amount in _container_requests(container).items():
            total[name] += amount
    for container in spec.get("initContainers") or []:
        for name, amount in _container_requests(container).items():
            total[name] = max(total[name], amount)
    return total


@dataclass(frozen=True)
class Demand:
    """What one workload needs at DR: requests per replica, times its DR replicas."""

    workload: Workload
    per_replica: Resources
    source: str  # "primary", "dr" (its standby, when the primary could not say) or "unknown"

    @property
    def gpus_per_replica(self) -> int:
        return int(self.per_replica.get(GPU, ZERO))

    @property
    def total(self) -> Resources:
        return {
            name: amount * self.workload.dr_replicas for name, amount in self.per_replica.items()
        }


def demand_of(workload: Workload, obj: Mapping[str, Any] | None, source: str) -> Demand:
    """The workload's demand from its pod template; the plan's ``gpu`` wins when set."""
    per_replica: Resources = dict.fromkeys(RESOURCES, ZERO)
    if obj is not None:
        per_replica = pod_requests((obj.get("spec") or {}).get("template") or {})
    else:
        source = "unknown"
    if workload.gpu:
        per_replica[GPU] = Decimal(workload.gpu)
    return Demand(workload, per_replica, source)


def fetch_workloads(
    targets: Targets, role: Role, workloads: Iterable[Workload]
) -> dict[str, dict[str, Any] | None]:
    """Every workload's object at one site, None where it is missing: read concurrently,
    once per run for the same site and workloads (the checks of a plan ask for them
    again and again, and so do the plans of a fleet run over one site)."""
    items = list(workloads)
    site = targets.site(role)
    key = ("workloads", site.identity("kube"),
           tuple((w.namespace, w.kind.value, w.name) for w in items))  # fmt: skip
    return dict(targets.once(key, lambda: _read_workloads(site.kube, items)))


def _read_workloads(kube: KubeTarget, items: list[Workload]) -> dict[str, dict[str, Any] | None]:
    if not items:
        return {}
    with ThreadPoolExecutor(max_workers=min(8, len(items))) as pool:
        found = pool.map(lambda w: kube.workload(w.namespace, w.kind.value, w.name), items)
        return {w.key: obj for w, obj in zip(items, found, strict=True)}


@dataclass(frozen=True)
class Templates:
    """Every plan workload's object, read at the primary, else from its DR standby."""

    objects: dict[str, dict[str, Any] | None]
    sources: dict[str, str]  # "primary", "dr" or "unknown"
    note: str | None  # why the primary could not be read, when it could not

    def template(self, workload: Workload) -> dict[str, Any]:
        """The workload's pod template; {} when neither site has it."""
        obj = self.objects.get(workload.key) or {}
        return dict((obj.get("spec") or {}).get("template") or {})


def plan_templates(plan: DrillPlan, targets: Targets) -> Templates:
    """In an incident the primary may be down, and the standby's template is the next
    best source (standby_parity says whether the two agree)."""
    note: str | None = None
    try:
        primary_objs = fetch_workloads(targets, "primary", plan.workloads)
    except TargetError as exc:
        primary_objs, note = {}, str(exc)
    missing = [w for w in plan.workloads if primary_objs.get(w.key) is None]
    dr_objs = fetch_workloads(targets, "dr", missing) if missing else {}
    objects: dict[str, dict[str, Any] | None] = {}
    sources: dict[str, str] = {}
    for w in plan.workloads:
        found = primary_objs.get(w.key)
        objects[w.key] = found if found is not None else dr_objs.get(w.key)
        sources[w.key] = "primary" if found is not None else "dr"
        if objects[w.key] is None:
            sources[w.key] = "unknown"
    return Templates(objects, sources, note)


def plan_demands(plan: DrillPlan, targets: Targets) -> tuple[list[Demand], str | None]:
    """Demands of every plan workload, and why the primary could not be read, if it could not."""
    found = plan_templates(plan, targets)
    demands = [demand_of(w, found.objects[w.key], found.sources[w.key]) for w in plan.workloads]
    return demands, found.note


def taken_over(plan: DrillPlan) -> list[Workload]:
    """The workloads a takeover brings up (critical, then normal; batch stays paused)."""
    return [w for w in plan.workloads if w.tier.value in ("critical", "normal")]


def add(demands: Iterable[Demand]) -> Resources:
    total: Resources = dict.fromkeys(RESOURCES, ZERO)
    for d in demands:
        for name, amount in d.total.items():
            total[name] = total.get(name, ZERO) + amount
    return total


def capacity(nodes: Iterable[NodeFacts]) -> Resources:
    total: Resources = dict.fromkeys(RESOURCES, ZERO)
    for n in nodes:
        for name in RESOURCES:
            total[name] += n.allocatable.get(name, ZERO)
    return total


def shown(resources: Mapping[str, Decimal]) -> dict[str, Any]:
    """Resources for evidence: GPUs as a count, CPU in cores, memory in GiB."""
    return {
        "gpu": int(resources.get(GPU, ZERO)),
        "cpu": cores(resources.get("cpu", ZERO)),
        "memory": gib(resources.get("memory", ZERO)),
    }


def pack_gpus(per_replica: Iterable[int], node_gpus: Iterable[int]) -> tuple[int, int]:
    """Place GPU replicas on nodes, first fit by decreasing size (a pod cannot span nodes).

    Returns (nodes used, replicas left unplaced). First-fit-decreasing is not
    optimal, but it never claims a fit that does not exist.
    """
    free = sorted((g for g in node_gpus if g > 0), reverse=True)
    used = [False] * len(free)
    unplaced = 0
    for need in sorted((g for g in per_replica if g > 0), reverse=True):
        for i, have in enumerate(free):
            if have >= need:
                free[i] -= need
                used[i] = True
                break
        else:
            unplaced += 1
    return sum(used), unplaced
