"""A lease port: one holder per name at a time, kept only while it is renewed.

The planner and the executor each read one durable JetStream consumer and must be its only
reader: a second replica pulling from the same consumer would receive half the messages,
and its planner would plan from half a cluster. A replica therefore works only while it
holds a lease named after its role (see :mod:`kaiwo_runtime.single_active`).

Two adapters with one behaviour (``tests/contract/test_lease_contract.py``):
:class:`NatsLeaseStore`, a JetStream key-value bucket whose ``ttl`` is the lease duration
(a write is a claim or a renewal; compare-and-set by revision makes it exclusive; the server
drops a key not renewed within the ttl), and :class:`MemoryLeaseStore` for unit tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import structlog
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.errors import (
    BadRequestError,
    KeyDeletedError,
    KeyNotFoundError,
    KeyWrongLastSequenceError,
)
from nats.js.kv import KeyValue as NatsKv

from kaiwo_runtime.kv import NatsKeyValue, declare_bucket, escape_key

log = structlog.get_logger("kaiwo.leases")

_WRONG_LAST_SEQUENCE = 10071
"""JetStream's error code for a write whose expected last revision is not the latest."""


class LeaseStore(Protocol):
    """Claims, renewals and releases of named leases; a revision proves who wrote last."""

    @property
    def duration_seconds(self) -> float:
        """How long a claim or renewal holds without the next renewal."""
        ...

    async def claim(self, name: str, holder: str) -> int | None:
        """The lease's revision if ``holder`` got it; None while someone holds it."""
        ...

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        """The new revision; None when the lease is no longer the one at ``revision``."""
        ...

    async def release(self, name: str, *, revision: int) -> None:
        """Give the lease up, if it is still the one at ``revision``."""
        ...

    async def holder(self, name: str) -> str | None:
        """Who holds the lease now (None: nobody)."""
        ...

    async def names(self, prefix: str) -> tuple[str, ...]:
        """The leases held now whose names start with ``prefix``, sorted (membership)."""
        ...


@dataclass(frozen=True, slots=True)
class _Held:
    holder: str
    revision: int
    written_at: float


class MemoryLeaseStore:
    """In-memory :class:`LeaseStore`; share one instance between replicas in a test."""

    def __init__(
        self, *, duration_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._duration = duration_seconds
        self._clock = clock
        self._leases: dict[str, _Held] = {}
        self._revision = 0

    @property
    def duration_seconds(self) -> float:
        return self._duration

    async def claim(self, name: str, holder: str) -> int | None:
        if self._current(name) is not None:
            return None
        return self._write(name, holder)

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        held = self._current(name)
        if held is None or held.revision != revision:
            return None
        return self._write(name, holder)

    async def release(self, name: str, *, revision: int) -> None:
        held = self._current(name)
        if held is not None and held.revision == revision:
            del self._leases[name]

    async def holder(self, name: str) -> str | None:
        held = self._current(name)
        return held.holder if held else None

    async def names(self, prefix: str) -> tuple[str, ...]:
        return tuple(
            sorted(n for n in self._leases if n.startswith(prefix) and self._current(n) is not None)
        )

    def _current(self, name: str) -> _Held | None:
        held = self._leases.get(name)
        if held is None or self._clock() - held.written_at >= self._duration:
            return None
        return held

    def _write(self, name: str, holder: str) -> int:
        self._revision += 1
        self._leases[name] = _Held(holder, self._revision, self._clock())
        return self._revision


class NatsLeaseStore:
    """Leases in a JetStream key-value bucket whose ttl is the lease duration."""

    def __init__(
        self, bucket: NatsKv, *, js: JetStreamContext, name: str, duration_seconds: float
    ) -> None:
        self._bucket = bucket
        self._entries = NatsKeyValue(bucket, js=js, name=name)
        self._duration = duration_seconds

    @classmethod
    async def open(
        cls, client: Client, bucket: str, *, duration_seconds: float, replicas: int = 1
    ) -> NatsLeaseStore:
        """Open ``bucket``, creating it with ttl ``duration_seconds`` when it is missing.

        The bucket's ttl is the lease duration for every replica, whatever each was given:
        if one replica's clock said 15 s and another's 5 s, the second could take over while
        the first still works. A different ``duration_seconds`` is logged and not used.
        """
        kv = await declare_bucket(client, bucket, replicas=replicas, ttl=duration_seconds)
        ttl = (await kv.status()).ttl
        if not ttl:
            raise ValueError(f"{bucket!r} keeps keys for ever: not a lease bucket")
        if abs(ttl - duration_seconds) > 1e-3:
            log.warning(
                "the lease bucket's duration wins over this replica's setting",
                bucket=bucket,
                bucket_seconds=ttl,
                configured_seconds=duration_seconds,
            )
        return cls(kv, js=client.jetstream(), name=bucket, duration_seconds=ttl)

    @property
    def duration_seconds(self) -> float:
        return self._duration

    async def claim(self, name: str, holder: str) -> int | None:
        try:
            return await self._bucket.create(escape_key(name), holder.encode())
        except KeyWrongLastSequenceError:
            return None

    async def renew(self, name: str, holder: str, *, revision: int) -> int | None:
        try:
            return await self._bucket.update(escape_key(name), holder.encode(), last=revision)
        except KeyWrongLastSequenceError:
            return None

    async def release(self, name: str, *, revision: int) -> None:
        try:
            await self._bucket.delete(escape_key(name), last=revision)
        except BadRequestError as error:
            # nats-py reports a delete's failed revision check as a plain bad request.
            if error.err_code != _WRONG_LAST_SEQUENCE:
                raise
            # Someone else holds the lease by now: theirs to keep.

    async def holder(self, name: str) -> str | None:
        try:
            entry = await self._bucket.get(escape_key(name))
        except (KeyNotFoundError, KeyDeletedError):
            return None
        return entry.value.decode() if entry.value else None

    async def names(self, prefix: str) -> tuple[str, ...]:
        # Read from the bucket's stream (NatsKeyValue.items), not nats-py's keys(), which
        # can end before the first key arrives; a released lease is a delete marker there,
        # and the server drops one not renewed within the ttl.
        held = [name async for name, _ in self._entries.items() if name.startswith(prefix)]
        return tuple(sorted(held))
