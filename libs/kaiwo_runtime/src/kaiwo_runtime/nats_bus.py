"""The :class:`~kaiwo_runtime.bus.Bus` on NATS JetStream, written with nats-py.

nats-py rather than FastStream because the bus needs what FastStream keeps out of reach:
``Nats-Msg-Id`` on every publish and ``PubAck.duplicate`` back, ``nak(delay)``/``term`` chosen
after a dead-letter publish, the delivery count and stream sequence of each message, direct
reads of stored messages by sequence (for the max-deliveries relay), and stream subject
transforms for partitions (docs/decisions/0005).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Iterator, Mapping
from functools import partial
from typing import Any, Final

import nats
import nats.errors
import nats.js.errors
import structlog
from kaiwo_contracts.events.envelope import MAX_MESSAGE_BYTES, Envelope
from kaiwo_contracts.events.streams import BusTopology, ConsumerSpec, StreamSpec
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js import api as js_api

from kaiwo_runtime.bus import (
    BusError,
    Delivery,
    Handler,
    PublishAck,
    PublishRefusedError,
    StoredMessage,
    check_size,
)
from kaiwo_runtime.cancellation import stop_if_cancelled
from kaiwo_runtime.dead_letters import dead_letter
from kaiwo_runtime.jetstream_acks import JetStreamAcks
from kaiwo_runtime.lanes import Lanes
from kaiwo_runtime.nats_connection import NatsConnection, connect_client
from kaiwo_runtime.pull_inbox import PullInbox
from kaiwo_runtime.settlement import (
    Ack,
    DeadLetter,
    Retry,
    Terminate,
    fetch_size,
    handle_batch,
    ordering_key,
    settle,
)

log = structlog.get_logger("kaiwo.bus.nats")


@contextlib.contextmanager
def bus_errors(what: str) -> Iterator[None]:
    """nats-py's errors as the port's :class:`BusError`, saying what failed (those a caller
    answers itself, such as a missing message or key, are caught before they get here)."""
    try:
        yield
    except (nats.errors.Error, nats.js.errors.APIError) as error:
        raise BusError(f"{what} failed: {error!r}") from error


_MESSAGE_TOO_LARGE = 10054
"""JetStream's error code for a message over the stream's ``max_msg_size``."""
_SHORTEST_NAK_DELAY = 0.001


PING_INTERVAL_SECONDS: Final = 5
MAX_OUTSTANDING_PINGS: Final = 2
"""A server that stops answering (frozen, its node gone without a reset) is taken as lost
after about three pings unanswered, 15 s: nats-py's defaults (120 s, 2) left a service
"connected", and its readiness green, for about six minutes. A ping every 5 s per
connection costs nothing measurable."""


class NatsBus:
    """A connected bus. Build it with :meth:`connect`; close it with :meth:`close`."""

    def __init__(
        self, *, client: Client, topology: BusTopology, publish_timeout: float = 5.0
    ) -> None:
        self.topology = topology
        self._client = client
        self._js: JetStreamContext = client.jetstream(timeout=publish_timeout)
        self._acks = JetStreamAcks.of(client)
        self._publish_timeout = publish_timeout
        self._inboxes: dict[str, PullInbox] = {}
        # Set by close(): nats-py reports its own close through the disconnect callback.
        self.closing = False

    @classmethod
    async def connect(
        cls,
        connection: NatsConnection | str,
        *,
        topology: BusTopology,
        name: str = "kaiwo",
        publish_timeout: float = 5.0,
    ) -> NatsBus:
        """Connect (reconnecting forever after a loss, as a long-running service should).

        ``connection`` carries the identity's credentials, TLS and inbox; a bare URL connects
        without credentials (a server without authentication). Logs show the URL redacted.
        """
        if isinstance(connection, str):
            connection = NatsConnection(url=connection, name=name)
        shown = connection.redacted_url

        async def on_error(error: Exception) -> None:
            # A timeout's text is empty: its type is what says what happened.
            log.warning("nats connection error", error=str(error) or type(error).__name__)

        bus: NatsBus | None = None

        async def on_disconnect() -> None:
            if bus is not None and bus.closing:
                log.debug("nats connection closed", url=shown)
            else:
                log.warning("nats disconnected", url=shown)

        async def on_reconnect() -> None:
            log.info("nats reconnected", url=shown)

        client = await connect_client(
            connection,
            max_reconnect_attempts=-1,
            reconnect_time_wait=0.2,
            ping_interval=PING_INTERVAL_SECONDS,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
            error_cb=on_error,
            disconnected_cb=on_disconnect,
            reconnected_cb=on_reconnect,
        )
        bus = cls(client=client, topology=topology, publish_timeout=publish_timeout)
        return bus

    @property
    def client(self) -> Client:
        return self._client

    async def close(self) -> None:
        self._inboxes.clear()
        # Acks are already written; flush them, then close. (drain() would wait out its
        # full timeout on the pull subscriptions' inboxes.)
        if self._client.is_connected:
            with contextlib.suppress(nats.errors.TimeoutError):
                await self._client.flush(timeout=2)
        if not self._client.is_closed:
            self.closing = True
            await self._client.close()

    # ------------------------------------------------------------------ topology

    async def ensure_streams(self) -> None:
        await self.declare(self.topology)

    async def declare(self, topology: BusTopology) -> None:
        """Create or update the streams and consumers of ``topology`` (the bus's own, or
        another's, such as the messenger's)."""
        for stream in topology.streams:
            await self._ensure_stream(stream)
        for consumer in topology.consumers:
            await self.ensure_consumer(consumer)

    async def _ensure_stream(self, spec: StreamSpec) -> None:
        config = _stream_config(spec)
        try:
            await self._js.stream_info(spec.name)
        except nats.js.errors.NotFoundError:
            await self._js.add_stream(config)
            log.info("stream created", stream=spec.name)
            return
        await self._js.update_stream(config)

    async def missing(
        self, *, streams: Iterable[str] = (), consumers: Iterable[str] = ()
    ) -> tuple[str, ...]:
        """Which of ``streams`` and of the topology's ``consumers`` (durable names) do not
        exist; for an identity that may use them but not declare them."""
        absent: list[str] = []
        for stream in streams:
            try:
                await self._js.stream_info(stream)
            except nats.js.errors.NotFoundError:
                absent.append(f"stream {stream}")
        for durable in consumers:
            spec = self.topology.consumer(durable)
            try:
                await self._js.consumer_info(spec.stream, durable)
            except nats.js.errors.NotFoundError:
                absent.append(f"consumer {durable} of {spec.stream}")
        return tuple(absent)

    async def ensure_consumer(self, spec: ConsumerSpec) -> None:
        """Create or update one durable consumer (the server does both for a durable name)."""
        await self._js.add_consumer(spec.stream, _consumer_config(spec))

    # ------------------------------------------------------------------ publishing

    async def publish(self, envelope: Envelope[Any], subject: str) -> PublishAck:
        headers, body = envelope.to_nats()
        return await self.publish_raw(subject, body=body, headers=headers)

    async def publish_raw(
        self, subject: str, *, body: bytes, headers: Mapping[str, str]
    ) -> PublishAck:
        # Checked here, headers included: nats-py checks only the body, and the server
        # answers a message over its max_payload by closing the connection.
        limit = self._message_limit()
        check_size(subject, headers, body, limit=limit)
        try:
            ack = await self._acks.publish(
                subject, body, headers=headers, timeout=self._publish_timeout
            )
        except nats.errors.MaxPayloadError as error:
            raise PublishRefusedError(
                f"{subject!r}: {error}", size=len(body), limit=self._client.max_payload
            ) from error
        except nats.js.errors.APIError as error:
            if error.err_code == _MESSAGE_TOO_LARGE:  # the stream's own max_msg_size
                raise PublishRefusedError(
                    f"{subject!r}: {error.description}", size=len(body), limit=limit
                ) from error
            raise BusError(f"publish to {subject!r} failed: {error!r}") from error
        except nats.js.errors.NoStreamResponseError as error:
            raise BusError(f"no stream stores {subject!r}") from error
        except (nats.errors.TimeoutError, nats.errors.ConnectionClosedError) as error:
            raise BusError(f"publish to {subject!r} failed: {error!r}") from error
        return PublishAck(stream=ack.stream, sequence=ack.sequence, duplicate=ack.duplicate)

    def _message_limit(self) -> int:
        """The largest message to send: ours, or the server's if it allows less."""
        return min(self._client.max_payload or MAX_MESSAGE_BYTES, MAX_MESSAGE_BYTES)

    async def read_stored(self, stream: str, sequence: int) -> StoredMessage | None:
        with bus_errors(f"reading {stream} at {sequence}"):
            try:
                raw = await self._js.get_msg(stream, seq=sequence)
            except nats.js.errors.NotFoundError:
                return None
        return StoredMessage(
            stream=stream,
            sequence=sequence,
            subject=raw.subject or "",
            headers=dict(raw.headers or {}),
            body=raw.data or b"",
        )

    async def read_next_stored(
        self, stream: str, sequence: int, *, subjects: str
    ) -> StoredMessage | None:
        with bus_errors(f"reading {stream} from {sequence}"):
            try:
                raw = await self._js.get_msg(
                    stream, seq=max(sequence, 1), subject=subjects, next=True
                )
            except nats.js.errors.NotFoundError:
                return None
        return StoredMessage(
            stream=stream,
            sequence=raw.seq or 0,
            subject=raw.subject or "",
            headers=dict(raw.headers or {}),
            body=raw.data or b"",
        )

    # ------------------------------------------------------------------ consuming

    async def process(
        self,
        consumer: ConsumerSpec,
        handler: Handler,
        *,
        max_messages: int = 16,
        wait_seconds: float = 1.0,
        lanes: Lanes | None = None,
    ) -> int:
        stop_if_cancelled()  # a handler's publish may have swallowed it; its loop calls again
        inbox = await self._inbox(consumer)
        batch = await fetch_size(consumer, max_messages, lanes)
        messages = await inbox.pull(batch=batch, wait_seconds=wait_seconds)
        # From now until each is settled, its wait for its turn included (decision 0234).
        kept = {id(message): KeptInProgress(message, consumer) for message in messages}
        handle_one = partial(self._handle_kept, kept=kept, consumer=consumer, handler=handler)
        if lanes is not None:
            for message in messages:
                started = lanes.start(ordering_key(message.subject), partial(handle_one, message))
                # Also when the lane is cancelled before the message's turn came.
                started.add_done_callback(kept[id(message)].release)
            return len(messages)
        try:
            await handle_batch(messages, consumer, handle_one)
        finally:
            for progress in kept.values():
                progress.release()
        return len(messages)

    async def _handle_kept(
        self,
        message: Msg,
        *,
        kept: Mapping[int, KeptInProgress],
        consumer: ConsumerSpec,
        handler: Handler,
    ) -> None:
        try:
            await self._handle(message, consumer, handler)
        finally:
            kept[id(message)].release()

    async def _inbox(self, consumer: ConsumerSpec) -> PullInbox:
        found = self._inboxes.get(consumer.durable_name)
        if found is None:
            found = await PullInbox.opened(self._client, consumer)
            self._inboxes[consumer.durable_name] = found
        return found

    async def _handle(self, message: Msg, consumer: ConsumerSpec, handler: Handler) -> None:
        metadata = message.metadata
        delivery = Delivery(
            stream=metadata.stream,
            consumer=consumer.durable_name,
            stream_sequence=metadata.sequence.stream,
            attempt=metadata.num_delivered,
            subject=message.subject,
            headers=dict(message.headers or {}),
            body=message.data,
        )
        match await settle(handler, delivery, consumer):
            case Ack() if consumer.max_ack_pending == 1:
                # The next message can only come once this one is settled: ask for it now.
                await self._inboxes[consumer.durable_name].acknowledge_asking_for_the_next(message)
            case Ack():
                await message.ack()
            case Retry(delay=delay):
                await message.nak(delay=nak_delay(consumer, attempt=delivery.attempt, wanted=delay))
            case DeadLetter(reason=reason):
                subject, headers, body = dead_letter(
                    delivery,
                    consumer=consumer.durable_name,
                    reason=reason,
                    attempts=delivery.attempt,
                    max_bytes=self._message_limit(),
                )
                # Publish first: if it fails the message is redelivered, never lost; unless
                # the bus refuses the dead letter for good (it stays in its own stream).
                try:
                    await self.publish_raw(subject, body=body, headers=headers)
                except PublishRefusedError as error:
                    log.error(
                        "dead letter refused by the bus; message terminated",
                        stream=delivery.stream,
                        seq=delivery.stream_sequence,
                        error=str(error),
                    )
                await message.term()
            case Terminate():
                await message.term()


