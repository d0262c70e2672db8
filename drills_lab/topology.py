"""What the lab's stand-in GPU platform contains.

One declarative description, read by the seeder (to create it), the site
endpoint (to know which deployments are critical) and the plan writer (to
describe it), so the three can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Tier = Literal["critical", "normal", "batch"]
Kind = Literal["Deployment", "StatefulSet"]

ZONE = "drills.test."
RECORD = "api.drills.test."
PRIMARY_ADDR = "127.0.0.2"
DR_ADDR = "127.0.0.3"
PRIMARY_REGION = "us-east-1"
DR_REGION = "us-west-2"
INGRESS_CLASS = "nginx"
INGRESS_NAMESPACE = "serving"
INGRESS_NAME = "public"
CONTROLLER_NAMESPACE = "ingress-nginx"
CONTROLLER_NAME = "ingress-nginx-controller"
GOOD_TTL = 30
DRIFT_TTL = 3600
MAX_TTL = 60


@dataclass(frozen=True)
class LabWorkload:
    namespace: str
    name: str
    kind: Kind
    tier: Tier
    image: str  # repository:tag, without the registry host (each site pulls from its own)
    primary_replicas: int
    dr_replicas: int
    writer: bool = False
    gpu: int = 0
    cpu: str = "2"
    memory: str = "8Gi"


@dataclass(frozen=True)
class LabDataset:
    name: str
    kind: Literal["data", "checkpoint", "model"]
    primary_bucket: str
    dr_bucket: str
    prefix: str
    objects: int
    rpo_target: int  # seconds


@dataclass(frozen=True)
class LabSecret:
    namespace: str
    name: str
    keys: tuple[str, ...]
    per_site: bool = False


@dataclass(frozen=True)
class NodePool:
    prefix: str
    count: int
    gpus: int
    cpu: str
    memory: str
    gpu_product: str = "NVIDIA-H100-80GB-HBM3"


@dataclass(frozen=True)
class SiteShape:
    kube_minor: int
    driver: str
    cuda: str
    pools: tuple[NodePool, ...] = field(default_factory=tuple)


WORKLOADS: tuple[LabWorkload, ...] = (
    # critical: what users touch; must be up first at DR
    LabWorkload(
        "serving",
        "inference-gateway",
        "Deployment",
        "critical",
        "platform/inference-gateway:1.8.2",
        2,
        2,
        cpu="1",
        memory="2Gi",
    ),
    LabWorkload(
        "serving",
        "llm-server",
        "Deployment",
        "critical",
        "models/llm-server:0.6.3",
        2,
        2,
        gpu=1,
        cpu="8",
        memory="64Gi",
    ),
    LabWorkload(
        "serving",
        "embedding-server",
        "Deployment",
        "critical",
        "models/embedding-server:2.1.0",
        1,
        1,
        gpu=1,
        cpu="4",
        memory="16Gi",
    ),
    LabWorkload(
        "serving",
        "session-store",
        "StatefulSet",
        "critical",
        "platform/session-store:7.2.4",
        1,
        1,
        writer=True,
        cpu="2",
        memory="8Gi",
    ),
    # normal: can follow a few minutes later
    LabWorkload(
        "training",
        "trainer",
        "Deployment",
        "normal",
        "training/trainer:2024.11",
        1,
        1,
        writer=True,
        gpu=4,
        cpu="32",
        memory="256Gi",
    ),
    LabWorkload(
        "training",
        "data-loader",
        "Deployment",
        "normal",
        "training/data-loader:3.0.1",
        1,
        1,
        cpu="8",
        memory="32Gi",
    ),
    LabWorkload(
        "platform",
        "model-registry",
        "Deployment",
        "normal",
        "platform/model-registry:1.4.0",
        1,
        1,
        writer=True,
    ),
    LabWorkload(
        "platform",
        "metrics-gateway",
        "Deployment",
        "normal",
        "platform/metrics-gateway:0.9.7",
        1,
        1,
        cpu="1",
        memory="2Gi",
    ),
    # batch: stays paused during a takeover
    LabWorkload(
        "batch", "eval-runner", "Deployment", "batch", "batch/eval-runner:0.3.0", 1, 1, gpu=1
    ),
    LabWorkload(
        "batch",
        "embedding-backfill",
        "Deployment",
        "batch",
        "batch/embedding-backfill:0.2.5",
        1,
        1,
        gpu=1,
    ),
    LabWorkload(
        "batch",
        "dataset-compactor",
        "Deployment",
        "batch",
        "batch/dataset-compactor:1.1.0",
        1,
        1,
        writer=True,
    ),
    LabWorkload(
        "batch",
        "report-builder",
        "Deployment",
        "batch",
        "batch/report-builder:0.5.2",
        1,
        1,
        cpu="1",
        memory="2Gi",
    ),
)

# The ingress controller is site infrastructure, not a workload the drill scales up.
CONTROLLER_IMAGE = "platform/ingress-nginx-controller:1.11.3"

# Images published as a multi-arch index rather than a single manifest.
MULTI_ARCH = frozenset({"platform/inference-gateway:1.8.2", "models/llm-server:0.6.3"})

DATASETS: tuple[LabDataset, ...] = (
    LabDataset("training-data", "data", "train-data-primary", "train-data-dr", "corpus/", 40, 3600),
    LabDataset("checkpoints", "checkpoint", "ckpt-primary", "ckpt-dr", "runs/llama-8b/", 24, 900),
    LabDataset("model-artifacts", "model", "models-primary", "models-dr", "release/", 8, 3600),
)

K8S_SECRETS: tuple[LabSecret, ...] = (
    LabSecret("serving", "model-api-keys", ("primary-key", "secondary-key")),
    LabSecret("serving", "hf-token", ("token",)),
    LabSecret("training", "wandb-key", ("api-key",)),
    LabSecret("serving", "registry-pull", (".dockerconfigjson",), per_site=True),
)

AWS_SECRETS: tuple[str, ...] = ("lab/session-store-password",)


@dataclass(frozen=True)
class LabExternalSecret:
    """An ExternalSecret at each site, synced from that site's region of Secrets Manager."""

    namespace: str
    name: str
    remote_key: str
    keys: tuple[str, ...]


