"""Does the event store hold exactly what JetStream holds, and is every message settled?

Every message of ``KAIWO_OBS``, ``KAIWO_PLAN`` and ``KAIWO_RES`` must be in the store exactly
once (a copy published twice under one event id is one row), nothing may be in the store that
the streams never held, and once the operator is idle every durable consumer of a running
service has nothing pending and nothing awaiting an ack.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Final

import nats.js.errors
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    BusTopology,
)
from kaiwo_eventstore import EventStore, StoredEvent
from nats.js import JetStreamContext

RECORDED_STREAMS: Final = (OBSERVED_STREAM, PLAN_STREAM, RESULT_STREAM)
IDLE_CONSUMERS_EXCLUDED: Final = frozenset({"monitor-obs"})
"""Consumers of services these tests do not run (the monitor needs Prometheus)."""
EVENT_ID_HEADER: Final = "ce-id"


@dataclass(frozen=True, slots=True)
class StreamLedger:
    """One NATS stream next to what the store recorded from it."""

    stream: str
    message_ids: tuple[str, ...]
    """The event id of each stored message, in stream order (copies included)."""
    recorded_ids: tuple[str, ...]
    """The event ids the store holds with this stream in their metadata."""

    @property
    def missing(self) -> set[str]:
        return set(self.message_ids) - set(self.recorded_ids)

    @property
    def unexpected(self) -> set[str]:
        return set(self.recorded_ids) - set(self.message_ids)

    @property
    def recorded_twice(self) -> set[str]:
        return {event_id for event_id, n in Counter(self.recorded_ids).items() if n > 1}

    @property
    def exact(self) -> bool:
        return not (self.missing or self.unexpected or self.recorded_twice)


async def stream_message_ids(js: JetStreamContext, stream: str) -> tuple[str, ...]:
    info = await js.stream_info(stream)
    first, last = info.state.first_seq, info.state.last_seq
    ids: list[str] = []
    for sequence in range(first, last + 1) if info.state.messages else ():
        try:
            message = await js.get_msg(stream, seq=sequence)
        except nats.js.errors.NotFoundError:
            continue
        headers = {key.lower(): value for key, value in (message.headers or {}).items()}
        ids.append(headers[EVENT_ID_HEADER])
    return tuple(ids)


async def recorded_events(store: EventStore) -> list[StoredEvent]:
    return [event async for batch in store.iter_all() for event in batch]


async def ledgers(js: JetStreamContext, store: EventStore) -> dict[str, StreamLedger]:
    events = await recorded_events(store)
    return {
        stream: StreamLedger(
            stream=stream,
            message_ids=await stream_message_ids(js, stream),
            recorded_ids=tuple(
                e.event_id for e in events if e.metadata.get("natsStream") == stream
            ),
        )
        for stream in RECORDED_STREAMS
    }


async def unsettled_consumers(js: JetStreamContext, topology: BusTopology) -> dict[str, str]:
    """Durable consumers with messages pending or unacknowledged: name -> counts."""
    unsettled: dict[str, str] = {}
    for spec in topology.consumers:
        if spec.durable_name in IDLE_CONSUMERS_EXCLUDED:
            continue
        info = await js.consumer_info(spec.stream, spec.durable_name)
        if info.num_pending or info.num_ack_pending:
            unsettled[spec.durable_name] = (
                f"pending={info.num_pending} ack_pending={info.num_ack_pending}"
            )
    return unsettled


async def dead_letters(js: JetStreamContext) -> int:
    return int((await js.stream_info(DEAD_LETTER_STREAM)).state.messages)
