"""One behavioural suite for every Bus adapter: the in-memory fake and real JetStream."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import replace
from datetime import UTC, datetime

import pytest
from kaiwo_contracts.events import Envelope, ObservedObjectV1, observed_event_id
from kaiwo_contracts.events.envelope import MAX_MESSAGE_BYTES
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_RELAY,
    DEAD_LETTER_STREAM,
    OBSERVED_STREAM,
    BusTopology,
    ConsumerSpec,
    bus_topology,
)
from kaiwo_runtime.bus import Bus, BusError, Delivery, PublishRefusedError, message_size
from kaiwo_runtime.dead_letters import (
    DLQ_BODY_BYTES,
    DLQ_CONSUMER,
    DLQ_DELIVERIES,
    DLQ_REASON,
    DLQ_SEQUENCE,
    DLQ_STREAM,
    DLQ_SUBJECT,
    dead_letter_relay,
)
from kaiwo_runtime.settlement import run_consumer

UID_A = "0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001"
UID_B = "5d2e9c1e-77a1-4f0e-8f0a-0c1b2d3e4f02"
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HANG_SECONDS = 60.0
"""How long a loop may run before the test calls it hung: a guard, not a measure."""

TEST_CONSUMER = ConsumerSpec(
    durable_name="test-obs",
    stream=OBSERVED_STREAM,
    filter_subjects=("kaiwo.obs.>",),
    description="contract test consumer",
    max_deliver=3,
    backoff_seconds=(0.2, 0.2),
    max_ack_pending=1,
)
DLQ_READER = ConsumerSpec(
    durable_name="test-dlq",
    stream=DEAD_LETTER_STREAM,
    filter_subjects=("kaiwo.dlq.>",),
    description="reads dead letters",
    max_deliver=2,
    backoff_seconds=(1.0,),
    max_ack_pending=16,
)
RELAY = ConsumerSpec(
    durable_name=DEAD_LETTER_RELAY,
    stream=DEAD_LETTER_STREAM,
    filter_subjects=("$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>",),
    description="relay",
    max_deliver=3,
    backoff_seconds=(1.0,),
    max_ack_pending=16,
)


def topology(*consumers: ConsumerSpec, partitions: int = 1) -> BusTopology:
    base = bus_topology(partitions=partitions)
    return BusTopology(
        partitions=partitions,
        streams=base.streams,
        consumers=(TEST_CONSUMER, DLQ_READER, RELAY, *consumers),
    )


def observed(
    uid: str, resource_version: str, *, name: str = "train.v1"
) -> Envelope[ObservedObjectV1]:
    data = ObservedObjectV1(
        kind="KaiwoJob",
        api_version="kaiwo.silogen.ai/v1alpha1",
        namespace="team-a",
        name=name,
        uid=uid,
        resource_version=resource_version,
        event_type="MODIFIED",
        object={"metadata": {"name": name, "uid": uid, "resourceVersion": resource_version}},
    )
    return Envelope.new(
        data=data,
        source="/kaiwo/watcher",
        time=WHEN,
        correlationid=uid,
        subject=f"team-a/{name}",
        id=observed_event_id(uid=uid, resource_version=resource_version),
    )


def obs_subject(uid: str) -> str:
    return f"kaiwo.obs.kaiwojob.team-a.{uid}"


async def drain(bus: Bus, consumer: ConsumerSpec, handler, *, rounds: int = 20) -> None:  # type: ignore[no-untyped-def]
    """Process until a pull comes back empty."""
    for _ in range(rounds):
        if await bus.process(consumer, handler, wait_seconds=0.5) == 0:
            return


async def dead_letters(bus: Bus, *, expected: int, within: float = 10.0) -> list[Delivery]:
    found: list[Delivery] = []

    async def keep(delivery: Delivery) -> None:
        found.append(delivery)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while len(found) < expected and loop.time() < deadline:
        await bus.process(DLQ_READER, keep, wait_seconds=0.3)
    return found


# ------------------------------------------------------------------------------- publishing


async def test_second_publish_of_an_id_is_a_duplicate_and_stored_once(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    event = observed(UID_A, "101")

    first = await bus.publish(event, obs_subject(UID_A))
    again = await bus.publish(event, obs_subject(UID_A))

    assert (first.stream, first.sequence, first.duplicate) == ("KAIWO_OBS", 1, False)
    assert (again.stream, again.sequence, again.duplicate) == ("KAIWO_OBS", 1, True)
    stored = await bus.read_stored("KAIWO_OBS", 1)
    assert stored is not None
    assert stored.headers["Nats-Msg-Id"] == f"{UID_A}:101"
    assert await bus.read_stored("KAIWO_OBS", 2) is None


async def test_two_publishers_of_one_observation_store_one_message(bus_harness) -> None:  # type: ignore[no-untyped-def]
    watcher_1 = await bus_harness.connect(topology())
    watcher_2 = await bus_harness.connect(topology())
    await watcher_1.ensure_streams()

    acks = [
        await watcher_1.publish(observed(UID_A, "7"), obs_subject(UID_A)),
        await watcher_2.publish(observed(UID_A, "7"), obs_subject(UID_A)),
        await watcher_2.publish(observed(UID_A, "8"), obs_subject(UID_A)),
    ]

    assert [(ack.sequence, ack.duplicate) for ack in acks] == [(1, False), (1, True), (2, False)]


async def test_publishing_where_no_stream_listens_fails(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()

    with pytest.raises(BusError):
        await bus.publish_raw("elsewhere.subject", body=b"{}", headers={})


async def test_ensure_streams_twice_changes_nothing(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))

    await bus.ensure_streams()

    assert (await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))).duplicate is True


# ------------------------------------------------------------------------------- consuming


async def test_consumer_receives_the_typed_envelope_it_was_sent(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    sent = observed(UID_A, "42", name="node-1.example.com")
    await bus.publish(sent, obs_subject(UID_A))
    received: list[Envelope[ObservedObjectV1]] = []

    async def handle(delivery: Delivery) -> None:
        received.append(delivery.envelope(ObservedObjectV1))

    count = await bus.process(TEST_CONSUMER, handle, wait_seconds=2.0)

    assert count == 1
    assert received == [sent]
    assert received[0].data.name == "node-1.example.com"
    assert await bus.process(TEST_CONSUMER, handle, wait_seconds=0.3) == 0


async def test_a_process_that_may_not_wait_takes_what_is_there(bus_harness) -> None:  # type: ignore[no-untyped-def]
    """``wait_seconds=0``: what the consumer has now, or nothing (how the planner reads findings
    and scale decisions between observations)."""
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    seen: list[str | None] = []

    async def handle(delivery: Delivery) -> None:
        seen.append(delivery.message_id)

    nothing = await bus.process(TEST_CONSUMER, handle, wait_seconds=0)
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))
    taken = 0
    for _ in range(50):  # the stream takes the message in before the consumer offers it
        taken = await bus.process(TEST_CONSUMER, handle, wait_seconds=0)
        if taken:
            break
        await asyncio.sleep(0.02)

    assert (nothing, taken) == (0, 1)
    assert seen == [f"{UID_A}:1"]
    assert await bus.process(TEST_CONSUMER, handle, wait_seconds=0) == 0


async def test_a_consumer_loop_whose_cancellation_was_swallowed_stops_at_its_next_fetch(
    bus_harness,
) -> None:  # type: ignore[no-untyped-def]
    """A handler's publish can return normally from a cancellation (Python 3.11's wait_for,
    in nats-py's request): the task is still being cancelled, and its loop must stop at the
    next fetch instead of fetching (and acknowledging) on for ever."""
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))
    handled: list[str | None] = []

    async def handle(delivery: Delivery) -> None:
        handled.append(delivery.message_id)

    async def consumer_loop() -> None:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.sleep(0)  # swallowed, as the library did
        while True:
            await bus.process(TEST_CONSUMER, handle, wait_seconds=0.2)

    loop = asyncio.create_task(consumer_loop())
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(loop, 5)

    assert loop.cancelled()
    assert handled == []  # nothing taken: the message stays for the next reader
    await drain(bus, TEST_CONSUMER, handle)
    assert handled == [f"{UID_A}:1"]


async def test_durable_consumer_resumes_where_it_stopped_after_reconnect(bus_harness) -> None:  # type: ignore[no-untyped-def]
    first = await bus_harness.connect(topology())
    await first.ensure_streams()
    for version in ("1", "2", "3"):
        await first.publish(observed(UID_A, version), obs_subject(UID_A))
    seen: list[str | None] = []

    async def handle(delivery: Delivery) -> None:
        seen.append(delivery.message_id)

    assert await first.process(TEST_CONSUMER, handle, max_messages=1, wait_seconds=2.0) == 1
    # Acknowledged on the server before it stops: an acknowledgement still on its way would
    # be lost with the restart and the message delivered again (allowed: at least once).
    await bus_harness.acknowledged(first, TEST_CONSUMER, through=1)
    await first.close()
    await bus_harness.restart()
    second = await bus_harness.connect(topology())
    await drain(second, TEST_CONSUMER, handle)

    assert seen == [f"{UID_A}:1", f"{UID_A}:2", f"{UID_A}:3"]


async def test_failed_handler_is_retried_after_the_backoff(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "5"), obs_subject(UID_A))
    attempts: list[int] = []

    async def flaky(delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        if delivery.attempt == 1:
            raise ConnectionError("API server unavailable")

    loop = asyncio.get_running_loop()
    started = loop.time()
    await drain(bus, TEST_CONSUMER, flaky)
    elapsed = loop.time() - started

    assert attempts == [1, 2]
    assert elapsed >= 0.2  # TEST_CONSUMER's first backoff
    assert await dead_letters(bus, expected=1, within=0.5) == []


async def test_malformed_message_goes_to_the_dead_letter_subject_with_its_reason(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    headers = {
        "ce-id": "bad-1",
        "ce-type": "ai.silogen.kaiwo.obs.observed.v1",
        "ce-source": "/kaiwo/watcher",
        "ce-specversion": "1.0",
        "Nats-Msg-Id": "bad-1",
    }
    await bus.publish_raw(obs_subject(UID_A), body=b"{not json", headers=headers)
    attempts: list[int] = []

    async def handle(delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        delivery.envelope(ObservedObjectV1)

    await drain(bus, TEST_CONSUMER, handle)
    letters = await dead_letters(bus, expected=1)

    assert attempts == [1]
    assert len(letters) == 1
    letter = letters[0]
    assert letter.subject == "kaiwo.dlq.KAIWO_OBS.test-obs"
    assert letter.body == b"{not json"
    assert letter.headers["ce-id"] == "bad-1"
    assert letter.headers[DLQ_REASON].startswith("rejected: EnvelopeFormatError")
    assert letter.headers[DLQ_STREAM] == "KAIWO_OBS"
    assert letter.headers[DLQ_CONSUMER] == "test-obs"
    assert letter.headers[DLQ_SUBJECT] == obs_subject(UID_A)
    assert letter.headers[DLQ_SEQUENCE] == "1"
    assert letter.headers[DLQ_DELIVERIES] == "1"


async def test_message_failing_every_delivery_is_dead_lettered_after_max_deliver(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "9"), obs_subject(UID_A))
    attempts: list[int] = []

    async def always_failing(delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        raise TimeoutError("still down")

    await drain(bus, TEST_CONSUMER, always_failing)
    letters = await dead_letters(bus, expected=1)

    assert attempts == [1, 2, 3]
    assert [letter.headers[DLQ_REASON] for letter in letters] == [
        "max deliveries (3) exhausted: TimeoutError: still down"
    ]
    assert letters[0].headers["Nats-Msg-Id"] == "dlq:KAIWO_OBS:test-obs:1"


async def test_unacknowledged_message_reaches_the_dead_letters_through_the_advisory(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    abandoning = ConsumerSpec(
        durable_name="test-abandon",
        stream=OBSERVED_STREAM,
        filter_subjects=("kaiwo.obs.>",),
        description="a consumer whose handler never finishes",
        max_deliver=2,
        backoff_seconds=(0.3,),
        max_ack_pending=1,
    )
    bus = await bus_harness.connect(topology(abandoning))
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "11"), obs_subject(UID_A))
    entered = asyncio.Event()
    attempts: list[int] = []

    async def hangs(delivery: Delivery) -> None:
        attempts.append(delivery.attempt)
        entered.set()
        await asyncio.Event().wait()

    for _ in range(2):  # the process "crashes" mid-handler on both deliveries
        entered.clear()
        task = asyncio.create_task(bus.process(abandoning, hangs, wait_seconds=3.0))
        await asyncio.wait_for(entered.wait(), 5.0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0.4)
    # A pull after the last ack wait lets the server notice the exhausted message.
    assert await bus.process(abandoning, hangs, wait_seconds=0.5) == 0
    relay = dead_letter_relay(bus)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 10.0
    while loop.time() < deadline and await bus.process(RELAY, relay, wait_seconds=0.3) == 0:
        pass
    letters = await dead_letters(bus, expected=1)

    assert attempts == [1, 2]
    assert len(letters) == 1
    assert letters[0].subject == "kaiwo.dlq.KAIWO_OBS.test-abandon"
    assert letters[0].headers["ce-id"] == f"{UID_A}:11"
    assert letters[0].headers[DLQ_REASON] == (
        "max deliveries (2) exhausted without an acknowledgement"
    )
    assert Envelope[ObservedObjectV1].from_nats(letters[0].headers, letters[0].body) == observed(
        UID_A, "11"
    )


async def test_order_per_object_holds_across_a_retry(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    for version in range(1, 6):
        await bus.publish(observed(UID_A, str(version)), obs_subject(UID_A))
        await bus.publish(observed(UID_B, str(version)), obs_subject(UID_B))
    handled: dict[str, list[str]] = {UID_A: [], UID_B: []}
    failed_once: set[str] = set()

    async def handle(delivery: Delivery) -> None:
        event = delivery.envelope(ObservedObjectV1)
        if event.id == f"{UID_A}:2" and event.id not in failed_once:
            failed_once.add(event.id)
            raise ConnectionError("transient")
        handled[event.data.uid].append(event.data.resource_version)

    await drain(bus, TEST_CONSUMER, handle, rounds=40)

    assert handled == {UID_A: ["1", "2", "3", "4", "5"], UID_B: ["1", "2", "3", "4", "5"]}


UID_LANES = ConsumerSpec(
    durable_name="test-lanes",
    stream=OBSERVED_STREAM,
    filter_subjects=("kaiwo.obs.>",),
    description="several in flight, ordered per uid",
    max_deliver=3,
    backoff_seconds=(0.2, 0.2),
    max_ack_pending=16,
    ordered_by_uid=True,
)


async def test_uid_ordered_consumer_overlaps_uids_and_keeps_each_uids_order(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology(UID_LANES))
    await bus.ensure_streams()
    for version in range(1, 4):
        await bus.publish(observed(UID_A, str(version)), obs_subject(UID_A))
        await bus.publish(observed(UID_B, str(version)), obs_subject(UID_B))
    handled: list[str] = []
    in_flight: set[str] = set()
    overlapped: set[frozenset[str]] = set()

    async def handle(delivery: Delivery) -> None:
        event = delivery.envelope(ObservedObjectV1)
        uid = event.data.uid
        assert uid not in in_flight, "two messages of one uid were handled at once"
        in_flight.add(uid)
        if len(in_flight) > 1:
            overlapped.add(frozenset(in_flight))
        await asyncio.sleep(0.05)  # an API call: the other uid's lane runs meanwhile
        in_flight.discard(uid)
        handled.append(event.id)

    await drain(bus, UID_LANES, handle, rounds=10)

    assert [i for i in handled if i.startswith(UID_A)] == [f"{UID_A}:{v}" for v in (1, 2, 3)]
    assert [i for i in handled if i.startswith(UID_B)] == [f"{UID_B}:{v}" for v in (1, 2, 3)]
    assert overlapped == {frozenset({UID_A, UID_B})}


LANES_LOOP = replace(
    UID_LANES, durable_name="test-lanes-loop", max_deliver=2, backoff_seconds=(HANG_SECONDS,)
)
"""As ``UID_LANES``, with an ack wait no held message reaches (it would come back)."""


async def test_a_uid_ordered_consumer_loop_handles_a_new_uid_while_another_is_held(
    bus_harness,
) -> None:  # type: ignore[no-untyped-def]
    """A message that arrives while another uid's message is still being handled starts
    at once: it does not wait for the batch fetched before it (an owner whose API calls
    retry for minutes must not hold up every other owner's plans)."""
    bus = await bus_harness.connect(topology(LANES_LOOP))
    await bus.ensure_streams()
    held = asyncio.Event()
    release = asyncio.Event()
    handled: list[str] = []

    async def handle(delivery: Delivery) -> None:
        event = delivery.envelope(ObservedObjectV1)
        if event.data.uid == UID_A:
            held.set()
            await release.wait()
        handled.append(event.id)

    stop = asyncio.Event()
    loop = asyncio.create_task(run_consumer(bus, LANES_LOOP, handle, stop=stop, poll_timeout=0.2))
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))
    await asyncio.wait_for(held.wait(), HANG_SECONDS)
    await bus.publish(observed(UID_B, "1"), obs_subject(UID_B))
    await bus.publish(observed(UID_A, "2"), obs_subject(UID_A))
    await wait_until(lambda: handled == [f"{UID_B}:1"])

    release.set()
    await wait_until(lambda: len(handled) == 3)
    stop.set()
    await asyncio.wait_for(loop, HANG_SECONDS)

    assert handled == [f"{UID_B}:1", f"{UID_A}:1", f"{UID_A}:2"]  # A's in their order
    await drain(bus, LANES_LOOP, handle)
    assert len(handled) == 3  # every one acknowledged: none comes back


