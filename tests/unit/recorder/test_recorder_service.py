"""The recorder over an in-memory JetStream: every family once, nothing lost, nothing twice."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ModelLoad, ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    OBSERVED_STREAM,
    BusTopology,
    bus_topology,
)
from kaiwo_contracts.events.subjects import load_report_subject, scale_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import InMemoryEventStore
from kaiwo_recorder.gaps import Gap
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.bus import PoisonMessage, message_size
from kaiwo_runtime.dead_letters import DLQ_REASON
from structlog.testing import capture_logs

WORKLOAD = "workload/0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"
MODEL_UID = "9a8b7c6d-4444-4e5f-8a9b-0c1d2e3f4a5b"


def sample(metric: Any, **labels: str) -> float:
    return float(metric.labels(**labels)._value.get()) if labels else float(metric._value.get())


async def every_family(samples: Any) -> list[Any]:
    observed = samples.job_observation()
    plan = samples.plan_decision(observed.envelope)
    return [
        observed,
        samples.pod_observation(),
        samples.node_observation(),
        plan,
        samples.apply_result(plan.envelope),
        samples.preemption(),
    ]


async def test_the_recorder_has_one_consumer_per_stream(harness: Any) -> None:
    assert sorted(c.durable_name for c in harness.service.consumers) == [
        "recorder-dlq",
        "recorder-gateway",
        "recorder-mon",
        "recorder-obs",
        "recorder-plan",
        "recorder-res",
    ]


async def test_every_family_is_recorded_once_in_its_stream(harness: Any, samples: Any) -> None:
    sent = await every_family(samples)
    await harness.publish(*sent)

    assert await harness.pump_all() == 6

    workload = await harness.store.read_stream(WORKLOAD)
    assert sorted(event.type for event in workload) == [
        "ai.silogen.kaiwo.mon.preemption-decided.v1",
        "ai.silogen.kaiwo.obs.observed.v1",
        "ai.silogen.kaiwo.obs.observed.v1",
        "ai.silogen.kaiwo.plan.decided.v1",
        "ai.silogen.kaiwo.res.applied.v1",
    ]
    nodes = await harness.store.read_stream("node/gpu-node-1.example.com")
    assert [event.event_id for event in nodes] == [f"{samples.NODE_UID}:7"]
    assert await harness.store.last_position() == 6
    recorded = {event.event_id: event for event in await harness.store.read_all()}
    for item in sent:
        event = recorded[item.envelope.id]
        assert event.type == item.envelope.type
        assert event.correlation_id == item.envelope.correlationid
        assert event.causation_id == item.envelope.causationid
    assert sample(harness.metrics.events_appended, stream="KAIWO_OBS") == 3
    assert sample(harness.metrics.events_appended, stream="KAIWO_PLAN") == 1
    # nothing left to deliver: everything was acknowledged
    harness.clock.advance(3600)
    assert await harness.pump_all() == 0


async def test_observation_sequences_are_the_stream_sequences(harness: Any, samples: Any) -> None:
    await harness.publish(samples.node_observation(), samples.job_observation())
    await harness.pump_all()

    events = await harness.store.read_all()
    assert [(e.metadata["natsStream"], e.metadata["natsSequence"]) for e in events] == [
        ("KAIWO_OBS", 1),
        ("KAIWO_OBS", 2),
    ]


async def test_a_redelivered_message_is_stored_once(harness: Any, samples: Any) -> None:
    await harness.publish(samples.job_observation())

    class LostAck:
        """Wraps a pulled message so that its ack never reaches the server."""

        def __init__(self, message: Any) -> None:
            self.message = message
            self.delivery = message.delivery

        async def ack(self) -> None:
            return None

        async def extend(self) -> None:
            await self.message.extend()

    puller = harness.service._puller

    class LosingPuller:
        async def pull(self, consumer: Any, **kwargs: Any) -> Any:
            return [LostAck(m) for m in await puller.pull(consumer, **kwargs)]

        async def flush(self) -> None:
            return None

    harness.service._puller = LosingPuller()
    first = await harness.service.pump(harness.service.consumers[0], wait_seconds=0)
    assert first.appended == 1
    harness.service._puller = puller

    harness.clock.advance(10)  # past the ack wait: the server delivers it again
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    second = await harness.service.pump(consumer, wait_seconds=0)

    assert (second.messages, second.appended, second.duplicates) == (1, 0, 1)
    assert len(await harness.store.read_all()) == 1
    assert sample(harness.metrics.duplicates, stream="KAIWO_OBS") == 1


async def test_a_republished_event_after_the_duplicate_window_is_stored_once(
    harness: Any, samples: Any
) -> None:
    await harness.publish(samples.job_observation())
    await harness.pump_all()
    harness.clock.advance(600)  # JetStream forgot the id; the store has not
    await harness.publish(samples.job_observation())

    await harness.pump_all()

    assert [e.event_id for e in await harness.store.read_all()] == [f"{samples.JOB_UID}:100"]


async def test_a_database_outage_holds_the_batch_until_the_store_is_back(samples: Any) -> None:
    store = samples.UnavailableStore()
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation(), samples.pod_observation())
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    store.down = True

    held = await harness.service.pump(consumer, wait_seconds=0)

    assert held.held and held.messages == 2
    assert await store.inner.last_position() == 0
    assert sample(harness.metrics.store_unavailable) == 1
    # still held, still failing: retried with the same messages, no new pull
    again = await harness.service.pump(consumer, wait_seconds=0)
    assert again.held and again.messages == 2

    store.down = False
    recovered = await harness.service.pump(consumer, wait_seconds=0)

    assert (recovered.held, recovered.appended) == (False, 2)
    assert [e.event_id for e in await store.inner.read_all()] == [
        f"{samples.JOB_UID}:100",
        f"{samples.POD_UID}:101",
    ]
    harness.clock.advance(3600)
    assert (await harness.service.pump(consumer, wait_seconds=0)).messages == 0


async def test_a_full_disk_holds_the_batch_although_reads_still_work(samples: Any) -> None:
    # The store reads on a full disk, so probing with a read cannot tell "full" from "this row
    # is refused": the recorder used to dead-letter and acknowledge every message.
    store = samples.FullStore()
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation(), samples.pod_observation())
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    store.full = True

    held = await harness.service.pump(consumer, wait_seconds=0)

    assert (held.held, held.messages, held.dead_lettered) == (True, 2, 0)
    assert harness.server.stream_messages(DEAD_LETTER_STREAM) == []
    assert sample(harness.metrics.store_unavailable) == 1
    assert sample(harness.metrics.held_messages) == 2
    with pytest.raises(Exception, match="2 messages held, not recorded: SQLITE_FULL"):
        await harness.service.store_ready()

    store.full = False
    recovered = await harness.service.pump(consumer, wait_seconds=0)

    assert (recovered.held, recovered.appended) == (False, 2)
    assert sample(harness.metrics.held_messages) == 0
    assert await harness.service.store_ready()
    assert [e.event_id for e in await store.inner.read_all()] == [
        f"{samples.JOB_UID}:100",
        f"{samples.POD_UID}:101",
    ]


async def test_messages_of_a_recorder_that_died_during_an_outage_are_not_lost(
    samples: Any,
) -> None:
    store = samples.UnavailableStore()
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation())
    store.down = True
    await harness.pump_all()  # the batch is held, never acknowledged; then the process dies

    store.down = False
    harness.restart()
    assert await harness.pump_all() == 0  # still within the ack wait
    harness.clock.advance(10)
    assert await harness.pump_all() == 1

    assert [e.event_id for e in await store.inner.read_all()] == [f"{samples.JOB_UID}:100"]


async def test_stopping_gives_a_held_batch_back_for_immediate_redelivery(samples: Any) -> None:
    store = samples.UnavailableStore()
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation())
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    store.down = True
    await harness.service.pump(consumer, wait_seconds=0)

    await harness.service.release(consumer)
    store.down = False
    other = harness.restart()

    assert (await other.pump(consumer, wait_seconds=0)).appended == 1


async def test_run_records_until_stopped_and_survives_an_outage(samples: Any) -> None:
    store = samples.UnavailableStore()
    harness = await samples.make_harness(store)
    store.down = True
    stop = asyncio.Event()
    running = asyncio.create_task(harness.service.run(stop))
    sent = await every_family(samples)
    await harness.publish(*sent)
    await asyncio.sleep(0.3)
    assert await store.inner.last_position() == 0

    store.down = False
    for _ in range(200):
        if await store.inner.last_position() == len(sent):
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(running, 5)

    assert sorted(e.event_id for e in await store.inner.read_all()) == sorted(
        item.envelope.id for item in sent
    )


async def test_a_malformed_message_is_recorded_raw(harness: Any, samples: Any) -> None:
    await harness.bus.publish_raw(
        f"kaiwo.obs.kaiwojob.team-a.{samples.JOB_UID}",
        body=b"not json at all",
        headers={"Nats-Msg-Id": "garbage-1"},
    )

    await harness.pump_all()

    (event,) = await harness.store.read_all()
    assert event.type == "ai.silogen.kaiwo.recorder.malformed.v1"
    assert event.event_id == "garbage-1"
    assert event.data["body"] == "not json at all"
    assert sample(harness.metrics.malformed, stream="KAIWO_OBS") == 1


async def test_a_poison_message_is_recorded_raw_in_its_batch_and_its_neighbours_as_events(
    harness: Any, samples: Any
) -> None:
    before = samples.job_observation(resource_version="100")
    after = samples.job_observation(resource_version="101")
    await harness.publish(before)
    poison = b"[" * 5000 + b"]" * 5000  # json.loads raised RecursionError on it
    headers, _ = before.envelope.to_nats()
    await harness.bus.publish_raw(
        before.subject, body=poison, headers={**headers, "ce-id": "poison", "Nats-Msg-Id": "p"}
    )
    await harness.publish(after)
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)

    result = await harness.service.pump(consumer, wait_seconds=0)

    assert (result.messages, result.appended, result.malformed, result.dead_lettered) == (
        3,
        3,
        1,
        0,
    )
    stored = await harness.store.read_all()
    assert [(e.event_id, e.type) for e in stored] == [
        (f"{samples.JOB_UID}:100", "ai.silogen.kaiwo.obs.observed.v1"),
        ("poison", "ai.silogen.kaiwo.recorder.malformed.v1"),
        (f"{samples.JOB_UID}:101", "ai.silogen.kaiwo.obs.observed.v1"),
    ]
    assert stored[1].data["failure"] == "too-deep"
    assert stored[1].data["bodyEncoding"] == "text"
    assert stored[1].data["body"] == poison.decode()
    assert stored[1].data["headers"]["ce-id"] == "poison"
    assert harness.server.stream_messages(DEAD_LETTER_STREAM) == []


async def test_dead_letters_of_other_consumers_are_recorded(harness: Any, samples: Any) -> None:
    sent = samples.job_observation()
    await harness.publish(sent)
    planner = next(c for c in bus_topology().consumers if c.durable_name == "planner-obs")

    async def reject(_delivery: Any) -> None:
        raise PoisonMessage("spec.gpus must be a number")

    await harness.bus.process(planner, reject, wait_seconds=0)

    await harness.pump_all()

    dead = await harness.store.read_stream("deadletter/KAIWO_OBS/planner-obs")
    assert [e.type for e in dead] == ["ai.silogen.kaiwo.dlq.dead-lettered.v1"]
    assert dead[0].causation_id == sent.envelope.id
    assert "spec.gpus must be a number" in dead[0].data["reason"]
    # the observation itself is recorded once, from its own stream
    assert [e.event_id for e in await harness.store.read_stream(WORKLOAD)] == [sent.envelope.id]


async def test_a_row_the_store_refuses_is_stored_raw_and_the_rest_of_the_batch_kept(
    samples: Any,
) -> None:
    store = samples.RefusingStore(marker="gpu-node-1")
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation(), samples.node_observation())

    await harness.pump_all()

    events = {e.event_id: e for e in await store.inner.read_all()}
    assert events[f"{samples.JOB_UID}:100"].type == "ai.silogen.kaiwo.obs.observed.v1"
    raw = events[f"{samples.NODE_UID}:7"]
    assert raw.type == "ai.silogen.kaiwo.recorder.malformed.v1"
    assert raw.data["bodyEncoding"] == "base64"
    assert raw.data["type"] == "ai.silogen.kaiwo.obs.observed.v1"
    assert raw.data["reason"].startswith("store refused: ValueError: unsupported Unicode")


async def test_a_message_the_store_refuses_in_every_form_is_dead_lettered(samples: Any) -> None:
    store = samples.RefusingStore(marker="gpu-node-1", refuse_raw=True)
    harness = await samples.make_harness(store)
    await harness.publish(samples.node_observation())

    observed = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    result = await harness.service.pump(observed, wait_seconds=0)

    assert result.dead_lettered == 1
    (letter,) = harness.server.stream_messages(DEAD_LETTER_STREAM)
    assert letter.subject == "kaiwo.dlq.KAIWO_OBS.recorder-obs"
    assert letter.headers[DLQ_REASON].startswith("recorder: store refused the event")
    assert await store.inner.last_position() == 0
    # the dead letter carries the same body, refused as well: it stays in KAIWO_DLQ, and
    # the recorder does not dead-letter it again (that would loop)
    dlq = next(c for c in harness.service.consumers if c.stream == DEAD_LETTER_STREAM)
    assert (await harness.service.pump(dlq, wait_seconds=0)).dead_lettered == 1
    assert len(harness.server.stream_messages(DEAD_LETTER_STREAM)) == 1
    harness.clock.advance(3600)
    assert (await harness.service.pump(dlq, wait_seconds=0)).messages == 0
    harness.clock.advance(3600)
    assert (await harness.service.pump(observed, wait_seconds=0)).messages == 0


async def test_readiness_follows_the_store(samples: Any) -> None:
    store = samples.UnavailableStore()
    harness = await samples.make_harness(store)
    assert await harness.service.store_ready()
    store.down = True
    with pytest.raises(ConnectionRefusedError):
        await harness.service.store_ready()


async def test_a_second_connection_resumes_the_durable_consumers(samples: Any) -> None:
    store = InMemoryEventStore()
    harness = await samples.make_harness(store)
    await harness.publish(samples.job_observation())
    await harness.pump_all()
    await harness.bus.close()
    other = harness.restart()
    await harness.publish(samples.pod_observation())
    for consumer in other.consumers:
        await other.pump(consumer, wait_seconds=0)

    assert [e.event_id for e in await store.read_all()] == [
        f"{samples.JOB_UID}:100",
        f"{samples.POD_UID}:101",
    ]


async def test_run_turns_a_max_deliveries_advisory_into_a_dead_letter_with_the_message(
    harness: Any, samples: Any
) -> None:
    sent = samples.job_observation()
    ack = await harness.bus.publish(sent.envelope, sent.subject)
    # What the server publishes when a handler never answered until max_deliver ran out.
    advisory = {
        "type": "io.nats.jetstream.advisory.v1.max_deliver",
        "id": "adv-1",
        "timestamp": "2026-03-01T12:00:00Z",
        "stream": "KAIWO_OBS",
        "consumer": "planner-obs",
        "stream_seq": ack.sequence,
        "deliveries": 6,
    }
    await harness.bus.publish_raw(
        "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.KAIWO_OBS.planner-obs",
        body=json.dumps(advisory).encode(),
        headers={},
    )
    stop = asyncio.Event()
    running = asyncio.create_task(harness.service.run(stop))
    for _ in range(200):
        dead = await harness.store.read_stream("deadletter/KAIWO_OBS/planner-obs")
        if any(e.type == "ai.silogen.kaiwo.dlq.dead-lettered.v1" for e in dead):
            break
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(running, 5)

    letters = [e for e in dead if e.type == "ai.silogen.kaiwo.dlq.dead-lettered.v1"]
    assert len(letters) == 1
    assert letters[0].causation_id == sent.envelope.id
    assert "max deliveries (6) exhausted" in letters[0].data["reason"]


class CountingStore:
    """The store, counting ``append_next`` calls (one per transaction)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.appends = inner, 0

    async def append_next(self, events: Any) -> Any:
        self.appends += 1
        return await self.inner.append_next(events)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


