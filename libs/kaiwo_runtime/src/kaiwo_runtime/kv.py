"""A small key-value port for service state that must survive a restart.

The watcher keeps its resourceVersion checkpoints here, the planner its projection snapshot
and last plan fingerprints, the executor what it last applied. Two adapters with one
behaviour (checked by ``tests/contract/test_kv_contract.py``): :class:`NatsKeyValue` on a
JetStream key-value bucket, and :class:`MemoryKeyValue` for unit tests.

Keys are free text; they are escaped into the bucket's key alphabet (``[-/_=.a-zA-Z0-9]``)
so a Kubernetes name or a ``kind/uid`` can be used as is. A bucket out of reach (NATS
restarting, the connection closed, a request unanswered) raises :class:`BusError`, the error
callers already wait out for the bus itself.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Protocol

from nats.aio.client import Client
from nats.js.client import JetStreamContext
from nats.js.errors import (
    APIError,
    BucketNotFoundError,
    InvalidKeyError,
    KeyNotFoundError,
    KeyValueError,
    KeyWrongLastSequenceError,
    NotFoundError,
)
from nats.js.kv import KV_DEL, KV_OP, KV_PURGE
from nats.js.kv import KeyValue as NatsKv

from kaiwo_runtime.bus import BusError
from kaiwo_runtime.jetstream_acks import JetStreamAcks
from kaiwo_runtime.nats_bus import bus_errors

_WRITE_TIMEOUT_SECONDS = 5.0
"""How long a write waits for JetStream's acknowledgement (nats-py's default for buckets)."""
_EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
_WRONG_LAST_SEQUENCE = frozenset({10071, 10164})
"""JetStream's error codes for a write whose expected last revision of the key is not the
key's (nats-py raises ``KeyWrongLastSequenceError`` for these)."""

_CREATE_ATTEMPTS = 3
"""Writes a create tries while another writer deletes and writes the key in between."""

_UNSAFE = re.compile(r"[^-/_=.a-zA-Z0-9]|_")


def escape_key(key: str) -> str:
    """Map any text to a valid bucket key, reversibly (``_`` is the escape character)."""
    return _UNSAFE.sub(lambda m: "".join(f"_{b:02X}" for b in m.group().encode()), key)


