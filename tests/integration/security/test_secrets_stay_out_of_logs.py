"""A service given a password in its NATS URL never writes the password: not when it starts,
not when NATS goes away and comes back, not in the one line it prints when NATS refuses it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kaiwo_runtime.nats_server import NatsServer

from tests.integration.pipeline.harness import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]

PASSWORD = "s3cret-Pa55word"
# A server whose only user logs in with a password (the URL form some operators still use).
PASSWORD_CONFIG = f"""
authorization {{
  users = [
    {{user: "kaiwo", password: "{PASSWORD}", permissions: {{publish: ">", subscribe: ">"}}}}
  ]
}}
"""


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def start_planner(
    nats_url: str, log: Path, started: list[subprocess.Popen[bytes]]
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "KAIWO_NATS_URL": nats_url,
        "KAIWO_NATS_DECLARE_STREAMS": "true",
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": "0",  # a port of its own, bound by the service
        "KAIWO_LEASE_SECONDS": "2",
        "KAIWO_CONNECT_TIMEOUT_SECONDS": "3",
        "KAIWO_LOG_FORMAT": "json",
        "KAIWO_LOG_LEVEL": "DEBUG",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kaiwo_planner"], env=env, stdout=out, stderr=out
        )
    started.append(process)
    return process


async def until_logged(log: Path, text: bytes) -> None:
    async def check() -> bool | Pending:
        written = await asyncio.to_thread(log.read_bytes)
        return text in written or Pending(f"{log.name}: {written.decode()[-2000:]}")

    await eventually(check, what=f"{text!r} logged", within=30)


async def test_the_password_in_the_nats_url_never_reaches_the_planner_log(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "planner.log"
    async with NatsServer(config=PASSWORD_CONFIG, store_dir=tmp_path / "nats") as server:
        port = server.port
        url = f"nats://kaiwo:{PASSWORD}@127.0.0.1:{port}"
        planner = start_planner(url, log, processes)
        await until_logged(log, b'"planner starting"')
        await until_logged(log, b'"active: holding the lease"')
        await server.restart()
        await until_logged(log, b'"nats reconnected"')
        planner.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(planner.wait, 30) == 0

    written = log.read_text()
    assert PASSWORD not in written
    assert f"nats://kaiwo:***@127.0.0.1:{port}" in written
    assert '"nats disconnected"' in written


async def test_the_one_line_a_refused_planner_prints_has_no_password(
    tmp_path: Path, processes: list[subprocess.Popen[bytes]]
) -> None:
    log = tmp_path / "planner.log"
    async with NatsServer(config=PASSWORD_CONFIG) as server:
        port = server.port
        url = f"nats://kaiwo:wrong-{PASSWORD}@127.0.0.1:{port}"
        planner = start_planner(url, log, processes)
        assert await asyncio.to_thread(planner.wait, 30) == 1

    written = log.read_text()
    assert PASSWORD not in written
    assert written.splitlines()[-1].startswith(
        f"kaiwo-planner: cannot use NATS: NATS at nats://kaiwo:***@127.0.0.1:{port} is unreachable"
    )
