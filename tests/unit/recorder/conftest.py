"""Fixtures for the recorder's unit tests: an in-memory JetStream with a hand-driven clock,
the in-memory event store, stores that fail on purpose, and envelopes of every family."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.events import (
    ActionOutcome,
    ApplyResultV1,
    Envelope,
    ObservedObjectV1,
    PlanDecidedV1,
    PreemptionDecidedV1,
    plan_event_id,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import (
    monitor_subject,
    observed_subject,
    plan_subject,
    result_subject,
)
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_eventstore import AppendResult, InMemoryEventStore, NewEvent, StoreUnavailableError
from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
JOB_UID = "0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"
POD_UID = "5d1e6f70-2222-4a3b-8c9d-0e1f2a3b4c5d"
NODE_UID = "7f3e9c2a-3333-4b7d-8c55-0e1d2f3a4b5c"
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class SteppedClock:
    """A monotonic clock for the in-memory JetStream that moves only when told."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class Sent:
    """An envelope and the subject it was published on."""

    envelope: Envelope[Any]
    subject: str


def job_observation(*, resource_version: str = "100", event_type: str = "ADDED") -> Sent:
    obj = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": JOB_UID,
            "resourceVersion": resource_version,
        },
        "spec": {"image": "busybox", "gpus": 1},
    }
    payload = ObservedObjectV1(
        kind="KaiwoJob",
        api_version="kaiwo.silogen.ai/v1alpha1",
        namespace="team-a",
        name="train",
        uid=JOB_UID,
        resource_version=resource_version,
        event_type=event_type,  # type: ignore[arg-type]
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=NOW,
        id=f"{JOB_UID}:{resource_version}",
        subject="team-a/train",
        correlationid=JOB_UID,
        traceparent=TRACEPARENT,
    )
    return Sent(envelope, observed_subject(kind="KaiwoJob", namespace="team-a", uid=JOB_UID))


def pod_observation() -> Sent:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "team-a",
            "uid": POD_UID,
            "resourceVersion": "101",
            "labels": {"kaiwo.silogen.ai/run-id": JOB_UID},
        },
    }
    payload = ObservedObjectV1(
        kind="Pod",
        api_version="v1",
        namespace="team-a",
        name="train-0",
        uid=POD_UID,
        resource_version="101",
        event_type="ADDED",
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=NOW,
        id=f"{POD_UID}:101",
        subject="team-a/train-0",
        correlationid=JOB_UID,
    )
    return Sent(envelope, observed_subject(kind="Pod", namespace="team-a", uid=POD_UID))


def node_observation() -> Sent:
    obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-node-1.example.com", "uid": NODE_UID, "resourceVersion": "7"},
    }
    payload = ObservedObjectV1(
        kind="Node",
        api_version="v1",
        name="gpu-node-1.example.com",
        uid=NODE_UID,
        resource_version="7",
        event_type="SYNC",
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=NOW,
        id=f"{NODE_UID}:7",
        subject="gpu-node-1.example.com",
        correlationid=NODE_UID,
    )
    return Sent(envelope, observed_subject(kind="Node", namespace=None, uid=NODE_UID))


JOB_REF = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1",
    kind="KaiwoJob",
    name="train",
    namespace="team-a",
    uid=JOB_UID,
)


def plan_decision(cause: Envelope[Any]) -> Sent:
    plan = Plan(owner=JOB_REF, observed_generation=1, status={"status": "PENDING"})
    envelope = cause.caused(
        data=PlanDecidedV1.of(plan, planned_at=NOW, obs_sequence=1),
        source="/kaiwo/planner",
        time=NOW,
        id=plan_event_id(plan=plan, causation_id=cause.id),
    )
    return Sent(envelope, plan_subject(kind="KaiwoJob", namespace="team-a", uid=JOB_UID))


def apply_result(plan: Envelope[PlanDecidedV1]) -> Sent:
    result = ApplyResultV1.summarise(
        plan_id=plan.id,
        plan_fingerprint=plan.data.fingerprint,
        owner=JOB_REF,
        actions=(ActionOutcome(operation="status", target=JOB_REF, outcome="applied"),),
    )
    envelope = plan.caused(data=result, source="/kaiwo/executor", time=NOW)
    return Sent(
        envelope,
        result_subject(outcome="applied", kind="KaiwoJob", namespace="team-a", uid=JOB_UID),
    )


