"""Credential references, and the guard that keeps literal credentials out of plans.

A plan names where a credential lives, never the credential itself:
``env:NAME`` (an environment variable), ``file:PATH`` (a file, relative to the
plan's directory) or ``prefect:BLOCK`` (a Prefect Secret block). Anything that
looks like a credential written inline is refused, and no message here ever
contains the offending value.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler, ValidatorFunctionWrapHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from drills.errors import PermanentError
from drills.plan.files import FileRefusedError, read_regular_file
from drills.text import control_characters, is_credential_name, sensitive_params, split_url

RefKind = Literal["env", "file", "prefect"]

# A credential file is a token, a password or a key: a few kilobytes at most.
MAX_SECRET_FILE_BYTES = 1024 * 1024

REFERENCE_HINT = "give a reference such as env:NAME, file:PATH or prefect:BLOCK"
LITERAL_CREDENTIAL = f"looks like a literal credential; {REFERENCE_HINT}"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Prefect block document names: lowercase letters, digits and dashes.
_BLOCK_NAME = re.compile(r"[a-z0-9][a-z0-9-]*")
_REF_SHAPE = re.compile(r"(env|file|prefect):\S.*", re.DOTALL)


class SecretRef(str):
    """A reference to a credential: ``env:NAME``, ``file:PATH`` or ``prefect:BLOCK``.

    It is a ``str`` so that it serialises as written; ``kind`` and ``value``
    split it. The referenced credential is read only by :func:`resolve_secret`.
    """

    __slots__ = ()

    @property
    def kind(self) -> RefKind:
        return cast(RefKind, self.split(":", 1)[0])

    @property
    def value(self) -> str:
        """The variable name, file path or block name (never the credential)."""
        return self.split(":", 1)[1]

    @classmethod
    def parse(cls, text: object) -> SecretRef:
        """Return a ``SecretRef`` or raise ``ValueError`` with a message free of ``text``."""
        if not isinstance(text, str) or not text:
            raise ValueError(f"must be a credential reference; {REFERENCE_HINT}")
        kind, sep, rest = text.partition(":")
        if not sep or kind not in ("env", "file", "prefect"):
            raise ValueError(LITERAL_CREDENTIAL)
        if kind == "env" and not _ENV_NAME.fullmatch(rest):
            raise ValueError("env: must be followed by an environment variable name, e.g. env:NAME")
        if kind == "file" and not rest.strip():
            raise ValueError("file: must be followed by a path, e.g. file:secrets/token")
        if kind == "file" and control_characters(rest):
            # A NUL cannot be in a path at all; other controls are a paste accident.
            raise ValueError("file: path contains a control character (such as NUL)")
        if kind == "prefect" and not _BLOCK_NAME.fullmatch(rest):
            raise ValueError(
                "prefect: must be followed by a Secret block name "
                "(lowercase letters, digits and dashes), e.g. prefect:registry-token"
            )
        return cls(text)

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def validate(value: object) -> SecretRef:
            return value if isinstance(value, SecretRef) else cls.validated(value)

        return core_schema.no_info_plain_validator_function(
            validate, serialization=core_schema.to_string_ser_schema()
        )

    @classmethod
    def validated(cls, value: object) -> SecretRef:
        """:meth:`parse` for a pydantic validator: its error is a validation error."""
        try:
            return cls.parse(value)
        except ValueError as exc:
            raise PydanticCustomError(
                "plan_secret_ref", "{message}", {"message": str(exc)}
            ) from None

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return {
            "type": "string",
            "pattern": r"^(env:[A-Za-z_][A-Za-z0-9_]*|file:\S.*|prefect:[a-z0-9][a-z0-9-]*)$",
            "description": "A credential reference: env:NAME, file:PATH or prefect:BLOCK.",
        }


def reference_when_shaped(value: object, handler: ValidatorFunctionWrapHandler) -> object:
    """Validator for a field that takes a literal or a reference (a user name): a value
    written as ``env:``, ``file:`` or ``prefect:`` is a reference and is checked as one,
    so a mistyped reference is an error, never silently a literal. Anything else goes
    to ``handler`` (the literal's own checks)."""
    if isinstance(value, str) and value.partition(":")[0] in ("env", "file", "prefect"):
        return SecretRef.validated(value)
    return handler(value)


def resolve_secret(ref: SecretRef, base_dir: Path) -> str:
    """Read the credential that ``ref`` names. Errors name the reference, never the value.

    Raises :class:`drills.errors.PermanentError` (a ``TargetError``) when it cannot be read.
    """
    target = f"secret reference {ref}"
    if ref.kind == "env":
        value = os.environ.get(ref.value)
        if value is None:
            raise PermanentError(target, f"environment variable {ref.value} is not set")
        if not value:
            raise PermanentError(target, f"environment variable {ref.value} is empty")
        return value
    if ref.kind == "file":
        return _read_secret_file(target, base_dir, ref.value)
    return _load_prefect_secret(target, ref.value)


def _read_secret_file(target: str, base_dir: Path, raw_path: str) -> str:
    path = Path(raw_path).expanduser()
    if not path.is_absolute():
        path = base_dir / path
    try:
        text = read_regular_file(path, MAX_SECRET_FILE_BYTES).decode("utf-8")
    except FileRefusedError as exc:
        raise PermanentError(target, f"{path} {exc.reason}") from None
    except FileNotFoundError:
        raise PermanentError(target, f"file {path} does not exist") from None
    except PermissionError:
        raise PermanentError(target, f"cannot read file {path}: permission denied") from None
    except UnicodeDecodeError:
        raise PermanentError(target, f"file {path} is not UTF-8 text") from None
    except OSError as exc:
        raise PermanentError(target, f"cannot read file {path}: {exc.strerror}") from None
    except ValueError:  # a path the OS cannot take
        raise PermanentError(target, "the file path is not valid") from None
    value = text.rstrip("\r\n")
    if not value:
        raise PermanentError(target, f"file {path} is empty")
    return value


def prefect_api_url() -> str | None:
    """The Prefect API URL that Prefect would use here, or None when none is configured.

    With none, Prefect's client would start a temporary server of its own (tens of
    seconds, and telemetry) and look the block up in that empty server: never useful.
    """
    configured = os.environ.get("PREFECT_API_URL", "").strip()
    if configured:
        return configured
    # Profiles, prefect.toml, .env and pyproject.toml can set it too; Prefect's settings
    # read them all. Importing the settings starts nothing. Prefect is imported here, and
    # only when a `prefect:` reference is resolved: the one place the core may use it
    # (the exception is written down in .importlinter).
    try:
        from prefect.settings import get_current_settings
    except ImportError:
        return None
    url = get_current_settings().api.url
    return str(url) if url else None


def _load_prefect_secret(target: str, block: str) -> str:
    if prefect_api_url() is None:
        raise PermanentError(
            target,
            "no Prefect server is configured (set PREFECT_API_URL, or select a Prefect "
            "profile that sets it)",
        )
    try:
        from prefect.blocks.system import Secret
    except ImportError:
        raise PermanentError(target, "Prefect is not installed") from None
    try:
        # _sync: load synchronously even when called from inside an event loop.
        loaded: Any = Secret.load(block, _sync=True)  # type: ignore[call-arg]
        value = loaded.get()
    except ValueError as exc:
        # Prefect raises ValueError for an unknown block name; its text names the block only.
        raise PermanentError(target, f"Prefect Secret block could not be loaded: {exc}") from None
    except Exception as exc:
        # Any client failure (server down, auth) is reported by type only: the
        # message of an arbitrary exception is not guaranteed to be free of the value.
        raise PermanentError(
            target, f"Prefect Secret block could not be loaded ({type(exc).__name__})"
        ) from exc
    if not isinstance(value, str) or not value:
        raise PermanentError(target, "Prefect Secret block is empty or not a string")
    return value


# --- the literal-credential guard -------------------------------------------

_AWS_KEY_ID = re.compile(r"(?<![A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])")
# Bounded repetitions keep these linear on the multi-megabyte strings a fuzzer sends.
_PEM_PRIVATE = re.compile(r"-----BEGIN (?:[A-Z0-9]{1,20} ){0,4}PRIVATE KEY(?: BLOCK)?-----")


def is_credential_key(key: str) -> bool:
    """True for a key named like a credential: ``password``, ``api_key``, ``AUTH_TOKEN``...
    (the same names as for query parameters: :func:`drills.text.is_credential_name`)."""
    return is_credential_name(key)


def looks_like_reference(value: str) -> bool:
    return bool(_REF_SHAPE.fullmatch(value))


def credential_pattern(text: str) -> str | None:
    """Name the kind of credential found in ``text`` (never the credential), or None."""
    if len(text) >= 20 and _AWS_KEY_ID.search(text):
        return "looks like an AWS access key id; " + REFERENCE_HINT
    if "-----BEGIN" in text and _PEM_PRIVATE.search(text):
        return "contains a PEM private key; " + REFERENCE_HINT
    return url_credential(text)


def url_credential(text: str) -> str | None:
    """Describe a credential carried by a URL anywhere in ``text``: a password in its
    user info, or a credential-like query parameter (``sig=``, ``access_token=``...)."""
    # Cheap tests first: almost every string has neither "://" nor "=".
    has_url, has_param = "://" in text, "=" in text
    if not has_url and not has_param:
        return None
    if has_url and "@" in text and _url_with_password(text):
        return "contains a URL with a password (user:password@); " + REFERENCE_HINT
    if has_param:
        for match in _QUERY_PAIR.finditer(text):
            names = sensitive_params(match.group(0)[1:])
            if names:
                return (
                    f"contains a URL whose query parameter {_param_name(names[0])} "
                    f"carries a credential; {REFERENCE_HINT}"
                )
    return None


# `?name=value`, `&name=value`, `#name=value` (OAuth puts tokens in fragments), `;name=value`.
_QUERY_PAIR = re.compile(r"[?&#;][A-Za-z0-9_.%~-]{1,64}=[^&#;\s]+")


def _param_name(name: str) -> str:
    # The name says which parameter to remove; it is the value that is the credential.
    if len(name) > 40 or _AWS_KEY_ID.search(name) or not name.isprintable():
        return "(name not shown)"
    return f"`{name}`"


def _url_with_password(text: str) -> bool:
    # Word by word, so the work is linear in the text whatever it holds; a password
    # may contain '/', which ends RFC 3986's authority, so split_url reads loosely.
    for word in text.split():
        if "://" not in word or "@" not in word:
            continue
        for piece in word.split("://")[1:]:
            parts = split_url("x://" + piece)
            if parts and ":" in parts[1]:
                return True
    return False


Path_ = tuple[Any, ...]


def _kubernetes_key(path: Path_) -> bool:
    """``key`` in a validation job's inline Job is Kubernetes' own (a toleration's, a
    secretKeyRef's), never a credential; every other name and string is still checked."""
    return (
        len(path) >= 4
        and path[0] == "validation_jobs"
        and path[2] == "manifest"
        and (path[-1] == "key")
    )


def find_literal_credentials(data: Any, path: Path_ = ()) -> Iterator[tuple[Path_, str, bool]]:
    """Yield ``(path, message, at_key)`` for every inline credential anywhere in plan data.

    Checked: credential-looking strings (AWS key ids, PEM private keys, URLs with a
    password or a credential in their query), in keys and values alike; and
    credential-named keys (``password``, ``api_key``...) holding a scalar that is not
    a reference. ``data`` is decoded data (what the models receive), never source text.
    """
    if isinstance(data, dict):
        for key, value in data.items():
            here = (*path, key)
            if isinstance(key, str):
                found = credential_pattern(key)
                if found:
                    yield here, f"this key {found}", True
                    continue
                named = is_credential_key(key) and not _kubernetes_key(here)
                if named and _is_literal(value):
                    yield here, LITERAL_CREDENTIAL, False
                    continue
            yield from find_literal_credentials(value, here)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from find_literal_credentials(item, (*path, index))
    elif isinstance(data, str):
        found = credential_pattern(data)
        if found:
            yield path, found, False


def _is_literal(value: Any) -> bool:
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, int | float):
        return True
    return isinstance(value, str) and bool(value) and not looks_like_reference(value)


def safe_repr(value: object, limit: int = 40) -> str:
    """Quote a short, harmless input for an error message; describe anything else.

    Values of enum-like fields ("critcal") help an operator; a value that looks
    like a credential, or is long enough to be one, is never echoed.
    """
    if isinstance(value, str):
        if len(value) > limit or credential_pattern(value) or is_credential_key(value):
            return "a value that is not shown"
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float) and len(repr(value)) <= limit:
        return repr(value)
    return describe(value)


def describe(value: object) -> str:
    """The kind of a YAML value in an operator's words: "a list", "a mapping"..."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__} value"