SECRET_STORE = "lab-secrets-manager"  # a ClusterSecretStore at each site
EXTERNAL_SECRETS: tuple[LabExternalSecret, ...] = (
    LabExternalSecret("serving", "inference-db", "lab/inference-db", ("username", "password")),
    LabExternalSecret("training", "feature-store", "lab/feature-store", ("token",)),
)

SITES: dict[str, SiteShape] = {
    "primary": SiteShape(
        kube_minor=30,
        driver="550.54.15",
        cuda="12.4",
        pools=(NodePool("gpu-a", 4, 8, "96", "1024Gi"), NodePool("cpu-a", 2, 0, "64", "256Gi")),
    ),
    "dr": SiteShape(
        kube_minor=30,
        driver="550.54.15",
        cuda="12.4",
        pools=(NodePool("gpu-b", 3, 8, "96", "1024Gi"), NodePool("cpu-b", 2, 0, "64", "256Gi")),
    ),
}

# The faults `drills lab up --drift` seeds, one per failure a real takeover hits.
DRIFT_MISSING_IMAGE = "platform/session-store:7.2.4"
DRIFT_STALE_DATASET = "checkpoints"
DRIFT_STALE_AGE_S = 6 * 3600
DRIFT_DIFFERENT_SECRET = ("serving", "model-api-keys")
DRIFT_NEVER_READY = ("serving", "embedding-server")
# Its remote secret is missing from DR's region, so its sync there fails.
DRIFT_FAILING_EXTERNAL_SECRET = ("training", "feature-store")


# The lab plan's validation job: the trainer resumes from DR's newest checkpoint, trains
# TRAINER_JOB_STEPS steps and writes the next checkpoint there. `--drift-training` runs it
# with DRIFT_TRAINER_TAG, built for a CUDA whose driver DR's GPU nodes do not have.
TRAINER_JOB = "trainer-resume"
TRAINER_JOB_TAG = "2024.11"
DRIFT_TRAINER_TAG = "2025.02-cuda12.8"
TRAINER_JOB_STEPS = 50


def critical_workloads() -> tuple[LabWorkload, ...]:
    return tuple(w for w in WORKLOADS if w.tier == "critical")


# --- what a site can carry (drills_lab.load) -----------------------------------------
# The critical workloads whose ready replicas decide how many requests a second a site serves.
INFERENCE_WORKLOADS = ("serving/llm-server",)
# `drills lab up --drift-capacity`: at DR, work of the critical tier's priority that is not
# the plan's holds every GPU but the ones the takeover needs at its dr_replicas, so DR starts
# the minimum but cannot grow to carry the primary's peak.
DRIFT_CAPACITY_NAMESPACE = "research"
DRIFT_CAPACITY_NAME = "notebooks"


# --- what decides scheduling at a site (readiness v2) ---------------------------------
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
PRIORITY_CLASSES = {
    "critical": ("drills-critical", 1_000_000),
    "normal": ("drills-normal", 100_000),
    "batch": ("drills-batch", 1_000),
}
# Kueue: LocalQueue (namespace, name) → ClusterQueue, for the GPU workloads that queue.
KUEUE_QUEUES = {
    ("serving", "serving-queue"): "serving-gpu",
    ("training", "training-queue"): "training-gpu",
}
KUEUE_COHORT = "gpu-pool"
QUEUED = {("serving", "llm-server"): "serving-queue",
          ("serving", "embedding-server"): "serving-queue",
          ("training", "trainer"): "training-queue"}  # fmt: skip
DEVICE_PLUGIN_NAMESPACE = "gpu-operator"
DEVICE_PLUGIN_NAME = "nvidia-device-plugin-daemonset"
SENTINEL_NAMESPACE = "serving"
SENTINEL_NAME = "dr-sentinel"
SENTINEL_IMAGE = "platform/dr-sentinel:1.0.0"
SENTINEL_EVERY_S = 60.0

# The faults `drills lab up --drift-scheduling` seeds: the takeover would find capacity but
# its pods would not run.
DRIFT_QUEUE = ("serving-gpu", 1, 1)  # ClusterQueue, nominal GPUs, GPUs it may borrow
DRIFT_MISSING_PRIORITY_CLASS = "drills-critical"
DRIFT_PLUGIN_NOT_READY_NODE = "gpu-b-2"
DRIFT_TAINT = {"key": "dedicated", "value": "training", "effect": "NoSchedule"}