class KeptInProgress:
    """Tells the server that a fetched message is still being worked on (``+WPI``), every
    third of its consumer's shortest ack wait, until :meth:`release`.

    The server redelivers a message unacknowledged after its ack wait (``backoff[0]``, 5 s),
    even to the consumer that still handles it. A plan whose API calls were being retried, or
    that waited in its owner's lane behind one, came back while in hand, queued behind
    itself, and was carried out again at once: its backoff skipped, its deliveries used up,
    and the overloaded API server asked twice. A handler that dies still lets it come back:
    the progress is told by the process that holds the message.
    """

    __slots__ = ("_every", "_loop", "_message", "_telling", "_timer")

    def __init__(self, message: Msg, consumer: ConsumerSpec) -> None:
        ack_waits = consumer.backoff_seconds or (consumer.ack_wait_seconds,)
        self._every = min(ack_waits) / 3
        self._message = message
        self._loop = asyncio.get_running_loop()
        self._telling: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = self._loop.call_later(self._every, self._tell)

    def release(self, _: object = None) -> None:
        """Stop telling (the message is settled, or given up unsettled); idempotent. A
        progress not yet sent is not sent: after a ``nak`` it would restart the ack wait,
        and the retry would come after that instead of the ``nak``'s delay."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._telling is not None:
            self._telling.cancel()

    def _tell(self) -> None:
        if self._timer is None:
            return
        self._timer = self._loop.call_later(self._every, self._tell)
        if self._telling is None or self._telling.done():
            self._telling = self._loop.create_task(self._progress())

    async def _progress(self) -> None:
        # Settled meanwhile, or disconnected: nothing to keep (the server redelivers).
        with contextlib.suppress(nats.errors.Error):
            await self._message.in_progress()


def nak_delay(consumer: ConsumerSpec, *, attempt: int, wanted: float) -> float:
    """The delay to send with a ``nak`` so that delivery ``attempt`` comes back after
    ``wanted`` seconds (0: at once).

    With a backoff list the server does not wait the delay it is given: it dates the message
    back by the ack wait (``backoff[0]``) plus the delay, then redelivers once the ack wait
    of that delivery (``backoff[attempt - 1]``) has passed since, i.e. after
    ``delay - backoff[0] + backoff[attempt - 1]`` (measured against nats-server 2.x). Naks
    of the backoff's own delays waited 5, 25, 115, 355, 355 s instead of 5, 15, 60, 180,
    180: a poison message held its consumer for 855 s instead of the 260 s decision 0005
    promises. A wanted delay shorter than that schedule allows comes back as soon as it can.
    """
    backoff = consumer.backoff_seconds
    if wanted <= 0 or not backoff:
        return max(wanted, 0.0)
    ack_wait = backoff[min(max(attempt, 1), len(backoff)) - 1]
    return max(wanted + backoff[0] - ack_wait, _SHORTEST_NAK_DELAY)


def _stream_config(spec: StreamSpec) -> js_api.StreamConfig:
    transform = (
        js_api.SubjectTransform(
            src=spec.subject_transform.source, dest=spec.subject_transform.destination
        )
        if spec.subject_transform
        else None
    )
    return js_api.StreamConfig(
        name=spec.name,
        description=spec.description,
        subjects=list(spec.subjects),
        retention=js_api.RetentionPolicy(spec.retention),
        storage=js_api.StorageType(spec.storage),
        max_age=spec.max_age_seconds,
        max_bytes=spec.max_bytes,
        duplicate_window=spec.duplicate_window_seconds,
        num_replicas=spec.replicas,
        subject_transform=transform,
        republish=(
            js_api.RePublish(src=spec.republish.source, dest=spec.republish.destination)
            if spec.republish
            else None
        ),
    )


def _consumer_config(spec: ConsumerSpec) -> js_api.ConsumerConfig:
    filters = list(spec.filter_subjects)
    return js_api.ConsumerConfig(
        durable_name=spec.durable_name,
        description=spec.description,
        ack_policy=js_api.AckPolicy.EXPLICIT,
        deliver_policy=js_api.DeliverPolicy.ALL,
        ack_wait=spec.backoff_seconds[0] if spec.backoff_seconds else spec.ack_wait_seconds,
        backoff=list(spec.backoff_seconds) or None,
        max_deliver=spec.max_deliver,
        max_ack_pending=spec.max_ack_pending,
        filter_subject=filters[0] if len(filters) == 1 else None,
        filter_subjects=filters if len(filters) > 1 else None,
    )
