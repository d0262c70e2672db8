"""Scalar field types of a drill plan: names, URLs, DNS values, cron and time zones.

Each is an ``Annotated`` type whose validator raises a ``plan_value`` error with
a message written for an operator. Messages echo the input only through
:func:`drills.plan.refs.safe_repr`, which never shows anything credential-like.
"""

from __future__ import annotations

import ipaddress
import re
import zoneinfo
from collections.abc import Callable
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from drills.plan.refs import safe_repr


def invalid(message: str) -> PydanticCustomError:
    """A validation error whose text is exactly ``message``."""
    return PydanticCustomError("plan_value", "{message}", {"message": message})


def _checked(check: Callable[[str], str]) -> AfterValidator:
    def run(value: str) -> str:
        try:
            return check(value)
        except ValueError as exc:
            raise invalid(str(exc)) from None

    return AfterValidator(run)


_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
_SUBDOMAIN = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")
_DNS_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")


def check_label(value: str) -> str:
    if not _LABEL.fullmatch(value):
        raise ValueError(
            "must be 1–63 lowercase letters, digits or '-', starting and ending with a "
            "letter or digit"
        )
    return value


def check_k8s_name(value: str) -> str:
    if len(value) > 253 or not _SUBDOMAIN.fullmatch(value):
        raise ValueError(
            "is not a valid Kubernetes name (lowercase letters, digits, '-' and '.', "
            "starting and ending with a letter or digit)"
        )
    return value


def check_bucket(value: str) -> str:
    if not 3 <= len(value) <= 63 or not _SUBDOMAIN.fullmatch(value):
        raise ValueError("is not a valid bucket name (3–63 lowercase letters, digits, '-' and '.')")
    return value


def check_region(value: str) -> str:
    if not re.fullmatch(r"[a-z]{2}(-[a-z]+){1,2}-\d{1,2}", value):
        raise ValueError("is not an AWS region name such as us-east-1")
    return value


def check_http_url(value: str) -> str:
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        raise ValueError("is not a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("must name a host, e.g. https://host:port/path")
    if port == 0:
        raise ValueError("port 0 is not a valid port")
    if any(c.isspace() for c in value):
        raise ValueError("must not contain spaces")
    return value


def check_fqdn(value: str) -> str:
    """Validate a DNS name and return it lowercased and absolute (with a trailing dot)."""
    name = value.lower().rstrip(".") if value != "." else ""
    if not name or len(name) > 253 or not all(_DNS_LABEL.fullmatch(p) for p in name.split(".")):
        raise ValueError("is not a valid DNS name such as api.example.com.")
    return name + "."


def check_dns_server(value: str) -> str:
    host, port = value, None
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ("" if rest else None)
    elif value.count(":") == 1:
        host, port = value.split(":")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            check_fqdn(host)
        except ValueError:
            raise ValueError("must be HOST or HOST:PORT, e.g. 10.0.0.53:53") from None
    number = small_int(port) if port is not None else None
    if port is not None and (number is None or not 0 < number < 65536):
        raise ValueError("must be HOST or HOST:PORT with a port from 1 to 65535")
    return value


def check_image(value: str) -> str:
    if len(value) > 512 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]*", value):
        raise ValueError("is not an image reference such as registry/path/name:tag")
    return value


def check_prefix(value: str) -> str:
    if value.startswith("/") or len(value) > 1024 or any(c in value for c in "\r\n\0"):
        raise ValueError("must be a key prefix such as runs/ (no leading '/', one line)")
    return value


def check_timezone(value: str) -> str:
    try:
        zoneinfo.ZoneInfo(value)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {safe_repr(value)}; use an IANA name such as UTC or Europe/Berlin"
        ) from None
    return value


def _registry_id(value: Any) -> Any:
    # YAML reads 123456789012 as a number; accept it only when no leading zero can
    # have been lost (or an octal reading have changed it).
    if isinstance(value, int) and not isinstance(value, bool):
        if len(str(value)) == 12:
            return str(value)
        raise invalid("must be the 12-digit AWS account id, in quotes, e.g. '012345678901'")
    return value


def check_registry_id(value: str) -> str:
    if not re.fullmatch(r"\d{12}", value):
        raise ValueError("must be the 12-digit AWS account id, e.g. '012345678901'")
    return value


