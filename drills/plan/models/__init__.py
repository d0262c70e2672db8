"""The models of a drill plan, one module a section, and :class:`DrillPlan`, the whole.

Every model is frozen and refuses unknown keys. Rules that relate fields of one model live
in that model, so they run even when another part of the plan is broken; ``DrillPlan``
holds the few rules that span sections, and ``lint`` the warnings about a valid plan.
Import the models from here (or from :mod:`drills.plan`); the modules are the layout.
"""

from drills.plan.models.applications import Application
from drills.plan.models.base import PlanModel
from drills.plan.models.cost import CostSettings
from drills.plan.models.datasets import (
    Dataset,
    DatasetInventory,
    DatasetKind,
    InventoryDestination,
    InventorySchedule,
)
from drills.plan.models.demand import ServiceDemand
from drills.plan.models.dns_switch import (
    EXTERNAL_DNS_TARGET,
    Dns,
    DnsRecord,
    ExternalDns,
    ExternalDnsController,
    ExternalDnsResource,
    RecordType,
    Rfc2136Dns,
    Route53Dns,
    TsigAlgorithm,
    TsigKey,
)
from drills.plan.models.drill_gates import Gates
from drills.plan.models.drill_plan import MAX_DR_GPUS, DrillPlan
from drills.plan.models.image_remap import ImageRemap, ImagesPolicy
from drills.plan.models.lint import PlanWarning
from drills.plan.models.objectives import (
    MIN_RTO_SECONDS,
    Approval,
    EvidenceSettings,
    Objectives,
    Practice,
    Schedule,
    Sentinel,
    SmokeProbe,
)
from drills.plan.models.secrets_policy import (
    AwsSecret,
    ExternalSecretRef,
    KubernetesSecret,
    SecretsPolicy,
)
from drills.plan.models.service_levels import LoadProbe, Slo
from drills.plan.models.sites import (
    AwsAccess,
    AwsCredentials,
    ControllerFence,
    EcrRegistry,
    Fence,
    IngressFence,
    KubernetesAccess,
    ObjectRef,
    ObjectStorage,
    OciAuth,
    OciRegistry,
    Registry,
    Site,
    Sites,
)
from drills.plan.models.stores import ExternalRegistry, SecretStore, StoreSecret
from drills.plan.models.validation_job_spec import ValidationJob
from drills.plan.models.workloads import Tier, Workload, WorkloadKind

__all__ = [
    "EXTERNAL_DNS_TARGET",
    "MAX_DR_GPUS",
    "MIN_RTO_SECONDS",
    "Application",
    "Approval",
    "AwsAccess",
    "AwsCredentials",
    "AwsSecret",
    "ControllerFence",
    "CostSettings",
    "Dataset",
    "DatasetInventory",
    "DatasetKind",
    "Dns",
    "DnsRecord",
    "DrillPlan",
    "EcrRegistry",
    "EvidenceSettings",
    "ExternalDns",
    "ExternalDnsController",
    "ExternalDnsResource",
    "ExternalRegistry",
    "ExternalSecretRef",
    "Fence",
    "Gates",
    "ImageRemap",
    "ImagesPolicy",
    "IngressFence",
    "InventoryDestination",
    "InventorySchedule",
    "KubernetesAccess",
    "KubernetesSecret",
    "LoadProbe",
    "ObjectRef",
    "ObjectStorage",
    "Objectives",
    "OciAuth",
    "OciRegistry",
    "PlanModel",
    "PlanWarning",
    "Practice",
    "RecordType",
    "Registry",
    "Rfc2136Dns",
    "Route53Dns",
    "Schedule",
    "SecretStore",
    "SecretsPolicy",
    "Sentinel",
    "ServiceDemand",
    "Site",
    "Sites",
    "Slo",
    "SmokeProbe",
    "StoreSecret",
    "Tier",
    "TsigAlgorithm",
    "TsigKey",
    "ValidationJob",
    "Workload",
    "WorkloadKind",
]
