"""The ``azure-blob`` provider's settings, as a plan gives them, made into a client.

    objects:
      provider: azure-blob
      settings:
        account_url: https://myaccount.blob.core.windows.net   # or Azurite's URL
        account_key: env:AZURE_STORAGE_KEY                     # a reference, never the key
      # or: settings: {connection_string: file:secrets/azure-dr.conn}

The account name is read from ``account_url`` (``myaccount.blob...``, or the first path
segment on Azurite and other path-style endpoints) unless ``account_name`` gives it.
Every credential is a reference (``env:``, ``file:``, ``prefect:``), resolved when the
store is built and handed to the SDK only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from drills.errors import PermanentError
from drills.targets.provider_context import ProviderContext

SETTINGS = ("account_url", "account_name", "account_key", "connection_string", "timeout_s")
CONNECT_TIMEOUT_S = 5.0
READ_TIMEOUT_S = 30.0


def _text(settings: Mapping[str, Any], name: str, target: str) -> str | None:
    value = settings.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise PermanentError(target, f"settings.{name} must be a non-empty string")
    return value


def _reference(where: ProviderContext, name: str, target: str) -> str | None:
    value = _text(where.settings, name, target)
    if value is None:
        return None
    try:
        return where.secret(value)
    except ValueError as exc:  # a literal credential: refused without repeating it
        raise PermanentError(target, f"settings.{name} {exc}") from None


def account_name(url: str) -> str:
    """The account an account URL names: path style (Azurite) or host style (Azure)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    first = parts.path.strip("/").split("/")[0]
    path_style = host.replace(".", "").isdigit() or host in ("localhost", "[::1]", "::1")
    return first if path_style and first else host.split(".")[0]


def client_for(where: ProviderContext) -> Any:
    """A ``BlobServiceClient`` for the settings: unknown or missing ones refused in one line."""
    from azure.storage.blob import BlobServiceClient

    target = f"azure-blob {where.role}"
    settings = where.settings
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise PermanentError(
            target, f"unknown settings {', '.join(unknown)}; known: {', '.join(SETTINGS)}"
        )
    timeout = settings.get("timeout_s", where.timeout_s or READ_TIMEOUT_S)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        raise PermanentError(target, "settings.timeout_s must be a positive number of seconds")
    # The SDK's own retries would hide an unreachable account behind minutes of back-off:
    # drills retries (drills.targets.retry), and judges.
    options: dict[str, Any] = {
        "connection_timeout": min(CONNECT_TIMEOUT_S, float(timeout)),
        "read_timeout": float(timeout),
        "retry_total": 0,
    }
    if "connection_string" in settings:
        if "account_key" in settings or "account_url" in settings:
            raise PermanentError(
                target, "give settings.connection_string alone, or account_url and account_key"
            )
        conn = _reference(where, "connection_string", target)
        assert conn is not None
        try:
            return BlobServiceClient.from_connection_string(conn, **options)
        except ValueError:  # its message may quote the string: not repeated
            raise PermanentError(
                target, "settings.connection_string is not an Azure Storage connection string"
            ) from None
    url = _text(settings, "account_url", target)
    if url is None or urlsplit(url).scheme not in ("http", "https") or "?" in url:
        raise PermanentError(
            target,
            "settings.account_url must be the account's blob URL "
            "(https://ACCOUNT.blob.core.windows.net), without a query",
        )
    key = _reference(where, "account_key", target)
    if key is None:
        raise PermanentError(
            target, "settings.account_key (a reference) or settings.connection_string is needed"
        )
    name = _text(settings, "account_name", target) or account_name(url)
    credential = {"account_name": name, "account_key": key}
    return BlobServiceClient(url, credential=credential, **options)
