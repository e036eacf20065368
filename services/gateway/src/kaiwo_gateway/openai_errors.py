"""Errors answered in OpenAI's JSON format, ``{"error": {"message", "type", "param",
"code"}}``, by the HTTP API and, as an answer's body, by the messenger."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from aiohttp import web


class OpenAIError(Exception):
    """An error answered in OpenAI's format."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str,
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.code = code
        self.param = param

    def response(self) -> web.Response:
        error = {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}
        return web.json_response({"error": error}, status=self.status)


def bad_request(message: str, *, param: str | None = None) -> OpenAIError:
    return OpenAIError(400, message, kind="invalid_request_error", param=param)


class RefusedError(OpenAIError):
    """Refused before any Model was looked at; ``reason`` labels the metric."""

    KINDS: ClassVar[dict[int, str]] = {429: "rate_limit_error", 503: "server_error"}

    def __init__(
        self,
        status: int,
        message: str,
        *,
        reason: str,
        code: str,
        headers: Mapping[str, str] | None = None,
        close: bool = False,
    ) -> None:
        kind = self.KINDS.get(status, "invalid_request_error")
        super().__init__(status, message, kind=kind, code=code)
        self.reason = reason
        self.headers = dict(headers or {})
        self.close = close
        """The connection is closed after the answer (the rest of the request is unread)."""

    def response(self) -> web.Response:
        response = super().response()
        response.headers.update(self.headers)
        if self.close:
            response.force_close()
        if self.status == 401:
            response.headers["WWW-Authenticate"] = 'Bearer realm="kaiwo"'
        elif self.status in (429, 503):  # a limit or the API server: soon again may pass
            response.headers["Retry-After"] = "1"
        return response


def unauthenticated(message: str) -> RefusedError:
    return RefusedError(401, message, reason="unauthenticated", code="invalid_api_key")


def too_large(limit: int) -> RefusedError:
    return RefusedError(
        413,
        f"the request body is larger than {limit:,} bytes, the limit of this route",
        reason="too_large",
        code="request_too_large",
    )


def access_unavailable() -> RefusedError:
    """The API server could not be asked who the caller is or what they may use (down, or
    the gateway may not ask). Its error is not told: a caller with any token would read the
    gateway's service account, its rights or the API server's address; the gateway's log has
    it (``kaiwo.access``: "a review was not answered", with the review's kind and the error;
    decision 0219)."""
    return RefusedError(
        503,
        "the access check is unavailable: the gateway cannot ask the Kubernetes API server "
        "about this caller now; try again in a moment",
        reason="unavailable",
        code="access_check_unavailable",
    )


def model_server_failed(error: BaseException) -> str:
    """What a caller is told of a model server that failed mid-request: the kind of failure,
    not its text, which may name the server's address (upstream answers only the status
    text); the log has the rest."""
    return f"Bad Gateway: the model server failed ({type(error).__name__})"
