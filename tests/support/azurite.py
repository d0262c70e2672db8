"""Azurite, the Azure Storage emulator (npm, installed by `make venv` from package.json):
its blob service on a free loopback port, with its own state directory, per test worker."""

from __future__ import annotations

import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from drills.ports import free_port

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / "node_modules" / ".bin" / "azurite-blob"
# Azurite's one account and its key, as its documentation publishes them.
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
KEY_ENV = "DRILLS_TEST_AZURITE_KEY"
START_TIMEOUT_S = 60.0


def azurite_binary() -> Path:
    """The installed azurite-blob; the test fails, naming the install step, without it."""
    if not BINARY.exists():
        pytest.fail(f"{BINARY.relative_to(ROOT)} is missing: run `make venv` (npm ci)")
    return BINARY


@dataclass
class AzuriteServer:
    state_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    _proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def account_url(self) -> str:
        return f"http://{self.host}:{self.port}/{ACCOUNT}"

    def settings(self, key_ref: str = f"env:{KEY_ENV}") -> dict[str, Any]:
        """The azure-blob provider's settings for this account (the key by reference)."""
        return {"account_url": self.account_url, "account_key": key_ref}

    def start(self) -> None:
        self.port = self.port or free_port(self.host)
        log = (self.state_dir / "azurite.log").open("wb")
        self._proc = subprocess.Popen(
            [
                str(azurite_binary()),
                "--blobHost", self.host,
                "--blobPort", str(self.port),
                "--location", str(self.state_dir),
                "--skipApiVersionCheck",
                "--loose",
                "--silent",
                "--disableTelemetry",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise RuntimeError(f"azurite exited: {self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"azurite did not listen within {START_TIMEOUT_S:.0f} s")

    def log_tail(self) -> str:
        path = self.state_dir / "azurite.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)

    def client(self) -> Any:
        """An SDK client with the account key, for seeding what a test reads."""
        from azure.storage.blob import BlobServiceClient

        credential = {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY}
        return BlobServiceClient(self.account_url, credential=credential, retry_total=0)
