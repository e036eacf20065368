"""JetStream pull requests for one durable consumer, answered into a callback subscription.

Both ways of reading a durable consumer on NATS pull through a :class:`PullInbox`: the bus's
``process`` (:class:`~kaiwo_runtime.nats_bus.NatsBus`) and the batch consumer
(:class:`~kaiwo_runtime.batch_consumer.NatsPuller`). nats-py's ``PullSubscription.fetch``
awaits each message through a task and a timer of its own, and sends two requests for every
pull that finds nothing (a no-wait probe, then a lingering one): a reader that only looks
whether something came (the planner, between observations) paid both, and a timer on the
server, every round.

A pull here sends a no-wait probe first, so that a backlog comes in batches, then, if it
found nothing and may wait, one lingering request. The probe is left out when the last
request found the consumer empty and nothing came since: a reader that looked a moment ago
and waits again (the planner, between two observations) sends one request, not two. With
``wait_seconds`` 0 only the probe is sent. A consumer that hands out one message at a time
(``max_ack_pending`` 1, the planner's observations) asks for the next message in the
acknowledgement of the last (:meth:`PullInbox.acknowledge_asking_for_the_next`), so the
next pull sends nothing. Messages that arrive after a pull returned (its
request was still open) wait here for the next pull; they are never dropped, so every
delivered message is settled.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import nats.errors
from kaiwo_contracts.events.streams import ConsumerSpec
from nats.aio.client import Client
from nats.aio.msg import Msg

from kaiwo_runtime.bus import BusError

JS_API_PREFIX: Final = "$JS.API"
STATUS_HEADER: Final = "Status"
DESCRIPTION_HEADER: Final = "Description"

_NO_MESSAGES = "404"
_REQUEST_TIMEOUT = "408"
_CONFLICT = "409"  # e.g. "Exceeded MaxAckPending": this request ends, a later one may not
_HEARTBEAT = "100"
_REQUEST_ENDS = frozenset({_NO_MESSAGES, _REQUEST_TIMEOUT, _CONFLICT})
_NOTHING_THERE = frozenset({_NO_MESSAGES, _REQUEST_TIMEOUT})
SETTLE_SECONDS: Final = 5.0
"""How long a no-wait request may take to answer before the server counts as gone."""
SHORTEST_WAIT_SECONDS: Final = 0.05
"""The shortest lingering request: shorter waits are rounded up to it (0 sends none)."""
_ACK_NEXT: Final = b'+NXT {"batch":1,"no_wait":true}'
"""An acknowledgement that asks for the next message, without waiting, in the same publish."""


@dataclass(slots=True)
class _OpenRequest:
    """The pull request the server is still answering."""

    remaining: int
    """Messages it may still bring: the server ends it without a word once it brought all."""
    waits: bool
    """A lingering request; a no-wait one is answered at once."""
    ends_by: float
    """The event loop's time after which it counts as ended even unanswered (a reconnect
    loses requests and their answers)."""


class PullInbox:
    """One consumer's inbox: the messages its pull requests brought, in arrival order.

    At most one request is open at a time: while one is, a pull waits for what it brings
    instead of sending another (a second one would be held by the server, and end with a
    status of its own, for nothing).
    """

    def __init__(self, client: Client, *, request_subject: str) -> None:
        self._client = client
        self._request_subject = request_subject
        self._inbox = client.new_inbox()
        self._messages: deque[Msg] = deque()
        self._changed = asyncio.Event()
        self._open: _OpenRequest | None = None
        self._found_empty = False
        """A request ended with nothing to deliver, and no message came since."""
        self._failure: str | None = None

    @classmethod
    async def opened(cls, client: Client, consumer: ConsumerSpec) -> PullInbox:
        """An inbox for ``consumer``, subscribed; :class:`BusError` when it cannot be."""
        inbox = cls(
            client,
            request_subject=f"{JS_API_PREFIX}.CONSUMER.MSG.NEXT."
            f"{consumer.stream}.{consumer.durable_name}",
        )
        try:
            await client.subscribe(inbox._inbox, cb=inbox._receive)
        except nats.errors.Error as error:
            raise BusError(f"cannot pull {consumer.durable_name}: {error!r}") from error
        return inbox

    async def pull(self, *, batch: int, wait_seconds: float) -> list[Msg]:
        """Up to ``batch`` messages: what is waiting, else what the server has, else (when
        ``wait_seconds`` > 0) the first to come within ``wait_seconds``."""
        answered = not self._messages and self._asked_without_waiting()
        if answered:  # an acknowledgement asked for the next message: its answer is the probe
            await self._until(lambda: bool(self._messages), within=SETTLE_SECONDS)
        empty_when_last_asked = self._found_empty and (wait_seconds > 0 or answered)
        if not (self._messages or self._request_open() or empty_when_last_asked):
            await self._request(batch=batch, expires=None)
            await self._until(lambda: len(self._messages) >= batch, within=SETTLE_SECONDS)
        if not self._messages and wait_seconds > 0:
            await self._linger(batch=batch, wait=max(wait_seconds, SHORTEST_WAIT_SECONDS))
        if self._failure is not None:
            failure, self._failure = self._failure, None
            raise BusError(failure)
        return [self._messages.popleft() for _ in range(min(batch, len(self._messages)))]

    async def _linger(self, *, batch: int, wait: float) -> None:
        """Wait up to ``wait`` for the first message, a lingering request open all the while.

        The request open when this starts may be an earlier pull's, which the server has let
        expire and whose end (408) is still on its way: a message published meanwhile goes
        to no request. When that request ends first, one of this pull's own is sent for the
        time left. This pull's own request ending (its time up, or refused) ends the wait.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        asked = False
        while not self._messages and self._failure is None:
            left = deadline - loop.time()
            if left <= 0:
                return
            if not self._request_open():
                if asked:
                    return
                await self._request(batch=batch, expires=max(left, SHORTEST_WAIT_SECONDS))
                asked = True
            await self._until(lambda: bool(self._messages), within=left)

    async def acknowledge_asking_for_the_next(self, message: Msg) -> None:
        """Acknowledge ``message`` and, in the same publish, ask for the next message without
        waiting (JetStream's ``+NXT``): the request the next pull of a consumer that hands out
        one message at a time would send. A plain acknowledgement while a request is open."""
        if self._request_open() or not message.reply:
            await message.ack()
            return
        ends_by = asyncio.get_running_loop().time() + SETTLE_SECONDS
        self._open = _OpenRequest(remaining=1, waits=False, ends_by=ends_by)
        try:
            await self._client.publish(message.reply, _ACK_NEXT, reply=self._inbox)
        except nats.errors.Error:
            self._open = None
            raise

    def _asked_without_waiting(self) -> bool:
        return self._request_open() and self._open is not None and not self._open.waits

    def _request_open(self) -> bool:
        if self._open is not None and asyncio.get_running_loop().time() >= self._open.ends_by:
            self._open = None
        return self._open is not None

    async def _request(self, *, batch: int, expires: float | None) -> None:
        # Without expires the server answers at once (404 when it has nothing); with it,
        # it keeps the request open until a message comes or the time is up (408).
        request: dict[str, object] = {"batch": batch}
        if expires is None:
            request["no_wait"] = True
        else:
            request["expires"] = int(expires * 1_000_000_000)
        ends_by = asyncio.get_running_loop().time() + (expires or 0) + SETTLE_SECONDS
        self._open = _OpenRequest(remaining=batch, waits=expires is not None, ends_by=ends_by)
        try:
            await self._client.publish(
                self._request_subject, json.dumps(request).encode(), reply=self._inbox
            )
        except nats.errors.Error as error:
            self._open = None
            raise BusError(f"pull from {self._request_subject} failed: {error!r}") from error

    async def _until(self, done: Callable[[], bool], *, within: float) -> None:
        """Wait until ``done()``, no request is open, or ``within`` seconds pass."""
        deadline = asyncio.get_running_loop().time() + within
        while not (done() or not self._request_open() or self._failure):
            self._changed.clear()
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), remaining)

    async def _receive(self, message: Msg) -> None:
        status = (message.headers or {}).get(STATUS_HEADER) if not message.data else None
        if status is None:
            self._messages.append(message)
            self._found_empty = False
            if self._open is not None:
                self._open.remaining -= 1
                if self._open.remaining <= 0:
                    self._open = None
        elif status in _REQUEST_ENDS:
            self._open = None
            self._found_empty = status in _NOTHING_THERE
        elif status != _HEARTBEAT:
            description = (message.headers or {}).get(DESCRIPTION_HEADER, "")
            self._failure = f"pull from {self._request_subject} refused: {status} {description}"
        self._changed.set()