async def test_a_uid_ordered_consumer_loop_holds_no_more_than_its_max_ack_pending(
    bus_harness,
) -> None:  # type: ignore[no-untyped-def]
    """Busy lanes stop the fetching: the loop never takes more messages than it may have
    unacknowledged, and a stop finishes the ones in hand."""
    narrow = replace(LANES_LOOP, durable_name="test-lanes-narrow", max_ack_pending=2)
    bus = await bus_harness.connect(topology(narrow))
    await bus.ensure_streams()
    uids = [f"{UID_A[:-3]}{n:03d}" for n in range(5)]
    for uid in uids:
        await bus.publish(observed(uid, "1"), obs_subject(uid))
    release = asyncio.Event()
    started: list[str] = []
    handled: list[str] = []

    async def handle(delivery: Delivery) -> None:
        event = delivery.envelope(ObservedObjectV1)
        started.append(event.data.uid)
        await release.wait()
        handled.append(event.data.uid)

    stop = asyncio.Event()
    loop = asyncio.create_task(run_consumer(bus, narrow, handle, stop=stop, poll_timeout=0.2))
    await wait_until(lambda: len(started) == 2)
    await asyncio.sleep(0.5)  # several pulls' time: a loop that fetched on would start more
    assert len(started) == 2

    stop.set()
    release.set()
    await asyncio.wait_for(loop, HANG_SECONDS)
    assert len(started) == 2  # nothing fetched after the stop
    assert sorted(handled) == sorted(started)  # the two in hand were finished
    await drain(bus, narrow, handle)
    assert sorted(handled) == sorted(uids)


