"""A Docker-registry token service for tests, in front of a real distribution registry.

distribution's ``auth: token`` verifies JWTs against a ``rootcertbundle``: the JWT's
``kid`` header must be the libtrust key id of a certificate's public key. This
module makes an EC P-256 key and its self-signed certificate, signs ES256 tokens,
serves them at ``/token`` to clients with the right basic credentials, and runs a
``docker-registry`` configured to trust them.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import secrets
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

from drills_lab.httpserve import serve_in_thread
from drills_lab.procs import free_port
from drills_lab.registry import RegistryServer

SERVICE = "drills-test-registry"
ISSUER = "drills-test-issuer"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def libtrust_key_id(key: ec.EllipticCurvePublicKey) -> str:
    """The key id distribution's libtrust derives: base32 of SHA-256(DER)[:30], in 4s."""
    der = key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    encoded = base64.b32encode(hashlib.sha256(der).digest()[:30]).decode("ascii").rstrip("=")
    return ":".join(encoded[i : i + 4] for i in range(0, len(encoded), 4))


class TokenIssuer:
    def __init__(self) -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
        now = dt.datetime.now(dt.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(days=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .sign(self.key, hashes.SHA256())
        )
        self.kid = libtrust_key_id(self.key.public_key())

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def mint(self, scope: str, *, subject: str = "tester", lifetime: int = 300) -> str:
        """An ES256 JWT granting ``scope`` (``repository:NAME:ACTIONS``, or "" for none)."""
        access = []
        if scope:
            kind, name_actions = scope.split(":", 1)
            name, _, actions = name_actions.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        header = {"typ": "JWT", "alg": "ES256", "kid": self.kid}
        claims = {
            "iss": ISSUER,
            "sub": subject,
            "aud": SERVICE,
            "exp": now + lifetime,
            "nbf": now - 10,
            "iat": now,
            "jti": secrets.token_hex(8),
            "access": access,
        }
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        der = self.key.sign(signing_input.encode("ascii"), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        return f"{signing_input}.{_b64(signature)}"


class TokenService:
    """``GET /token?service=…&scope=…`` with basic credentials → ``{"token": …}``."""

    def __init__(self, issuer: TokenIssuer, user: str, password: str) -> None:
        self.issuer = issuer
        self.requests: Counter[str] = Counter()  # scope → how many tokens were asked for
        self._lock = threading.Lock()
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        service = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                scope = " ".join(query.get("scope", []))
                with service._lock:
                    service.requests[scope] += 1
                if self.headers.get("Authorization") != expected:
                    self._send(401, {"errors": [{"code": "UNAUTHORIZED"}]})
                    return
                token = issuer.mint(scope)
                self._send(200, {"token": token, "access_token": token, "expires_in": 300})

            def _send(self, status: int, body: object) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.port = free_port()
        self._server, self._thread = serve_in_thread("127.0.0.1", self.port, Handler, "token")
        self.realm = f"http://127.0.0.1:{self.port}/token"

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class TokenRegistry(RegistryServer):
    """distribution with ``auth: token``, serving an existing registry's storage."""

    def __init__(self, workdir: Path, storage: Path, realm: str, issuer: TokenIssuer) -> None:
        super().__init__(workdir, name="token-registry")
        self._shared_storage = storage
        self._realm = realm
        self._issuer = issuer

    def _write_config(self) -> None:
        super()._write_config()
        bundle = self.workdir / "token-ca.pem"
        bundle.write_bytes(self._issuer.cert_pem())
        config = yaml.safe_load(self.config_path.read_text())
        config["storage"]["filesystem"]["rootdirectory"] = str(self._shared_storage.resolve())
        config["auth"] = {
            "token": {
                "realm": self._realm,
                "service": SERVICE,
                "issuer": ISSUER,
                "rootcertbundle": str(bundle.resolve()),
            }
        }
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

    def _answers(self) -> bool:
        try:
            response = httpx.get(f"{self.url}/v2/", timeout=0.5, trust_env=False)
        except httpx.TransportError:
            return False
        return response.status_code == 401
