"""Waiting for the first of several asyncio events, or a timeout."""

from __future__ import annotations

import asyncio


async def first_of(*events: asyncio.Event, seconds: float) -> None:
    """Return once any of ``events`` is set, or after ``seconds``."""
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
