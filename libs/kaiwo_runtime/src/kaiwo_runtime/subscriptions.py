"""Plain (core NATS) subscriptions: messages as they are published, nothing stored, nothing
to settle. How a gateway replica hears every replica's load reports (decision 0027); a
message published while nobody listens is simply not heard, which is what a report that is
sent again every interval wants.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from nats.aio.client import Client
from nats.aio.msg import Msg


@dataclass(frozen=True, slots=True)
class Published:
    subject: str
    headers: Mapping[str, str]
    body: bytes


Receiver = Callable[[Published], Awaitable[None]]


class NatsSubscriber:
    def __init__(self, client: Client) -> None:
        self._client = client

    async def subscribe(self, subject: str, receive: Receiver) -> None:
        """Hand every message published on ``subject`` (a NATS filter) to ``receive``, one
        at a time, for as long as the connection lives."""

        async def received(message: Msg) -> None:
            await receive(
                Published(
                    subject=message.subject,
                    headers=dict(message.headers or {}),
                    body=message.data,
                )
            )

        await self._client.subscribe(subject, cb=received)
