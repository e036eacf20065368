"""Messages handled as they arrive, in one lane per key, with a bound on those in flight.

A consumer that handles fetched batches one after the other holds a message that arrives
while a batch is handled until the whole batch is done: the slowest message of the batch
(an owner whose API calls retry, a long status write) delays every message behind it, of
every owner. :class:`Lanes` instead starts each message as soon as it is fetched and a slot
is free. Messages of one key (the uid of the subject) run in the order they were started,
one at a time; those of different keys run concurrently; at most ``limit`` run or wait at
once, so a consumer never holds more messages than its ``max_ack_pending`` lets it fetch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

log = structlog.get_logger(__name__)

Work = Callable[[], Awaitable[None]]


class Lanes:
    """Work started by key; see the module docstring."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("a lane bound must be at least 1")
        self._limit = limit
        self._tails: dict[str, asyncio.Task[None]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._freed = asyncio.Event()
        self._error: BaseException | None = None

    @property
    def in_flight(self) -> int:
        return len(self._running)

    async def free_slots(self) -> int:
        """How many more may start now, waiting for at least one. Raises the first error a
        finished piece of work raised since the last call (once)."""
        self._raise_error()
        while len(self._running) >= self._limit:
            self._freed.clear()
            await self._freed.wait()
            self._raise_error()
        return self._limit - len(self._running)

    def start(self, key: str, work: Work) -> asyncio.Task[None]:
        """Start ``work`` after the work started before under ``key``; the task that waits
        for its turn and runs it. Take a slot first with :meth:`free_slots`: more than
        ``limit`` at once is refused."""
        if len(self._running) >= self._limit:
            raise RuntimeError("no free lane slot: wait for free_slots() first")
        before = self._tails.get(key)
        task = asyncio.create_task(self._run(key, before, work))
        self._tails[key] = task
        self._running.add(task)
        return task

    async def drain(self) -> None:
        """Wait for all the work started; then raise the first error it raised, if any."""
        while self._running:
            await asyncio.wait(tuple(self._running))
        self._raise_error()

    async def abandon(self) -> None:
        """Cancel the work started and wait until it has ended (a stop that cannot wait)."""
        running = tuple(self._running)
        for task in running:
            task.cancel()
        if running:
            await asyncio.wait(running)

    async def _run(self, key: str, before: asyncio.Task[None] | None, work: Work) -> None:
        task = asyncio.current_task()
        try:
            if before is not None:
                # In order within the lane. The earlier run keeps its own error, so waiting
                # for it raises nothing; shielded, so a cancelled wait leaves it running.
                await asyncio.shield(before)
            await work()
        except Exception as error:
            if self._error is None:
                self._error = error
            else:
                log.warning("lane work failed", key=key, error=repr(error))
        finally:
            self._running.discard(task)
            if self._tails.get(key) is task:
                del self._tails[key]
            self._freed.set()

    def _raise_error(self) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error
