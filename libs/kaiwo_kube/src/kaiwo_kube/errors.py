"""Typed errors of the Kubernetes port, from the API server's Status answers.

The names follow the API server's Status reasons (NotFound, Conflict, ...), hence no "Error"
suffix.
"""

# ruff: noqa: N818

from __future__ import annotations

import math
from typing import Any


class KubeError(Exception):
    """The API server refused a request; ``status`` is its Status body (may be empty)."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str = "",
        status: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.status = status or {}


class NotFound(KubeError):
    """404: the object (or its namespace, or its kind) does not exist."""


class AlreadyExists(KubeError):
    """409 AlreadyExists: a create found an object of that name."""


class Conflict(KubeError):
    """409 Conflict: stale resourceVersion, failed precondition, or SSA field-manager conflict."""


class Invalid(KubeError):
    """422 Invalid: the object fails validation; ``causes`` names the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list((self.status.get("details") or {}).get("causes") or [])


class BadRequest(KubeError):
    """400: the request itself is malformed (bad selector, name mismatch...)."""


class ResourceExpired(KubeError):
    """410 Gone: the resourceVersion is older than the server keeps; relist and watch anew."""


class Retryable(KubeError):
    """429 or 5xx (or the connection failed): try again, after ``retry_after`` if given."""

    def __init__(
        self,
        message: str,
        *,
        code: int,
        reason: str = "",
        status: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code, reason=reason, status=status)
        self.retry_after = retry_after


class MalformedResponse(Retryable):
    """The answer is not what the API promises (not JSON, not an object, a watch event of no
    known type, a list without its resourceVersion): treated like a dropped connection, since
    asking again (or listing again) is all a client can do."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code=0, reason="MalformedResponse")


def _retry_after(status: dict[str, Any], header: str | None) -> float | None:
    """Seconds to wait from the Status details or the Retry-After header; None unless a
    finite, non-negative number (an answer of ``inf`` must not stop the caller for good)."""
    details = status.get("details")
    seconds = _seconds(details.get("retryAfterSeconds")) if isinstance(details, dict) else None
    if seconds is None and header:
        seconds = _seconds(header)
    return seconds


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        seconds = float(value)
    except (ValueError, OverflowError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


_BY_CODE: dict[int, type[KubeError]] = {
    400: BadRequest,
    404: NotFound,
    409: Conflict,
    410: ResourceExpired,
    422: Invalid,
}


_UNTYPABLE_APPLY = "failed to create typed patch object"


def error_from_status(
    *, code: int, status: dict[str, Any] | None, retry_after_header: str | None = None
) -> KubeError:
    """The typed error for an HTTP code and the Status body the server sent."""
    body = status if isinstance(status, dict) else {}
    reason = body.get("reason")
    reason = reason if isinstance(reason, str) else ""
    message = body.get("message")
    message = message if isinstance(message, str) and message else f"the API server answered {code}"
    if code == 500 and _UNTYPABLE_APPLY in message:
        # Server-side apply of a field the schema does not declare: a 500 that no retry
        # will ever turn into a success (kube-apiserver v1.36), so it is the request's fault.
        return Invalid(message, code=code, reason=reason or "Invalid", status=body)
    if code == 429 or code >= 500:
        return Retryable(
            message,
            code=code,
            reason=reason,
            status=body,
            retry_after=_retry_after(body, retry_after_header),
        )
    kind = _BY_CODE.get(code, KubeError)
    if code == 409 and reason == "AlreadyExists":
        kind = AlreadyExists
    return kind(message, code=code, reason=reason, status=body)
