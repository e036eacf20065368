"""The messenger: requests to Models that arrive through JetStream, answered there too
(decision 0049; KubeAI's ``internal/messenger`` on the project's own bus).

Each gateway replica with ``KAIWO_MESSENGER_ENABLED`` reads the durable consumer
``gateway-messenger`` of ``KAIWO_MSG_REQ`` (declared by the administrator), at most
``handlers`` requests at a time. A request on ``kaiwo-messenger.<namespace>.requests`` may use
only the Models of ``<namespace>``; it goes the way an HTTP request goes (the same catalog,
the same balancer and strategy, the same retries of connections not accepted, the same wait
for a ready endpoint, counted in the same load reports, so it scales a Model from zero and
drives the autoscaler), and its answer is published to ``kaiwo-messenger.<namespace>.responses``
(stored in ``KAIWO_MSG_RES``) before the request is acknowledged. While it is handled it is
kept alive with progress acks, so a long generation is not delivered twice.

What is decided about each outcome (answer, deliver again, give up) is
:mod:`kaiwo_gateway.domain.messages`; this module does the I/O.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Protocol

import aiohttp
import structlog
from kaiwo_contracts.events.messenger import (
    REQUEST_STREAM,
    RESPONSE_STREAM,
    NotATenantError,
    messenger_consumer,
    tenant_of,
)
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_runtime.batch_consumer import PulledMessage
from kaiwo_runtime.bus import BusError
from kaiwo_runtime.work_queue import NotDeclaredError

from kaiwo_gateway.domain.load import model_ref
from kaiwo_gateway.domain.messages import (
    Answer,
    Failure,
    MessageRequest,
    Redeliver,
    Reply,
    backend_answer,
    failure,
    metadata_of,
    parse_request,
    settle,
    trace_headers,
)
from kaiwo_gateway.domain.routing import (
    Ambiguous,
    Route,
    Unknown,
    balancing_prefix,
    find_route,
)
from kaiwo_gateway.domain.selectors import LabelSelector
from kaiwo_gateway.domain.sent_json import with_member
from kaiwo_gateway.http_api import Gateway
from kaiwo_gateway.message_replies import publish_settled
from kaiwo_gateway.messenger_settings import MessengerNotProvisionedError, MessengerSettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.openai_errors import OpenAIError, model_server_failed
from kaiwo_gateway.relay import NOT_CONNECTED, read_limited

log = structlog.get_logger("kaiwo.gateway.messenger")

PUBLISH_ATTEMPTS = 3
PUBLISH_RETRY_SECONDS = 0.5
HEADER_ROOM = 8 * 1024
"""Bytes of an answer's message kept for its headers."""


class RequestQueue(Protocol):
    """What the messenger needs of the bus (:class:`kaiwo_runtime.work_queue.NatsWorkQueue`):
    bind to the declared consumer, pull requests (settled one by one), publish answers."""

    @property
    def message_limit(self) -> int: ...

    async def bind(self, consumer: ConsumerSpec, *, streams: Sequence[str]) -> ConsumerSpec:
        """The consumer as declared; :class:`NotDeclaredError` naming what is missing."""
        ...

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]: ...

    async def publish(self, subject: str, *, body: bytes, headers: Mapping[str, str]) -> None: ...


