"""A nats-server that stops answering without closing its connections (frozen, its node gone
without a reset) is taken as lost within seconds, so a service's readiness ("NATS connected")
turns false, and it comes back when the server answers again (decision 0251)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.nats_bus import MAX_OUTSTANDING_PINGS, PING_INTERVAL_SECONDS, NatsBus
from kaiwo_runtime.nats_server import NatsServer

from tests.waiting import Pending, eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(120)]


async def test_a_frozen_server_is_noticed_within_seconds_and_a_thawed_one_reconnects() -> None:
    assert (PING_INTERVAL_SECONDS, MAX_OUTSTANDING_PINGS) == (5, 2)
    async with NatsServer() as server:
        bus = await NatsBus.connect(server.url, topology=bus_topology())
        pid = server.pid
        assert pid is not None
        try:
            os.kill(pid, signal.SIGSTOP)
            frozen = time.monotonic()
            try:

                def lost() -> bool | Pending:
                    connected = bus.client.is_connected
                    return True if not connected else Pending("still connected")

                # nats-py's defaults (a ping every 120 s, 2 outstanding) took about six minutes.
                await eventually(lost, what="the frozen server taken as lost", within=40)
                noticed = time.monotonic() - frozen
                print(f"\na frozen server was taken as lost after {noticed:.1f} s")
            finally:
                os.kill(pid, signal.SIGCONT)

            def back() -> bool | Pending:
                return True if bus.client.is_connected else Pending("reconnecting")

            await eventually(back, what="reconnected to the thawed server", within=30)
        finally:
            await bus.close()
