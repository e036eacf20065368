"""The messenger's decisions (decision 0049): what a request message asks, what its answer
says, and whether a request is answered now or delivered again.

A request message is KubeAI's: ``{"metadata": <anything>, "path": "/v1/completions",
"body": {<an OpenAI request naming its model>}}`` (``path`` defaults to ``/v1/completions``;
a missing leading ``/`` is added). Its answer is ``{"metadata": <the same>, "status_code":
<int>, "body": <the model server's JSON, or {"error": {...}}>}``, published with the request's
own headers (its ids: anything but NATS's ``Nats-*``) and ``Kaiwo-Request-Id``: the
request's ``Nats-Msg-Id`` when it had one, else its stream sequence.

Settling (at-least-once): a request that cannot be served as written (not JSON, no model, an
unknown model: 400, 404) and one the model server answered (whatever its status) are answered
and acknowledged. One that failed for a while only (no ready endpoint, every endpoint refused,
the server hung up: 502, 503) is delivered again after the consumer's backoff, unanswered;
on its last delivery it is answered with the error and kept as a dead letter. Acknowledged
only once the answer is stored: a failed publish leaves it to be delivered again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from kaiwo_contracts.events.streams import ConsumerSpec

from kaiwo_gateway.domain.bodies import BodyLimits, body_problem, depth_problem, document_depth
from kaiwo_gateway.domain.sent_json import member_text

MESSAGE_PATHS: Final = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
DEFAULT_PATH: Final = "/v1/completions"
REQUEST_ID_HEADER: Final = "Kaiwo-Request-Id"
DELIVERIES_HEADER: Final = "Kaiwo-Deliveries"
DEAD_REASON_HEADER: Final = "Kaiwo-Dead-Reason"
MESSAGE_ID_HEADER: Final = "Nats-Msg-Id"
TRACE_HEADERS: Final = frozenset({"traceparent", "tracestate"})
ECHOED_HEADERS_LIMIT: Final = 32
"""At most this many of a request's own headers go back with its answer."""
_RESERVED_PREFIXES: Final = ("nats-", "kaiwo-")
TRANSIENT_STATUSES: Final = frozenset({502, 503})


@dataclass(frozen=True, slots=True)
class MessageRequest:
    metadata: Any
    path: str
    body: Mapping[str, Any]
    model: str
    sent: bytes = b""
    """``body`` as the message wrote it, what the model server gets (decision 0262)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What goes back: a status and a JSON body."""

    status: int
    body: Any

    @property
    def transient(self) -> bool:
        """True for the gateway's own 502 and 503 (see :func:`failure`); a model server's
        answer is final whatever its status."""
        return False


@dataclass(frozen=True, slots=True)
class Failure(Answer):
    """The gateway's own error: the request never got a model server's answer."""

    retry: bool = False

    @property
    def transient(self) -> bool:
        return self.retry


def failure(status: int, message: str, *, code: str | None = None) -> Failure:
    kind = "server_error" if status >= 500 else "invalid_request_error"
    error = {"message": message, "type": kind, "param": None, "code": code}
    return Failure(status=status, body={"error": error}, retry=status in TRANSIENT_STATUSES)


def parse_request(raw: bytes, limits: BodyLimits) -> MessageRequest | Failure:
    """The request ``raw`` asks for, or why it cannot be served (400, 404)."""
    document = _document(raw, limits)
    if isinstance(document, Failure):
        return document
    request = _request(document)
    if isinstance(request, Failure):
        return request
    return replace(request, sent=member_text(raw, "body"))


def _document(raw: bytes, limits: BodyLimits) -> dict[str, Any] | Failure:
    """``raw`` as a JSON object within the gateway's body limits (the HTTP routes' own)."""
    problem = body_problem(raw, limits)
    if problem is not None:
        return failure(400, problem, code="body_too_complex")
    try:
        document = json.loads(raw)
    except RecursionError:
        return failure(400, depth_problem(limits.json_depth + 1, limits) or "too deep")
    except ValueError as error:
        return failure(400, f"bad request: the message is not JSON: {error}")
    depth = depth_problem(document_depth(document, beyond=limits.json_depth), limits)
    if depth is not None:
        return failure(400, depth, code="body_too_complex")
    if not isinstance(document, dict):
        return failure(400, "bad request: the message must be a JSON object")
    return document


