"""Batches of a read, the next one fetched while the caller works through this one (both SQL
stores' ``iter_all`` and ``iter_by_type``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from typing import Any

from kaiwo_eventstore.events import StoredEvent
from kaiwo_eventstore.sql.rows import CORRELATION_COLUMN, RowDecoder, decode_rows


async def prefetched(
    fetch: Callable[[int], Awaitable[list[Any]]],
    from_position: int,
    *,
    batch_size: int,
    decode: RowDecoder,
    correlated: Callable[[str], bool] | None = None,
) -> AsyncGenerator[Sequence[StoredEvent], None]:
    """Decoded batches of ``fetch`` (raw rows from a position on, the position first in
    each row); the next batch is fetched while this one is consumed. With ``correlated``,
    only the rows whose correlation id it accepts are decoded and given.

    The prefetch lets the database (or SQLite's thread) work while Python decodes and the
    caller handles a batch. Close the iterator (``contextlib.aclosing``) when stopping early,
    so the prefetch is cancelled at once rather than on collection.
    """
    pending: asyncio.Future[list[Any]] | None = asyncio.ensure_future(fetch(from_position))
    try:
        while pending is not None:
            rows = await pending
            pending = None
            if len(rows) == batch_size:
                pending = asyncio.ensure_future(fetch(rows[-1][0] + 1))
            if correlated is not None:
                rows = [row for row in rows if correlated(row[CORRELATION_COLUMN])]
            if rows:
                yield decode_rows(decode, rows)
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pending
