"""The ``nats`` command lines docs/events.md gives a subscriber, run as the page writes them
(natscli from the built stack, the ``subscriber`` key, a real nats-server with the operator's
permissions): only the server's address, the key's path and the program's path are put in."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import re
import shlex
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final

import pytest
from kaiwo_contracts.events.permissions import (
    ADMIN,
    PLANNER,
    SUBSCRIBER,
    operator_identities,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import public_workload_subject, stored_subject
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer

from tests.integration.pipeline.harness import STEP_SECONDS
from tests.nats_keys import connected_as
from tests.real_cluster import REPO_ROOT
from tests.stack_programs import stack_program

pytestmark = [pytest.mark.nats, pytest.mark.slow]

EVENTS_PAGE: Final = REPO_ROOT / "docs" / "events.md"
DOCUMENTED_SERVER: Final = "nats://127.0.0.1:4222"
DOCUMENTED_KEY: Final = "subscriber.nk"


def documented_lines(page: str) -> tuple[list[str], list[list[str]]]:
    """The page's ``nats`` block: the ``N`` command prefix and each ``$N`` line's arguments,
    continuation lines joined and comments dropped."""
    block = re.search(r"```sh\n(N=\"nats .*?)```", page, re.DOTALL)
    assert block is not None, 'docs/events.md has no ```sh block starting N="nats ..."'
    lines = block.group(1).replace("\\\n", " ").splitlines()
    prefix = shlex.split(lines[0].removeprefix("N="))[0].split()
    commands = [shlex.split(line, comments=True)[1:] for line in lines[1:] if line.strip()]
    return prefix, commands


def told(number: int, namespace: str) -> tuple[str, bytes]:
    """The subject and body of a public event (the body is not read by the command line)."""
    uid = f"6f1c2d3e-0000-4000-8000-0000000000{number:02d}"
    subject = public_workload_subject(namespace=namespace, kind="KaiwoJob", uid=uid)
    return subject, json.dumps({"transition": "submitted", "number": number}).encode()


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[NatsServer, CredentialsDirectory]]:
    credentials = write_credentials(tmp_path / "credentials", operator_identities(bus_topology()))
    async with NatsServer(config=credentials.server_config.read_text()) as started:
        yield started, credentials


async def test_the_pages_nats_lines_read_live_stored_and_unread_public_events(
    server: tuple[NatsServer, CredentialsDirectory],
) -> None:
    nats_server, credentials = server
    prefix, commands = documented_lines(EVENTS_PAGE.read_text())
    assert len(commands) == 4, commands
    live, stored, add_consumer, unread = commands
    put_in = {
        "nats": stack_program("nats"),
        DOCUMENTED_SERVER: nats_server.url,
        DOCUMENTED_KEY: str(credentials.seed(SUBSCRIBER)),
    }
    assert set(put_in) <= set(prefix), f"the page's command prefix moved on: {prefix}"
    program = [put_in.get(word, word) for word in prefix]

    def connection(identity: str) -> NatsConnection:
        return connected_as(nats_server.url, credentials, identity)

    topology = bus_topology()
    admin = await NatsBus.connect(connection(ADMIN), topology=topology)
    planner = await NatsBus.connect(connection(PLANNER), topology=topology)

    async def tell(number: int, namespace: str) -> str:
        subject, body = told(number, namespace)
        await planner.publish_raw(
            subject,
            body=body,
            headers={"ce-type": "ai.silogen.kaiwo.public.workload.v1", "Nats-Msg-Id": subject},
        )
        return subject

    try:
        await admin.ensure_streams()
        before = [await tell(1, "team-a"), await tell(2, "team-b")]

        # Live only: what is published while it listens, nothing from before.
        numbers = itertools.count(10)
        heard, while_live = await live_subjects(
            program + live, tell_next=lambda: tell(next(numbers), "team-a")
        )
        assert heard and heard == while_live[-len(heard) :], (heard, while_live)
        every = [*before, *while_live]

        # Every stored event, then it exits by itself.
        assert subjects_in(run(program + stored)) == every

        # A durable consumer of the tool's own: the first read has everything, a second run
        # only what came since (the first acknowledged what it printed).
        assert "Filter Subject: kaiwo.public.>" in run(program + add_consumer)
        assert subjects_in(run(program + unread)) == every
        consumer = run([*program, "consumer", "info", "KAIWO_PUBLIC", "my-tool"])
        assert "Outstanding Acks: 0 out of" in consumer, consumer
        later = await tell(4, "team-b")
        assert subjects_in(run(program + unread)) == [later]
    finally:
        await planner.close()
        await admin.close()


def run(command: Sequence[str]) -> str:
    """Run a command line that exits by itself; its output, having checked it succeeded."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=STEP_SECONDS, check=False
    )
    assert done.returncode == 0, f"{shlex.join(command)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout + done.stderr


def subjects_in(output: str) -> list[str]:
    """The subjects of the messages natscli printed, in order."""
    return re.findall(r"subject: (kaiwo\.public\.\S+)", output)


async def live_subjects(
    command: Sequence[str], *, tell_next: Callable[[], Awaitable[str]]
) -> tuple[list[str], list[str]]:
    """The subjects a live ``nats sub`` prints, and those published while it ran. Once it
    says it subscribes, ``tell_next`` publishes an event each second until one is printed:
    natscli says so before its subscription has reached the server, so the first may be
    missed (a CI run under load waited 60 s for it)."""
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    assert process.stdout is not None
    printed: list[str] = []
    published: list[str] = []

    async def read_line() -> None:
        assert process.stdout is not None
        printed.append((await process.stdout.readline()).decode())
        assert printed[-1], f"nats sub exited: {''.join(printed)}"

    def heard() -> list[str]:
        # Live, the stream republishes each stored event after kaiwo.live. (decision 0287).
        live = re.findall(r"Received on \"?(kaiwo\.live\.public\.[^\s\"]+)", "".join(printed))
        return [stored_subject(subject) for subject in live]

    try:
        async with asyncio.timeout(STEP_SECONDS):
            while not any("Subscribing on" in line for line in printed):
                await read_line()
            while not set(heard()) & set(published):
                published.append(await tell_next())
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(1):
                        while not set(heard()) & set(published):
                            await read_line()
    finally:
        process.terminate()
        await process.wait()
    return heard(), published
