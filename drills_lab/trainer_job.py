"""The lab's trainer image run as a Job: resume from the newest checkpoint, train, save.

Registered with each site's API server as the runner of ``training/trainer`` pods
(:mod:`drills_lab.kubeapi.podrun`). It first does what a CUDA image's entrypoint
does: checks that the node's NVIDIA driver is new enough for the CUDA the image
was built with (the tag says which), and fails, saying so, when it is not. Then it
really reads the newest checkpoint under the site's checkpoint bucket (moto S3),
and writes the next one, ``steps`` later, beside it.
"""

from __future__ import annotations

import re
from typing import Any

from drills_lab import topology
from drills_lab.kubeapi.objects import dig
from drills_lab.kubeapi.podrun import PodRun, image_of
from drills_lab.seed_aws import body_of

REPOSITORY = "training/trainer"
# The CUDA each trainer tag was built with, and the oldest driver each CUDA runs on
# (NVIDIA's CUDA compatibility table).
CUDA_OF_TAG = {
    topology.TRAINER_JOB_TAG: "12.4",
    topology.DRIFT_TRAINER_TAG: "12.8",
}
MIN_DRIVER = {"12.4": 550, "12.8": 570}
DEFAULT_STEPS = 100
_STEP = re.compile(r"step-(\d+)/")
CHECKPOINTS = next(d for d in topology.DATASETS if d.kind == "checkpoint")


def _env(pod: dict[str, Any], name: str) -> str | None:
    for container in dig(pod, "spec", "containers") or []:
        for var in container.get("env") or []:
            if var.get("name") == name:
                return str(var.get("value", ""))
    return None


def driver_problem(pod: dict[str, Any], node: dict[str, Any]) -> str | None:
    """Why the image cannot start on the node's driver; None when it can."""
    tag = image_of(pod).rsplit(":", 1)[-1]
    cuda = CUDA_OF_TAG.get(tag)
    if cuda is None:
        return f"unknown trainer tag {tag!r}: no CUDA build"
    labels = dig(node, "metadata", "labels") or {}
    major = labels.get("nvidia.com/cuda.driver.major")
    if major is None or not major.isdigit():
        return f"CUDA {cuda} needs an NVIDIA driver, and node {node['metadata']['name']} has none"
    if int(major) < MIN_DRIVER[cuda]:
        return f"CUDA {cuda} needs driver >= {MIN_DRIVER[cuda]}, node has {major}"
    return None


class TrainerJob:
    """The runner for one site: its checkpoint bucket, through an S3 client."""

    def __init__(self, s3: Any, bucket: str) -> None:
        self.s3 = s3
        self.bucket = bucket

    def newest(self) -> tuple[str, int] | None:
        keys: list[str] = []
        for page in self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=CHECKPOINTS.prefix
        ):
            keys += [o["Key"] for o in page.get("Contents") or []]
        stepped = [(int(m.group(1)), k) for k in keys if (m := _STEP.search(k))]
        if not stepped:
            return None
        step, key = max(stepped)
        return key, step

    def __call__(self, pod: dict[str, Any], node: dict[str, Any]) -> PodRun:
        name = node["metadata"]["name"]
        labels = dig(node, "metadata", "labels") or {}
        lines = [
            f"trainer {image_of(pod)} on {name} "
            f"({labels.get('nvidia.com/gpu.product', 'no GPU')}, "
            f"driver {labels.get('nvidia.com/cuda.driver-version.full', 'none')})"
        ]
        problem = driver_problem(pod, node)
        if problem:
            return PodRun(1, [*lines, f"driver check failed: {problem}"])
        lines.append("driver check passed")
        found = self.newest()
        if found is None:
            return PodRun(
                1, [*lines, f"no checkpoint under s3://{self.bucket}/{CHECKPOINTS.prefix}"]
            )
        key, step = found
        body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        lines.append(f"resumed from s3://{self.bucket}/{key} (step {step}, {len(body)} bytes)")
        steps = int(_env(pod, "TRAIN_STEPS") or DEFAULT_STEPS)
        new_key = f"{CHECKPOINTS.prefix}step-{step + steps:06d}/model.safetensors"
        self.s3.put_object(Bucket=self.bucket, Key=new_key, Body=body_of(CHECKPOINTS, new_key))
        lines += [f"trained {steps} steps", f"wrote s3://{self.bucket}/{new_key}"]
        return PodRun(0, lines)
