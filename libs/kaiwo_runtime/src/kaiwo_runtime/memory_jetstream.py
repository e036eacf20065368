"""An in-memory JetStream server, for unit tests.

It plays the server: limits streams with a duplicate window keyed on ``Nats-Msg-Id``, subject
transforms (``wildcard`` and ``partition``), durable consumers with explicit ack, ack wait and
backoff, ``max_ack_pending``, ``max_deliver`` and the max-deliveries advisory. Several
:class:`~kaiwo_runtime.memory_bus.MemoryBus` "connections" can share one server, so a test can
drop a connection and resume the same durable consumer from another.

Time is the event loop's clock (or a clock passed in), so redelivery delays are real but
short in tests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kaiwo_contracts.events.envelope import MAX_MESSAGE_BYTES, NATS_MSG_ID_HEADER
from kaiwo_contracts.events.partitions import fnv1a_32
from kaiwo_contracts.events.streams import (
    MAX_DELIVERIES_ADVISORY,
    ConsumerSpec,
    StreamSpec,
    SubjectTransform,
)

from kaiwo_runtime.bus import (
    BusError,
    ConsumerPosition,
    Delivery,
    PublishAck,
    StoredMessage,
    check_size,
    message_size,
)

_ONE_TOKEN = "*"  # noqa: S105 - subject wildcards, not secrets
_TAIL = ">"
_FUNCTION = re.compile(r"^\{\{\s*(wildcard|partition)\(([^)]*)\)\s*\}\}$")


def subject_matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, ``>`` one or more trailing tokens."""
    wanted, given = pattern.split("."), subject.split(".")
    for index, token in enumerate(wanted):
        if token == _TAIL:
            return len(given) > index
        if index >= len(given) or token not in (_ONE_TOKEN, given[index]):
            return False
    return len(given) == len(wanted)


def apply_transform(transform: SubjectTransform, subject: str) -> str:
    """The stored subject for ``subject`` (unchanged when the source does not match)."""
    if not subject_matches(transform.source, subject):
        return subject
    source_tokens = transform.source.split(".")
    tokens = subject.split(".")
    wildcards = [tokens[i] for i, token in enumerate(source_tokens) if token == _ONE_TOKEN]
    output = []
    for token in transform.destination.split("."):
        match = _FUNCTION.match(token)
        if match is None:
            output.append(token)
            continue
        name, arguments = match.group(1), [int(a) for a in match.group(2).split(",")]
        if name == "wildcard":
            output.append(wildcards[arguments[0] - 1])
        else:
            key = "".join(wildcards[index - 1] for index in arguments[1:])
            output.append(str(fnv1a_32(key.encode()) % arguments[0]))
    return ".".join(output)


@dataclass(slots=True)
class _Stream:
    spec: StreamSpec
    messages: dict[int, StoredMessage] = field(default_factory=dict)
    stored_at: dict[int, float] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    ids: dict[str, tuple[int, float]] = field(default_factory=dict)
    last_sequence: int = 0
    stored_bytes: int = 0


@dataclass(slots=True)
class _Pending:
    attempts: int
    redeliver_at: float


@dataclass(slots=True)
class _Consumer:
    spec: ConsumerSpec
    cursor: int = 1
    pending: dict[int, _Pending] = field(default_factory=dict)

    def ack_wait(self, attempts: int) -> float:
        backoff = self.spec.backoff_seconds
        if not backoff:
            return self.spec.ack_wait_seconds
        return backoff[min(attempts, len(backoff)) - 1]


