"""``kaiwo events tail`` against a real nats-server: live events, filtered, one line each.
Observations are internal (``--internal``: a reader's key may read them, the CLI's may not,
decision 0039); these servers have no authentication, but that of the last test, which has
the operator's keys and refuses a key the subjects it may not read."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any, Final

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_contracts.events.permissions import (
    ADMIN,
    CLI,
    SUBSCRIBER,
    WATCHER,
    operator_identities,
    reader_identity,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection, connect_client, flush_written
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer

from tests.nats_keys import connected_as

pytestmark = pytest.mark.nats

KAIWO: Final = str(Path(sys.executable).parent / "kaiwo")
REFUSED_WITHIN: Final = 30.0
"""A refused tail ends in well under a second; a hang (what it did) fails the test here."""


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
        # tail subscribes when it has started: publish until it has seen its one event. It
        # follows what the streams store (decision 0287), and JetStream stores an event id
        # once: each round's pod-7 event has an id of its own.
        while not tailing.done() and number < 2000:
            for candidate in (number, 7 if number % 2 else number + 10_000):
                envelope, subject = make_observation(candidate)
                if candidate == 7:
                    envelope = envelope.model_copy(update={"id": f"{envelope.id}-{number}"})
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


async def tail_process(tmp_path: Path, *arguments: str) -> tuple[int, str, str]:
    """``kaiwo events tail`` in a process of its own, killed when it does not end (a hang
    must fail the test, not stop it); no stack to find (``$KAIWO_STATE`` is empty)."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "KAIWO_STATE": str(tmp_path / "none")}
    process = await asyncio.create_subprocess_exec(
        KAIWO,
        *("events", "tail", *arguments),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), REFUSED_WITHIN)
    except TimeoutError:
        process.kill()
        await process.communicate()
        raise AssertionError(f"kaiwo events tail {' '.join(arguments)} did not end") from None
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_tail_refused_its_subjects_exits_2_naming_the_key_and_the_one_that_reads_them(
    tmp_path: Path, make_observation: Any
) -> None:
    """docs/cli.md: exit 2 when NATS refuses. The CLI's own key asked for ``--internal``
    (``kaiwo.>``, decision 0039) used to get a permissions violation on the log and wait for
    good; the subscriber's key refused the results the same. A reader's key reads them."""
    topology = bus_topology()
    credentials = write_credentials(
        tmp_path / "credentials", (*operator_identities(topology), reader_identity("audit"))
    )
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        cli, subscriber = credentials.seed(CLI), credentials.seed(SUBSCRIBER)

        internal = await tail_process(
            tmp_path, "--nats", server.url, "--credentials", str(cli), "--internal"
        )
        assert internal == (
            2,
            "",
            f"kaiwo events: NATS refused: the key {cli} may not read kaiwo.live.>; --internal "
            "takes a reader's key (kaiwo nats credentials --out DIR --keep --reader NAME "
            "writes DIR/NAME.nk), given with --credentials; without --internal the CLI's key "
            "reads the events that carry no object\n",
        )

        public_only = await tail_process(
            tmp_path, "--nats", server.url, "--credentials", str(subscriber)
        )
        assert public_only == (
            2,
            "",
            f"kaiwo events: NATS refused: the key {subscriber} may not read kaiwo.live.res.>, "
            "kaiwo.live.mon.>, kaiwo.live.gateway.>; tail takes the CLI's key (kaiwo up's, found "
            "without flags; cli.nk of kaiwo nats credentials) or a reader's, given with "
            "--credentials\n",
        )

        # The key named reads them: a reader's, with --internal, prints an observation.
        def connection(identity: str) -> NatsConnection:
            return connected_as(server.url, credentials, identity)

        admin = await NatsBus.connect(connection(ADMIN), topology=topology)
        watcher = await NatsBus.connect(connection(WATCHER), topology=topology)
        try:
            await admin.ensure_streams()
            reading = asyncio.create_task(
                tail_process(
                    tmp_path,
                    *("--nats", server.url, "--credentials", str(credentials.seed("audit"))),
                    *("--internal", "--count", "1"),
                )
            )
            number = 0
            while not reading.done() and number < 1000:  # until tail has subscribed
                envelope, subject = make_observation(number)
                await watcher.publish(envelope, subject)
                number += 1
                await asyncio.sleep(0.02)
            code, out, err = await reading
        finally:
            await watcher.close()
            await admin.close()
        assert (code, err) == (0, ""), err
        assert "obs.observed.v1" in out


async def test_a_flush_returns_once_the_server_answered_every_subscription_before_it(
    tmp_path: Path,
) -> None:
    """nats-py writes a flush's PING ahead of the subscriptions still in its buffer, so the
    server answered it before refusing them, and tail, woken by the first refusal, named only
    the subjects refused so far (seen on a loaded CI machine: ``kaiwo.res.>`` alone).
    ``flush_written`` returns after every refusal of the subscriptions made before it."""
    credentials = write_credentials(tmp_path / "credentials", operator_identities(bus_topology()))
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        refused: list[str] = []

        async def note(error: Exception) -> None:
            refused.append(str(error))

        connection = NatsConnection(url=server.url, credentials_file=credentials.seed(SUBSCRIBER))
        client = await connect_client(connection, error_cb=note)
        try:
            subjects = ("kaiwo.res.>", "kaiwo.mon.>", "kaiwo.gateway.>")
            for subject in subjects:
                await client.subscribe(subject)
            await flush_written(client, seconds=5)
            assert len(refused) == len(subjects), refused
            assert all("permissions violation for subscription" in e.lower() for e in refused)
        finally:
            await client.close()
