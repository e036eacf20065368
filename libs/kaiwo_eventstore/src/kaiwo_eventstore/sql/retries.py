"""Appending at each stream's next versions, again after a conflict or a busy lock (both SQL
stores' ``append_next``, the recorder's call)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Final

from kaiwo_eventstore.errors import ConcurrencyError, StoreBusyError
from kaiwo_eventstore.events import AppendResult

APPEND_ATTEMPTS: Final = 8


async def appended_with_retries(append: Callable[[], Awaitable[AppendResult]]) -> AppendResult:
    """``append()`` (an append expecting ``ANY``), tried up to :data:`APPEND_ATTEMPTS` times,
    waiting 10 ms, then twice as long each time up to a second, after a conflict or a busy
    lock; the last attempt's error is raised."""
    delay = 0.01
    for _attempt in range(APPEND_ATTEMPTS - 1):
        try:
            return await append()
        except (ConcurrencyError, StoreBusyError):
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
    return await append()
