"""The observation source on a real NATS connection (nats-py): stored reads and wake-ups."""

from __future__ import annotations

from collections.abc import Callable

import nats.js.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from kaiwo_gateway.observations import StoredObservation


class NatsObservationSource:
    def __init__(self, client: Client) -> None:
        self._client = client
        self._jsm = client.jsm()

    async def next_stored(
        self, *, stream: str, subject: str, after: int
    ) -> StoredObservation | None:
        try:
            raw = await self._jsm.get_msg(stream, seq=after + 1, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return None
        return StoredObservation(
            sequence=int(raw.seq or 0),
            subject=raw.subject or "",
            headers=dict(raw.headers or {}),
            body=raw.data or b"",
        )

    async def subscribe(self, subject: str, wake: Callable[[], None]) -> None:
        async def woken(_message: Msg) -> None:
            wake()

        await self._client.subscribe(subject, cb=woken)
