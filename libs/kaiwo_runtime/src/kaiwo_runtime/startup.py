"""How every service process starts and stops (``python -m kaiwo_<service>``).

One rule for all of them: a dependency that does not answer at start ends the process with
status 1 and one line on stderr (:class:`StartupError`); SIGTERM and SIGINT set the ``stop``
event the service runs until; logs are configured from the shared settings.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TypeVar

from kaiwo_runtime.logging import configure_logging
from kaiwo_runtime.settings import ServiceSettings

EXIT_UNAVAILABLE = 1
T = TypeVar("T")


class StartupError(RuntimeError):
    """A dependency is unreachable at start; the message is the one line to print."""


def utc_now() -> datetime:
    """The wall clock services hand to their cores (the cores never read a clock)."""
    return datetime.now(UTC)


async def within(seconds: float, what: str, step: Awaitable[T]) -> T:
    """``step``, or a :class:`StartupError` saying ``what`` failed (or took too long)."""
    try:
        return await asyncio.wait_for(step, seconds)
    except TimeoutError as error:
        raise StartupError(f"{what}: no answer within {seconds:g} s") from error
    except StartupError:
        raise
    except Exception as error:
        detail = " ".join(str(error).split()) or type(error).__name__
        raise StartupError(f"{what}: {detail}") from error


def configure_service_logging(settings: ServiceSettings) -> None:
    json_logs = {"auto": None, "json": True, "console": False}[settings.log_format]
    configure_logging(level=settings.log_level, json=json_logs)


async def run_until_signalled(name: str, serve: Callable[[asyncio.Event], Awaitable[None]]) -> int:
    """Run ``serve(stop)`` until SIGTERM/SIGINT; the process exit status."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await serve(stop)
    except StartupError as error:
        sys.stderr.write(f"{name}: {error}\n")
        return EXIT_UNAVAILABLE
    return 0
