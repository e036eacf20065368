"""Dead letters: the copy of a message its consumer gave up on, on
``kaiwo.dlq.<stream>.<consumer>`` with the reason and the original headers, cut to fit the
largest message; and the relay that turns the server's max-deliveries advisories into one.
"""

from __future__ import annotations

import structlog
from kaiwo_contracts.events.envelope import MAX_MESSAGE_BYTES, NATS_MSG_ID_HEADER, parse_body
from kaiwo_contracts.events.streams import DEAD_LETTER_STREAM, MAX_DELIVERIES_ADVISORY
from kaiwo_contracts.events.subjects import dead_letter_subject

from kaiwo_runtime.bus import Bus, Delivery, Handler, PoisonMessage, StoredMessage, message_size

log = structlog.get_logger("kaiwo.bus")


DLQ_REASON = "Kaiwo-Dlq-Reason"
DLQ_STREAM = "Kaiwo-Dlq-Stream"
DLQ_CONSUMER = "Kaiwo-Dlq-Consumer"
DLQ_SUBJECT = "Kaiwo-Dlq-Subject"
DLQ_SEQUENCE = "Kaiwo-Dlq-Sequence"
DLQ_DELIVERIES = "Kaiwo-Dlq-Deliveries"
DLQ_BODY_BYTES = "Kaiwo-Dlq-Body-Bytes"
"""Set when the dead letter carries only the start of the body: the original's size (the
original is still in its own stream, and the recorder has stored it there)."""
_MAX_REASON_LENGTH = 1024
_KEPT_WHEN_CROWDED = ("ce-id", "ce-type", "ce-source", "ce-subject", "ce-correlationid")
# Headers that steer JetStream on publish; copying them into a dead letter would misfire.
_PUBLISH_CONTROL_PREFIXES = ("nats-expected-", "nats-msg-id", "nats-rollup", "nats-ttl")


def dead_letter(
    delivery: Delivery | StoredMessage,
    *,
    consumer: str,
    reason: str,
    attempts: int,
    max_bytes: int = MAX_MESSAGE_BYTES,
) -> tuple[str, dict[str, str], bytes]:
    """Subject, headers and body of the dead letter for a message of ``consumer``.

    Keeps the original headers (``ce-*`` included) and body; adds the reason and where the
    message came from. The ``Nats-Msg-Id`` is derived from stream, consumer and sequence so
    a relay and an in-process dead-lettering of the same message store it once.

    A dead letter must fit where the original barely did: when the added headers push it
    over ``max_bytes``, the body is cut (its size is in ``Kaiwo-Dlq-Body-Bytes``), and when
    even the headers crowd it, only the identifying ``ce-*`` headers are kept.
    """
    stream = delivery.stream
    sequence = delivery.stream_sequence if isinstance(delivery, Delivery) else delivery.sequence
    headers = {
        key: value
        for key, value in delivery.headers.items()
        if not key.lower().startswith(_PUBLISH_CONTROL_PREFIXES)
    }
    headers.update(
        {
            DLQ_REASON: single_line(reason),
            DLQ_STREAM: stream,
            DLQ_CONSUMER: consumer,
            DLQ_SUBJECT: delivery.subject,
            DLQ_SEQUENCE: str(sequence),
            DLQ_DELIVERIES: str(attempts),
            NATS_MSG_ID_HEADER: f"dlq:{stream}:{consumer}:{sequence}",
        }
    )
    return dead_letter_subject(stream=stream, consumer=consumer), *_fitted(
        headers, delivery.body, max_bytes=max_bytes
    )


def _fitted(
    headers: dict[str, str], body: bytes, *, max_bytes: int
) -> tuple[dict[str, str], bytes]:
    if message_size(headers, body) <= max_bytes:
        return headers, body
    cut = {**headers, DLQ_BODY_BYTES: str(len(body))}
    room = max_bytes - message_size(cut, b"")
    if room >= 0:
        return cut, body[:room]
    ours = {DLQ_REASON, DLQ_STREAM, DLQ_CONSUMER, DLQ_SUBJECT, DLQ_SEQUENCE, DLQ_DELIVERIES}
    kept = {
        key: value[:256]
        for key, value in cut.items()
        if key in ours or key == NATS_MSG_ID_HEADER or key.lower() in _KEPT_WHEN_CROWDED
    }
    return kept, body[: max(0, max_bytes - message_size(kept, b""))]


def dead_letter_relay(bus: Bus) -> Handler:
    """A handler for the relay consumer: advisory in, dead letter with the message out."""

    async def relay(delivery: Delivery) -> None:
        if not delivery.subject.startswith(MAX_DELIVERIES_ADVISORY + "."):
            raise PoisonMessage(f"not a max-deliveries advisory: {delivery.subject}")
        try:
            advisory = parse_body(delivery.body)
            stream = str(advisory["stream"])
            consumer = str(advisory["consumer"])
            sequence = int(advisory["stream_seq"])
            deliveries = int(advisory.get("deliveries", 0))
        except (ValueError, KeyError, TypeError) as error:
            raise PoisonMessage(f"unreadable advisory: {describe_error(error)}") from error
        if stream == DEAD_LETTER_STREAM:
            # A reader of the dead letters gave up on one: it stays where it is. Relaying it
            # would make a dead letter of a dead letter, which its reader may give up on too.
            log.info(
                "max deliveries on a dead letter; not relayed",
                consumer=consumer,
                seq=sequence,
                deliveries=deliveries,
            )
            return
        reason = f"max deliveries ({deliveries}) exhausted without an acknowledgement"
        stored = await bus.read_stored(stream, sequence)
        if stored is None:
            stored = StoredMessage(
                stream=stream, sequence=sequence, subject="", headers={}, body=b""
            )
            reason += "; the message is no longer in the stream"
        subject, headers, body = dead_letter(
            stored, consumer=consumer, reason=reason, attempts=deliveries
        )
        await bus.publish_raw(subject, body=body, headers=headers)

    return relay


def single_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:_MAX_REASON_LENGTH]


def describe_error(error: BaseException) -> str:
    return single_line(f"{type(error).__name__}: {error}")