async def wait_until(condition, *, within: float = HANG_SECONDS) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + within
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


async def test_partitioned_streams_store_the_uid_partition_the_server_computes(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    bus = await bus_harness.connect(topology(partitions=4))
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))
    await bus.publish(observed(UID_B, "1"), obs_subject(UID_B))

    stored = [await bus.read_stored("KAIWO_OBS", sequence) for sequence in (1, 2)]

    # Partitions as nats-server 2.15 computes them (FNV-1a of the uid token, mod 4).
    assert [message.subject for message in stored if message] == [
        f"kaiwo.obs.kaiwojob.team-a.{UID_A}.3",
        f"kaiwo.obs.kaiwojob.team-a.{UID_B}.1",
    ]


# ------------------------------------------------------------------------------- hostile input

POISON_HEADERS = {
    "ce-id": "poison-1",
    "ce-type": "ai.silogen.kaiwo.obs.observed.v1",
    "ce-source": "/kaiwo/watcher",
    "ce-specversion": "1.0",
    "ce-time": "2026-03-01T12:00:00Z",
    "ce-correlationid": UID_A,
    "Nats-Msg-Id": "poison-1",
}


async def read_stream(bus: Bus, stream: str) -> list[str]:
    """The subjects stored in ``stream``, in order."""
    subjects = []
    sequence = 1
    while (stored := await bus.read_stored(stream, sequence)) is not None:
        subjects.append(stored.subject)
        sequence += 1
    return subjects


