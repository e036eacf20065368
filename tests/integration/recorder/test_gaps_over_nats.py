"""A stream with a tiny byte limit on a real nats-server: what the stream dropped before the
recorder read it is reported as a gap, with the lag, and the rest is recorded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kaiwo_contracts.events.streams import OBSERVED_STREAM, BusTopology, bus_topology
from kaiwo_eventstore import open_event_store
from kaiwo_recorder.gaps import Gap
from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from structlog.testing import capture_logs

from tests.integration.recorder.test_recorder_over_nats import utc_now
from tests.waiting import eventually

pytestmark = [pytest.mark.nats]

SENT = 300
KEEP_BYTES = 64 * 1024  # a few dozen ~1.2 KB observations


def tiny_topology() -> BusTopology:
    base = bus_topology()
    return BusTopology(
        partitions=1,
        streams=tuple(
            replace(s, max_bytes=KEEP_BYTES) if s.name == OBSERVED_STREAM else s
            for s in base.streams
        ),
        consumers=base.consumers,
    )


def sample(metric: Any, **labels: str) -> float:
    return float(metric.labels(**labels)._value.get())


async def test_messages_the_stream_dropped_before_the_recorder_read_them_are_a_gap(
    nats_server: NatsServer, tmp_path: Any, make_observation: Any
) -> None:
    bus = await NatsBus.connect(nats_server.url, topology=tiny_topology(), name="gap-test")
    store = await open_event_store(f"sqlite:///{tmp_path / 'events.db'}")
    try:
        await bus.ensure_streams()
        for number in range(SENT):  # the recorder is not running: the stream overflows
            envelope, subject = make_observation(number)
            await bus.publish(envelope, subject)
        info = await bus.client.jetstream().stream_info(OBSERVED_STREAM)
        first, last = info.state.first_seq, info.state.last_seq
        service = RecorderService(
            bus=bus, store=store, clock=utc_now, metrics=RecorderMetrics(), fetch_wait_seconds=0.2
        )
        consumer = next(c for c in service.consumers if c.stream == OBSERVED_STREAM)

        with capture_logs() as logs:
            gap = await service.check_position(consumer)
        lag = sample(service.metrics.lag, stream=OBSERVED_STREAM)
        appended = 0
        while appended < last - first + 1:
            appended += (await service.pump(consumer, wait_seconds=0.5)).appended

        async def acknowledgements_taken_in() -> bool:
            # Acknowledgements are sent without waiting for the server to take them in.
            await service.check_position(consumer)
            return sample(service.metrics.lag, stream=OBSERVED_STREAM) == 0

        await eventually(acknowledgements_taken_in, what="the lag back to 0")
        events = await store.read_all(limit=SENT)
    finally:
        await store.close()
        await bus.close()

    kept = last - first + 1
    assert last == SENT
    assert 10 < kept < SENT  # the limit dropped most of them, not all
    assert gap == Gap(1, first - 1)
    assert lag == kept
    assert appended == kept
    assert sample(service.metrics.gap_messages, stream=OBSERVED_STREAM) == first - 1
    assert sample(service.metrics.lag, stream=OBSERVED_STREAM) == 0
    assert [e.metadata["natsSequence"] for e in events] == list(range(first, last + 1))
    [line] = [entry for entry in logs if entry["log_level"] == "error"]
    assert (line["stream"], line["first_sequence"], line["last_sequence"]) == (
        OBSERVED_STREAM,
        1,
        first - 1,
    )
    print(f"\n{SENT} published, {kept} kept by a {KEEP_BYTES} B stream, gap of {first - 1}")


async def test_a_jump_in_the_sequences_delivered_is_reported_as_a_gap(
    nats_server: NatsServer, tmp_path: Any, make_observation: Any
) -> None:
    bus = await NatsBus.connect(nats_server.url, topology=tiny_topology(), name="gap-test")
    store = await open_event_store(f"sqlite:///{tmp_path / 'events.db'}")
    try:
        await bus.ensure_streams()
        service = RecorderService(
            bus=bus, store=store, clock=utc_now, metrics=RecorderMetrics(), fetch_wait_seconds=0.2
        )
        consumer = next(c for c in service.consumers if c.stream == OBSERVED_STREAM)
        assert await service.check_position(consumer) is None  # empty: expects sequence 1
        for number in range(SENT):
            envelope, subject = make_observation(number)
            await bus.publish(envelope, subject)
        first = (await bus.client.jetstream().stream_info(OBSERVED_STREAM)).state.first_seq

        with capture_logs() as logs:
            await service.pump(consumer, wait_seconds=0.5)
    finally:
        await store.close()
        await bus.close()

    assert first > 1
    assert sample(service.metrics.gap_messages, stream=OBSERVED_STREAM) == first - 1
    [line] = [entry for entry in logs if entry["log_level"] == "error"]
    assert line["noticed"] == "the deliveries skipped sequences"
