"""The hostile bus corpus against the real consumers on a real nats-server.

The planner (real planning), the executor (against the fake API server), the recorder
(SQLite) with the dead-letter relay run as they do in production, each on its own
connection. Each message of :mod:`tests.hostile.bus.corpus` is published, then an innocent
message for the same reader (a KaiwoJob for the planner, a plan for the executor), and the
test waits until the innocent one is handled: within 5 s, the consumers' first retry delay,
so no hostile message was retried. Then it reads what happened to the hostile one (dead
letter and reason, the recorder's row) and compares with the outcome written in the corpus.

``pytest tests/hostile/bus -s`` prints the table (message, expected, observed).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1 import KaiwoJob
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    bus_topology,
)
from kaiwo_eventstore import EventStore, StoredEvent, open_event_store
from kaiwo_executor.service import BUCKET, ExecutorService
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.records import DEAD_LETTER_TYPE, MALFORMED_TYPE, MAX_DELIVERIES_TYPE
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.bus import PublishRefusedError
from kaiwo_runtime.dead_letters import DLQ_REASON, DLQ_SEQUENCE, DLQ_STREAM
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from structlog.testing import capture_logs

from tests.hostile.bus.corpus import (
    HostileMessage,
    build_corpus,
    kaiwo_job,
    observation,
    plan_message,
    uid_of,
)

pytestmark = [pytest.mark.nats, pytest.mark.slow]

HANG_SECONDS = 60.0
"""How long a wait may last before the test calls it hung: a guard, not a measure."""
RETRIED = "message will be retried"
"""What a consumer logs when it leaves a message for a later delivery: never logged here means
every hostile message was settled on its first delivery, so none held up the innocent one
behind it (the figure in the table) for a retry delay."""
REJECTED = "rejected: EnvelopeFormatError: "


def now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Observed:
    publish: str
    consumer: str
    recorder: str
    innocent_seconds: float | None = None


@dataclass
class Stack:
    """The services, a bus for the test's own publishing, and the store the recorder fills."""

    bus: NatsBus
    store: EventStore
    tasks: list[asyncio.Task[None]]
    stop: asyncio.Event
    kube: KubernetesAsyncioAdapter
    innocents: int = 0
    read: dict[str, int] = field(default_factory=dict)

    async def new_messages(self, stream: str) -> list[Any]:
        """Messages stored in ``stream`` since the last call (by sequence)."""
        found = []
        sequence = self.read.get(stream, 0) + 1
        while (stored := await self.bus.read_stored(stream, sequence)) is not None:
            found.append(stored)
            sequence += 1
        self.read[stream] = sequence - 1
        return found

    async def settled(self, stream: str, consumer: str, sequence: int) -> None:
        """Wait until ``consumer`` has acknowledged (or terminated) ``sequence``."""
        js = self.bus.client.jetstream()
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            info = await js.consumer_info(stream, consumer)
            if info.ack_floor.stream_seq >= sequence:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{consumer} never settled {stream}:{sequence}")

    async def innocent(self, reader: str) -> float:
        """Publish an innocent message for ``reader``; seconds until it was handled."""
        self.innocents += 1
        name = f"innocent-{reader}-{self.innocents}"
        uid = uid_of(name)
        if reader == "planner":
            subject, headers, body = observation(kaiwo_job(uid, name))
            answers = PLAN_STREAM
        else:
            # The executor admits plans of owners that exist: the innocent plan's owner does.
            created = await self.kube.create(
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoJob",
                    "metadata": {"name": name, "namespace": "default"},
                    "spec": {"image": "busybox"},
                }
            )
            subject, headers, body = plan_message(created["metadata"]["uid"], name)
            uid = created["metadata"]["uid"]
            answers = RESULT_STREAM
        started = time.monotonic()
        await self.bus.publish_raw(subject, body=body, headers=headers)
        while time.monotonic() - started < HANG_SECONDS:
            for stored in await self.new_messages(answers):
                if stored.headers.get("ce-correlationid") == uid:
                    return time.monotonic() - started
            await asyncio.sleep(0.01)
        raise AssertionError(f"the innocent {name} was not handled within {HANG_SECONDS} s")

    async def recorded(self, stream: str, sequence: int) -> StoredEvent:
        deadline = time.monotonic() + HANG_SECONDS
        while time.monotonic() < deadline:
            for event in await self.store.read_all(limit=100_000):
                metadata = event.metadata
                if (metadata.get("natsStream"), metadata.get("natsSequence")) == (stream, sequence):
                    return event
            await asyncio.sleep(0.05)
        raise AssertionError(f"the recorder never stored {stream}:{sequence}")


