"""The console's live-update stream (``/events``, server-sent events) as the console stops."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import aiohttp
from aiohttp import web
from kaiwo_console.domain.cluster import ClusterState
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.http_api import Console
from kaiwo_console.metrics import ConsoleMetrics
from kaiwo_runtime.kubernetes_access import LOOPBACK_ONLY


async def no_timeline(_uid: str) -> Any:
    raise AssertionError("no workload page is asked for")


def console() -> Console:
    return Console(
        state=ClusterState(),
        records=QueueRecords(),
        workloads_access=LOOPBACK_ONLY,
        nodes_access=LOOPBACK_ONLY,
        metrics=ConsoleMetrics(),
        clock=lambda: datetime(2026, 11, 30, tzinfo=UTC),
        timeline=no_timeline,
        anonymous="loopback",
    )


async def test_an_open_page_does_not_hold_the_console_when_it_stops() -> None:
    """A page keeps its stream open as long as it is shown. Stopping the console ends the
    stream as a response (the page's EventSource connects again, to a console that runs),
    instead of aiohttp waiting 60 s for it and then cutting the connection."""
    runner = web.AppRunner(console().application(), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://{host}:{port}/events") as page,
    ):
        assert page.status == 200
        first = await page.content.readline()
        stopping = asyncio.create_task(runner.cleanup())
        # Cut off mid-stream, this raises ClientPayloadError (after aiohttp's 60 s).
        rest = await page.content.read()
        await stopping

    assert first.startswith(b"data: ")
    assert rest in (b"\n", b"")
