"""The running lab: two stand-in sites and the real services around them.

``Lab.start()`` brings everything up in this process (Kubernetes-compatible
servers, site endpoints, moto) or as children that die with it (named, the
registries), seeds the GPU platform, and writes the state directory: the
kubeconfigs, credential files, the lab plan and ``lab.json``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import shutil
import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import boto3

from drills.errors import LabError
from drills.ports import candidate_port
from drills_lab import externaldns, externalsecrets, topology
from drills_lab.dcgm import DcgmExporter
from drills_lab.demand import DEFAULT_DAY_S, DEMAND_PEAK_QUERY, RULES, DemandGenerator, describe
from drills_lab.endpoint import SiteEndpoint
from drills_lab.images import push_lab_images
from drills_lab.kubeapi import KubeApiServer, write_kubeconfig
from drills_lab.kubeapi.audit import AuditLog
from drills_lab.lowprio import seed_low_priority_work
from drills_lab.moto_server import MotoServer
from drills_lab.named import LabDnsRecord, NamedServer
from drills_lab.planfile import LabEndpoints, PlanOptions, write_plan
from drills_lab.procs import find_binary
from drills_lab.prometheus import PrometheusServer, ScrapeJob
from drills_lab.registry import RegistryServer
from drills_lab.replicator import ReverseReplicator
from drills_lab.seed_aws import ACCOUNT, seed_aws_secrets, seed_datasets, seed_route53
from drills_lab.seed_capacity import seed_drift_capacity
from drills_lab.seed_cluster import cluster_info, seed_site
from drills_lab.sentinel import SentinelHeartbeat
from drills_lab.state import STATE_FILE, LabInfo
from drills_lab.trainer import CheckpointWriter
from drills_lab.trainer_job import CHECKPOINTS, TrainerJob
from drills_lab.trainer_job import REPOSITORY as TRAINER_REPOSITORY

log = logging.getLogger("drills_lab")

SITE_ADDR = {"primary": topology.PRIMARY_ADDR, "dr": topology.DR_ADDR}
SITE_REGION = {"primary": topology.PRIMARY_REGION, "dr": topology.DR_REGION}
SECRET_PREFIX = "drills-lab-secret-"
AWS_KEY_ID = "AKLABDRILLSLOCAL0000"


# What the lab's services keep on disk in its state directory, and nothing else: `lab up`
# wipes exactly these, so a lab is the same whatever ran before it in that directory (a
# registry keeps its blobs across `lab down`: an image `--drift` leaves out would
# otherwise still be at DR from an earlier clean lab).
REGISTRY_DIRS = {site: f"registry-{site}" for site in SITE_ADDR}
NAMED_DIR = "named"
PROMETHEUS_DIR = "prometheus"
PRICING_FILE = "pricing.json"
# An example price sheet for the lab's plan (OpenCost's custom-pricing shape).
LAB_PRICING = {"provider": "custom", "description": "drills lab: an example GPU-hour price",
               "currencyCode": "USD", "gpuProducts": {"NVIDIA-H100-80GB-HBM3": "2.49"}}  # fmt: skip
TSIG_FILE = "tsig.secret"  # written only when named runs: a stale one would outlive it


def audit_file(site: str) -> str:
    """The name of a site's audit log in the state directory (``drills lab up --audit``)."""
    return f"{site}.audit.jsonl"


def clear_service_storage(state_dir: Path) -> list[Path]:
    """Remove what an earlier lab's services left in ``state_dir``; returns what went.

    Only the lab's own entries, directly in ``state_dir``: a symlink among them is
    removed as a link, never followed, so nothing outside the state directory is touched.
    """
    removed = []
    for name in (*REGISTRY_DIRS.values(), NAMED_DIR, TSIG_FILE, PROMETHEUS_DIR,
                 externaldns.JOURNAL_FILE):  # fmt: skip
        path = state_dir / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        else:
            continue
        removed.append(path)
    if removed:
        log.info("cleared what an earlier lab left: %s", ", ".join(p.name for p in removed))
    return removed


def _port_free_on_both(hosts: tuple[str, ...]) -> int:
    """A port free on every site address, so the service listens on the same port at both."""
    for _ in range(50):
        with socket.socket() as first:
            try:
                first.bind((hosts[0], candidate_port()))
            except OSError:
                continue
            port = int(first.getsockname()[1])
        try:
            for host in hosts:
                with socket.socket() as probe:
                    probe.bind((host, port))
        except OSError:
            continue
        return port
    raise LabError(f"no port free on all of {', '.join(hosts)}")


