"""``kaiwo events tail`` against a real nats-server: live events, filtered, one line each.
Observations are internal (``--internal``: a reader's key may read them, the CLI's may not,
decision 0039; this server has no authentication)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

pytestmark = pytest.mark.nats


async def test_tail_prints_the_live_events_that_match(
    nats_server: NatsServer, make_observation: Any
) -> None:
    bus = await NatsBus.connect(nats_server.url, topology=bus_topology(), name="tail-test")
    await bus.ensure_streams()
    runner = CliRunner()
    tailing = asyncio.create_task(
        asyncio.to_thread(
            runner.invoke,
            app,
            [
                *("events", "tail", "--nats", nats_server.url, "--internal"),
                *("--name", "pod-7", "--count", "1"),
            ],
            env={"COLUMNS": "200", "NO_COLOR": "1"},
        )
    )
    try:
        number = 0
        # tail subscribes when it has started: publish until it has seen its one event
        while not tailing.done() and number < 2000:
            for candidate in (number, 7 if number % 2 else number + 10_000):
                envelope, subject = make_observation(candidate)
                await bus.publish(envelope, subject)
            number += 1
            await asyncio.sleep(0.02)
        result = await asyncio.wait_for(tailing, 30)
    finally:
        await bus.close()

    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    assert "obs.observed.v1" in line
    assert "team-a/pod-7 " in line
    assert "id=00000000" in line


async def test_tail_says_a_poison_message_is_unreadable_and_goes_on(
    nats_server: NatsServer, make_observation: Any
) -> None:
    bus = await NatsBus.connect(nats_server.url, topology=bus_topology(), name="tail-test")
    await bus.ensure_streams()
    runner = CliRunner()
    tailing = asyncio.create_task(
        asyncio.to_thread(
            runner.invoke,
            app,
            ["events", "tail", "--nats", nats_server.url, "--internal", "--count", "2"],
            env={"COLUMNS": "400", "NO_COLOR": "1"},
        )
    )
    envelope, subject = make_observation(3)
    headers, _ = envelope.to_nats()
    try:
        number = 0
        while not tailing.done() and number < 500:
            # Until tail has subscribed these are lost; then it sees a poison one, a good one.
            await bus.publish_raw(
                subject,
                body=b"[" * 5000 + b"]" * 5000,
                headers={**headers, "Nats-Msg-Id": f"poison-{number}"},
            )
            good, good_subject = make_observation(100 + number)
            await bus.publish(good, good_subject)
            number += 1
            await asyncio.sleep(0.05)
        result = await asyncio.wait_for(tailing, 30)
    finally:
        await bus.close()

    assert result.exit_code == 0, result.output
    # Tail may have subscribed between a poison message and its good one: either order.
    [poison] = [line for line in result.output.splitlines() if line.startswith("(unreadable")]
    [good] = [line for line in result.output.splitlines() if not line.startswith("(unreadable")]
    assert poison.startswith(f"(unreadable message on {subject}: too-deep: nested deeper than 201")
    assert "obs.observed.v1" in good
