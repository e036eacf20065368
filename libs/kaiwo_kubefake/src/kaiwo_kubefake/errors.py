"""API errors as the API server reports them: an HTTP code and a ``meta/v1`` Status body."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API server refuses; :meth:`status` is the body it answers with."""

    def __init__(
        self,
        *,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(*, name: str, group: str, plural: str) -> dict[str, Any]:
    # The core group is "", which the real server leaves out (omitempty).
    return {"name": name, **({"group": group} if group else {}), "kind": plural}


def not_found(*, name: str, group: str, plural: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        code=404,
        reason="NotFound",
        message=f'{qualified} "{name}" not found',
        details=_details(name=name, group=group, plural=plural),
    )


def already_exists(*, name: str, group: str, plural: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        code=409,
        reason="AlreadyExists",
        message=f'{qualified} "{name}" already exists',
        details=_details(name=name, group=group, plural=plural),
    )


def conflict(*, name: str, group: str, plural: str, why: str) -> ApiError:
    qualified = f"{plural}.{group}" if group else plural
    return ApiError(
        code=409,
        reason="Conflict",
        message=f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        details=_details(name=name, group=group, plural=plural),
    )


def invalid(*, name: str, group: str, kind: str, causes: list[tuple[str, str, str]]) -> ApiError:
    """422 Invalid; ``causes`` are (reason, field, message) triples."""
    text = "; ".join(f"{field}: {message}" for _, field, message in causes)
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        code=422,
        reason="Invalid",
        message=f'{qualified} "{name}" is invalid: {text}',
        details={
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [
                {"reason": reason, "field": field, "message": message}
                for reason, field, message in causes
            ],
        },
    )


def bad_request(message: str) -> ApiError:
    return ApiError(code=400, reason="BadRequest", message=message)


def gone(message: str) -> ApiError:
    return ApiError(code=410, reason="Expired", message=message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(code=405, reason="MethodNotAllowed", message=message)


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        code=415,
        reason="UnsupportedMediaType",
        message=f"the body of the request was in an unknown format - accepted media types "
        f"include: application/json-patch+json, application/merge-patch+json, "
        f"application/apply-patch+yaml, application/strategic-merge-patch+json "
        f"(got {content_type!r})",
    )
