"""``KubeApiServer``: the lab's in-process Kubernetes API server and its controller."""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from drills.errors import LabError
from drills_lab.kubeapi.api import KubeApi
from drills_lab.kubeapi.audit import AuditLog
from drills_lab.kubeapi.controller import RolloutController
from drills_lab.kubeapi.http import ApiHTTPServer
from drills_lab.kubeapi.jobs import JobController
from drills_lab.kubeapi.podrun import LogBook, Runners
from drills_lab.kubeapi.store import ResourceStore
from drills_lab.kubeapi.tls import Certificate, self_signed, server_context

log = logging.getLogger("drills_lab.kubeapi")

# The namespaces every real cluster starts with.
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class KubeApiServer:
    """A Kubernetes-API-compatible server on loopback, for the official client and kubectl.

    ``token``, when set, is required as a bearer token on every request but
    the health checks. ``ready_delay`` is how long a workload's new pods take
    to turn ready. The server can be stopped and started again on the same
    port with its objects intact, like a site going down and coming back.

    ``tls=True`` serves HTTPS with a fresh self-signed certificate
    (``ca_pem``). kubectl needs it to authenticate: client-go never sends a
    kubeconfig's token to an http:// server. The Python client sends it either way.

    ``audit``, when given, records every request the server answers (see
    :mod:`drills_lab.kubeapi.audit`); the lab's own in-process reads are not requests.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        version: tuple[int, int] = (1, 30),
        token: str | None = None,
        ready_delay: float = 0.5,
        name: str = "lab",
        tls: bool = False,
        audit: AuditLog | None = None,
    ) -> None:
        self.host = host
        self.name = name
        self.version = version
        self._port = port
        self._token = token
        self._certificate: Certificate | None = self_signed(host) if tls else None
        self.store = ResourceStore()
        for namespace in SYSTEM_NAMESPACES:
            self.store.create("namespaces", {"metadata": {"name": namespace}})
        self._api = KubeApi(self.store, version)
        self._api.audit = audit
        self.audit = audit
        # What a Job's pod does, by its image (the lab's trainer registers its own), and
        # what it printed, served as pods/log.
        self.runners = Runners()
        self.logs = LogBook()
        self._api.logs = self.logs
        jobs = JobController(self.store, ready_delay, self.runners, self.logs)
        self._controller = RolloutController(self.store, ready_delay, name, jobs)
        self._httpd: ApiHTTPServer | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        if self._port == 0:
            raise LabError(f"kube api {self.name}: no port until start()")
        scheme = "https" if self._certificate else "http"
        return f"{scheme}://{self.host}:{self._port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The PEM certificate to trust when ``tls=True``, else None."""
        return self._certificate.cert_pem if self._certificate else None

    @property
    def running(self) -> bool:
        return self._httpd is not None

    def start(self) -> None:
        with self._lock:
            if self._httpd is not None:
                return
            try:
                context = server_context(self._certificate) if self._certificate else None
                httpd = ApiHTTPServer((self.host, self._port), self._api, self._token, context)
            except OSError as exc:
                raise LabError(
                    f"kube api {self.name}: cannot listen on {self.host}:{self._port}: {exc}"
                ) from exc
            self._port = httpd.server_address[1]
            self._api.server_address = f"{self.host}:{self._port}"
            self._httpd = httpd
            self._controller.start()
            threading.Thread(
                target=httpd.serve_forever, name=f"kubeapi-{self.name}", daemon=True
            ).start()
        major, minor = self.version
        log.info("kube api %s listening on %s (v%d.%d)", self.name, self.url, major, minor)

    def stop(self) -> None:
        with self._lock:
            httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        httpd.close_connections()
        self.store.wake_all()
        self._controller.stop()
        log.info("kube api %s stopped", self.name)

    def __enter__(self) -> KubeApiServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