async def test_a_message_over_the_size_limit_is_refused_before_it_is_sent(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    headers = {"ce-id": "big"}
    body = b"x" * (MAX_MESSAGE_BYTES - 16)

    with pytest.raises(PublishRefusedError) as refused:
        await bus.publish_raw(obs_subject(UID_A), body=body, headers=headers)

    # The header block is 10 + 2 + (5 + 3 + 4) bytes: 24 bytes, 8 over the limit.
    assert (refused.value.size, refused.value.limit) == (MAX_MESSAGE_BYTES + 8, MAX_MESSAGE_BYTES)
    assert message_size(headers, body) == MAX_MESSAGE_BYTES + 8
    # The connection is still usable (the server would have closed it over such a message).
    assert (await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))).sequence == 1


async def test_a_deeply_nested_message_is_dead_lettered_on_its_first_delivery(bus_harness) -> None:  # type: ignore[no-untyped-def]
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    await bus.publish_raw(
        obs_subject(UID_A), body=b"[" * 5000 + b"]" * 5000, headers=POISON_HEADERS
    )
    await bus.publish(observed(UID_A, "2"), obs_subject(UID_A))
    handled: list[tuple[int, int]] = []

    async def handle(delivery: Delivery) -> None:
        handled.append((delivery.stream_sequence, delivery.attempt))
        delivery.envelope(ObservedObjectV1)

    await drain(bus, TEST_CONSUMER, handle)
    [letter] = await dead_letters(bus, expected=1)

    assert handled == [(1, 1), (2, 1)]
    assert letter.headers[DLQ_REASON] == (
        "rejected: EnvelopeFormatError: too-deep: nested deeper than 201 levels "
        "(recursion limit exceeded at line 1 column 202)"
    )


