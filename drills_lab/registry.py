"""The CNCF distribution registry (Debian's ``docker-registry``) as a lab site's registry.

Image sync is one of the things a drill most often finds broken, so the lab runs the
same registry software many private sites run, rather than an imitation of its API.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import secrets
from pathlib import Path
from typing import NamedTuple

import httpx
import yaml

from drills.errors import LabError
from drills_lab.loopback import loopback_client
from drills_lab.procs import ManagedProcess, free_port, require_binary

log = logging.getLogger("drills_lab.registry")

_START_TIMEOUT = 10.0
# The lowest cost Go's bcrypt accepts: enough for a lab, and fast to verify per request.
_BCRYPT_COST = 4


def bcrypt_hash(password: str) -> str:
    """Hash ``password`` with bcrypt through the system's libcrypt (libxcrypt).

    distribution reads only bcrypt htpasswd entries. Neither the ``bcrypt`` package nor
    ``htpasswd`` (apache2-utils) is a dependency, but libxcrypt, which every Debian
    system has, implements bcrypt.
    """
    if "\n" in password or "\x00" in password:
        raise LabError("registry password may not contain a newline or NUL")
    name = ctypes.util.find_library("crypt")
    if name is None:
        raise LabError("libcrypt not found; it is needed to write a bcrypt htpasswd")
    lib = ctypes.CDLL(name)
    lib.crypt_gensalt.restype = ctypes.c_char_p
    lib.crypt_gensalt.argtypes = [ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int]
    lib.crypt.restype = ctypes.c_char_p
    lib.crypt.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    salt = lib.crypt_gensalt(b"$2b$", _BCRYPT_COST, None, 0)
    hashed = lib.crypt(password.encode("utf-8"), salt) if salt else None
    # libxcrypt signals failure with NULL or a string starting with "*".
    if not hashed or not hashed.startswith(b"$2b$"):
        raise LabError(f"libcrypt ({name}) does not support bcrypt")
    return str(hashed.decode("ascii"))


class RegistryServer:
    """A ``docker-registry serve`` with filesystem storage in ``workdir``.

    With ``htpasswd=(user, password)`` the registry asks for basic auth; the password
    only ever lands in ``workdir`` as a bcrypt hash.
    """

    def __init__(
        self,
        workdir: Path,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        htpasswd: tuple[str, str] | None = None,
        name: str = "registry",
    ) -> None:
        self.workdir = Path(workdir)
        self.host = host
        self.port = port or free_port(host)
        self.name = name
        if htpasswd is not None and (not htpasswd[0] or ":" in htpasswd[0]):
            raise LabError(f"invalid registry user name {htpasswd[0]!r}")
        self.htpasswd = htpasswd
        self._process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def config_path(self) -> Path:
        return self.workdir / "config.yml"

    @property
    def storage_path(self) -> Path:
        return self.workdir / "storage"

    @property
    def log_path(self) -> Path:
        return self.workdir / "registry.log"

    def start(self) -> None:
        """Write the config, start the registry and wait until ``/v2/`` answers."""
        if self._process is not None and self._process.running():
            return
        binary = require_binary("docker-registry", "docker-registry")
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.storage_path.mkdir(exist_ok=True)
        self._write_config()
        # distribution lets REGISTRY_* variables override any config key; an inherited
        # one (say REGISTRY_HTTP_ADDR) would silently move or reconfigure the lab.
        env = {key: value for key, value in os.environ.items() if not key.startswith("REGISTRY_")}
        process = ManagedProcess(
            f"{self.name} {self.host}:{self.port}",
            [binary, "serve", str(self.config_path)],
            log_path=self.log_path,
            env=env,
            cwd=self.workdir,
        )
        process.start(self._answers, timeout=_START_TIMEOUT)
        self._process = process
        log.info("%s serving on %s", self.name, self.url)

    def stop(self) -> None:
        """Stop the registry; storage stays in ``workdir``. Idempotent."""
        if self._process is not None:
            self._process.stop()
            self._process = None

    def _answers(self) -> bool:
        try:
            response = loopback_client().get(f"{self.url}/v2/", timeout=0.5)
        except httpx.TransportError:
            return False
        expected = 401 if self.htpasswd else 200
        return response.status_code == expected

    def _write_config(self) -> None:
        config: dict[str, object] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.storage_path.resolve())},
                "delete": {"enabled": True},
                # The background purge would only add a goroutine and log lines here.
                "maintenance": {"uploadpurging": {"enabled": False}},
            },
            # No debug section: its listener would need a second port per registry.
            "http": {
                "addr": f"{self.host}:{self.port}",
                # Set here so the registry does not warn that it generated one.
                "secret": secrets.token_hex(16),
                "headers": {"X-Content-Type-Options": ["nosniff"]},
            },
        }
        if self.htpasswd is not None:
            user, password = self.htpasswd
            htpasswd_path = self.workdir / "htpasswd"
            fd = os.open(htpasswd_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(f"{user}:{bcrypt_hash(password)}\n")
            config["auth"] = {
                "htpasswd": {"realm": f"drills-{self.name}", "path": str(htpasswd_path.resolve())}
            }
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            yaml.safe_dump(config, handle, sort_keys=False)

    def __enter__(self) -> RegistryServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"RegistryServer({self.name!r} at {self.url})"


class RegistryPair(NamedTuple):
    """The two sites' registries."""

    primary: RegistryServer
    dr: RegistryServer
