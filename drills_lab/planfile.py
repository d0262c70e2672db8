"""Write the lab's own drill plan, since its ports are only known once it runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from drills.plan import plan_schema_text
from drills_lab import topology
from drills_lab.demand import DEMAND_QUERY, DEMAND_RESOLUTION, PEAK_RPS
from drills_lab.load import PER_REPLICA_RPS
from drills_lab.slo_plan import lab_load, lab_slos

CREDENTIALS = {
    "access_key_id": "file:aws/access_key_id",
    "secret_access_key": "file:aws/secret_access_key",
}


@dataclass(frozen=True)
class LabEndpoints:
    kube: dict[str, str]
    site_endpoints: dict[str, str]
    service_port: int
    registries: dict[str, str]
    moto: str
    named: str | None
    tsig_name: str | None
    route53_zone_id: str | None
    account: str
    prometheus: str | None = None  # scraping each site's DCGM exporter
    pricing: str | None = None  # a pricing file beside the plan
    external_dns: dict[str, Any] | None = None  # `--dns external-dns`: its plan section


@dataclass(frozen=True)
class PlanOptions:
    """What `drills lab up` was asked for, as far as the plan shows it."""

    drift: bool = False
    demand_recorded: bool = False  # the lab's Prometheus records the demand
    drift_training: bool = False
    slo: bool = True  # SLOs and a load probe after the switch, where Prometheus records


def _aws(region: str, moto: str) -> dict[str, Any]:
    return {"region": region, "endpoint_url": moto, "credentials": dict(CREDENTIALS)}


def _site(site: str, lab: LabEndpoints) -> dict[str, Any]:
    region = topology.PRIMARY_REGION if site == "primary" else topology.DR_REGION
    registry: dict[str, Any]
    if lab.registries:
        registry = {"kind": "oci", "url": lab.registries[site]}
    else:
        registry = {"kind": "ecr", "region": region, "registry_id": lab.account}
    return {
        "kubernetes": {"kubeconfig": f"{site}.kubeconfig", "context": site},
        "aws": _aws(region, lab.moto),
        "registry": registry,
        "objects": _aws(region, lab.moto) | {"endpoint_url": lab.moto},
        "ingress": {
            "mode": "ingress",
            "objects": [{"namespace": topology.INGRESS_NAMESPACE, "name": topology.INGRESS_NAME}],
        },
        "endpoint": lab.site_endpoints[site],
    }


def _dns(lab: LabEndpoints) -> dict[str, Any]:
    common = {
        "record": {"name": topology.RECORD, "type": "A"},
        "primary_value": topology.PRIMARY_ADDR,
        "dr_value": topology.DR_ADDR,
        "max_ttl": topology.MAX_TTL,
    }
    if lab.named and lab.external_dns:
        return {**lab.external_dns, "servers": [lab.named], "zone": topology.ZONE, **common}
    if lab.named:
        return {
            "provider": "rfc2136",
            "servers": [lab.named],
            "zone": topology.ZONE,
            "tsig": {
                "name": lab.tsig_name,
                "algorithm": "hmac-sha256",
                "secret": "file:tsig.secret",
            },
            **common,
        }
    return {
        "provider": "route53",
        "hosted_zone_id": lab.route53_zone_id,
        "aws": _aws(topology.PRIMARY_REGION, lab.moto),
        **common,
    }


def _cost(lab: LabEndpoints) -> dict[str, Any]:
    cost: dict[str, Any] = {}
    if lab.pricing:
        cost["pricing"] = lab.pricing
    if lab.prometheus:
        cost["prometheus"] = lab.prometheus
    return cost


def _demand(recorded: bool) -> dict[str, Any]:
    """The LLM server's demand: the lab's recorded series when its Prometheus runs, else the
    generator's peak as a static figure."""
    recorded_at = {"query": DEMAND_QUERY, "resolution": DEMAND_RESOLUTION}
    where: dict[str, Any] = recorded_at if recorded else {"static": PEAK_RPS}
    return {
        key: {**where, "unit": "requests/s", "per_replica": PER_REPLICA_RPS,
              "reserve": 0.3, "target_percent": 100}
        for key in topology.INFERENCE_WORKLOADS
    }  # fmt: skip