async def test_a_dead_letter_of_a_message_near_the_limit_carries_the_start_of_its_body(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    bus = await bus_harness.connect(topology())
    await bus.ensure_streams()
    body = b"x" * (MAX_MESSAGE_BYTES - 400)
    await bus.publish_raw(obs_subject(UID_A), body=body, headers=POISON_HEADERS)

    async def handle(delivery: Delivery) -> None:
        delivery.envelope(ObservedObjectV1)

    await drain(bus, TEST_CONSUMER, handle)
    [letter] = await dead_letters(bus, expected=1)

    assert letter.headers[DLQ_BODY_BYTES] == str(len(body))
    assert letter.headers[DLQ_REASON].startswith("rejected: EnvelopeFormatError: not-json")
    assert letter.body == body[: len(letter.body)]
    assert message_size(letter.headers, letter.body) <= MAX_MESSAGE_BYTES
    assert len(letter.body) > MAX_MESSAGE_BYTES - 2000


async def abandon(bus: Bus, consumer: ConsumerSpec) -> None:
    """Take a message and never settle it, as a reader that crashes on it does."""
    entered = asyncio.Event()

    async def hangs(delivery: Delivery) -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(bus.process(consumer, hangs, wait_seconds=0.3))
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(entered.wait(), 0.5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_one_poison_message_makes_one_dead_letter_however_long_the_relay_runs(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    crashing_reader = ConsumerSpec(
        durable_name="test-dlq-crashes",
        stream=DEAD_LETTER_STREAM,
        filter_subjects=("kaiwo.dlq.>",),
        description="a reader of dead letters that crashes on every one",
        max_deliver=2,
        backoff_seconds=(0.3,),
        max_ack_pending=16,
    )
    failing_reader = ConsumerSpec(
        durable_name="test-dlq-fails",
        stream=DEAD_LETTER_STREAM,
        filter_subjects=("kaiwo.dlq.>",),
        description="a reader of dead letters whose handler always raises",
        max_deliver=2,
        backoff_seconds=(0.2,),
        max_ack_pending=16,
    )
    bus = await bus_harness.connect(topology(crashing_reader, failing_reader))
    await bus.ensure_streams()
    await bus.publish_raw(obs_subject(UID_A), body=b"{not json", headers=POISON_HEADERS)

    async def decode(delivery: Delivery) -> None:
        delivery.envelope(ObservedObjectV1)

    async def fails(delivery: Delivery) -> None:
        raise RuntimeError("the store is broken for this one")

    await drain(bus, TEST_CONSUMER, decode)
    relay = dead_letter_relay(bus)

    async def one_round() -> None:
        await abandon(bus, crashing_reader)
        await bus.process(failing_reader, fails, wait_seconds=0.1)
        await bus.process(RELAY, relay, wait_seconds=0.1)

    # Until the crashing reader has run out of deliveries (the relay then has an advisory to
    # ignore), however many rounds a loaded machine needs; then the relay goes on a while.
    advisory = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.KAIWO_DLQ.test-dlq-crashes"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + HANG_SECONDS
    while advisory not in await read_stream(bus, DEAD_LETTER_STREAM):
        assert loop.time() < deadline, "the crashing reader never ran out of deliveries"
        await one_round()
    for _ in range(5):
        await one_round()
    stored = await read_stream(bus, DEAD_LETTER_STREAM)

    assert [subject for subject in stored if subject.startswith("kaiwo.dlq.")] == [
        "kaiwo.dlq.KAIWO_OBS.test-obs"
    ]
    assert advisory in stored


async def test_a_stream_over_its_byte_limit_drops_its_oldest_messages(bus_harness) -> None:  # type: ignore[no-untyped-def]
    base = topology()
    limited = BusTopology(
        partitions=1,
        streams=tuple(
            replace(s, max_bytes=16 * 1024) if s.name == OBSERVED_STREAM else s
            for s in base.streams
        ),
        consumers=base.consumers,
    )
    bus = await bus_harness.connect(limited)
    await bus.ensure_streams()
    padding = "p" * 2000
    for version in range(1, 21):  # ~2 KB each, 40 KB in all
        await bus.publish(
            observed(UID_A, str(version), name=f"n{padding}"[:250]), obs_subject(UID_A)
        )
        await bus.publish_raw(
            obs_subject(UID_B), body=padding.encode(), headers={"Nats-Msg-Id": f"pad-{version}"}
        )

    assert await bus.read_stored(OBSERVED_STREAM, 1) is None
    assert (await bus.read_stored(OBSERVED_STREAM, 40)) is not None
    kept = [
        sequence
        for sequence in range(1, 41)
        if await bus.read_stored(OBSERVED_STREAM, sequence) is not None
    ]
    assert kept == list(range(kept[0], 41))
    assert 5 <= len(kept) <= 12  # 16 KiB of 1.3-2.3 KB messages


async def test_reading_on_from_a_sequence_skips_other_subjects(
    bus_harness,  # type: ignore[no-untyped-def]
) -> None:
    bus = await bus_harness.connect(topology(partitions=4))
    await bus.ensure_streams()
    await bus.publish(observed(UID_A, "1"), obs_subject(UID_A))
    await bus.publish(observed(UID_B, "1"), obs_subject(UID_B))
    await bus.publish(observed(UID_A, "2"), obs_subject(UID_A))

    first = await bus.read_next_stored("KAIWO_OBS", 1, subjects="kaiwo.obs.>")
    of_a = await bus.read_next_stored("KAIWO_OBS", 2, subjects=f"kaiwo.obs.*.*.{UID_A}.*")

    assert first is not None and first.sequence == 1
    assert of_a is not None and (of_a.sequence, of_a.subject) == (
        3,
        f"kaiwo.obs.kaiwojob.team-a.{UID_A}.3",
    )
    assert await bus.read_next_stored("KAIWO_OBS", 4, subjects="kaiwo.obs.>") is None
