"""Reading a request's body within its limits (decision 0041): the declared size first,
then chunk by chunk, each chunk counted against the caller's bytes in flight (decision 0040);
a JSON body checked for depth and containers before it is parsed; a multipart form rebuilt
without its ``model`` field.

A compressed body (``Content-Encoding: gzip`` or ``deflate``) is decoded by aiohttp's server
as it is read, and the limits count the decoded bytes; one that does not decode is a 400
naming its ``Content-Encoding``, a coding aiohttp does not decode a 415 before a byte is read
(decision 0219)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.http_exceptions import ContentEncodingError

from kaiwo_gateway.domain.access import Caller, CallerLimits
from kaiwo_gateway.domain.bodies import (
    BodyLimits,
    body_problem,
    depth_problem,
    document_depth,
)
from kaiwo_gateway.domain.headers import ACCEPTED_CODINGS, undecoded_coding
from kaiwo_gateway.openai_errors import RefusedError, bad_request, too_large

READ_CHUNK = 64 * 1024
MAX_FORM_PARTS = 64


@dataclass
class Slot:
    """One request counted against its caller's limits, and the body bytes it holds."""

    caller: Caller
    limits: CallerLimits
    held: int = 0

    def hold(self, size: int) -> None:
        if not self.limits.hold(self.caller.limit_key, size):
            raise RefusedError(
                429,
                f"too many request bytes in flight: at most "
                f"{self.limits.limits.body_bytes:,} per caller; try again when some finish",
                reason="too_many_bytes",
                code="too_many_bytes_in_flight",
            )
        self.held += size

    def release(self) -> None:
        self.limits.leave(self.caller.limit_key, held=self.held)
        self.held = 0


def parsed_json(raw: bytes, limits: BodyLimits) -> dict[str, Any]:
    """The body as a JSON object, within the limits of containers and depth (400 beyond)."""
    problem = body_problem(raw, limits)
    if problem is None:
        try:
            parsed = json.loads(raw)
        except RecursionError:  # the parser's own stack ran out: far deeper than the limit
            problem = depth_problem(limits.json_depth + 1, limits)
        except ValueError as error:
            raise bad_request(f"bad request: the body is not JSON: {error}") from error
        else:
            problem = depth_problem(document_depth(parsed, beyond=limits.json_depth), limits)
    if problem is not None:
        raise RefusedError(400, problem, reason="too_deep", code="body_too_complex")
    if not isinstance(parsed, dict):
        raise bad_request("bad request: the body must be a JSON object")
    return parsed


def refuse_declared_size(request: web.Request, limit: int) -> None:
    """A body declared larger than the limit is refused before a byte of it is read."""
    if request.content_length is not None and request.content_length > limit:
        raise too_large(limit)


def refuse_undecoded_coding(request: web.Request) -> None:
    """A body in a coding aiohttp does not decode is refused before a byte of it is read
    (415, with the codings accepted): the gateway forwards no ``Content-Encoding``."""
    coding = undecoded_coding(request.headers.getall("Content-Encoding", []))
    if coding is not None:
        raise RefusedError(
            415,
            f"unsupported Content-Encoding {coding[:64]!r}: send the body plain, or in one "
            f"of {ACCEPTED_CODINGS}",
            reason="unsupported_encoding",
            code="unsupported_content_encoding",
            headers={"Accept-Encoding": ACCEPTED_CODINGS},
        )


def unreadable_body(request: web.Request, error: web.RequestPayloadError) -> RefusedError:
    """The 400 for a body aiohttp could not read: one that does not decode as its
    ``Content-Encoding`` says (named), or broken framing (the kind of failure).

    aiohttp's parser has stopped feeding that body; after the answer its server would read
    the rest (lingering) and meet the error again, logged as an unhandled exception with its
    traceback. The body is ended here instead, and the connection closed after the answer."""
    request.content.feed_eof()
    if isinstance(error.__cause__, ContentEncodingError):
        coding = request.headers.get("Content-Encoding", "").strip().lower()
        return RefusedError(
            400,
            f"bad request: the body does not decode as its Content-Encoding says ({coding})",
            reason="undecodable_body",
            code="invalid_content_encoding",
            close=True,
        )
    cause = type(error.__cause__ or error).__name__
    return RefusedError(
        400,
        f"bad request: the body could not be read ({cause})",
        reason="unreadable_body",
        code="invalid_body",
        close=True,
    )


async def read_body(request: web.Request, slot: Slot, limit: int) -> bytes:
    """The body, decoded, read chunk by chunk up to ``limit`` bytes, each chunk counted
    against the caller's bytes in flight."""
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.content.iter_chunked(READ_CHUNK):
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            slot.hold(len(chunk))
            chunks.append(chunk)
    except web.RequestPayloadError as error:
        raise unreadable_body(request, error) from None
    return b"".join(chunks)


class _Collected:
    """Where a multipart writer puts its bytes."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []

    async def write(self, data: bytes) -> None:
        self.chunks.append(data)


async def multipart_without_model(
    request: web.Request, slot: Slot, limit: int
) -> tuple[dict[str, str], bytes, str]:
    """The form's ``model`` field, and the form without it (as upstream: FasterWhisper
    serves its one model whatever it is called). Its parts are read chunk by chunk, at most
    ``limit`` bytes and :data:`MAX_FORM_PARTS` parts in all; the form is held twice (read,
    then rebuilt), and counted so. A body that is no form is a 400."""
    try:
        return await _read_form(request, slot, limit)
    except web.RequestPayloadError as error:
        raise unreadable_body(request, error) from None
    except ValueError as error:  # aiohttp: no boundary, or the body does not start with it
        raise bad_request(f"bad request: the body is not a multipart form: {error}") from None


async def _read_form(
    request: web.Request, slot: Slot, limit: int
) -> tuple[dict[str, str], bytes, str]:
    reader = await request.multipart()
    writer = aiohttp.MultipartWriter("form-data")
    fields: dict[str, str] = {}
    size = parts = 0
    while True:
        part = await reader.next()
        if part is None:
            break
        if not isinstance(part, aiohttp.BodyPartReader):
            raise bad_request("bad request: nested multipart bodies are not supported")
        parts += 1
        if parts > MAX_FORM_PARTS:
            raise bad_request(f"bad request: a form of more than {MAX_FORM_PARTS} parts")
        chunks: list[bytes] = []
        while chunk := await part.read_chunk(READ_CHUNK):
            size += len(chunk)
            if size > limit:
                raise too_large(limit)
            slot.hold(2 * len(chunk))
            chunks.append(chunk)
        data = b"".join(chunks)
        if part.name == "model" and part.filename is None:
            fields["model"] = data.decode(errors="replace").strip()
            continue
        payload = aiohttp.payload.BytesPayload(
            bytes(data), content_type=part.headers.get("Content-Type", "text/plain")
        )
        if part.filename is None:
            payload.set_content_disposition("form-data", name=part.name or "")
        else:
            payload.set_content_disposition(
                "form-data", name=part.name or "", filename=part.filename
            )
        writer.append_payload(payload)
    collected = _Collected()
    await writer.write(collected)  # type: ignore[arg-type]
    return fields, b"".join(collected.chunks), writer.content_type
