"""``kaiwo events tail`` when NATS is not there, on a real nats-server: one line and exit 2,
as docs/cli.md promises, never nats-py's traceback at every attempt; and a server that goes
away while tail follows it ends tail the same way, where it waited for good (decision 0240)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Final

import aiohttp
import pytest
from kaiwo_runtime.nats_server import NatsServer, free_port

pytestmark = pytest.mark.nats

KAIWO: Final = str(Path(sys.executable).parent / "kaiwo")
ENDS_WITHIN: Final = 40.0
"""nats-py gives up after 3 reconnect attempts 2 s apart; a hang fails the test here."""


async def tail_process(tmp_path: Path, url: str) -> asyncio.subprocess.Process:
    """``kaiwo events tail --nats URL`` in a process of its own (no stack to find)."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "KAIWO_STATE": str(tmp_path / "none")}
    return await asyncio.create_subprocess_exec(
        KAIWO,
        *("events", "tail", "--nats", url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )


async def ended(process: asyncio.subprocess.Process) -> tuple[int, str, str]:
    try:
        out, err = await asyncio.wait_for(process.communicate(), ENDS_WITHIN)
    except TimeoutError:
        process.kill()
        await process.communicate()
        raise AssertionError("kaiwo events tail did not end") from None
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_server_nobody_runs_is_one_line_with_the_password_masked(tmp_path: Path) -> None:
    port = free_port()

    result = await ended(await tail_process(tmp_path, f"nats://kaiwo:s3cret@127.0.0.1:{port}"))

    assert result == (
        2,
        "",
        f"kaiwo events: NATS at nats://kaiwo:***@127.0.0.1:{port} is unreachable: "
        f"[Errno 111] Connect call failed ('127.0.0.1', {port})\n",
    )


async def test_a_server_that_goes_away_ends_tail_with_one_line(tmp_path: Path) -> None:
    monitoring = free_port()
    async with NatsServer(config=f"http: 127.0.0.1:{monitoring}\n") as server:
        url, port = server.url, server.port
        tailing = await tail_process(tmp_path, url)
        # Until tail is connected (and subscribed): the server's monitoring page counts it.
        for _ in range(400):
            if await _subscribed_clients(monitoring) > 0:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("kaiwo events tail never subscribed")

    result = await ended(tailing)

    assert result == (
        2,
        "",
        f"kaiwo events: NATS at {url} was lost and did not come back: [Errno 111] Connect "
        f"call failed ('127.0.0.1', {port})\n",
    )


async def _subscribed_clients(monitoring_port: int) -> int:
    """Clients with a subscription, from ``/connz`` (tail's connection is the only one)."""
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{monitoring_port}/connz") as response,
    ):
        answer = await response.json()
    return sum(1 for client in answer.get("connections", []) if client.get("subscriptions"))