class Messenger:
    """Reads the requests, sends each to its Model, publishes the answers."""

    def __init__(
        self,
        *,
        queue: RequestQueue,
        gateway: Gateway,
        settings: MessengerSettings,
        metrics: GatewayMetrics,
        consumer: ConsumerSpec | None = None,
    ) -> None:
        self.queue = queue
        self.gateway = gateway
        self.settings = settings
        self.metrics = metrics
        self.consumer = consumer or messenger_consumer()
        self._bound = False
        self._session: aiohttp.ClientSession | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def reading(self) -> bool:
        return self._bound

    async def open(self) -> None:
        """Bind to the consumer (declared by the administrator, checked here)."""
        try:
            self.consumer = await self.queue.bind(
                self.consumer, streams=(REQUEST_STREAM, RESPONSE_STREAM)
            )
        except NotDeclaredError as missing:
            raise MessengerNotProvisionedError(
                f"the messenger's {', '.join(missing.missing)} are not declared "
                "(kaiwo nats provision --messenger, with the administrator's key)"
            ) from None
        self._bound = True
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=None),
            timeout=aiohttp.ClientTimeout(
                total=self.settings.request_timeout_seconds,
                sock_connect=self.settings.connect_timeout_seconds,
            ),
            auto_decompress=True,
        )

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._bound = False
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def run(self, stop: asyncio.Event) -> None:
        """Fetch and handle requests until ``stop``; requests still in hand are given back
        (delivered again at once)."""
        if not self._bound:
            await self.open()
        try:
            while not stop.is_set():
                free = self.settings.handlers - len(self._tasks)
                if free <= 0:
                    await asyncio.wait(
                        self._tasks,
                        timeout=self.settings.fetch_wait_seconds,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
                    continue
                try:
                    messages = await self.queue.pull(
                        self.consumer,
                        max_messages=free,
                        wait_seconds=self.settings.fetch_wait_seconds,
                    )
                except Exception as error:  # the bus away for a while: try again, never die
                    if stop.is_set():
                        break
                    log.warning("fetching requests failed; trying again", error=repr(error))
                    await asyncio.sleep(self.settings.fetch_wait_seconds)
                    continue
                for message in messages:
                    task = asyncio.create_task(self._handle_logged(message))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        finally:
            await self.close()

    # ------------------------------------------------------------------ one request

    async def _handle_logged(self, message: PulledMessage) -> None:
        try:
            await self.handle(message)
        except asyncio.CancelledError:
            raise
        except Exception:  # the bus went away mid-way: the request comes back after ack wait
            log.exception("handling a request failed; it will be delivered again")

    async def handle(self, message: PulledMessage) -> None:
        started = time.perf_counter()
        received = message.delivery
        delivery, sequence = received.attempt, received.stream_sequence
        try:
            namespace = tenant_of(received.subject)
        except NotATenantError:  # the stream stores no other subject; never delivered again
            log.error("not a requests subject; terminated", subject=received.subject)
            await message.term()
            return
        headers = dict(received.headers)
        try:
            async with self._kept_alive(message):
                request_metadata, answer = await self.answer(namespace, received.body, headers)
        except asyncio.CancelledError:
            # Given back, to come again once this replica's last pull request has expired:
            # delivered at once, it could go to that request and be lost with the connection
            # (a delivery spent for nothing).
            later = 3 * self.settings.fetch_wait_seconds
            with contextlib.suppress(Exception):
                await asyncio.shield(message.nak(delay=later))
            raise
        settled = settle(answer, delivery=delivery, consumer=self.consumer)
        if isinstance(settled, Redeliver):
            await message.nak(delay=settled.delay_seconds)
            self.metrics.messages.labels(namespace=namespace, outcome="redelivered").inc()
            log.info(
                "request left for another delivery",
                namespace=namespace,
                seq=sequence,
                delivery=delivery,
                status=answer.status,
            )
            return
        try:
            await self._publish_retried(namespace, message, settled, request_metadata, headers)
        except (BusError, OSError) as error:
            log.warning("answer not stored; request delivered again", error=str(error))
            self.metrics.messages.labels(namespace=namespace, outcome="unpublished").inc()
            await message.nak(delay=self.consumer.retry_delay(delivery))
            return
        await message.ack()
        outcome = "dead" if settled.dead_reason else "answered"
        self.metrics.messages.labels(namespace=namespace, outcome=outcome).inc()
        self.metrics.message_latency.labels(namespace=namespace).observe(
            time.perf_counter() - started
        )

    async def _publish_retried(
        self,
        namespace: str,
        message: PulledMessage,
        settled: Reply,
        request_metadata: Any,
        headers: Mapping[str, str],
    ) -> None:
        """:func:`~kaiwo_gateway.message_replies.publish_settled`, tried
        :data:`PUBLISH_ATTEMPTS` times: on the consumer's last delivery a nak brings nothing
        back, so a short outage must not leave the request unanswered (a copy stored twice is
        dropped by its ``Nats-Msg-Id``)."""
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                await publish_settled(
                    self.queue, namespace, message, settled, request_metadata, headers
                )
                return
            except (BusError, OSError):
                if attempt == PUBLISH_ATTEMPTS:
                    raise
                with contextlib.suppress(Exception):  # a missed extension: a redelivery
                    await message.extend()
                await asyncio.sleep(PUBLISH_RETRY_SECONDS)

    @contextlib.asynccontextmanager
    async def _kept_alive(self, message: PulledMessage) -> AsyncIterator[None]:
        # A third of the shortest ack wait: two progress acks may be late before the server
        # hands the request to another replica.
        ack_wait = min(self.consumer.backoff_seconds or (self.consumer.ack_wait_seconds,))
        every = min(self.settings.progress_seconds, ack_wait / 3)

        async def report() -> None:
            while True:
                await asyncio.sleep(every)
                with contextlib.suppress(Exception):  # a missed one: the next may come
                    await message.extend()

        reporter = asyncio.create_task(report())
        try:
            yield
        finally:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter

    async def answer(
        self, namespace: str, raw: bytes, headers: Mapping[str, str]
    ) -> tuple[Any, Answer]:
        """The request's metadata and its answer (the model server's, or an error)."""
        parsed = parse_request(raw, self.settings.bodies)
        if isinstance(parsed, Failure):
            return metadata_of(raw), parsed
        found = find_route(
            self.gateway.catalog, parsed.model, LabelSelector(), namespaces={namespace}
        )
        if isinstance(found, Unknown):
            return parsed.metadata, failure(404, found.message, code="model_not_found")
        if isinstance(found, Ambiguous):  # one namespace holds one Model of a name
            return parsed.metadata, failure(400, found.message)
        return parsed.metadata, await self._served(found, parsed, headers)

    async def _served(
        self, route: Route, request: MessageRequest, headers: Mapping[str, str]
    ) -> Answer:
        model = route.model
        # Only an adapter's name changes: a body encoded again is not what the client sent.
        body = (
            with_member(request.sent, "model", route.backend_model)
            if route.adapter is not None
            else request.sent
        )
        prefix = balancing_prefix(model, request.path, request.body)
        key = model_ref(uid=model.uid, namespace=model.namespace, name=model.name)
        in_flight = self.gateway.metrics.in_flight.labels(
            namespace=model.namespace, model=model.name
        )
        in_flight.inc()
        self.gateway.load.counts.started(key, message=True)
        try:
            return await self._forward(route, request.path, body, prefix, headers)
        except OpenAIError as error:
            return failure(error.status, error.message, code=error.code)
        finally:
            self.gateway.load.counts.finished(key, message=True)
            in_flight.dec()

    async def _forward(
        self,
        route: Route,
        path: str,
        body: bytes,
        prefix: str,
        headers: Mapping[str, str],
    ) -> Answer:
        assert self._session is not None
        model = route.model
        balancer = self.gateway.balancer
        sent_headers = {"Content-Type": "application/json", **trace_headers(headers.items())}
        tried: set[str] = set()
        for _attempt in range(self.settings.attempts):
            choice = await self.gateway.waiter.endpoint_for(
                route,
                prefix=prefix,
                exclude=tried,
                wait_seconds=self.settings.endpoint_wait_seconds,
            )
            endpoint = choice.endpoint
            try:
                async with self._session.post(
                    f"http://{endpoint.address}{path}", data=body, headers=sent_headers
                ) as upstream:
                    data = await read_limited(upstream, self._answer_limit())
                    if data is None:
                        return Failure(
                            status=502,
                            body={
                                "error": {
                                    "message": "the model server's answer is larger than a "
                                    f"message may be ({self._answer_limit():,} bytes)",
                                    "type": "server_error",
                                    "code": "answer_too_large",
                                }
                            },
                            retry=False,
                        )
                    return backend_answer(upstream.status, data)
            except NOT_CONNECTED as error:
                tried.add(endpoint.key)
                self.gateway.metrics.retries.labels(
                    namespace=model.namespace, model=model.name
                ).inc()
                log.info(
                    "endpoint did not accept the connection",
                    model_uid=model.uid,
                    endpoint=endpoint.key,
                    failure=type(error).__name__,
                    error=str(error),
                )
                continue
            except (aiohttp.ClientError, TimeoutError) as error:
                log.warning(
                    "the model server failed",
                    model_uid=model.uid,
                    endpoint=endpoint.key,
                    error=repr(error),
                )
                return failure(502, model_server_failed(error))
            finally:
                balancer.release(group=model.uid, endpoint=endpoint.key)
        return failure(
            502,
            f"no endpoint of model {model.name!r} accepted a connection ({len(tried)} tried)",
        )

    def _answer_limit(self) -> int:
        return max(self.queue.message_limit - HEADER_ROOM, 1024)