def _request(document: Mapping[str, Any]) -> MessageRequest | Failure:
    path = document.get("path", DEFAULT_PATH)
    if not isinstance(path, str):
        return failure(400, "bad request: 'path' must be a string")
    path = path if path.startswith("/") else f"/{path}"
    if path not in MESSAGE_PATHS:
        served = ", ".join(MESSAGE_PATHS)
        return failure(404, f"bad request: path {path!r} is not served; use one of {served}")
    body = document.get("body")
    if not isinstance(body, dict):
        return failure(400, "bad request: 'body' must be a JSON object (the OpenAI request)")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return failure(400, "bad request: reading model from body: missing 'model' field")
    if body.get("stream"):
        return failure(400, "bad request: 'stream' is not supported by the messenger")
    return MessageRequest(metadata=document.get("metadata"), path=path, body=body, model=model)


def metadata_of(raw: bytes) -> Any:
    """The ``metadata`` of a message, as far as it can be read (for an error's answer)."""
    try:
        document = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    return document.get("metadata") if isinstance(document, dict) else None


def backend_answer(status: int, data: bytes) -> Answer:
    """A model server's answer: its JSON, or its text as an error when it is not JSON."""
    try:
        return Answer(status=status, body=json.loads(data))
    except (ValueError, RecursionError):
        text = data.decode(errors="replace")
        return Answer(status=status, body={"error": {"message": text, "type": "server_error"}})


def response_document(metadata: Any, answer: Answer) -> bytes:
    return json.dumps(
        {"metadata": metadata, "status_code": answer.status, "body": answer.body},
        separators=(",", ":"),
    ).encode()


def request_id(headers: Mapping[str, str], *, sequence: int) -> str:
    """The id a client matches the answer by: its ``Nats-Msg-Id``, else the stream sequence."""
    for key, value in headers.items():
        if key.lower() == MESSAGE_ID_HEADER.lower() and value:
            return value
    return str(sequence)


def echoed_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The request's own headers that go back with its answer (its ids); NATS's and ours
    stay behind (a ``Nats-Msg-Id`` copied would make JetStream drop the answer as a copy of
    the request)."""
    echoed: dict[str, str] = {}
    for key, value in headers:
        if key.lower().startswith(_RESERVED_PREFIXES) or len(echoed) >= ECHOED_HEADERS_LIMIT:
            continue
        echoed[key] = value
    return echoed


def trace_headers(headers: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The W3C trace context, which reaches the model server as it does over HTTP."""
    return {key.lower(): value for key, value in headers if key.lower() in TRACE_HEADERS}


@dataclass(frozen=True, slots=True)
class Reply:
    """Publish ``answer``, then acknowledge; with ``dead_reason``, keep the request as a dead
    letter too (it ran out of deliveries)."""

    answer: Answer
    dead_reason: str | None = None


@dataclass(frozen=True, slots=True)
class Redeliver:
    """Leave the request unanswered; it comes back after ``delay_seconds``."""

    delay_seconds: float


def settle(answer: Answer, *, delivery: int, consumer: ConsumerSpec) -> Reply | Redeliver:
    """What to do with a request's ``delivery``-th (1-based) outcome ``answer``."""
    if not answer.transient:
        return Reply(answer)
    if delivery < consumer.max_deliver:
        return Redeliver(delay_seconds=consumer.retry_delay(delivery))
    reason = f"gave up after {delivery} deliveries: the last one got {answer.status}"
    return Reply(_given_up(answer, reason), dead_reason=reason)


def _given_up(answer: Answer, reason: str) -> Answer:
    error = answer.body.get("error") if isinstance(answer.body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        message = f"{error['message']} ({reason})"
        return Answer(status=answer.status, body={"error": {**error, "message": message}})
    return answer
