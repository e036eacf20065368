"""Reading a stream's stored messages in order, read-only, and being woken when one is
published: how the gateway and the console follow ``KAIWO_OBS`` (decision 0051).

``next_stored`` asks JetStream for the next stored message of a subject filter after a
sequence (``STREAM.MSG.GET`` with ``next_by_subj``), so a reader keeps one cursor per filter
and needs no consumer: an identity allowed to create consumers on ``KAIWO_OBS`` could
reconfigure the planner's. A plain subscription to the same subjects only wakes the reader.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import nats.js.errors
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg

log = structlog.get_logger("kaiwo.stored_reads")


@dataclass(frozen=True, slots=True)
class StoredObservation:
    sequence: int
    subject: str
    headers: dict[str, str]
    body: bytes


class ObservationSource(Protocol):
    """Stored messages of a stream, and wake-ups when one is published."""

    async def next_stored(
        self, *, stream: str, subject: str, after: int
    ) -> StoredObservation | None: ...

    async def subscribe(self, subject: str, wake: Callable[[], None]) -> None: ...


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


@dataclass
class StoredReader:
    """Reads every stored message of ``filters`` once, in stream order: all of them at
    :meth:`start`, then new ones whenever woken or every ``resync_seconds`` (a missed wake-up
    costs at most that). ``apply`` takes each message in (True: it changed something);
    ``on_change`` is called once after a read that changed something."""

    source: ObservationSource
    stream: str
    filters: tuple[str, ...]
    apply: Callable[[StoredObservation], bool]
    on_change: Callable[[], None]
    resync_seconds: float = 30.0
    cursors: dict[str, int] = field(default_factory=dict)
    caught_up: bool = False
    _wake: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        """Subscribe for wake-ups, then read everything stored so far. With the stream out
        of reach (NATS restarting), :meth:`run` reads it as soon as it answers, and
        ``caught_up`` (readiness) waits for that."""
        for subject in self.filters:
            await self.source.subscribe(subject, self._wake.set)
        await self._read_once()

    async def run(self, stop: asyncio.Event) -> None:
        """Read new messages whenever woken, or every ``resync_seconds`` (every second
        until the first read succeeded), until ``stop``."""
        stopping = asyncio.ensure_future(stop.wait())
        try:
            while not stop.is_set():
                woken = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait(
                    (woken, stopping),
                    timeout=self.resync_seconds if self.caught_up else min(self.resync_seconds, 1),
                    return_when=asyncio.FIRST_COMPLETED,
                )
                woken.cancel()
                if stop.is_set():
                    return
                await self._read_once()
        finally:
            stopping.cancel()

    async def _read_once(self) -> None:
        self._wake.clear()
        try:
            await self.catch_up()
        except Exception as error:  # the next wake-up or resync tries again
            log.warning("reading stored messages failed", stream=self.stream, error=str(error))
            return
        self.caught_up = True

    async def catch_up(self) -> None:
        """Read what was stored since the last read; the cursors keep what was read when a
        read fails part-way, and what it changed is told all the same."""
        changed = False
        try:
            for subject in self.filters:
                while True:
                    after = self.cursors.get(subject, 0)
                    stored = await self.source.next_stored(
                        stream=self.stream, subject=subject, after=after
                    )
                    if stored is None:
                        break
                    self.cursors[subject] = stored.sequence
                    changed = self.apply(stored) or changed
        finally:
            if changed:
                self.on_change()
