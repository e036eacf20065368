"""How long one bad message holds up its consumer, measured on a real nats-server.

Decision 0005 promises: a message that cannot be decoded is dead-lettered on its first
delivery; one whose handler always fails is dead-lettered on delivery ``max_deliver`` after
waiting ``retry_delay(1) + ... + retry_delay(max_deliver - 1)`` (260 s with the defaults);
then the consumer's next message is handled. Here the same consumer runs with the backoff
scaled down to tenths of seconds so the bound can be measured.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from kaiwo_contracts.events import Envelope, ObservedObjectV1
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    OBSERVED_STREAM,
    BusTopology,
    ConsumerSpec,
    bus_topology,
)
from kaiwo_runtime.bus import Delivery
from kaiwo_runtime.dead_letters import DLQ_REASON
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from kaiwo_runtime.settlement import run_consumer

pytestmark = [pytest.mark.nats, pytest.mark.slow]

UID = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
SUBJECT = f"kaiwo.obs.kaiwojob.team-a.{UID}"
SCALED = ConsumerSpec(
    durable_name="bound-obs",
    stream=OBSERVED_STREAM,
    filter_subjects=("kaiwo.obs.>",),
    description="the planner's consumer with the backoff scaled down",
    max_deliver=4,
    backoff_seconds=(0.4, 0.8, 1.2),
    max_ack_pending=1,
)
# Worked out by hand from SCALED: retries after deliveries 1, 2 and 3 wait 0.4, 0.8 and
# 1.2 s; delivery 4 is the last and is dead-lettered.
BOUND_SECONDS = 0.4 + 0.8 + 1.2
# Pulls, acks and the dead-letter publish on a loaded 2-core machine.
OVERHEAD_SECONDS = 0.6


def observation(resource_version: str) -> Envelope[ObservedObjectV1]:
    return Envelope.new(
        data=ObservedObjectV1(
            kind="KaiwoJob",
            api_version="kaiwo.silogen.ai/v1alpha1",
            namespace="team-a",
            name="train",
            uid=UID,
            resource_version=resource_version,
            event_type="MODIFIED",
            object={"metadata": {"name": "train", "uid": UID}},
        ),
        source="/kaiwo/watcher",
        time=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        correlationid=UID,
        id=f"{UID}:{resource_version}",
    )


@dataclass
class Timeline:
    """When each message was delivered, by resourceVersion (or "poison")."""

    deliveries: dict[str, list[float]] = field(default_factory=dict)
    innocent_handled: asyncio.Event = field(default_factory=asyncio.Event)

    def note(self, key: str) -> None:
        self.deliveries.setdefault(key, []).append(asyncio.get_running_loop().time())


@pytest.fixture
async def bus() -> AsyncIterator[NatsBus]:
    async with NatsServer() as server:
        base = bus_topology()
        topology = BusTopology(partitions=1, streams=base.streams, consumers=(SCALED,))
        connected = await NatsBus.connect(server.url, topology=topology, name="bound")
        await connected.ensure_streams()
        yield connected
        await connected.close()


async def run_until_innocent_handled(bus: NatsBus, timeline: Timeline) -> None:
    async def handle(delivery: Delivery) -> None:
        envelope = delivery.envelope(ObservedObjectV1)
        timeline.note(envelope.data.resource_version)
        if envelope.data.resource_version == "1":
            raise ConnectionError("the API server refuses this one every time")
        timeline.innocent_handled.set()

    async def poison_aware(delivery: Delivery) -> None:
        if delivery.headers.get("ce-id") == "poison":
            timeline.note("poison")
        await handle(delivery)

    stop = asyncio.Event()
    task = asyncio.create_task(run_consumer(bus, SCALED, poison_aware, stop=stop, poll_timeout=0.2))
    try:
        await asyncio.wait_for(timeline.innocent_handled.wait(), BOUND_SECONDS + 10)
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def dead_letter_reasons(bus: NatsBus) -> list[str]:
    reasons = []
    sequence = 1
    while (stored := await bus.read_stored(DEAD_LETTER_STREAM, sequence)) is not None:
        reasons.append(stored.headers[DLQ_REASON])
        sequence += 1
    return reasons


async def test_an_always_failing_message_blocks_its_consumer_for_the_backoff_and_no_longer(
    bus: NatsBus,
) -> None:
    assert SCALED.poison_bound_seconds == pytest.approx(BOUND_SECONDS)
    await bus.publish(observation("1"), SUBJECT)
    await bus.publish(observation("2"), SUBJECT)
    timeline = Timeline()

    await run_until_innocent_handled(bus, timeline)

    failing = timeline.deliveries["1"]
    blocked = timeline.deliveries["2"][0] - failing[0]
    print(f"\nalways-failing message: blocked {blocked:.2f} s (bound {BOUND_SECONDS:.2f} s)")
    assert len(failing) == 4
    assert BOUND_SECONDS <= blocked <= BOUND_SECONDS + OVERHEAD_SECONDS
    assert await dead_letter_reasons(bus) == [
        "max deliveries (4) exhausted: ConnectionError: the API server refuses this one every time"
    ]


async def test_a_message_that_cannot_be_decoded_blocks_its_consumer_for_one_delivery(
    bus: NatsBus,
) -> None:
    headers, _ = observation("1").to_nats()
    poison = {**headers, "ce-id": "poison", "Nats-Msg-Id": "poison"}
    await bus.publish_raw(SUBJECT, body=b'{"a":' * 5000 + b"1" + b"}" * 5000, headers=poison)
    await bus.publish(observation("2"), SUBJECT)
    timeline = Timeline()

    await run_until_innocent_handled(bus, timeline)

    blocked = timeline.deliveries["2"][0] - timeline.deliveries["poison"][0]
    print(f"\nundecodable message: blocked {blocked:.3f} s")
    assert len(timeline.deliveries["poison"]) == 1
    assert blocked <= OVERHEAD_SECONDS
    assert await dead_letter_reasons(bus) == [
        "rejected: EnvelopeFormatError: too-deep: nested deeper than 201 levels "
        "(recursion limit exceeded at line 1 column 1006)"
    ]
