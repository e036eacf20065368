"""A key-value bucket out of reach for its first reads, as while NATS restarts."""

from __future__ import annotations

from collections.abc import AsyncIterator

from kaiwo_runtime.bus import BusError
from kaiwo_runtime.kv import KeyValue


class UnansweredReads:
    """Wraps a :class:`KeyValue`: its first ``failed_gets`` reads of a key and its first
    ``failed_listings`` listings raise :class:`BusError`, as the NATS adapter's do when a
    request goes unanswered."""

    def __init__(self, kv: KeyValue, *, failed_gets: int = 0, failed_listings: int = 0) -> None:
        self._kv = kv
        self.failed_gets = failed_gets
        self.failed_listings = failed_listings
        self.gets = 0
        self.listings = 0

    async def get(self, key: str) -> bytes | None:
        self.gets += 1
        if self.gets <= self.failed_gets:
            raise BusError("nats: timeout")
        return await self._kv.get(key)

    async def put(self, key: str, value: bytes) -> None:
        await self._kv.put(key, value)

    async def create(self, key: str, value: bytes) -> bytes | None:
        return await self._kv.create(key, value)

    async def delete(self, key: str) -> None:
        await self._kv.delete(key)

    async def items(self) -> AsyncIterator[tuple[str, bytes]]:
        self.listings += 1
        if self.listings <= self.failed_listings:
            raise BusError("nats: timeout")
        async for key, value in self._kv.items():
            yield key, value