def preemption() -> Sent:
    payload = PreemptionDecidedV1(
        workload=JOB_REF,
        vendor="amd",
        gpu_count=1,
        utilization_ratio=0.02,
        threshold_ratio=0.2,
        policy="OnPressure",
        reason="GpuUnderutilized",
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/monitor",
        time=NOW,
        subject="team-a/train",
        correlationid=JOB_UID,
    )
    return Sent(envelope, monitor_subject(topic="preemption", namespace="team-a", uid=JOB_UID))


class UnavailableStore:
    """The in-memory store behind a switch: while ``down``, every call fails like a lost
    database connection."""

    def __init__(self) -> None:
        self.inner = InMemoryEventStore()
        self.down = False
        self.append_calls = 0

    def _check(self) -> None:
        if self.down:
            raise ConnectionRefusedError("connection refused (test database is down)")

    async def append_next(self, events: Sequence[NewEvent], **kwargs: Any) -> AppendResult:
        self.append_calls += 1
        self._check()
        return await self.inner.append_next(events, **kwargs)

    async def last_position(self) -> int:
        self._check()
        return await self.inner.last_position()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FullStore:
    """The in-memory store on a full disk while ``full``: every append fails as the SQL store
    reports it (reads still work, as they do on a full disk)."""

    def __init__(self) -> None:
        self.inner = InMemoryEventStore()
        self.full = False

    async def append_next(self, events: Sequence[NewEvent], **kwargs: Any) -> AppendResult:
        if self.full:
            raise StoreUnavailableError("SQLITE_FULL: database or disk is full")
        return await self.inner.append_next(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class RefusingStore:
    """Answers, but refuses (like a constraint or encoding error) any transaction holding an
    event whose data contains ``marker``; with ``refuse_raw`` also the raw (base64) form."""

    marker: str
    refuse_raw: bool = False
    inner: InMemoryEventStore = field(default_factory=InMemoryEventStore)

    def _refused(self, event: NewEvent) -> bool:
        text = repr(event.data)
        return self.marker in text or (
            self.refuse_raw and event.data.get("bodyEncoding") == "base64"
        )

    async def append_next(self, events: Sequence[NewEvent], **kwargs: Any) -> AppendResult:
        if any(self._refused(event) for event in events):
            raise ValueError("unsupported Unicode escape sequence (refused by the test store)")
        return await self.inner.append_next(events, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@dataclass
class Harness:
    clock: SteppedClock
    server: MemoryJetStream
    bus: MemoryBus
    store: Any
    service: RecorderService
    metrics: RecorderMetrics

    async def publish(self, *sent: Sent) -> None:
        for item in sent:
            ack = await self.bus.publish(item.envelope, item.subject)
            assert not ack.duplicate

    async def pump_all(self) -> int:
        """Pump every recorder consumer once (no waiting); how many messages were handled."""
        handled = 0
        for consumer in self.service.consumers:
            handled += (await self.service.pump(consumer, wait_seconds=0)).messages
        return handled

    def restart(self) -> RecorderService:
        """A new recorder on a new connection to the same server and store (after a crash)."""
        self.bus = MemoryBus(server=self.server, topology=bus_topology())
        self.metrics = RecorderMetrics()
        self.service = RecorderService(
            bus=self.bus, store=self.store, clock=lambda: NOW, metrics=self.metrics
        )
        return self.service


async def make_harness(store: Any) -> Harness:
    clock = SteppedClock()
    server = MemoryJetStream(clock=clock)
    bus = MemoryBus(server=server, topology=bus_topology())
    await bus.ensure_streams()
    metrics = RecorderMetrics()
    service = RecorderService(bus=bus, store=store, clock=lambda: NOW, metrics=metrics)
    return Harness(
        clock=clock, server=server, bus=bus, store=store, service=service, metrics=metrics
    )


@pytest.fixture
async def harness() -> Harness:
    return await make_harness(InMemoryEventStore())


class Samples:
    """The builders and constants above, for tests (conftest modules are not importable)."""

    NOW = NOW
    JOB_UID = JOB_UID
    POD_UID = POD_UID
    NODE_UID = NODE_UID
    TRACEPARENT = TRACEPARENT
    job_observation = staticmethod(job_observation)
    pod_observation = staticmethod(pod_observation)
    node_observation = staticmethod(node_observation)
    plan_decision = staticmethod(plan_decision)
    apply_result = staticmethod(apply_result)
    preemption = staticmethod(preemption)
    make_harness = staticmethod(make_harness)
    UnavailableStore = UnavailableStore
    RefusingStore = RefusingStore
    FullStore = FullStore


@pytest.fixture
def samples() -> type[Samples]:
    return Samples
