"""Ctrl-C during ``kaiwo up``'s start-up: obeyed at once, and whatever had started is stopped."""

from __future__ import annotations

import asyncio
import contextlib

from kaiwo_cli.stack.local import LocalStack


async def start_unless_stopped(stack: LocalStack, stop: asyncio.Event) -> bool:
    """Start ``stack``, or, when ``stop`` is set first (Ctrl-C), abandon the start-up at once
    and stop whatever had started; whether it started."""
    starting = asyncio.create_task(stack.__aenter__())
    stopped = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if starting.done():
        starting.result()  # its StackError, if it failed
        return True
    starting.cancel()  # __aenter__ stops what had started when it is cancelled
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    await stack.stop()
    return False
