"""What the messenger publishes for a request it settled: the answer, and for a dead request
the request itself with the reason (decision 0057)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kaiwo_contracts.events.messenger import (
    dead_subject,
    response_subject,
)
from kaiwo_runtime.batch_consumer import PulledMessage

from kaiwo_gateway.domain.messages import (
    DEAD_REASON_HEADER,
    DELIVERIES_HEADER,
    MESSAGE_ID_HEADER,
    REQUEST_ID_HEADER,
    Reply,
    echoed_headers,
    request_id,
    response_document,
)


class Publisher(Protocol):
    async def publish(self, subject: str, *, body: bytes, headers: Mapping[str, str]) -> None: ...


async def publish_settled(
    queue: Publisher,
    namespace: str,
    message: PulledMessage,
    settled: Reply,
    request_metadata: Any,
    headers: Mapping[str, str],
) -> None:
    """The answer to a settled request, to the tenant's response subject, and when it is dead
    (no retry left) a copy of the request with the reason, to its dead-letter subject."""
    received = message.delivery
    sequence = received.stream_sequence
    echoed = echoed_headers(headers.items())
    identity = request_id(headers, sequence=sequence)
    if settled.dead_reason is not None:
        await queue.publish(
            dead_subject(namespace),
            body=received.body,
            headers={
                **echoed,
                REQUEST_ID_HEADER: identity,
                DEAD_REASON_HEADER: settled.dead_reason,
                DELIVERIES_HEADER: str(received.attempt),
                MESSAGE_ID_HEADER: f"dead-{sequence}",
            },
        )
    # The answer's own id is the request's sequence: an answer stored again for a request
    # delivered again (the ack was lost) is dropped by the stream as a copy.
    await queue.publish(
        response_subject(namespace),
        body=response_document(request_metadata, settled.answer),
        headers={
            **echoed,
            REQUEST_ID_HEADER: identity,
            MESSAGE_ID_HEADER: f"answer-{sequence}",
        },
    )