def check_hosted_zone(value: str) -> str:
    zone_id = value.removeprefix("/hostedzone/")
    if not re.fullmatch(r"[A-Z0-9]{1,32}", zone_id):
        raise ValueError("is not a Route 53 hosted zone id such as Z0123456789ABCDEFGHIJ")
    return zone_id


def check_aws_secret_id(value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9/_+=.@:-]{1,2048}", value):
        raise ValueError("is not a Secrets Manager secret name or ARN")
    return value


def small_int(text: str) -> int | None:
    """``int(text)`` for up to six ASCII digits, else None (no unicode digits, no huge numbers)."""
    return int(text) if re.fullmatch(r"[0-9]{1,6}", text) else None


# --- cron ---------------------------------------------------------------------

_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
_DAYS = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
# (field name, lowest, highest, names for values starting at `lowest`)
_CRON_FIELDS: tuple[tuple[str, int, int, list[str]], ...] = (
    ("minute", 0, 59, []),
    ("hour", 0, 23, []),
    ("day-of-month", 1, 31, []),
    ("month", 1, 12, _MONTHS),
    ("day-of-week", 0, 7, _DAYS),
)
_CRON_MACROS = {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}


def check_cron(value: str) -> str:
    """Validate a five-field cron expression (ranges, lists, steps, month and day names)."""
    text = " ".join(value.split())
    if text.lower() in _CRON_MACROS:
        return text
    fields = text.split(" ")
    if len(fields) != 5:
        raise ValueError(
            f"cron must have 5 fields (minute hour day-of-month month day-of-week), "
            f"got {len(fields)}"
        )
    for part, (name, low, high, names) in zip(fields, _CRON_FIELDS, strict=True):
        for item in part.split(","):
            _check_cron_item(item, name, low, high, names)
    return text


def _check_cron_item(item: str, name: str, low: int, high: int, names: list[str]) -> None:
    where = f"cron {name} field"
    body, slash, step = item.partition("/")
    steps = small_int(step)
    if slash and (steps is None or not 1 <= steps <= high - low + 1):
        raise ValueError(
            f"{where}: step {safe_repr(step)} must be a number from 1 to {high - low + 1}"
        )
    if body == "*":
        return
    first, dash, last = body.partition("-")
    start = _cron_value(first, where, low, high, names)
    if dash:
        end = _cron_value(last, where, low, high, names)
        if end < start:
            raise ValueError(f"{where}: range {safe_repr(body)} runs backwards")


def _cron_value(text: str, where: str, low: int, high: int, names: list[str]) -> int:
    if text.lower() in names:
        return names.index(text.lower()) + low
    number = small_int(text)
    if number is None:
        hint = f" or a name ({names[0]}–{names[-1]})" if names else ""
        raise ValueError(f"{where}: {safe_repr(text)} is not a number from {low} to {high}{hint}")
    if not low <= number <= high:
        raise ValueError(f"{where}: {number} is out of range {low}–{high}")
    return number


# --- the annotated types --------------------------------------------------------

PlanName = Annotated[str, _checked(check_label)]
Label = Annotated[str, _checked(check_label)]
K8sNamespace = Annotated[str, _checked(check_label)]
K8sName = Annotated[str, _checked(check_k8s_name)]
BucketName = Annotated[str, _checked(check_bucket)]
AwsRegion = Annotated[str, _checked(check_region)]
HttpUrl = Annotated[str, _checked(check_http_url), Field(json_schema_extra={"format": "uri"})]
DnsName = Annotated[str, _checked(check_fqdn)]
DnsServer = Annotated[str, _checked(check_dns_server)]
ObjectPrefix = Annotated[str, _checked(check_prefix)]
ImageRef = Annotated[str, _checked(check_image)]
TimeZone = Annotated[str, _checked(check_timezone)]
CronExpr = Annotated[str, _checked(check_cron)]
AwsAccountId = Annotated[str, BeforeValidator(_registry_id), _checked(check_registry_id)]
HostedZoneId = Annotated[str, _checked(check_hosted_zone)]
AwsSecretId = Annotated[str, _checked(check_aws_secret_id)]
ShortText = Annotated[str, Field(min_length=1, max_length=200)]
