"""The recorder against a real nats-server and a real database: everything published is stored
exactly once, across a killed recorder process and a restarted NATS server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.waiting import eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow]


HANG_SECONDS = 60.0
"""How long a wait may last before the test calls it hung: a guard, not a measure."""


def utc_now() -> datetime:
    return datetime.now(UTC)


async def wait_for_count(store: EventStore, expected: int, *, within: float = 60) -> int:
    deadline = time.monotonic() + within
    count = 0
    while time.monotonic() < deadline:
        count = len(await store.read_all(limit=expected + 100))
        if count >= expected:
            return count
        await asyncio.sleep(0.1)
    return count


@contextlib.asynccontextmanager
async def running_recorder(url: str, store: EventStore) -> AsyncIterator[RecorderService]:
    bus = await NatsBus.connect(url, topology=bus_topology(), name="recorder-test")
    await bus.ensure_streams()
    service = RecorderService(
        bus=bus, store=store, clock=utc_now, metrics=RecorderMetrics(), fetch_wait_seconds=0.2
    )
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield service
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await bus.close()


async def publish(url: str, envelopes: list[tuple[Any, str]], *, pause_every: int = 0) -> None:
    bus = await NatsBus.connect(url, topology=bus_topology(), name="publisher")
    try:
        await bus.ensure_streams()
        for index, (envelope, subject) in enumerate(envelopes, start=1):
            await bus.publish(envelope, subject)
            if pause_every and index % pause_every == 0:
                await asyncio.sleep(0.01)
    finally:
        await bus.close()


async def test_everything_published_is_stored_once(
    nats_server: NatsServer, store_url: str, make_observation: Any
) -> None:
    sent = [make_observation(number) for number in range(2000)]
    store = await open_event_store(store_url)
    try:
        async with running_recorder(nats_server.url, store) as service:
            started = time.perf_counter()
            await publish(nats_server.url, sent)
            count = await wait_for_count(store, len(sent))
            elapsed = time.perf_counter() - started
            counter = service.metrics.events_appended.labels(stream="KAIWO_OBS")

            # The counter moves just after the batch's commit, which the store shows first.
            def counted() -> float | None:
                value: float = counter._value.get()
                return value if value >= len(sent) else None

            appended = await eventually(counted, what="every append counted")
        events = await store.read_all(limit=5000)
    finally:
        await store.close()

    assert count == len(sent)
    assert sorted(e.event_id for e in events) == sorted(envelope.id for envelope, _ in sent)
    assert appended == len(sent)
    assert [e.metadata["natsSequence"] for e in events] == list(range(1, len(sent) + 1))
    print(f"\nrecorded {len(sent)} events (publish + record) in {elapsed:.2f}s")


async def test_a_restart_of_nats_mid_stream_loses_nothing(
    nats_server: NatsServer, store_url: str, make_observation: Any
) -> None:
    first = [make_observation(number) for number in range(300)]
    second = [make_observation(number) for number in range(300, 600)]
    store = await open_event_store(store_url)
    try:
        async with running_recorder(nats_server.url, store):
            await publish(nats_server.url, first)
            await wait_for_count(store, 100)
            await nats_server.restart()
            await publish(nats_server.url, second)
            count = await wait_for_count(store, 600)
        ids = [e.event_id for e in await store.read_all(limit=1000)]
    finally:
        await store.close()

    assert count == 600
    assert sorted(ids) == sorted(envelope.id for envelope, _ in first + second)


def recorder_process_env(nats_url: str, store_url: str) -> dict[str, str]:
    return {
        **os.environ,
        "KAIWO_NATS_URL": nats_url,
        "KAIWO_EVENTSTORE_URL": store_url,
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": "0",
        "KAIWO_LOG_FORMAT": "json",
        "KAIWO_LOG_LEVEL": "WARNING",
        "KAIWO_RECORDER_FETCH_WAIT_SECONDS": "0.2",
    }


async def start_recorder_process(
    nats_url: str, store_url: str, log: Path
) -> asyncio.subprocess.Process:
    with log.open("ab") as output:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "kaiwo_recorder",
            env=recorder_process_env(nats_url, store_url),
            stdout=output,
            stderr=output,
        )


async def test_a_killed_recorder_process_loses_nothing_and_stores_nothing_twice(
    nats_server: NatsServer, store_url: str, make_observation: Any, tmp_path: Path
) -> None:
    sent = [make_observation(number) for number in range(3000)]
    log = tmp_path / "recorder.log"
    process = await start_recorder_process(nats_server.url, store_url, log)
    publisher = asyncio.create_task(publish(nats_server.url, sent, pause_every=100))
    store: EventStore | None = None
    try:
        # The process creates the schema; wait for it and some events, however long a loaded
        # machine takes to start a Python process (a count of polls would not tell).
        deadline = time.monotonic() + HANG_SECONDS
        stored = 0
        while stored < 300:
            assert time.monotonic() < deadline, log.read_text()
            with contextlib.suppress(Exception):
                store = store or await open_event_store(store_url, migrate=False)
                stored = await store.last_position()
            await asyncio.sleep(0.05)
        assert store is not None
        killed_at = await store.last_position()
        process.send_signal(signal.SIGKILL)  # mid-batch: acks may be lost, commits are not
        await process.wait()
        process = await start_recorder_process(nats_server.url, store_url, log)
        await publisher
        count = await wait_for_count(store, len(sent), within=90)
        events = await store.read_all(limit=10_000)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(process.wait(), 20)
        if store is not None:
            await store.close()

    assert killed_at < len(sent), "the kill should land while events are still coming"
    assert count == len(sent), log.read_text()[-2000:]
    assert sorted(e.event_id for e in events) == sorted(envelope.id for envelope, _ in sent)
    assert process.returncode == 0  # SIGTERM is a clean stop


async def test_the_process_exits_with_one_line_when_nats_is_unreachable(tmp_path: Path) -> None:
    nowhere = f"nats://127.0.0.1:{free_port()}"
    env = recorder_process_env(nowhere, f"sqlite:///{tmp_path / 'events.db'}")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kaiwo_recorder",
        env={**env, "KAIWO_STARTUP_TIMEOUT_SECONDS": "2"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 60)

    assert process.returncode == 2
    lines = [line for line in stderr.decode().splitlines() if line.startswith("kaiwo-recorder:")]
    assert len(lines) == 1
    assert f"NATS at {nowhere} is unreachable" in lines[0]
