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
            "code": self.code,
        }
        if self.reason:  # some failures (a 500 from server-side apply) carry no reason
            body["reason"] = self.reason
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
    texts = [f"{field}: {message}" for _, field, message in causes]
    # One cause is given bare, several as the API server's aggregate "[a, b]".
    text = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
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


def internal_error(message: str) -> ApiError:
    return ApiError(code=500, reason="InternalError", message=f"Internal error occurred: {message}")


def gone(message: str) -> ApiError:
    return ApiError(code=410, reason="Expired", message=message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(code=405, reason="MethodNotAllowed", message=message)


def unsupported_media_type(*, custom: bool = False) -> ApiError:
    """415; custom resources accept no strategic merge patch."""
    accepted = ["application/json-patch+json", "application/merge-patch+json"]
    accepted += ["application/apply-patch+yaml"]
    if not custom:
        accepted += ["application/strategic-merge-patch+json"]
    return ApiError(
        code=415,
        reason="UnsupportedMediaType",
        message=f"the body of the request was in an unknown format - accepted media types "
        f"include: {', '.join(accepted)}",
    )


def undeclared_in_schema(
    *, namespace: str, name: str, api_version: str, kind: str, paths: list[str]
) -> ApiError:
    """Server-side apply of fields the schema does not declare: a 500 with no reason."""
    lines = [f"{path}: field not declared in schema" for path in paths]
    text = lines[0] if len(lines) == 1 else "errors:\n" + "\n".join(f"  {line}" for line in lines)
    return ApiError(
        code=500,
        reason="",
        message=f"failed to create typed patch object ({namespace}/{name}; {api_version}, "
        f"Kind={kind}): {text}",
    )