@contextlib.asynccontextmanager
async def running_stack(tmp_path: Path) -> AsyncIterator[Stack]:
    topology = bus_topology()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(NatsServer())
        fake = await stack.enter_async_context(FakeKubeServer(kubeconfig_path=tmp_path / "kc"))
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path)
        stack.push_async_callback(kube.close)
        await kube.ensure_crds(custom_resource_definitions([KaiwoJob]), field_manager="test")

        async def connect(name: str) -> NatsBus:
            bus = await NatsBus.connect(server.url, topology=topology, name=name)
            stack.push_async_callback(bus.close)
            await bus.ensure_streams()
            return bus

        test_bus = await connect("hostile-publisher")
        store = await open_event_store(f"sqlite:///{tmp_path / 'events.db'}")
        stack.push_async_callback(store.close)
        planner_bus = await connect("planner")
        planner = PlannerService(
            planner_bus,
            await NatsKeyValue.open(planner_bus.client, "kaiwo-planner"),
            clock=now,
            plan_fn=None,
            settings=PlannerSettings(poll_seconds=0.05),
            metrics=PlannerMetrics(),
        )
        executor_bus = await connect("executor")
        executor = ExecutorService(
            executor_bus,
            kube,
            await NatsKeyValue.open(executor_bus.client, BUCKET),
            now,
            poll_timeout=0.2,
        )
        recorder = RecorderService(
            bus=await connect("recorder"),
            store=store,
            clock=now,
            metrics=RecorderMetrics(),
            fetch_wait_seconds=0.2,
        )
        stop = asyncio.Event()
        tasks = [
            asyncio.create_task(service.run(stop), name=name)
            for name, service in (
                ("planner", planner),
                ("executor", executor),
                ("recorder", recorder),
            )
        ]
        running = Stack(bus=test_bus, store=store, tasks=tasks, stop=stop, kube=kube)
        try:
            # What the planner needs to plan a KaiwoJob: its namespace and the queue config.
            for obj in (
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
                {
                    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                    "kind": "KaiwoQueueConfig",
                    "metadata": {"name": "kaiwo"},
                    "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": ["team-a"]}]},
                },
            ):
                name = obj["metadata"]["name"]
                obj["metadata"].update(uid=uid_of(name), resourceVersion="1", generation=1)
                subject, headers, body = observation(obj)
                await test_bus.publish_raw(subject, body=body, headers=headers)
            await running.innocent("planner")
            yield running
        finally:
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 20)


def stream_of(message: HostileMessage) -> str:
    if message.subject.startswith("kaiwo.obs."):
        return OBSERVED_STREAM
    if message.subject.startswith("kaiwo.plan."):
        return PLAN_STREAM
    return DEAD_LETTER_STREAM


def consumer_outcome(message: HostileMessage, sequence: int, letters: list[Any]) -> str:
    """What the reader did, from the dead letters that appeared while the case ran."""
    stream = stream_of(message)
    if message.reader == "relay":
        made = [letter for letter in letters if letter.subject.startswith("kaiwo.dlq.")]
        if not made:
            return "no dead letter"
        reasons = {letter.headers[DLQ_REASON].split(" (")[0] for letter in made}
        return "dead letter: " + ", ".join(sorted(reasons))
    mine = [
        letter
        for letter in letters
        if letter.headers.get(DLQ_STREAM) == stream
        and letter.headers.get(DLQ_SEQUENCE) == str(sequence)
    ]
    if message.reader == "-":
        return "-" if not mine else "dead letter"
    if not mine:
        return "handled"
    reason = mine[0].headers[DLQ_REASON]
    if reason.startswith(REJECTED):
        return "dead letter: " + reason.removeprefix(REJECTED).split(":")[0]
    return "dead letter: " + reason


def recorder_outcome(event: StoredEvent) -> str:
    if event.type == MALFORMED_TYPE:
        return f"poison: {event.data['failure']}"
    if event.type == DEAD_LETTER_TYPE:
        return "dead letter record"
    if event.type == MAX_DELIVERIES_TYPE:
        return "advisory record"
    return "event"


async def run_case(stack: Stack, message: HostileMessage) -> Observed:
    await stack.new_messages(DEAD_LETTER_STREAM)  # only what this case causes counts
    try:
        ack = await stack.bus.publish_raw(
            message.subject, body=message.body, headers=message.headers
        )
    except PublishRefusedError:
        innocent = await stack.innocent("planner")
        return Observed("refused at publish", "-", "nothing", innocent)
    stream = ack.stream
    innocent = None
    if message.reader in ("planner", "executor"):
        innocent = await stack.innocent(message.reader)
        await stack.settled(
            stream, "planner-obs" if message.reader == "planner" else "executor-plan", ack.sequence
        )
    elif message.reader == "relay":
        await stack.settled(stream, "bus-deadletter-relay", ack.sequence)
    event = await stack.recorded(stream, ack.sequence)
    await asyncio.sleep(0.2)  # a dead letter the relay publishes lands in KAIWO_DLQ
    letters = await stack.new_messages(DEAD_LETTER_STREAM)
    return Observed(
        publish="stored",
        consumer=consumer_outcome(message, ack.sequence, letters),
        recorder=recorder_outcome(event),
        innocent_seconds=innocent,
    )


def table(rows: list[tuple[HostileMessage, Observed]]) -> str:
    lines = [
        "| message | what | expected | observed | next innocent handled after |",
        "|---|---|---|---|---|",
    ]
    for message, seen in rows:
        expected = message.expected
        lines.append(
            f"| `{message.name}` | {message.what} | "
            f"{expected.publish}; {expected.consumer}; {expected.recorder} | "
            f"{seen.publish}; {seen.consumer}; {seen.recorder} | "
            + (f"{seen.innocent_seconds:.2f} s" if seen.innocent_seconds is not None else "-")
            + " |"
        )
    return "\n".join(lines)


async def test_every_hostile_message_meets_its_expected_outcome_and_nothing_crashes(
    tmp_path: Path,
) -> None:
    corpus = build_corpus()
    with capture_logs() as logs:
        async with running_stack(tmp_path) as stack:
            rows = [(message, await run_case(stack, message)) for message in corpus]
            crashed = [task.get_name() for task in stack.tasks if task.done()]
    print("\n" + table(rows))

    assert len(corpus) >= 20
    mismatches = [
        (message.name, message.expected, seen)
        for message, seen in rows
        if (seen.publish, seen.consumer, seen.recorder)
        != (message.expected.publish, message.expected.consumer, message.expected.recorder)
    ]
    assert mismatches == []
    retried = [entry for entry in logs if entry["event"] == RETRIED]
    assert retried == []
    assert crashed == []
    tracebacks = [
        entry for entry in logs if entry.get("exc_info") or entry["log_level"] == "critical"
    ]
    assert tracebacks == []
