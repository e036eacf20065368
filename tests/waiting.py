"""Waiting for a condition in a test: the one ``eventually`` every test uses.

A check is polled until it answers; the limit only guards against a hang (generous, for a
loaded machine), it never asserts how fast the product is. A check answers "not yet" with
``False``, ``None`` or a :class:`Pending` that says where things stand (the failure message
quotes it); anything else is the answer, and ``eventually`` returns it.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, TypeVar

T = TypeVar("T")

HANG_SECONDS: Final = 60.0
"""How long a condition may take before the test calls it hung: moments when idle, far more
on a loaded 2-core machine running several stacks."""
INTERVAL_SECONDS: Final = 0.05


class NotConvergedError(AssertionError):
    """A condition did not hold in time; the message says what and where things stood."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A check's answer while the condition does not hold yet, with where things stand."""

    reason: str

    def __bool__(self) -> bool:
        return False


Answer = T | Pending | None
Check = Callable[[], Awaitable[Answer[T]] | Answer[T]]


def _not_yet(answer: object) -> bool:
    return answer is None or answer is False or isinstance(answer, Pending)


def _failure(what: str, within: float, last: object) -> NotConvergedError:
    where = f" ({last.reason})" if isinstance(last, Pending) else ""
    return NotConvergedError(f"{what}: not within {within:g} s{where}")


async def eventually(
    check: Check[T],
    *,
    what: str = "the condition",
    within: float = HANG_SECONDS,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """Poll ``check`` (a function or a coroutine function) until it answers; return that."""
    deadline = time.monotonic() + within
    while True:
        answer = check()
        if inspect.isawaitable(answer):
            answer = await answer
        if not _not_yet(answer):
            return answer  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _failure(what, within, answer)
        await asyncio.sleep(interval)


def eventually_blocking(
    check: Callable[[], Answer[T]],
    *,
    what: str = "the condition",
    within: float = HANG_SECONDS,
    interval: float = INTERVAL_SECONDS,
) -> T:
    """:func:`eventually` for a test without an event loop (one that drives processes)."""
    deadline = time.monotonic() + within
    while True:
        answer = check()
        if not _not_yet(answer):
            return answer  # type: ignore[return-value]
        if time.monotonic() > deadline:
            raise _failure(what, within, answer)
        time.sleep(interval)
