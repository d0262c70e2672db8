"""API errors and the ``Status`` objects that carry them, worded as the real server does."""

from __future__ import annotations

from typing import Any

from drills.errors import LabError
from drills_lab.kubeapi.resources import ResourceType


class ApiError(LabError):
    """A request the API refuses. Raised in-process too, e.g. by ``ObjectStore.create``."""

    def __init__(
        self, code: int, reason: str, message: str, details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            status["details"] = self.details
        return status


def _details(rt: ResourceType, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": rt.plural}
    if rt.group:
        details["group"] = rt.group
    return details


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{rt.qualified_resource} "{name}" not found', _details(rt, name)
    )


def namespace_not_found(name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'namespaces "{name}" not found', {"name": name, "kind": "namespaces"}
    )


def path_not_found() -> ApiError:
    return ApiError(404, "NotFound", "the server could not find the requested resource", {})


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, "AlreadyExists", f'{rt.qualified_resource} "{name}" already exists', _details(rt, name)
    )


def conflict(rt: ResourceType, name: str) -> ApiError:
    message = (
        f'Operation cannot be fulfilled on {rt.qualified_resource} "{name}": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )
    return ApiError(409, "Conflict", message, _details(rt, name))


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one cause per ``(field, message)``."""
    text = ", ".join(f"{field}: {message}" for field, message in causes)
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": message, "field": field}
        for field, message in causes
    ]
    return ApiError(422, "Invalid", f'{rt.qualified_kind} "{name}" is invalid: {text}', details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(method: str) -> ApiError:
    return ApiError(
        405,
        "MethodNotAllowed",
        f"the server does not allow this method ({method}) on the requested resource",
        {},
    )


def unsupported_media_type(content_type: str, accepted: tuple[str, ...]) -> ApiError:
    message = (
        f"the body of the request was in an unknown format ({content_type or 'none'}) - "
        f"accepted media types include: {', '.join(accepted)}"
    )
    return ApiError(415, "UnsupportedMediaType", message, {})


def expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def success(rt: ResourceType, name: str, uid: str) -> dict[str, Any]:
    details = _details(rt, name)
    details["uid"] = uid
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": details,
    }