def _trainer_job(lab: LabEndpoints, *, drift_training: bool) -> dict[str, Any]:
    """The validation job a drill runs at DR: resume from DR's newest checkpoint, train,
    and write the next checkpoint there."""
    trainer = next(w for w in topology.WORKLOADS if w.name == "trainer")
    checkpoints = next(d for d in topology.DATASETS if d.kind == "checkpoint")
    registry = lab.registries.get("dr", "").split("://", 1)[-1] or (
        f"{lab.account}.dkr.ecr.{topology.DR_REGION}.amazonaws.com"
    )
    tag = topology.DRIFT_TRAINER_TAG if drift_training else topology.TRAINER_JOB_TAG
    repository = trainer.image.rsplit(":", 1)[0]
    container = {
        "name": "trainer",
        "image": f"{registry}/{repository}:{tag}",
        "args": ["--resume", "latest", "--steps", str(topology.TRAINER_JOB_STEPS)],
        "env": [{"name": "TRAIN_STEPS", "value": str(topology.TRAINER_JOB_STEPS)}],
        "resources": {"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 1}},
    }
    return {
        "name": topology.TRAINER_JOB,
        "namespace": trainer.namespace,
        "deadline": "5m",
        "output": {"bucket": checkpoints.dr_bucket, "prefix": checkpoints.prefix},
        "manifest": {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"nvidia.com/gpu.present": "true"},
                        "tolerations": [{**topology.GPU_TAINT, "operator": "Equal"}],
                        "containers": [container],
                    }
                },
            },
        },
    }


def _after_switch(lab: LabEndpoints, host: str, options: PlanOptions) -> dict[str, Any]:
    """The SLOs and load probe: only where the lab's Prometheus answers them."""
    if not (options.slo and options.demand_recorded):
        return {}
    return {"slo": lab_slos(), "load": lab_load(host, lab.service_port)}


def lab_plan(lab: LabEndpoints, options: PlanOptions) -> dict[str, Any]:
    host = topology.RECORD.rstrip(".")
    cost = _cost(lab)
    return {
        "name": "lab",
        "description": "The local lab's stand-in GPU platform"
        + (" with seeded drift" if options.drift else ""),
        "sites": {site: _site(site, lab) for site in ("primary", "dr")},
        "workloads": [
            {
                "name": w.name,
                "namespace": w.namespace,
                "kind": w.kind,
                "tier": w.tier,
                "dr_replicas": w.dr_replicas,
                "writer": w.writer,
                "gpu": w.gpu,
            }
            for w in topology.WORKLOADS
        ],
        "datasets": [
            {
                "name": d.name,
                "kind": d.kind,
                "primary_bucket": d.primary_bucket,
                "dr_bucket": d.dr_bucket,
                "prefix": d.prefix,
                "rpo_target": d.rpo_target,
                "min_versions": 2,
            }
            for d in topology.DATASETS
        ],
        "secrets": {
            "max_age_days": 90,
            "kubernetes": [
                {"namespace": s.namespace, "name": s.name, "per_site": s.per_site}
                for s in topology.K8S_SECRETS
            ],
            "aws": [{"id": name, "per_site": False} for name in topology.AWS_SECRETS],
            "external_secrets": [
                {"namespace": s.namespace, "name": s.name} for s in topology.EXTERNAL_SECRETS
            ],
        },
        "dns": _dns(lab),
        "objectives": {"rto": "5m", "rpo": "15m"},
        "smoke": [
            {
                "name": "gateway",
                "url": f"http://{host}:{lab.service_port}/healthz",
                "expect_status": 200,
                "expect_body": "dr",
                "timeout": "30s",
            }
        ],
        "schedule": {"cron": "0 3 1 1,4,7,10 *", "timezone": "UTC"},
        "approval": {"required": False, "timeout": "1h"},
        "sentinel": {
            "namespace": topology.SENTINEL_NAMESPACE,
            "name": topology.SENTINEL_NAME,
            "max_age": "10m",
        },
        **({"cost": cost} if cost else {}),
        "demand": _demand(options.demand_recorded),
        "validation_jobs": [_trainer_job(lab, drift_training=options.drift_training)],
        **_after_switch(lab, host, options),
    }


SCHEMA_FILE = "plan.schema.json"


def write_plan(path: Path, lab: LabEndpoints, options: PlanOptions) -> None:
    """The plan, and beside it the plan schema its first line names, so that an editor with
    the YAML language server completes and checks it wherever the lab's directory is."""
    (path.parent / SCHEMA_FILE).write_text(plan_schema_text())
    header = (
        f"# yaml-language-server: $schema={SCHEMA_FILE}\n"
        "# Written by `drills lab up`: the lab's ports are chosen at start, so this plan\n"
        "# is regenerated each time. Credentials are references to files beside it.\n"
    )
    path.write_text(
        header
        + yaml.safe_dump(
            lab_plan(lab, options),
            sort_keys=False,
        )
    )