async def test_messages_arriving_while_it_lingers_share_one_transaction(
    harness: Any, samples: Any
) -> None:
    store = CountingStore(harness.store)
    lingering = RecorderService(
        bus=harness.bus, store=store, clock=lambda: samples.NOW, linger_seconds=0.05
    )
    observations = lingering.bus.topology.consumer("recorder-obs")
    await harness.publish(samples.job_observation())

    async def late_arrivals() -> None:
        await asyncio.sleep(0.01)  # after the first pull, within the linger
        await harness.publish(samples.pod_observation(), samples.node_observation())

    arriving = asyncio.create_task(late_arrivals())
    result = await lingering.pump(observations, wait_seconds=0)
    await arriving

    assert (result.messages, result.appended) == (3, 3)
    assert store.appends == 1


async def gap_harness(samples: Any, *, keep_bytes: int) -> Any:
    """A recorder whose observation stream holds only ``keep_bytes`` (its oldest dropped)."""
    harness = await samples.make_harness(InMemoryEventStore())
    tiny = BusTopology(
        partitions=1,
        streams=tuple(
            replace(s, max_bytes=keep_bytes) if s.name == OBSERVED_STREAM else s
            for s in harness.bus.topology.streams
        ),
        consumers=harness.bus.topology.consumers,
    )
    harness.bus.topology = tiny
    await harness.bus.ensure_streams()
    return harness


