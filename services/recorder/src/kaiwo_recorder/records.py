"""From one delivered NATS message to the event-store row that records it (pure).

The recorder never rewrites an event: ``data`` is the message body exactly as published
(parsed JSON), and the CloudEvents attributes are stored as they came. What it adds goes into
``metadata``: the NATS stream, stream sequence and stored subject (:data:`NATS_STREAM`,
:data:`NATS_SEQUENCE`, :data:`NATS_SUBJECT`) and the ``traceparent``.

Three kinds of record:

* an **event** (a valid envelope; a payload of a known type must also validate): recorded
  under its own ``id`` and ``type``, so a redelivered or re-published message is stored once;
* a **dead letter** or a **max-deliveries advisory** from ``KAIWO_DLQ``: recorded under
  :data:`DEAD_LETTER_TYPE` / :data:`MAX_DELIVERIES_TYPE` with its own id (the original event
  is already recorded from its own stream, and the two must not collapse into one row);
* a **malformed** ("poison") message, anything the one decoder
  (:func:`~kaiwo_contracts.events.decoding.decode_event`) refuses — bad headers, a body that
  is not a JSON object, nesting too deep, a number out of range, a payload that fails its
  schema, a subject that does not fit it: recorded *raw* under :data:`MALFORMED_TYPE` with
  the reason (and its class, ``failure``), the headers and the body (JSON if it parses, else
  text, else base64), so readers that ask for a type never trip over it and nothing is lost.

:func:`record_of` never raises: every message becomes a row, so one hostile message can
never fail the batch it arrived in.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.events.decoding import decode_event
from kaiwo_contracts.events.envelope import (
    CE_HEADER_PREFIX,
    EARLIEST_TIME,
    LATEST_TIME,
    NATS_MSG_ID_HEADER,
    DecodeFailure,
    EnvelopeFormatError,
    event_type,
    parse_json,
)
from kaiwo_contracts.events.subjects import Family
from kaiwo_eventstore import NewEvent
from kaiwo_runtime.bus import Delivery
from kaiwo_runtime.dead_letters import (
    DLQ_CONSUMER,
    DLQ_DELIVERIES,
    DLQ_REASON,
    DLQ_SEQUENCE,
    DLQ_STREAM,
    DLQ_SUBJECT,
)
from pydantic_core import from_json, to_json

from kaiwo_recorder.stream_ids import advisory_origin, parsed_or_none, stream_id_for

MALFORMED_TYPE: Final = event_type("recorder", "malformed")
DEAD_LETTER_TYPE: Final = event_type("dlq", "dead-lettered")
MAX_DELIVERIES_TYPE: Final = event_type("dlq", "max-deliveries")
RECORDER_SOURCE: Final = "/kaiwo/recorder"
NATS_SOURCE: Final = "/kaiwo/nats"

NATS_STREAM: Final = "natsStream"
NATS_SEQUENCE: Final = "natsSequence"
NATS_SUBJECT: Final = "natsSubject"
TRACEPARENT: Final = "traceparent"
MALFORMED_REASON: Final = "malformed"

_MAX_ID_LENGTH = 256
_DIGEST_LENGTH = 16
_FRACTION = re.compile(r"\.\d+")


class UnrecordableError(ValueError):
    """Not even a raw record can be made of the message (the recorder dead-letters it)."""


def record_of(delivery: Delivery, *, now: datetime) -> NewEvent:
    """The row for ``delivery``: an event, a dead letter, an advisory, or a raw record.

    Never raises: what cannot be read as what its subject says is recorded raw.
    """
    try:
        if advisory_origin(delivery.subject) is not None:
            return advisory_record(delivery, now=now)
        parsed = parsed_or_none(delivery.subject)
        if parsed is not None and parsed.family is Family.DEAD_LETTER:
            return dead_letter_record(delivery, now=now)
        return event_record(delivery)
    except EnvelopeFormatError as error:
        return malformed_record(delivery, reason=_one_line(error), now=now, failure=error.failure)
    except Exception as error:  # mapping is pure: any failure is the message's, never the batch's
        return malformed_record(
            delivery,
            reason=f"{type(error).__name__}: {_one_line(error)}",
            now=now,
            failure=DecodeFailure.INVALID_ENVELOPE,
        )


def event_record(delivery: Delivery) -> NewEvent:
    """The row of a valid event; raises :class:`EnvelopeFormatError` when it is not one.

    The body is parsed once and the envelope validated once, with the payload model of its
    type when it has one: the stored ``data`` is the parsed body itself, never a model dump.
    """
    decoded = decode_event(delivery.headers, delivery.body, subject=delivery.subject)
    envelope, data = decoded.envelope, decoded.body
    return NewEvent(
        event_id=envelope.id,
        stream_id=stream_id_for(
            nats_subject=delivery.subject,
            nats_stream=delivery.stream,
            correlation_id=envelope.correlationid,
            name=_name_of(envelope.subject),
        ),
        type=envelope.type,
        subject=envelope.subject,
        time=envelope.time,
        source=envelope.source,
        correlation_id=envelope.correlationid,
        causation_id=envelope.causationid,
        data=data,
        metadata=nats_metadata(delivery, traceparent=envelope.traceparent),
    )


def dead_letter_record(delivery: Delivery, *, now: datetime) -> NewEvent:
    """A dead letter: the original message and why a consumer gave up on it."""
    headers = _lowered(delivery.headers)
    consumer = headers.get(DLQ_CONSUMER.lower(), "")
    correlation = _bounded(headers.get("ce-correlationid")) or _fallback_correlation(delivery)
    original_id = headers.get("ce-id")
    body, encoding = body_value(delivery.body)
    return NewEvent(
        event_id=_dead_letter_id(headers, delivery),
        stream_id=stream_id_for(
            nats_subject=delivery.subject,
            nats_stream=delivery.stream,
            correlation_id=correlation,
            name=None,
        ),
        type=DEAD_LETTER_TYPE,
        subject=headers.get("ce-subject"),
        time=now,
        source=_consumer_source(consumer),
        correlation_id=correlation,
        causation_id=_bounded(original_id),
        data={
            "reason": headers.get(DLQ_REASON.lower(), ""),
            "stream": headers.get(DLQ_STREAM.lower(), ""),
            "consumer": consumer,
            "subject": headers.get(DLQ_SUBJECT.lower(), ""),
            "sequence": _int_or_none(headers.get(DLQ_SEQUENCE.lower())),
            "deliveries": _int_or_none(headers.get(DLQ_DELIVERIES.lower())),
            "originalId": original_id,
            "originalType": headers.get("ce-type"),
            "headers": _cloud_event_headers(delivery.headers),
            "body": body,
            "bodyEncoding": encoding,
        },
        metadata=nats_metadata(delivery, traceparent=headers.get("ce-traceparent")),
    )


def _dead_letter_id(headers: Mapping[str, str], delivery: Delivery) -> str:
    """The dead letter's ``Nats-Msg-Id`` (``dlq:<stream>:<consumer>:<sequence>``) and a
    digest of which message it is: its ``ce-id``, else its subject and body.

    The id alone names a sequence, and sequences start at 1 again when NATS loses its
    streams (decision 0231): another message dead-lettered at a sequence used before would
    be taken by the store for the one it holds, and dropped. The digest keeps them apart,
    while the same message dead-lettered twice (in process and by the relay) stays one row.
    """
    original = headers.get("ce-id")
    which = (
        original.encode()
        if original
        else headers.get(DLQ_SUBJECT.lower(), "").encode() + b"\n" + delivery.body
    )
    digest = _digest(which)
    letter = _bounded(headers.get(NATS_MSG_ID_HEADER.lower()))
    if letter is None:
        return f"deadletter:{delivery.stream}:{delivery.stream_sequence}:{digest}"
    return _bounded(f"{letter}:{digest}") or f"dlq:{_digest(letter.encode())}:{digest}"


def _digest(value: bytes) -> str:
    return hashlib.sha256(value).hexdigest()[:_DIGEST_LENGTH]


def advisory_record(delivery: Delivery, *, now: datetime) -> NewEvent:
    """A max-deliveries advisory of the server (JSON body with ``id``, ``stream_seq``, ...)."""
    body, encoding = body_value(delivery.body)
    advisory: Mapping[str, Any] = body if isinstance(body, Mapping) else {}
    advisory_id = _bounded(str(advisory.get("id") or "")) or None
    stream_id = stream_id_for(
        nats_subject=delivery.subject,
        nats_stream=delivery.stream,
        correlation_id="-",
        name=None,
    )
    return NewEvent(
        event_id=f"advisory:{advisory_id}"
        if advisory_id
        else f"advisory:{delivery.stream}:{delivery.stream_sequence}",
        stream_id=stream_id,
        type=MAX_DELIVERIES_TYPE,
        subject=None,
        time=_time_or(advisory.get("timestamp"), now),
        source=NATS_SOURCE,
        correlation_id=stream_id,
        data=dict(advisory) if advisory else {"body": body, "bodyEncoding": encoding},
        metadata=nats_metadata(delivery, traceparent=None),
    )


def malformed_record(
    delivery: Delivery,
    *,
    reason: str,
    now: datetime,
    failure: DecodeFailure = DecodeFailure.INVALID_ENVELOPE,
) -> NewEvent:
    """A raw record of a message that is not a valid event, with the reason.

    Only values that are valid whatever the message are taken from it (bounded ids, a
    zone-aware time, a source of the ``/kaiwo/…`` form); the rest is kept in ``data``.
    """
    headers = _lowered(delivery.headers)
    correlation = _bounded(headers.get("ce-correlationid")) or _fallback_correlation(delivery)
    body, encoding = body_value(delivery.body)
    try:
        return NewEvent(
            event_id=_bounded(headers.get("ce-id"))
            or _bounded(headers.get(NATS_MSG_ID_HEADER.lower()))
            or f"malformed:{delivery.stream}:{delivery.stream_sequence}",
            stream_id=stream_id_for(
                nats_subject=delivery.subject,
                nats_stream=delivery.stream,
                correlation_id=correlation,
                name=None,
            ),
            type=MALFORMED_TYPE,
            subject=_bounded(headers.get("ce-subject")),
            time=_time_or(headers.get("ce-time"), now),
            source=_bounded(headers.get("ce-source")) or RECORDER_SOURCE,
            correlation_id=correlation,
            causation_id=_bounded(headers.get("ce-causationid")),
            data={
                "reason": reason,
                "failure": failure.value,
                "type": headers.get("ce-type"),
                "headers": dict(delivery.headers),
                "body": body,
                "bodyEncoding": encoding,
            },
            metadata={
                **nats_metadata(delivery, traceparent=headers.get("ce-traceparent")),
                MALFORMED_REASON: reason,
            },
        )
    except (ValueError, TypeError) as error:
        raise UnrecordableError(_one_line(error)) from error


def base64_record(event: NewEvent, *, delivery: Delivery, reason: str) -> NewEvent:
    """``event`` with its body as base64 only: for a row the database refused as it was.

    (PostgreSQL's ``jsonb`` refuses ``\\u0000`` in strings, which JSON allows.)
    """
    return NewEvent(
        event_id=event.event_id,
        stream_id=event.stream_id,
        type=MALFORMED_TYPE,
        subject=event.subject,
        time=event.time,
        source=event.source,
        correlation_id=event.correlation_id,
        causation_id=event.causation_id,
        data={
            "reason": reason,
            "type": event.type,
            "body": base64.b64encode(delivery.body).decode("ascii"),
            "bodyEncoding": "base64",
        },
        metadata={**nats_metadata(delivery, traceparent=None), MALFORMED_REASON: reason},
    )


# --------------------------------------------------------------------------- parts


def nats_metadata(delivery: Delivery, *, traceparent: str | None) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        NATS_STREAM: delivery.stream,
        NATS_SEQUENCE: delivery.stream_sequence,
        NATS_SUBJECT: delivery.subject,
    }
    if traceparent:
        metadata[TRACEPARENT] = traceparent
    return metadata


def body_value(body: bytes) -> tuple[Any, str]:
    """The body as JSON when it parses (within the decoder's bounds: a body nested too deep
    or with numbers out of range is kept as text) and can still be read back once a row
    holds it one level down, else UTF-8 text, else base64; and which it is."""
    try:
        value = parse_json(body)
    except EnvelopeFormatError:
        pass
    else:
        if _readable_one_level_down(value):
            return value, "json"
    try:
        return body.decode("utf-8"), "text"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def _readable_one_level_down(value: Any) -> bool:
    """Whether a row with ``value`` under a key can be read back: the store writes JSON and
    reads it with the same depth limit the decoder has, so a body at that limit would make
    a row that is written and never read again (found by fuzzing). Only raw records
    embed a body, so the round trip costs nothing on the common path."""
    try:
        from_json(to_json({"body": value}), allow_inf_nan=False)
    except ValueError:
        return False
    return True


def decode_body(value: Any, encoding: str) -> bytes:
    """The bytes :func:`body_value` was given (for exports and tests)."""
    if encoding == "json":
        return json.dumps(value).encode()
    if encoding == "text":
        return str(value).encode()
    try:
        return base64.b64decode(str(value), validate=True)
    except binascii.Error as error:
        raise ValueError(f"not base64: {error}") from error


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in headers.items()}


def _cloud_event_headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {
        key.lower(): value
        for key, value in headers.items()
        if key.lower().startswith(CE_HEADER_PREFIX)
    }


def _name_of(subject: str | None) -> str | None:
    """The name part of a CloudEvents subject (``<namespace>/<name>`` or ``<name>``)."""
    return subject.rpartition("/")[2] or None if subject else None


def _fallback_correlation(delivery: Delivery) -> str:
    """A message without a correlation id correlates with its NATS stream and sequence."""
    return f"{delivery.stream}:{delivery.stream_sequence}"


def _consumer_source(consumer: str) -> str:
    """``/kaiwo/<service>`` of the consumer that dead-lettered (``planner-obs`` -> planner)."""
    service = consumer.partition("-")[0].lower()
    return f"/kaiwo/{service}" if service.isalnum() else RECORDER_SOURCE


def _bounded(value: str | None) -> str | None:
    if not value or len(value) > _MAX_ID_LENGTH:
        return None
    return value


def _int_or_none(value: str | None) -> int | None:
    # isdigit() alone admits "²" and other digits int() refuses; 19 digits fit int64.
    if value is None or not (value.isascii() and value.isdigit()) or len(value) > 19:
        return None
    return int(value)


def _time_or(value: object, default: datetime) -> datetime:
    """``value`` as a zone-aware time within the envelope's range, else ``default`` (a time
    the store could not convert to UTC would fail the row)."""
    if not isinstance(value, str):
        return default
    # The server writes nanoseconds; Python reads at most microseconds.
    trimmed = _FRACTION.sub(lambda match: match.group(0)[:7], value.replace("Z", "+00:00"))
    try:
        parsed = datetime.fromisoformat(trimmed)
        inside = parsed.tzinfo is not None and EARLIEST_TIME <= parsed < LATEST_TIME
    except (ValueError, OverflowError):
        return default
    return parsed if inside else default


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split())[:1024]
