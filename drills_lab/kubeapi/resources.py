"""The catalogue of resource types the lab server serves.

Discovery documents, routing, error messages and tables are all derived from
this one list, so a resource added here is served everywhere at once.
"""

from __future__ import annotations

from dataclasses import dataclass

# The verbs of a full resource; "deletecollection" is left out because the
# server does not implement it, and discovery must not promise it.
RESOURCE_VERBS = ("create", "delete", "get", "list", "patch", "update", "watch")
SUBRESOURCE_VERBS = ("get", "patch", "update")

# Field selectors every resource supports, as in the real API server.
COMMON_FIELD_LABELS = ("metadata.name", "metadata.namespace")


@dataclass(frozen=True)
class ResourceType:
    group: str  # "" is the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()  # "status", "scale"
    categories: tuple[str, ...] = ()
    field_labels: tuple[str, ...] = ()  # extra field selectors beyond metadata.*

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def path_prefix(self) -> str:
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    @property
    def qualified_resource(self) -> str:
        """How the API server names the resource in messages: ``deployments.apps``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """How validation messages name the kind: ``Deployment.apps``."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    def supports_field(self, field: str) -> bool:
        return field in COMMON_FIELD_LABELS or field in self.field_labels


CATALOGUE: tuple[ResourceType, ...] = (
    ResourceType(
        "", "v1", "Namespace", "namespaces", "namespace", False, ("ns",), ("status",),
        field_labels=("status.phase",),
    ),
    ResourceType(
        "", "v1", "Node", "nodes", "node", False, ("no",), ("status",),
        field_labels=("spec.unschedulable",),
    ),
    ResourceType(
        "", "v1", "Pod", "pods", "pod", True, ("po",), ("status", "log"), ("all",),
        field_labels=(
            "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
            "spec.serviceAccountName", "status.phase", "status.podIP", "status.nominatedNodeName",
        ),
    ),
    ResourceType("", "v1", "Service", "services", "service", True, ("svc",), ("status",), ("all",)),
    ResourceType("", "v1", "Secret", "secrets", "secret", True, field_labels=("type",)),
    ResourceType("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",)),
    ResourceType(
        "apps", "v1", "Deployment", "deployments", "deployment", True, ("deploy",),
        ("scale", "status"), ("all",),
    ),
    ResourceType(
        "apps", "v1", "StatefulSet", "statefulsets", "statefulset", True, ("sts",),
        ("scale", "status"), ("all",),
    ),
    # Flow runs of a Prefect Kubernetes work pool run as Jobs (deploy/prefect/).
    ResourceType("batch", "v1", "Job", "jobs", "job", True, (), ("status",), ("all",)),
    ResourceType(
        "networking.k8s.io", "v1", "Ingress", "ingresses", "ingress", True, ("ing",), ("status",),
    ),
    ResourceType(
        "", "v1", "ResourceQuota", "resourcequotas", "resourcequota", True, ("quota",),
        ("status",),
    ),
    ResourceType(
        "apps", "v1", "DaemonSet", "daemonsets", "daemonset", True, ("ds",), ("status",), ("all",),
    ),
    ResourceType(
        "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", False,
        ("pc",),
    ),
    # Kueue's CRDs, served as the kueue.x-k8s.io/v1beta1 API a Kueue install serves.
    ResourceType(
        "kueue.x-k8s.io", "v1beta1", "ClusterQueue", "clusterqueues", "clusterqueue", False,
        ("cq",), ("status",), ("kueue",),
    ),
    ResourceType(
        "kueue.x-k8s.io", "v1beta1", "LocalQueue", "localqueues", "localqueue", True,
        ("queue", "queues", "lq"), ("status",), ("kueue",),
    ),
    ResourceType(
        "kueue.x-k8s.io", "v1beta1", "Workload", "workloads", "workload", True,
        ("wl",), ("status",), ("kueue",),
    ),
    # external-dns's crd source reads DNSEndpoints (drills_lab.externaldns syncs them).
    ResourceType(
        "externaldns.k8s.io", "v1alpha1", "DNSEndpoint", "dnsendpoints", "dnsendpoint", True,
        (), ("status",),
    ),
    # External Secrets Operator's CRDs (drills_lab.externalsecrets syncs them).
    ResourceType(
        "external-secrets.io", "v1beta1", "ExternalSecret", "externalsecrets", "externalsecret",
        True, ("es",), ("status",), ("external-secrets",),
    ),
    ResourceType(
        "external-secrets.io", "v1beta1", "SecretStore", "secretstores", "secretstore", True,
        ("ss",), ("status",), ("external-secrets",),
    ),
    ResourceType(
        "external-secrets.io", "v1beta1", "ClusterSecretStore", "clustersecretstores",
        "clustersecretstore", False, ("css",), ("status",), ("external-secrets",),
    ),
)  # fmt: skip

BY_PLURAL: dict[str, ResourceType] = {rt.plural: rt for rt in CATALOGUE}


def group_versions() -> list[tuple[str, str]]:
    """Every (group, version) served, core first, in catalogue order."""
    seen: list[tuple[str, str]] = []
    for rt in CATALOGUE:
        if (rt.group, rt.version) not in seen:
            seen.append((rt.group, rt.version))
    return seen


def in_group_version(group: str, version: str) -> list[ResourceType]:
    return [rt for rt in CATALOGUE if rt.group == group and rt.version == version]


def lookup(group: str, version: str, plural: str) -> ResourceType | None:
    rt = BY_PLURAL.get(plural)
    if rt is None or rt.group != group or rt.version != version:
        return None
    return rt


def by_plural(plural: str) -> ResourceType:
    """The type for an in-process caller; a typo there is a programming error."""
    try:
        return BY_PLURAL[plural]
    except KeyError:
        raise KeyError(f"unknown resource {plural!r}; known: {sorted(BY_PLURAL)}") from None


def by_kind(api_version: str, kind: str) -> ResourceType | None:
    for rt in CATALOGUE:
        if rt.api_version == api_version and rt.kind == kind:
            return rt
    return None