class MemoryJetStream:
    """The shared server state; create one per test."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_payload: int = MAX_MESSAGE_BYTES
    ) -> None:
        self._clock = clock
        self.max_payload = max_payload
        self._streams: dict[str, _Stream] = {}
        self._consumers: dict[str, _Consumer] = {}
        self._advisory_ids = itertools.count(1)

    # ------------------------------------------------------------------ admin

    def add_stream(self, spec: StreamSpec) -> None:
        existing = self._streams.get(spec.name)
        if existing is None:
            self._streams[spec.name] = _Stream(spec=spec)
        else:
            existing.spec = spec

    def add_consumer(self, spec: ConsumerSpec) -> None:
        if spec.stream not in self._streams:
            raise BusError(f"stream {spec.stream} not found")
        existing = self._consumers.get(spec.durable_name)
        if existing is None:
            self._consumers[spec.durable_name] = _Consumer(spec=spec)
        else:
            existing.spec = spec

    def position(self, durable_name: str) -> ConsumerPosition:
        """Where a consumer stands (what JetStream's consumer and stream info report)."""
        consumer = self._consumer(durable_name)
        stream = self._streams[consumer.spec.stream]
        self._expire(stream)
        ahead = sum(
            1
            for sequence, message in stream.messages.items()
            if sequence >= consumer.cursor
            and any(subject_matches(p, message.subject) for p in consumer.spec.filter_subjects)
        )
        return ConsumerPosition(
            first_sequence=min(stream.messages, default=stream.last_sequence + 1),
            last_sequence=stream.last_sequence,
            delivered_sequence=consumer.cursor - 1,
            unsettled=ahead + len(consumer.pending),
        )

    def stream_messages(self, stream: str) -> list[StoredMessage]:
        """Everything stored in ``stream``, in order (for assertions in tests)."""
        self._expire(self._streams[stream])
        return list(self._streams[stream].messages.values())

    # ------------------------------------------------------------------ data path

    def publish(self, subject: str, *, body: bytes, headers: Mapping[str, str]) -> PublishAck:
        check_size(subject, headers, body, limit=self.max_payload)
        stream = self._stream_for(subject)
        now = self._clock()
        self._expire(stream)
        message_id = next(
            (v for k, v in headers.items() if k.lower() == NATS_MSG_ID_HEADER.lower()), None
        )
        window = stream.spec.duplicate_window_seconds
        if message_id is not None:
            seen = stream.ids.get(message_id)
            if seen is not None and now - seen[1] < window:
                return PublishAck(stream=stream.spec.name, sequence=seen[0], duplicate=True)
        stream.last_sequence += 1
        sequence = stream.last_sequence
        transform = stream.spec.subject_transform
        stored_subject = apply_transform(transform, subject) if transform else subject
        stream.messages[sequence] = StoredMessage(
            stream=stream.spec.name,
            sequence=sequence,
            subject=stored_subject,
            headers=dict(headers),
            body=body,
        )
        stream.stored_at[sequence] = now
        size = len(subject) + message_size(headers, body)
        stream.sizes[sequence] = size
        stream.stored_bytes += size
        if message_id is not None:
            stream.ids[message_id] = (sequence, now)
        self._discard_over_limit(stream)
        return PublishAck(stream=stream.spec.name, sequence=sequence, duplicate=False)

    def read(self, stream: str, sequence: int) -> StoredMessage | None:
        found = self._streams.get(stream)
        if found is None:
            raise BusError(f"stream {stream} not found")
        self._expire(found)
        return found.messages.get(sequence)

    def read_next(self, stream: str, sequence: int, subjects: str) -> StoredMessage | None:
        found = self._streams.get(stream)
        if found is None:
            raise BusError(f"stream {stream} not found")
        self._expire(found)
        return next(
            (
                message
                for at, message in sorted(found.messages.items())
                if at >= sequence and subject_matches(subjects, message.subject)
            ),
            None,
        )

    def take(self, durable_name: str, limit: int) -> list[Delivery]:
        """Deliver up to ``limit`` messages: due redeliveries first, then new ones."""
        consumer = self._consumer(durable_name)
        stream = self._streams[consumer.spec.stream]
        self._expire(stream)
        now = self._clock()
        deliveries: list[Delivery] = []
        for sequence in sorted(consumer.pending):
            if len(deliveries) >= limit:
                break
            entry = consumer.pending[sequence]
            if entry.redeliver_at > now:
                continue
            message = stream.messages.get(sequence)
            if message is None:
                del consumer.pending[sequence]
            elif entry.attempts >= consumer.spec.max_deliver:
                del consumer.pending[sequence]
                self._advise_max_deliveries(consumer, sequence, entry.attempts)
            else:
                deliveries.append(self._deliver(consumer, message, entry, now))
        while len(deliveries) < limit and len(consumer.pending) < consumer.spec.max_ack_pending:
            message = self._next_new(consumer, stream)
            if message is None:
                break
            entry = _Pending(attempts=0, redeliver_at=now)
            consumer.pending[message.sequence] = entry
            deliveries.append(self._deliver(consumer, message, entry, now))
        return deliveries

    def ack(self, durable_name: str, sequence: int) -> None:
        self._consumer(durable_name).pending.pop(sequence, None)

    def nak(self, durable_name: str, sequence: int, *, delay: float) -> None:
        entry = self._consumer(durable_name).pending.get(sequence)
        if entry is not None:
            entry.redeliver_at = self._clock() + delay

    # ------------------------------------------------------------------ internals

    def _deliver(
        self, consumer: _Consumer, message: StoredMessage, entry: _Pending, now: float
    ) -> Delivery:
        entry.attempts += 1
        entry.redeliver_at = now + consumer.ack_wait(entry.attempts)
        return Delivery(
            stream=message.stream,
            consumer=consumer.spec.durable_name,
            stream_sequence=message.sequence,
            attempt=entry.attempts,
            subject=message.subject,
            headers=dict(message.headers),
            body=message.body,
        )

    def _next_new(self, consumer: _Consumer, stream: _Stream) -> StoredMessage | None:
        while consumer.cursor <= stream.last_sequence:
            message = stream.messages.get(consumer.cursor)
            consumer.cursor += 1
            if message is not None and any(
                subject_matches(pattern, message.subject)
                for pattern in consumer.spec.filter_subjects
            ):
                return message
        return None

    def _advise_max_deliveries(self, consumer: _Consumer, sequence: int, attempts: int) -> None:
        stream_name = consumer.spec.stream
        subject = f"{MAX_DELIVERIES_ADVISORY}.{stream_name}.{consumer.spec.durable_name}"
        advisory = {
            "type": "io.nats.jetstream.advisory.v1.max_deliver",
            "id": f"memory-advisory-{next(self._advisory_ids)}",
            "stream": stream_name,
            "consumer": consumer.spec.durable_name,
            "stream_seq": sequence,
            "deliveries": attempts,
        }
        # Like the server: an advisory that no stream stores is simply lost.
        with contextlib.suppress(BusError):
            self.publish(subject, body=json.dumps(advisory).encode(), headers={})

    def _stream_for(self, subject: str) -> _Stream:
        found = [
            stream
            for stream in self._streams.values()
            if any(subject_matches(pattern, subject) for pattern in stream.spec.subjects)
        ]
        if not found:
            raise BusError(f"no stream stores {subject!r}")
        return found[0]

    def _consumer(self, durable_name: str) -> _Consumer:
        consumer = self._consumers.get(durable_name)
        if consumer is None:
            raise BusError(f"consumer {durable_name} not found")
        return consumer

    def _discard_over_limit(self, stream: _Stream) -> None:
        """Drop the oldest messages while the stream holds more than ``max_bytes`` (the
        server's default discard policy)."""
        limit = stream.spec.max_bytes
        while limit >= 0 and stream.stored_bytes > limit and stream.messages:
            self._drop(stream, next(iter(stream.messages)))

    def _drop(self, stream: _Stream, sequence: int) -> None:
        del stream.messages[sequence]
        del stream.stored_at[sequence]
        stream.stored_bytes -= stream.sizes.pop(sequence, 0)

    def _expire(self, stream: _Stream) -> None:
        now = self._clock()
        for sequence in _leading_older_than(stream.stored_at, now - stream.spec.max_age_seconds):
            self._drop(stream, sequence)
        seen = {key: at for key, (_, at) in itertools.islice(stream.ids.items(), 64)}
        for message_id in _leading_older_than(seen, now - stream.spec.duplicate_window_seconds):
            del stream.ids[message_id]


def _leading_older_than(times: Mapping[Any, float], horizon: float) -> list[Any]:
    """Keys at the front of an insertion-ordered (= time-ordered) mapping older than horizon."""
    expired = []
    for key, at in times.items():
        if at >= horizon:
            break
        expired.append(key)
    return expired