def observations(samples: Any, count: int) -> list[Any]:
    return [samples.job_observation(resource_version=str(100 + n)) for n in range(count)]


async def test_messages_dropped_before_they_were_read_are_reported_as_a_gap(
    samples: Any,
) -> None:
    sent = observations(samples, 10)
    size = len(sent[0].subject) + message_size(*sent[0].envelope.to_nats())
    harness = await gap_harness(samples, keep_bytes=3 * size + 10)  # room for three
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    await harness.publish(*sent)

    with capture_logs() as logs:
        gap = await harness.service.check_position(consumer)
    lag_before = sample(harness.metrics.lag, stream="KAIWO_OBS")
    recorded = await harness.service.pump(consumer, wait_seconds=0)
    await harness.service.check_position(consumer)

    assert gap == Gap(1, 7)
    assert lag_before == 3
    assert recorded.appended == 3
    assert sample(harness.metrics.gap_messages, stream="KAIWO_OBS") == 7
    assert sample(harness.metrics.lag, stream="KAIWO_OBS") == 0
    assert [(entry["log_level"], entry["first_sequence"], entry["messages"]) for entry in logs] == [
        ("error", 1, 7)
    ]


async def test_a_jump_in_the_deliveries_is_a_gap_too(samples: Any) -> None:
    sent = observations(samples, 10)
    size = len(sent[0].subject) + message_size(*sent[0].envelope.to_nats())
    harness = await gap_harness(samples, keep_bytes=3 * size + 10)
    consumer = next(c for c in harness.service.consumers if c.stream == OBSERVED_STREAM)
    await harness.service.check_position(consumer)  # nothing yet: expects sequence 1
    await harness.publish(*sent)

    recorded = await harness.service.pump(consumer, wait_seconds=0)

    assert recorded.appended == 3
    assert sample(harness.metrics.gap_messages, stream="KAIWO_OBS") == 7