class Lab:
    def __init__(
        self,
        state_dir: Path,
        *,
        drift: bool = False,
        drift_scheduling: bool = False,
        drift_capacity: bool = False,
        day_seconds: float = DEFAULT_DAY_S,
        drift_training: bool = False,
        ready_delay: float = 1.0,
        use_system_services: bool = True,
        checkpoint_every_s: float = 60.0,
        reverse_replication: bool = True,
        audit: bool = False,
        dns: str = "auto",
        dns_sync_interval: float = externaldns.DEFAULT_INTERVAL_S,
        low_priority_work: bool = False,
        slo: bool = True,
    ) -> None:
        self.state_dir = state_dir.resolve()
        self.dns = dns  # "auto": BIND when installed, else Route 53; or "external-dns"
        self.dns_sync_interval = dns_sync_interval
        self.external_dns: externaldns.LabExternalDns | None = None
        self.audit = audit
        self.drift = drift
        self.drift_scheduling = drift_scheduling
        self.low_priority_work = low_priority_work
        self.drift_capacity = drift_capacity
        self.day_seconds = day_seconds
        self.drift_training = drift_training
        self.slo = slo
        self.ready_delay = ready_delay
        self.use_system_services = use_system_services
        self.checkpoint_every_s = checkpoint_every_s
        self.reverse_replication = reverse_replication
        self._secret_base = secrets.token_bytes(16)
        self._stoppables: list[Any] = []
        self.kube: dict[str, KubeApiServer] = {}
        self.endpoints: dict[str, SiteEndpoint] = {}
        self.registries: dict[str, RegistryServer] = {}
        self.moto: MotoServer | None = None
        self.named: NamedServer | None = None
        self.dcgm: dict[str, DcgmExporter] = {}
        self.prometheus: PrometheusServer | None = None
        self.info: LabInfo | None = None
        self.route53_zone_id: str | None = None

    # -- secrets -------------------------------------------------------------
    def secret_value(self, site: str, ref: str, key: str) -> str:
        """The value a lab secret has at a site: distinctive, so leak scans can find it."""
        per_site = {f"{s.namespace}/{s.name}" for s in topology.K8S_SECRETS if s.per_site}
        drifted = self.drift and ref == "/".join(topology.DRIFT_DIFFERENT_SECRET)
        scope = site if (ref in per_site or drifted) else "shared"
        digest = hmac.new(self._secret_base, f"{scope}|{ref}|{key}".encode(), hashlib.sha256)
        return SECRET_PREFIX + digest.hexdigest()[:24]

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> LabInfo:
        begun = time.monotonic()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        clear_service_storage(self.state_dir)
        try:
            self._start_services()
            self._seed()
            for site in SITE_ADDR:
                bucket = getattr(CHECKPOINTS, f"{site}_bucket")
                runner = TrainerJob(self._aws("s3", site), bucket)
                self.kube[site].runners.register(TRAINER_REPOSITORY, runner)
            trainer = CheckpointWriter(
                self.kube["primary"].store,
                interval_s=self.checkpoint_every_s,
                replicate=not self.drift,
            )
            self._own(trainer).start()
            heartbeat = SentinelHeartbeat(
                self.kube["dr"].store, interval_s=topology.SENTINEL_EVERY_S
            )
            self._own(heartbeat).start()
            loads = {site: e.load for site, e in self.endpoints.items()}
            capacity = {site: e.serving_capacity for site, e in self.endpoints.items()}
            demand = DemandGenerator(loads, lambda site: capacity[site](), self.day_seconds,
                                     at_peak=self.drift_capacity)  # fmt: skip
            self._own(demand).start()
            for endpoint in self.endpoints.values():
                endpoint.users_first = demand.offer
            if self.prometheus is not None:
                self.prometheus.wait_for_series(DEMAND_PEAK_QUERY)
                if self.slo:
                    demand.wait_recorded()
            if self.reverse_replication:
                replicator = ReverseReplicator(self.kube["dr"].store, self._aws("s3", "primary"))
                self._own(replicator).start()
            self.info = self._write_state(time.monotonic() - begun)
        except BaseException:
            self.stop()
            raise
        log.info("lab up in %.2fs at %s", self.info.startup_seconds, self.state_dir)
        return self.info

    def stop(self) -> None:
        for thing in reversed(self._stoppables):
            try:
                thing.stop()
            except Exception:
                log.exception("stopping %s failed", thing)
        self._stoppables.clear()

    def _own(self, thing: Any) -> Any:
        self._stoppables.append(thing)
        return thing

    def _start_services(self) -> None:
        have_named = self.use_system_services and find_binary("named") is not None
        have_registry = self.use_system_services and find_binary("docker-registry") is not None
        self.moto = self._own(MotoServer(host="127.0.0.1"))
        self.moto.start()
        token = secrets.token_urlsafe(24)
        for site, addr in SITE_ADDR.items():
            server = KubeApiServer(
                host=addr,
                version=(1, topology.SITES[site].kube_minor),
                token=token,
                ready_delay=self.ready_delay,
                name=site,
                tls=True,  # kubectl sends a kubeconfig's token only over https
                audit=AuditLog(self.state_dir / audit_file(site), site) if self.audit else None,
            )
            self.kube[site] = self._own(server)
            server.start()
            write_kubeconfig(
                self.state_dir / f"{site}.kubeconfig",
                server_url=server.url,
                context=site,
                token=token,
                ca_pem=server.ca_pem,
            )
        port = _port_free_on_both(tuple(SITE_ADDR.values()))
        for site, addr in SITE_ADDR.items():
            endpoint = SiteEndpoint(site, self.kube[site].store, addr, port)
            self.endpoints[site] = self._own(endpoint)
            endpoint.start()
        if have_registry:
            for site, addr in SITE_ADDR.items():
                registry = RegistryServer(
                    self.state_dir / REGISTRY_DIRS[site], host=addr, name=site
                )
                self.registries[site] = self._own(registry)
                registry.start()
        self._start_metrics()
        if self.dns == "external-dns" and not have_named:
            raise LabError("--dns external-dns needs BIND named (apt-get install bind9)")
        if have_named:
            ttl = topology.DRIFT_TTL if self.drift else topology.GOOD_TTL
            records = [LabDnsRecord(topology.RECORD, "A", ttl, topology.PRIMARY_ADDR)]
            if self.dns == "external-dns":
                records += externaldns.lab_records(topology.RECORD, ttl)
            self.named = self._own(
                NamedServer(self.state_dir / NAMED_DIR, zone=topology.ZONE, records=records)
            )
            self.named.start()
            self.named.write_tsig_secret(self.state_dir / "tsig.secret")
            if self.dns == "external-dns":
                self._start_external_dns(ttl)

    def _start_external_dns(self, ttl: int) -> None:
        assert self.named is not None
        self.external_dns = self._own(
            externaldns.start_lab_controller(
                self.kube[externaldns.SITE].store, record=topology.RECORD,
                target=topology.PRIMARY_ADDR, ttl=ttl, server=(self.named.host, self.named.port),
                zone=topology.ZONE, tsig=(self.named.tsig_name, self.named.tsig_secret),
                interval_s=self.dns_sync_interval,
                journal=self.state_dir / externaldns.JOURNAL_FILE,
            )
        )  # fmt: skip

    def _start_metrics(self) -> None:
        """Each site's DCGM exporter, and a real Prometheus scraping them when installed
        (without it, `drills capacity` says so and measures idleness by allocation)."""
        for site, addr in SITE_ADDR.items():
            exporter = self._own(DcgmExporter(site, self.kube[site].store, addr))
            exporter.start()
            self.dcgm[site] = exporter
        if not (self.use_system_services and find_binary("prometheus")):
            log.info("prometheus not installed: no GPU metrics history in this lab")
            return
        dcgm = ScrapeJob("dcgm", {e.target: {"site": s} for s, e in self.dcgm.items()})
        # Each site labels its own series with its name, so its target adds no label.
        sites = ScrapeJob("sites", {f"{e.host}:{e.port}": {} for e in self.endpoints.values()})
        self.prometheus = self._own(
            PrometheusServer(self.state_dir / PROMETHEUS_DIR, [dcgm, sites], rules=RULES)
        )
        self.prometheus.start()

    def _aws(self, service: str, site: str) -> Any:
        assert self.moto is not None
        return boto3.client(
            service,
            endpoint_url=self.moto.url,
            region_name=SITE_REGION[site],
            aws_access_key_id=AWS_KEY_ID,
            aws_secret_access_key=self._aws_secret(),
        )

    def _aws_secret(self) -> str:
        return hashlib.sha256(self._secret_base + b"aws").hexdigest()[:40]

    def registry_host(self, site: str) -> str:
        if self.registries:
            return self.registries[site].url.removeprefix("http://")
        return f"{ACCOUNT}.dkr.ecr.{SITE_REGION[site]}.amazonaws.com"

    def _seed(self) -> None:
        for server in self.kube.values():
            server.store.create("configmaps", cluster_info(server.url, server.ca_pem))
        for site in SITE_ADDR:
            seed_site(
                self.kube[site].store,
                site,
                self.registry_host(site),
                self.secret_value,
                drift=self.drift,
                drift_scheduling=self.drift_scheduling,
            )
        if self.drift_capacity:
            seed_drift_capacity(self.kube["dr"].store, self.registry_host("dr"))
        self._seed_images()
        if self.low_priority_work:  # DR's GPUs busy with work a takeover preempts
            seed_low_priority_work(self.kube["dr"].store, self.registry_host("dr"))
        seed_datasets(self._aws("s3", "primary"), self._aws("s3", "dr"), drift=self.drift)
        seed_aws_secrets(
            self._aws("secretsmanager", "primary"),
            self.secret_value("primary", "aws/" + topology.AWS_SECRETS[0], "value"),
        )
        if self.named is None:
            self._seed_route53()
        self._start_external_secrets()

    def _start_external_secrets(self) -> None:
        """Each site's External Secrets stand-in, syncing from its region's Secrets Manager."""
        for site in SITE_ADDR:
            sm = self._aws("secretsmanager", site)
            store = self.kube[site].store
            externalsecrets.seed_site(
                store, sm, site, SITE_REGION[site],
                lambda key, prop: self.secret_value("primary", f"eso/{key}", prop),
                drift=self.drift,
            )  # fmt: skip
            self._own(externalsecrets.LabExternalSecrets(store, sm, name=site)).start()

    def _seed_images(self) -> None:
        ecr = {site: self._aws("ecr", site) for site in SITE_ADDR} if not self.registries else {}
        registries = {site: r.url for site, r in self.registries.items()}
        push_lab_images(list(SITE_ADDR), registries, ecr, drift=self.drift)

    def _seed_route53(self) -> None:
        self.route53_zone_id = seed_route53(self._aws("route53", "primary"), drift=self.drift)

    def _write_state(self, startup: float) -> LabInfo:
        creds = self.state_dir / "aws"
        creds.mkdir(exist_ok=True)
        _write_private(creds / "access_key_id", AWS_KEY_ID)
        _write_private(creds / "secret_access_key", self._aws_secret())
        assert self.moto is not None
        endpoints = LabEndpoints(
            kube={s: k.url for s, k in self.kube.items()},
            site_endpoints={s: e.url for s, e in self.endpoints.items()},
            service_port=next(iter(self.endpoints.values())).port,
            registries={s: r.url for s, r in self.registries.items()},
            moto=self.moto.url,
            named=(f"{self.named.host}:{self.named.port}" if self.named else None),
            tsig_name=self.named.tsig_name if self.named else None,
            route53_zone_id=self.route53_zone_id,
            account=ACCOUNT,
            prometheus=self.prometheus.url if self.prometheus else None,
            pricing=PRICING_FILE,
            external_dns=(
                externaldns.plan_section(self.dns_sync_interval) if self.external_dns else None
            ),
        )
        (self.state_dir / PRICING_FILE).write_text(json.dumps(LAB_PRICING, indent=2) + "\n")
        options = PlanOptions(drift=self.drift, demand_recorded=self.prometheus is not None,
                              drift_training=self.drift_training, slo=self.slo)  # fmt: skip
        write_plan(self.state_dir / "plan.yaml", endpoints, options)
        info = LabInfo(
            state_dir=str(self.state_dir),
            pid=os.getpid(),
            drift=self.drift,
            drift_scheduling=self.drift_scheduling,
            low_priority_work=self.low_priority_work,
            drift_capacity=self.drift_capacity,
            demand=describe(
                self.day_seconds, recorded=self.prometheus is not None, at_peak=self.drift_capacity
            ),
            drift_training=self.drift_training,
            slo=self.slo,
            reverse_replication=self.reverse_replication,
            started_at=time.time(),
            dns_provider=(
                "external-dns" if self.external_dns else "rfc2136" if self.named else "route53"
            ),
            registry_kind="oci" if self.registries else "ecr",
            kube=endpoints.kube,
            endpoints=endpoints.site_endpoints,
            registries=endpoints.registries,
            moto=self.moto.url,
            dns_server=endpoints.named or "route53 (moto)",
            prometheus=endpoints.prometheus or "",
            startup_seconds=round(startup, 3),
        )
        # Written aside and renamed, as a waiting `lab up` or test reads it the moment it exists.
        staged = self.state_dir / f".{STATE_FILE}.partial"
        staged.write_text(json.dumps(asdict(info), indent=2) + "\n")
        staged.replace(self.state_dir / STATE_FILE)
        return info


def _write_private(path: Path, value: str) -> None:
    path.write_text(value + "\n")
    path.chmod(0o600)
