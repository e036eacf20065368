"""Two gateway replicas on a real nats-server with every identity's key: one leads the
autoscaler, the other takes over when it stops and continues its moving averages from the
``kaiwo-autoscaler`` bucket; the load the other replica reports counts.

The Model ``chat`` (target 1 request per replica, no scale-down delay, window 30 s of 60
samples) has one stand-in endpoint. Requests held open at the second replica for a few
seconds put load into the first replica's windows; then the first stops and the Model is
observed at 4 replicas. The new leader wants fewer at once: the ceiling of the average it
continued, at least one, where a window started afresh would say zero.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.permissions import ADMIN, WATCHER, operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_gateway.__main__ import serve
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.integration.gateway.test_gateway import connect, observe, standin_pod, start_standin
from tests.unit.gateway.model_objects import model_object
from tests.waiting import eventually

pytestmark = [pytest.mark.nats, pytest.mark.asyncio(loop_scope="module")]


@dataclass
class Replica:
    stop: asyncio.Event
    task: asyncio.Task[None]
    base_url: str
    metrics_url: str

    async def leading(self) -> bool:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.metrics_url) as response,
        ):
            text = await response.text()
        return "kaiwo_autoscaler_leading 1.0" in text


@dataclass
class Cluster:
    server: NatsServer
    credentials: CredentialsDirectory
    watcher: NatsBus
    admin: NatsBus
    standin_port: int
    versions: dict[str, int]

    def settings(self, *, gateway_port: int, health_port: int) -> GatewaySettings:
        return GatewaySettings(
            nats_url=self.server.url,
            nats_credentials_file=self.credentials.seed("gateway"),
            gateway_host="127.0.0.1",
            gateway_port=gateway_port,
            gateway_anonymous="loopback",  # as kaiwo up runs it: no API server here
            health_host="127.0.0.1",
            health_port=health_port,
            # Long enough that a busy event loop (both replicas share the test's) never loses
            # it; a graceful stop releases it, so the other takes over within 2 s.
            lease_seconds=15,
            autoscaler_interval_seconds=0.5,
            autoscaler_window_seconds=30,
        )

    async def replica(self) -> Replica:
        gateway_port, health_port = free_port(), free_port()
        stop = asyncio.Event()
        task = asyncio.create_task(
            serve(self.settings(gateway_port=gateway_port, health_port=health_port), stop)
        )
        replica = Replica(
            stop=stop,
            task=task,
            base_url=f"http://127.0.0.1:{gateway_port}/openai/v1",
            metrics_url=f"http://127.0.0.1:{health_port}/metrics",
        )
        await eventually(lambda: answers(replica))
        return replica

    async def observe(self, obj: dict[str, Any]) -> None:
        await observe(self.watcher, self.versions, obj)


async def answers(replica: Replica) -> bool:
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{replica.base_url}/models") as response,
        ):
            return response.status == 200
    except aiohttp.ClientError:
        return False


def chat(*, replicas: int, generation: int) -> dict[str, Any]:
    return model_object(
        "chat",
        uid="chat",
        generation=generation,
        replicas=replicas,
        targetRequests=1,
        scaleDownDelaySeconds=0,
        maxReplicas=5,
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def cluster(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Cluster]:
    directory: Path = tmp_path_factory.mktemp("replicas")
    credentials = write_credentials(directory / "credentials", operator_identities(bus_topology()))
    port = free_port()
    standin = await start_standin("s1", port)
    try:
        async with NatsServer(config=credentials.server_config.read_text()) as server:
            admin = await connect(server, credentials, ADMIN)
            await admin.ensure_streams()
            watcher = await connect(server, credentials, WATCHER)
            found = Cluster(server, credentials, watcher, admin, port, versions={})
            await found.observe(chat(replicas=1, generation=1))
            await found.observe(standin_pod("s1", model="chat", model_uid="chat", port=port))
            try:
                yield found
            finally:
                await watcher.close()
                await admin.close()
    finally:
        standin.terminate()
        await standin.wait()


async def test_the_next_leader_continues_the_windows_of_the_first(cluster: Cluster) -> None:
    decisions: list[ScaleDecidedV1] = []

    async def decided(message: Any) -> None:
        envelope = Envelope[ScaleDecidedV1].from_nats(dict(message.headers or {}), message.data)
        decisions.append(envelope.data)

    await cluster.admin.client.subscribe("kaiwo.gateway.scale.>", cb=decided)
    first = await cluster.replica()
    await eventually(first.leading)
    second = await cluster.replica()
    assert not await second.leading()

    # Load at the second replica, sampled by the first: four requests held for 3 s.
    client = openai.AsyncOpenAI(base_url=second.base_url, api_key="unused", max_retries=0)
    answers = await asyncio.gather(
        *(client.completions.create(model="chat", prompt="hold 3") for _ in range(4))
    )
    assert [answer.choices[0].text for answer in answers] == ["s1|chat|"] * 4
    assert await first.leading() and not await second.leading()

    first.stop.set()
    await asyncio.wait_for(first.task, 15)
    await eventually(second.leading)
    await cluster.observe(chat(replicas=4, generation=2))

    await eventually(lambda: _decided_from_four(decisions))
    [down] = [d for d in decisions if d.generation == 2]
    assert down.from_replicas == 4
    # The average continued: some of the 60 samples still hold the load, so at least 1.
    assert 1 <= down.replicas < 4
    assert down.average_active_requests > 0
    second.stop.set()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(second.task, 15)


async def _decided_from_four(decisions: list[ScaleDecidedV1]) -> bool:
    return any(d.generation == 2 for d in decisions)
