"""The operator's four core services in one process (``kaiwo up --one-process``).

Run as ``python -m kaiwo_cli.stack.together`` with ``KAIWO_TOGETHER`` naming each member and
the environment it would have had as a process of its own (JSON: ``{"watcher": {...}, ...}``).
Each member keeps its own code, settings, NATS identity (its own credentials, so the server
still enforces what each may publish and read), health port and lease; they share one
interpreter, one event loop and one heap, which is what ``kaiwo up`` pays four times over as
processes (decision 0075).

A member that fails (cannot start, loses its lease, raises) is started again after a delay
that doubles up to 30 s, as the process supervisor does for a process; the others go on. A
crash of the interpreter itself takes all four down, and the supervisor restarts the process.
SIGTERM or SIGINT stops every member.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaiwo_cli.stack.processes import RestartBackOff

TOGETHER_ENV = "KAIWO_TOGETHER"
MEMBERS: Mapping[str, tuple[str, str]] = {
    "watcher": ("kaiwo_watcher.__main__", "WatcherSettings"),
    "planner": ("kaiwo_planner.__main__", "PlannerSettings"),
    "executor": ("kaiwo_executor.__main__", "ExecutorSettings"),
    "recorder": ("kaiwo_recorder.__main__", "RecorderSettings"),
}
"""What may run together: the member's ``__main__`` (its ``serve(settings, stop)``) and the
settings class it reads its environment with."""


@dataclass(frozen=True, slots=True)
class Member:
    name: str
    env: Mapping[str, str]


def members_of(raw: str) -> tuple[Member, ...]:
    """The members named in ``KAIWO_TOGETHER``; a ValueError names what is wrong."""
    document = json.loads(raw)
    if not isinstance(document, dict) or not document:
        raise ValueError(f"{TOGETHER_ENV} must map service names to their environments")
    unknown = sorted(set(document) - set(MEMBERS))
    if unknown:
        raise ValueError(f"{TOGETHER_ENV}: {', '.join(unknown)} cannot run together")
    return tuple(
        Member(name=name, env={str(k): str(v) for k, v in env.items()})
        for name, env in document.items()
    )


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` as the member's own process would have it, while its settings are read
    (synchronously: no other member runs meanwhile)."""
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def settings_of(member: Member) -> Any:
    module_name, settings_name = MEMBERS[member.name]
    settings_class = getattr(importlib.import_module(module_name), settings_name)
    with environment(member.env):
        return settings_class()


def serve_of(member: Member) -> Callable[[Any, asyncio.Event], Awaitable[int | None]]:
    serve: Callable[[Any, asyncio.Event], Awaitable[int | None]]
    serve = importlib.import_module(MEMBERS[member.name][0]).serve
    return serve


async def run_member(
    member: Member, stop: asyncio.Event, back_off: RestartBackOff | None = None
) -> None:
    """Serve ``member`` until ``stop``, starting it again after each failure, as the process
    supervisor does (:class:`~kaiwo_cli.stack.processes.RestartBackOff`)."""
    import structlog

    from kaiwo_cli.stack.processes import RestartBackOff

    log = structlog.get_logger("kaiwo.together")
    back_off = back_off or RestartBackOff()
    structlog.contextvars.bind_contextvars(service=member.name)  # this task's lines only
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        started = loop.time()
        try:
            code = await serve_of(member)(settings_of(member), stop)
            failure = None if not code else f"exit status {code}"
        except Exception as error:  # one member's failure must not end the others
            failure = f"{type(error).__name__}: {error}"
        if stop.is_set():
            return
        delay = back_off.after(loop.time() - started)
        log.warning(
            "service ended; restarting", service=member.name, why=failure or "ended", delay=delay
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)


async def run_together(members: tuple[Member, ...]) -> int:
    from kaiwo_runtime.startup import stop_on_signals

    stop = stop_on_signals()
    async with asyncio.TaskGroup() as group:
        for member in members:
            group.create_task(run_member(member, stop))
    return 0


def main() -> int:
    # Before anything imports structlog: this module imports nothing that does.
    from kaiwo_runtime.console_rendering import leave_out_console_rendering

    leave_out_console_rendering()
    from kaiwo_runtime.startup import (
        collect_young_objects_every,
        configure_service_logging,
        run_service,
    )

    try:
        members = members_of(os.environ.get(TOGETHER_ENV, ""))
    except ValueError as error:
        print(f"kaiwo-together: {error}", file=sys.stderr)  # noqa: T201 - the one line asked for
        return 2
    first = settings_of(members[0])
    configure_service_logging(first)
    # One collector for all: the planner's threshold, if it is here (its projection is the
    # large long-lived heap the threshold is tuned for).
    tuned = next((m for m in members if m.name == "planner"), members[0])
    collect_young_objects_every(settings_of(tuned).gc_young_allocations)
    return run_service(run_together(members))


if __name__ == "__main__":
    sys.exit(main())