def unescape_key(key: str) -> str:
    raw = bytearray()
    i = 0
    while i < len(key):
        if key[i] == "_":
            raw.append(int(key[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(key[i].encode())
            i += 1
    return raw.decode()


class KeyValue(Protocol):
    """Latest value per key; no history is promised. Out of reach: :class:`BusError`."""

    async def get(self, key: str) -> bytes | None: ...

    async def put(self, key: str, value: bytes) -> None: ...

    async def create(self, key: str, value: bytes) -> bytes | None:
        """Write ``value`` only if ``key`` holds nothing (never written, or deleted).

        Returns None when written, else the value ``key`` holds (and writes nothing): one
        round trip, where a read and then a write are two, for a key that is usually new.
        """
        ...

    async def delete(self, key: str) -> None: ...

    def items(self) -> AsyncIterator[tuple[str, bytes]]: ...


class MemoryKeyValue:
    """In-memory :class:`KeyValue`; share one instance to simulate a restart, and
    :meth:`close` it to be out of reach."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._closed = False

    def close(self) -> None:
        """Every call from now on raises :class:`BusError`, as a closed connection's would."""
        self._closed = True

    def _reachable(self) -> dict[str, bytes]:
        if self._closed:
            raise BusError("the bucket's connection is closed")
        return self._data

    async def get(self, key: str) -> bytes | None:
        return self._reachable().get(key)

    async def put(self, key: str, value: bytes) -> None:
        self._reachable()[key] = bytes(value)

    async def create(self, key: str, value: bytes) -> bytes | None:
        data = self._reachable()
        held = data.get(key)
        if held is None:
            data[key] = bytes(value)
        return held

    async def delete(self, key: str) -> None:
        self._reachable().pop(key, None)

    async def items(self) -> AsyncIterator[tuple[str, bytes]]:
        data = self._reachable()
        for key in sorted(data):
            yield key, data[key]


class ForeignBucketError(BusError):
    """A bucket's stream holds subjects of others: not a key-value bucket, and not opened."""


def checked_bucket_subjects(bucket: str, subjects: Sequence[str] | None) -> None:
    """A key-value bucket's stream holds its own keys' subjects and nothing else.

    The right to create a bucket is the right to create its stream, and the server checks
    the stream's name only: a key that may create ``KV_kaiwo-autoscaler`` before the gateway
    does could make it capture ``_INBOX.planner.>``, every reply to the planner, and read
    them back from the "bucket". A service that found such a bucket would go on writing its
    state into it and never know; it refuses it instead, naming the subjects
    (decision 0222)."""
    own = [f"$KV.{bucket}.>"]
    if list(subjects or ()) != own:
        raise ForeignBucketError(
            f"the key-value bucket {bucket!r} captures {list(subjects or ())}, not only its "
            f"own keys ({own[0]}): someone made it to read other subjects; delete the stream "
            f"KV_{bucket} as the administrator (nats stream rm KV_{bucket}) and start again"
        )


async def declare_bucket(
    client: Client, bucket: str, *, replicas: int = 1, ttl: float | None = None
) -> NatsKv:
    """``bucket``, created as the services make it (one value per key, ``ttl`` for a lease
    bucket) unless it exists, its subjects checked (:func:`checked_bucket_subjects`): what a
    service opens, and what the administrator's provisioning declares for every bucket before
    any service key could make one (decision 0222)."""
    from nats.js.api import KeyValueConfig

    js = client.jetstream()
    try:
        kv = await js.key_value(bucket)
    except BucketNotFoundError:
        kv = await js.create_key_value(
            KeyValueConfig(bucket=bucket, history=1, replicas=replicas, ttl=ttl)
        )
    return await checked_bucket(kv, bucket)


async def declare_buckets(
    client: Client, buckets: Mapping[str, float | None], *, replicas: int = 1
) -> None:
    """:func:`declare_bucket` for each bucket, with its ttl (None: none)."""
    for bucket, ttl in buckets.items():
        await declare_bucket(client, bucket, replicas=replicas, ttl=ttl)


async def checked_bucket(kv: NatsKv, bucket: str) -> NatsKv:
    """``kv`` once its stream holds its own keys only (:func:`checked_bucket_subjects`)."""
    status = await kv.status()
    checked_bucket_subjects(bucket, status.stream_info.config.subjects)
    return kv


class NatsKeyValue:
    """A JetStream key-value bucket (created on first use, file storage, one value per key)."""

    def __init__(
        self,
        bucket: NatsKv,
        *,
        js: JetStreamContext,
        name: str,
        acks: JetStreamAcks | None = None,
    ) -> None:
        self._bucket = bucket
        self._js = js
        # Writes acknowledged on the connection's shared reply subscription (decision
        # 0257); without one, through nats-py's bucket.
        self._acks = acks
        self._stream = f"KV_{name}"
        self._prefix = f"$KV.{name}."

    @classmethod
    async def open(cls, client: Client, bucket: str, *, replicas: int = 1) -> NatsKeyValue:
        kv = await declare_bucket(client, bucket, replicas=replicas)
        return cls(kv, js=client.jetstream(), name=bucket, acks=JetStreamAcks.of(client))

    @classmethod
    async def open_existing(cls, client: Client, bucket: str) -> NatsKeyValue | None:
        """Another service's bucket, to read: None while it does not exist (never created
        here, which would take it over)."""
        js = client.jetstream()
        try:
            kv = await js.key_value(bucket)
        except BucketNotFoundError:
            return None
        return cls(
            await checked_bucket(kv, bucket), js=js, name=bucket, acks=JetStreamAcks.of(client)
        )

    async def get(self, key: str) -> bytes | None:
        with bus_errors(f"reading {key!r} from {self._stream}"):
            try:
                entry = await self._bucket.get(escape_key(key))
            except KeyNotFoundError:
                return None
        return entry.value

    async def put(self, key: str, value: bytes) -> None:
        with bus_errors(f"writing {key!r} to {self._stream}"):
            if self._acks is None:
                await self._bucket.put(escape_key(key), value)
            else:
                await _write(self._acks, self._prefix, escape_key(key), value, headers=None)

    async def create(self, key: str, value: bytes) -> bytes | None:
        # Not nats-py's create(): when the key exists it reads it only to tell a deletion
        # apart, and a third round trip would then read the value. Here a refused write
        # reads the value once; a deleted key is written over its marker's revision.
        escaped = escape_key(key)
        last = 0
        for _ in range(_CREATE_ATTEMPTS):
            with bus_errors(f"creating {key!r} in {self._stream}"):
                try:
                    await self._update(escaped, value, last=last)
                    return None
                except KeyWrongLastSequenceError:
                    pass
                try:
                    return (await self._bucket.get(escaped)).value or b""
                except KeyNotFoundError as deleted:
                    last = (deleted.entry.revision or 0) if deleted.entry is not None else 0
        raise KeyValueError(description=f"key {key!r} kept changing while it was created")

    async def _update(self, escaped: str, value: bytes, *, last: int) -> None:
        """Write ``value`` if the key's last revision is ``last`` (0: the key has none);
        ``KeyWrongLastSequenceError`` otherwise, as nats-py's ``update``."""
        if self._acks is None:
            await self._bucket.update(escaped, value, last=last)
            return
        try:
            await _write(
                self._acks,
                self._prefix,
                escaped,
                value,
                headers={_EXPECTED_LAST_SUBJECT_SEQUENCE: str(last)},
            )
        except APIError as error:
            if error.err_code in _WRONG_LAST_SEQUENCE:
                raise KeyWrongLastSequenceError(description=error.description) from error
            raise

    async def delete(self, key: str) -> None:
        with bus_errors(f"deleting {key!r} from {self._stream}"):
            try:
                await self._bucket.purge(escape_key(key))
            except KeyNotFoundError:
                return

    async def items(self) -> AsyncIterator[tuple[str, bytes]]:
        """Every key and its value: the bucket's stream read in order up to its last message,
        a later message of a key replacing an earlier one, a delete or purge removing it.

        Not with nats-py's ``keys()``: its watcher reports the end of the keys when the server
        says nothing is left to deliver and the client has not counted a delivery yet. The
        server sends the two from different places, so that is also the case while the first
        key is on its way: about one listing in 200 came back empty for a bucket that was not
        (a monitor taking over restarted every underutilized stretch).
        """
        with bus_errors(f"listing {self._stream}"):
            latest = await self._latest()
        for key in sorted(latest):
            value = latest[key]
            if value is not None:
                yield unescape_key(key), value

    async def _latest(self) -> dict[str, bytes | None]:
        """Each key's last value in the bucket's stream (None: deleted or purged)."""
        last = (await self._js.stream_info(self._stream)).state.last_seq
        latest: dict[str, bytes | None] = {}
        sequence = 1
        while sequence <= last:
            try:
                stored = await self._js.get_msg(
                    self._stream, seq=sequence, subject=f"{self._prefix}>", next=True
                )
            except NotFoundError:
                break
            if stored.seq is None or stored.seq > last:
                break
            sequence = stored.seq + 1
            removed = (stored.headers or {}).get(KV_OP) in (KV_DEL, KV_PURGE)
            key = (stored.subject or "").removeprefix(self._prefix)
            latest[key] = None if removed else (stored.data or b"")
        return latest


async def _write(
    acks: JetStreamAcks,
    prefix: str,
    escaped: str,
    value: bytes,
    *,
    headers: dict[str, str] | None,
) -> None:
    """Write the value of the key ``escaped`` in the bucket whose subjects start ``prefix``."""
    # The key checks nats-py's bucket makes (escaping gives the alphabet, not these).
    if not escaped or escaped.startswith(".") or escaped.endswith("."):
        raise InvalidKeyError(escaped)
    await acks.publish(f"{prefix}{escaped}", value, headers=headers, timeout=_WRITE_TIMEOUT_SECONDS)
