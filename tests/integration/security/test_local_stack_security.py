"""``kaiwo up`` (as ``kaiwo up --fake`` runs it): its own credentials, private files, NATS on
loopback only with no anonymous access, and ``kaiwo events tail`` finding it without flags."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import nats
import nats.errors
import pytest
import pytest_asyncio
from click.testing import CliRunner
from kaiwo_cli.commands.events import tail
from kaiwo_cli.main import app
from kaiwo_contracts.events.permissions import CLI_SUBJECTS
from kaiwo_runtime.nats_server import free_port

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.waiting import HANG_SECONDS

pytestmark = [pytest.mark.nats, pytest.mark.slow]

IDENTITIES = (
    "admin",
    "cli",
    "console",
    "executor",
    "gateway",
    "monitor",
    "planner",
    "recorder",
    "subscriber",
    "watcher",
)


@pytest_asyncio.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Pipeline]:
    async with running_pipeline(tmp_path / "kaiwo", gateway_port=free_port()) as running:
        yield running


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def listening_addresses(port: int) -> set[str]:
    """Local IPv4 addresses with a socket listening on ``port`` (from /proc/net/tcp)."""
    found = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, _remote, state = line.split()[1:4]
        address, port_hex = local.split(":")
        if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
            octets = [str(int(address[i : i + 2], 16)) for i in range(6, -2, -2)]
            found.add(".".join(octets))
    return found


async def test_kaiwo_up_keeps_its_state_private(stack: Pipeline) -> None:
    state_dir = stack.stack.options.state_dir
    credentials = state_dir / "credentials"

    assert mode(state_dir) == 0o700
    assert mode(credentials) == 0o700
    assert sorted(path.stem for path in credentials.glob("*.nk")) == list(IDENTITIES)
    for path in (*credentials.iterdir(), state_dir / "events.db", state_dir / "stack.json"):
        assert mode(path) == 0o600, path
    assert "nkey" in (credentials / "nats-server.conf").read_text()
    assert "no_auth_user" not in (credentials / "nats-server.conf").read_text()
    state = json.loads((state_dir / "stack.json").read_text())
    assert state["subscriberCredentialsFile"] == str(credentials / "subscriber.nk")


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads /proc/net/tcp (Linux)")
async def test_nats_and_the_gateway_listen_on_loopback_only_and_nats_refuses_anonymous_clients(
    stack: Pipeline,
) -> None:
    server = stack.stack.nats
    assert server is not None
    gateway = stack.stack.options.gateway_port
    assert gateway is not None

    assert listening_addresses(server.port) == {"127.0.0.1"}
    assert listening_addresses(gateway) == {"127.0.0.1"}
    async with (
        aiohttp.ClientSession() as http,
        http.get(f"http://127.0.0.1:{gateway}/openai/v1/models") as models,
    ):
        assert await models.json() == {"object": "list", "data": []}
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            server.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2
        )


async def kaiwo(*arguments: str) -> Any:
    env = {**os.environ, "COLUMNS": "250", "NO_COLOR": "1"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


def noting_subscriptions(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Set once ``kaiwo events tail`` (run in this process) has subscribed to every subject
    and the server has seen it: an event published before then would pass it by."""
    subscribed = threading.Event()
    connect = tail.connect_client

    async def connect_noting(*arguments: Any, **options: Any) -> Any:
        client = await connect(*arguments, **options)
        subscribe, subjects = client.subscribe, set(CLI_SUBJECTS)

        async def subscribe_noting(subject: str, **kwargs: Any) -> Any:
            subscription = await subscribe(subject, **kwargs)
            subjects.discard(subject)
            if not subjects:
                await client.flush()
                subscribed.set()
            return subscription

        client.subscribe = subscribe_noting
        return client

    monkeypatch.setattr(tail, "connect_client", connect_noting)
    return subscribed


async def test_events_tail_finds_the_stack_without_flags(
    stack: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = str(stack.stack.options.state_dir)
    subscribed = noting_subscriptions(monkeypatch)
    tailing = asyncio.create_task(
        kaiwo("events", "tail", "--state-dir", state_dir, "--kind", "KaiwoJob", "--count", "1")
    )
    assert await asyncio.to_thread(subscribed.wait, HANG_SECONDS), "tail never subscribed"
    await stack.kube.create(actors.training_job("tailed"))
    result = await asyncio.wait_for(tailing, 60)

    assert result.exit_code == 0, result.output
    # Besides the event, the cluster the stack's events are of (decision 0042).
    (line,) = [text for text in result.output.splitlines() if not text.startswith("kaiwo events: ")]
    # The CLI's key follows the public workload events, not the observed objects (0039).
    assert "public.workload.v1" in line
    assert " submitted " in line
    assert f"{actors.NAMESPACE}/tailed " in line

    # The store is found through the same state, once the recorder has the event.
    async def explained() -> Any:
        result = await kaiwo(
            "events", "explain", f"{actors.NAMESPACE}/tailed", "--state-dir", state_dir
        )
        return result if result.exit_code == 0 else Pending(result.output)

    story = await eventually(explained, what="kaiwo events explain finds the workload")
    assert f"KaiwoJob {actors.NAMESPACE}/tailed" in story.output
