"""Scalar field types of a drill plan: names, URLs, DNS values, cron and time zones.

Each is an ``Annotated`` type whose validator raises a ``plan_value`` error with
a message written for an operator. Messages echo the input only through
:func:`drills.plan.refs.safe_repr`, which never shows anything credential-like.
"""

from __future__ import annotations

import datetime as dt
import functools
import ipaddress
import re
import zoneinfo
from collections.abc import Callable
from pathlib import Path, PurePath
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, Field, WrapValidator
from pydantic_core import PydanticCustomError

from drills.plan import cron
from drills.plan.cron import small_int
from drills.plan.durations import format_duration
from drills.plan.refs import SecretRef, reference_when_shaped, safe_repr
from drills.plan.urls import check_http_url
from drills.text import control_characters, visible

# A drill fences the primary each time it runs; more often than this is a mistake.
MIN_DRILL_INTERVAL = dt.timedelta(hours=1)


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


_PROVIDER_NAME = re.compile(r"[a-z][a-z0-9._-]{0,62}")


def check_provider(value: str) -> str:
    if not _PROVIDER_NAME.fullmatch(value):
        raise ValueError(
            "must be a provider's name: 1–63 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter (`drills providers list` shows those installed)"
        )
    return value


_IMAGE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*(/[A-Za-z0-9._-]+)*(/\*)?")


def check_image_pattern(value: str) -> str:
    if len(value) > 256 or not _IMAGE_PATTERN.fullmatch(value):
        raise ValueError(
            "must be an image name without tag, HOST/PATH, or a subtree HOST/PATH/* "
            "(one '*', at the end)"
        )
    return value


def check_prefix(value: str) -> str:
    problem = _control_problem(value, "")
    if problem:
        raise ValueError(problem)
    if value.startswith("/") or len(value) > 1024:
        raise ValueError("must be a key prefix such as runs/ (no leading '/', one line)")
    return value


# Files of the zone database that are not zones of their own: `localtime` is whatever
# this machine is set to (another machine runs the schedule), `posixrules` a default for
# POSIX TZ strings, `Factory` a placeholder that means "not set".
_NOT_ZONES = frozenset({"localtime", "posixrules", "Factory"})


@functools.cache
def _iana_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones()) - _NOT_ZONES


def check_timezone(value: str) -> str:
    """An IANA zone name as the zone database lists it: never a path, a file beside the
    zones, or another spelling that one machine's file system happens to accept."""
    zones = _iana_zones()
    if value in zones:
        return value
    near = next((z for z in sorted(zones) if z.lower() == value.lower()), None)
    hint = f"did you mean {near}? " if near else ""
    raise ValueError(
        f"unknown time zone {safe_repr(value)}; {hint}use an IANA name such as UTC or Europe/Berlin"
    )


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


# --- text and paths -------------------------------------------------------------


def _control_problem(value: str, allow: str) -> str | None:
    found = control_characters(value, allow)
    if not found:
        return None
    index, char = found[0]
    return (
        f"contains a control character ({visible(char)} at character {index + 1}); "
        "only printable text is allowed here"
    )


def check_printable(value: str) -> str:
    """One line of printable text: no ESC sequences, NULs or bidi overrides."""
    problem = _control_problem(value, "")
    if problem:
        raise ValueError(problem)
    return value


def check_text(value: str) -> str:
    """Printable text that may run over several lines (newlines and tabs allowed)."""
    problem = _control_problem(value, "\n\t")
    if problem:
        raise ValueError(problem)
    return value


def _file_path(value: Any) -> Any:
    if isinstance(value, str | PurePath):
        text = str(value)
        if not text.strip():
            raise invalid("must be a file path, not empty")
        found = control_characters(text)
        if found:
            index, char = found[0]
            raise invalid(
                f"a file path cannot contain a control character ({visible(char)} at "
                f"character {index + 1})"
            )
        if len(text) > 4096:
            raise invalid("is longer than any file path (4096 characters)")
    return value


def check_checkpoint_place(value: str) -> str:
    """A directory, or s3://BUCKET[/PREFIX]: where evidence checkpoints are kept."""
    text = check_printable(value).strip()
    if not text:
        raise ValueError("must be a directory or s3://bucket/prefix, not empty")
    if text.startswith("s3://"):
        bucket, _, prefix = text.removeprefix("s3://").partition("/")
        check_bucket(bucket)
        check_prefix(prefix)
    elif "://" in text:
        raise ValueError("must be a directory or s3://bucket/prefix (no other scheme)")
    if len(text) > 1024:
        raise ValueError("is longer than 1024 characters")
    return text


def check_cron(value: str) -> str:
    """Validate a cron expression, and that it fires, and not more often than hourly."""
    text = cron.normalise(value)
    timing = cron.cadence(text)
    if not timing.fires:
        raise ValueError(
            f"never fires: no day in the next {cron.HORIZON_DAYS // 366} years matches its "
            "day-of-month, month and day-of-week"
        )
    if timing.shortest is not None and timing.shortest < MIN_DRILL_INTERVAL:
        raise ValueError(
            f"fires every {format_duration(timing.shortest.total_seconds())}; each drill "
            "fences the primary and fails over, so a schedule may fire at most hourly "
            "(drills are usually weekly to quarterly)"
        )
    return text


# --- the annotated types --------------------------------------------------------

PlanName = Annotated[str, _checked(check_label)]
Label = Annotated[str, _checked(check_label)]
K8sNamespace = Annotated[str, _checked(check_label)]
K8sName = Annotated[str, _checked(check_k8s_name)]
BucketName = Annotated[str, _checked(check_bucket)]
AwsRegion = Annotated[str, _checked(check_region)]
HttpUrl = Annotated[str, _checked(check_http_url), Field(json_schema_extra={"format": "uri"})]
FilePath = Annotated[Path, BeforeValidator(_file_path)]
DnsName = Annotated[str, _checked(check_fqdn)]
DnsServer = Annotated[str, _checked(check_dns_server)]
ObjectPrefix = Annotated[str, _checked(check_prefix)]
ImageRef = Annotated[str, _checked(check_image)]
ProviderName = Annotated[str, _checked(check_provider)]
# images.remap: a name without tag (HOST/PATH), or a subtree (HOST/PATH/*).
ImagePattern = Annotated[
    str,
    Field(json_schema_extra={"examples": ["registry.primary/team/*"]}),
    _checked(check_image_pattern),
]
TimeZone = Annotated[str, _checked(check_timezone)]
CronExpr = Annotated[str, _checked(check_cron)]
AwsAccountId = Annotated[str, BeforeValidator(_registry_id), _checked(check_registry_id)]
HostedZoneId = Annotated[str, _checked(check_hosted_zone)]
AwsSecretId = Annotated[str, _checked(check_aws_secret_id)]
ShortText = Annotated[str, Field(min_length=1, max_length=200), _checked(check_printable)]
Text = Annotated[str, _checked(check_text)]
CheckpointPlace = Annotated[str, _checked(check_checkpoint_place)]
# A credential that is not itself a secret (a user name): written as is, or as a
# reference exactly like a password, so it can live beside the password it goes with.
NameOrRef = Annotated[SecretRef | ShortText, WrapValidator(reference_when_shaped)]
DnsNameOrRef = Annotated[SecretRef | DnsName, WrapValidator(reference_when_shaped)]
