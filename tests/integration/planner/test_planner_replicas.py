"""Two planner processes on one NATS: one plans, the other waits and takes over."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kaiwo_runtime.leases import NatsLeaseStore
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client

from tests.integration.pipeline.harness import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]

LEASE_SECONDS = 2.0
HANG_SECONDS = 30.0
"""How long a wait may last before the test calls it hung: a guard, not a measure."""


@pytest.fixture
async def leases(tmp_path: Path) -> AsyncIterator[tuple[NatsServer, NatsLeaseStore]]:
    async with NatsServer(store_dir=tmp_path / "nats") as server:
        client = Client()
        await client.connect(server.url)
        try:
            store = await NatsLeaseStore.open(
                client, "kaiwo-leases", duration_seconds=LEASE_SECONDS
            )
            yield server, store
        finally:
            await client.close()


@pytest.fixture
def planners(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
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
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": "0",  # a port of its own, bound by the service
        "KAIWO_LEASE_SECONDS": str(LEASE_SECONDS),
        "KAIWO_LOG_FORMAT": "json",
    }
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "kaiwo_planner"], env=env, stdout=out, stderr=out
        )
    started.append(process)
    return process


def holder_of(process: subprocess.Popen[bytes]) -> str:
    return f"{socket.gethostname()}/{process.pid}"


async def until_holder(store: NatsLeaseStore, expected: str, *, within: float) -> None:
    async def check() -> bool | Pending:
        holder = await store.holder("planner")
        return holder == expected or Pending(f"lease holder is {holder!r}, not {expected!r}")

    await eventually(check, what="the planner lease changes hands", within=within)


async def until_logged(log: Path, line: bytes, *, within: float) -> None:
    async def check() -> bool | Pending:
        written = await asyncio.to_thread(log.read_bytes)
        return line in written or Pending(f"{log.name}: {written.decode()}")

    await eventually(check, what=f"{line!r} logged", within=within)


async def test_a_second_planner_waits_and_takes_over_when_the_first_dies(
    leases: tuple[NatsServer, NatsLeaseStore],
    planners: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    server, store = leases
    first = start_planner(server.url, tmp_path / "first.log", planners)
    await until_holder(store, holder_of(first), within=HANG_SECONDS)
    second = start_planner(server.url, tmp_path / "second.log", planners)

    # A loaded machine can take seconds to start a Python process: wait for it to say so.
    await until_logged(tmp_path / "second.log", b"standby: another replica is active", within=30)
    await asyncio.sleep(LEASE_SECONDS * 2)  # several claims by the second, renewals by the first
    assert second.poll() is None, (tmp_path / "second.log").read_text()
    assert await store.holder("planner") == holder_of(first)

    first.send_signal(signal.SIGKILL)  # no release: the lease must run out
    # It runs out LEASE_SECONDS after the last renewal; the rest of the wait is a guard that
    # tells a hang from a loaded machine (that it did not change hands early is shown above).
    await until_holder(store, holder_of(second), within=LEASE_SECONDS + HANG_SECONDS)
    await until_logged(tmp_path / "second.log", b"active: holding the lease", within=HANG_SECONDS)

    second.send_signal(signal.SIGTERM)  # a graceful stop releases the lease
    assert await asyncio.to_thread(second.wait, 20) == 0
    assert await store.holder("planner") is None


async def test_a_planner_whose_lease_was_taken_over_exits_with_one_line(
    leases: tuple[NatsServer, NatsLeaseStore],
    planners: list[subprocess.Popen[bytes]],
    tmp_path: Path,
) -> None:
    server, store = leases
    planner = start_planner(server.url, tmp_path / "planner.log", planners)
    await until_holder(store, holder_of(planner), within=HANG_SECONDS)

    planner.send_signal(signal.SIGSTOP)  # paused past its lease (a long GC, a frozen node)
    try:
        await asyncio.sleep(LEASE_SECONDS * 2)
        assert await store.claim("planner", "another-pod") is not None
    finally:
        planner.send_signal(signal.SIGCONT)

    assert await asyncio.to_thread(planner.wait, 20) == 1
    lines = [
        line
        for line in (tmp_path / "planner.log").read_text().splitlines()
        if line.startswith("kaiwo-planner:")
    ]
    assert lines == [
        "kaiwo-planner: another replica took over the lease 'planner'; exiting so that a "
        "restart waits as a standby"
    ]
