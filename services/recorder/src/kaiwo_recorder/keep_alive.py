"""Keeping a batch the recorder holds from being redelivered while it is being stored: each
message's ack wait is extended on a timer (best effort: a missed extension is a redelivery,
which the store's idempotent append absorbs)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

from kaiwo_runtime.batch_consumer import PulledMessage


@contextlib.asynccontextmanager
async def kept_in_progress(batch: Sequence[PulledMessage], *, every: float) -> AsyncIterator[None]:
    """Extend the batch's ack wait ``every`` seconds while it is being recorded."""

    async def keep_alive() -> None:
        while True:
            await asyncio.sleep(every)
            await extend_all(batch)

    task = asyncio.create_task(keep_alive())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def extend_all(batch: Sequence[PulledMessage]) -> None:
    for message in batch:
        with contextlib.suppress(Exception):  # best effort: a missed extension = a redelivery
            await message.extend()