async def test_load_reports_are_kept_per_gateway_replica_and_decisions_with_their_model(
    harness: Any, samples: Any
) -> None:
    model = ObjectRef(
        api_version="kubeai.org/v1", kind="Model", name="llm", namespace="ai", uid=MODEL_UID
    )
    report = Envelope.new(
        data=ActiveRequestsV1(
            gateway="gw-0/1",
            interval_seconds=10.0,
            models=(ModelLoad(model=model, active_requests=3),),
        ),
        source="/kaiwo/gateway",
        time=samples.NOW,
        correlationid="gw-0/1",
    )
    decision = Envelope.new(
        data=ScaleDecidedV1(
            model=model,
            generation=2,
            from_replicas=0,
            replicas=1,
            cause="request",
            active_requests=3,
            average_active_requests=0,
            window_seconds=600,
            samples=60,
            target_requests=100,
            scale_down_delay_seconds=30,
            reason="scale from zero: 3 requests wait for a ready endpoint",
        ),
        source="/kaiwo/gateway",
        time=samples.NOW,
        subject="ai/llm",
        correlationid=MODEL_UID,
    )
    await harness.bus.publish(report, load_report_subject("gw-0/1"))
    await harness.bus.publish(decision, scale_subject(namespace="ai", uid=MODEL_UID))

    assert await harness.pump_all() == 2
    [recorded_report] = await harness.store.read_stream("gateway/gw-0/1")
    assert recorded_report.event_id == report.id
    [recorded_decision] = await harness.store.read_stream(f"workload/{MODEL_UID}")
    assert recorded_decision.type == "ai.silogen.kaiwo.gateway.scale-decided.v1"
    assert recorded_decision.metadata["natsStream"] == "KAIWO_GATEWAY"
    assert recorded_decision.metadata["natsSequence"] == 2
