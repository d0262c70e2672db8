"""The Alertmanager webhook receiver of `drills serve`: alerts in, proposed incidents out.

Alertmanager POSTs its notifications (webhook JSON, version "4") to ``/alertmanager``
with ``Authorization: Bearer TOKEN`` (its ``http_config.authorization``). The token is
named by reference (``env:``, ``file:``, ``prefect:``) and read once at start; a request
without it, or with another, is refused with 401 and written to the audit log (the
client's address, never what it sent). An accepted notification is handed to
drills.takeover.proposals, which keeps the alerts matching a plan's ``declare_on`` and
proposes incidents; nothing is ever started from here. A history store that does not
answer gets 503, so Alertmanager sends the notification again.

    drills serve receiver --port 9095 --token env:DRILLS_RECEIVER_TOKEN
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from drills.metrics.plans import PlanCache
from drills.store.history import HistoryStore
from drills.store.outage import is_store_outage, outage_text
from drills.takeover.proposals import (
    MAX_BODY_BYTES,
    NotificationError,
    parse_notification,
    receive,
)

log = logging.getLogger("drills.orchestrator.receiver")

PATH = "/alertmanager"
HEALTH_PATH = "/healthz"
REFUSAL_ACTION = "alert-webhook"  # the audit log's word for a refused notification
DEFAULT_PORT = 9095
READY_LINE = "receiving Alertmanager notifications at"


@dataclass(frozen=True)
class Receiver:
    """What the server needs: the token (read from its reference), the plans and the store."""

    token: str
    plans: PlanCache
    history: HistoryStore


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver
    lock: threading.Lock  # one notification at a time: proposals are decided in order

    def server_bind(self) -> None:
        super().server_bind()
        # On loopback, without this each answer waits ~40 ms for a delayed ACK.
        self.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def _answer(self, code: int, payload: dict[str, Any], **headers: str) -> None:
        body = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == HEALTH_PATH:
            self._answer(200, {"status": "ok"})
        else:
            self._answer(404, {"error": f"POST notifications to {PATH}"})

    def do_POST(self) -> None:
        try:
            length = max(0, int(self.headers.get("Content-Length") or 0))
        except ValueError:
            self.close_connection = True
            self._answer(400, {"error": "Content-Length is not a number"})
            return
        if self.path != PATH:
            self._drain(length)
            self._answer(404, {"error": f"POST notifications to {PATH}"})
            return
        why = self._unauthorised()
        if why is not None:
            self._drain(length)
            self._refuse(why)
            return
        if length > MAX_BODY_BYTES:
            self.close_connection = True  # the body is not read: the connection cannot go on
            self._answer(413, {"error": f"a notification is at most {MAX_BODY_BYTES} bytes"})
            return
        self._handle(self.rfile.read(length))

    def _drain(self, length: int) -> None:
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)  # keep-alive goes on with the next request
        elif length:
            self.close_connection = True

    def _unauthorised(self) -> str | None:
        given = self.headers.get("Authorization")
        if not given:
            return "no bearer token"
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return "not a bearer token"
        expected = self.server.receiver.token.encode()
        if not hmac.compare_digest(token.strip().encode(), expected):
            return "wrong bearer token"
        return None

    def _refuse(self, why: str) -> None:
        client = self.client_address[0]
        log.warning("notification from %s refused: %s", client, why)
        try:
            self.server.receiver.history.audit(
                who=f"address:{client}", action=REFUSAL_ACTION, plan="", accepted=False,
                reason=why, detail={"client": client, "path": self.path},
            )  # fmt: skip
        except Exception as exc:  # the refusal stands; only its record is missing
            if not is_store_outage(exc):
                raise
            log.error("the refusal could not be audited: %s", outage_text(exc))
        self._answer(401, {"error": why}, **{"WWW-Authenticate": 'Bearer realm="drills"'})

    def _handle(self, body: bytes) -> None:
        try:
            notification = parse_notification(body)
        except NotificationError as exc:
            self._answer(400, {"error": str(exc)})
            return
        receiver = self.server.receiver
        try:
            with self.server.lock:
                loaded = receiver.plans.load()
                if loaded.invalid:  # their declare_on cannot be read: say so, match the rest
                    log.warning("plan files that do not load: %s", ", ".join(loaded.invalid))
                changes = receive(notification, loaded.plans, receiver.history)
        except Exception as exc:
            if not is_store_outage(exc):
                raise
            # Alertmanager sends it again on a 5xx: nothing is lost while the store is out.
            self._answer(503, {"error": f"the history store does not answer: {outage_text(exc)}"})
            return
        self._answer(200, {"changes": [{"change": c.change, "proposal": c.proposal_id}
                                       for c in changes]})  # fmt: skip


def make_server(receiver: Receiver, host: str, port: int) -> ThreadingHTTPServer:
    """The server, bound (``port`` 0: a free one), not yet serving."""
    server = _Server((host, port), _Handler)
    server.receiver = receiver
    server.lock = threading.Lock()
    return server


__all__ = [
    "DEFAULT_PORT",
    "HEALTH_PATH",
    "PATH",
    "READY_LINE",
    "REFUSAL_ACTION",
    "PlanCache",
    "Receiver",
    "make_server",
]
