"""Fixtures for the planner service tests: an in-memory bus and bucket, a clock, a small planner.

``toy_planner`` is a real (if tiny) planning function, so the service can be tested without
depending on the full planners: a KaiwoJob gets one batch Job; every owner's status carries
the cluster's GPU total (so node changes alter plans) and, when the owner has a
``test/deadline`` annotation, whether that deadline has passed (so timers matter). The
``test/also-replan`` annotation names another KaiwoJob to plan with it (as preemption does).
An owner named ``broken`` makes it raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope, observed_event_id
from kaiwo_contracts.events.observed import ObservedObjectV1, WatchEventType
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import DEAD_LETTER_STREAM, PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.metrics import PlannerMetrics
from kaiwo_planner.service import PlanFunction, PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_runtime.bus import StoredMessage
from kaiwo_runtime.kv import KeyValue, MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

START = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
KAIWO = "kaiwo.silogen.ai/v1alpha1"
DEADLINE_ANNOTATION = "test/deadline"
ALSO_REPLAN_ANNOTATION = "test/also-replan"


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def toy_planner(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> PlanningResult:
    cluster = context.cluster
    meta = owner["metadata"]
    if meta["name"] == "broken":
        raise RuntimeError("a planner bug")
    status: dict[str, Any] = {"clusterGpus": sum(node.gpu_count for node in cluster.nodes)}
    deadline_text = (meta.get("annotations") or {}).get(DEADLINE_ANNOTATION)
    deadline = datetime.fromisoformat(deadline_text) if deadline_text else None
    if deadline is not None:
        status["expired"] = now >= deadline
    desired: tuple[dict[str, Any], ...] = ()
    if owner["kind"] == "KaiwoJob":
        desired = (
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "ownerReferences": [
                        {
                            "apiVersion": KAIWO,
                            "kind": "KaiwoJob",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                        }
                    ],
                },
            },
        )
    plan = Plan(
        owner=ObjectRef(
            api_version=owner["apiVersion"],
            kind=owner["kind"],
            name=meta["name"],
            namespace=meta.get("namespace"),
            uid=meta["uid"],
        ),
        observed_generation=meta.get("generation"),
        observed_resource_version=meta.get("resourceVersion"),
        desired=desired,
        status=status,
    )
    replan_at = deadline if deadline is not None and now < deadline else None
    also = (meta.get("annotations") or {}).get(ALSO_REPLAN_ANNOTATION)
    also_replan = (
        (ObjectRef(api_version=KAIWO, kind="KaiwoJob", name=also, namespace=meta["namespace"]),)
        if also
        else ()
    )
    return PlanningResult(plan=plan, replan_at=replan_at, also_replan=also_replan)


def kaiwo_job(
    name: str, *, namespace: str = "team-a", deadline: datetime | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": f"uid-{name}",
        "generation": 1,
    }
    if deadline is not None:
        metadata["annotations"] = {DEADLINE_ANNOTATION: deadline.isoformat()}
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": metadata,
        "spec": {"image": "busybox"},
    }


def queue_config() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kqc"},
    }


def batch_job(owner: Mapping[str, Any]) -> dict[str, Any]:
    """The Job the toy planner asks for, as the cluster would report it."""
    meta = owner["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": f"uid-job-{meta['name']}",
            "ownerReferences": [
                {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoJob",
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
    }


def gpu_node(
    name: str, *, gpus: int = 8, extra_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    labels = {
        "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
        "beta.amd.com/gpu.family.AI": str(gpus),
    }
    labels |= extra_labels or {}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {
            "capacity": {"amd.com/gpu": str(gpus)},
            "allocatable": {"amd.com/gpu": str(gpus)},
        },
    }


@dataclass
class PlannerHarness:
    """One in-memory JetStream and bucket shared by every service a test starts (restarts)."""

    clock: FakeClock
    server: MemoryJetStream = field(default_factory=MemoryJetStream)
    kv: MemoryKeyValue = field(default_factory=MemoryKeyValue)
    topology: Any = field(default_factory=bus_topology)
    buses: list[MemoryBus] = field(default_factory=list)

    def __post_init__(self) -> None:
        for stream in self.topology.streams:
            self.server.add_stream(stream)
        for consumer in self.topology.consumers:
            self.server.add_consumer(consumer)
        self.watcher = MemoryBus(server=self.server, topology=self.topology)

    def bus(self) -> MemoryBus:
        bus = MemoryBus(server=self.server, topology=self.topology)
        self.buses.append(bus)
        return bus

    def service(
        self,
        *,
        plan_fn: PlanFunction | None = toy_planner,
        kv: KeyValue | None = None,
        **settings: Any,
    ) -> PlannerService:
        return PlannerService(
            self.bus(),
            kv or self.kv,
            clock=self.clock,
            plan_fn=plan_fn,
            settings=PlannerSettings(**settings),
            metrics=PlannerMetrics(),
        )

    async def observe(
        self,
        obj: dict[str, Any],
        rv: str,
        event: WatchEventType = "MODIFIED",
        *,
        event_id: str | None = None,
    ) -> Envelope[ObservedObjectV1]:
        """Publish what the watcher would: the object at ``rv``, stamped with the clock."""
        meta = obj["metadata"]
        body = {**obj, "metadata": {**meta, "resourceVersion": rv}}
        observed = ObservedObjectV1(
            kind=obj["kind"],
            api_version=obj["apiVersion"],
            namespace=meta.get("namespace"),
            name=meta["name"],
            uid=meta["uid"],
            resource_version=rv,
            event_type=event,
            object=body,
        )
        envelope = Envelope.new(
            data=observed,
            source="/kaiwo/watcher",
            time=self.clock(),
            correlationid=meta["uid"],
            subject=f"{meta['namespace']}/{meta['name']}"
            if meta.get("namespace")
            else meta["name"],
            id=event_id or observed_event_id(uid=meta["uid"], resource_version=rv),
        )
        subject = observed_subject(
            kind=obj["kind"], namespace=meta.get("namespace"), uid=meta["uid"]
        )
        await self.watcher.publish(envelope, subject)
        return envelope

    def plans(self) -> list[Envelope[PlanDecidedV1]]:
        return [
            Envelope[PlanDecidedV1].from_nats(m.headers, m.body)
            for m in self.server.stream_messages(PLAN_STREAM)
        ]

    def dead_letters(self) -> list[StoredMessage]:
        return [
            m
            for m in self.server.stream_messages(DEAD_LETTER_STREAM)
            if m.subject.startswith("kaiwo.dlq.")
        ]

    @staticmethod
    async def drain(service: PlannerService) -> int:
        """Handle every observation waiting for the service; returns how many."""
        total = 0
        while handled := await service.step(wait_seconds=0):
            total += handled
        return total


class Builders:
    """The objects tests observe (a fixture, since tests cannot import this module)."""

    start = START
    kaiwo_job = staticmethod(kaiwo_job)
    queue_config = staticmethod(queue_config)
    batch_job = staticmethod(batch_job)
    gpu_node = staticmethod(gpu_node)
    toy_planner = staticmethod(toy_planner)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def harness(clock: FakeClock) -> PlannerHarness:
    return PlannerHarness(clock=clock)


@pytest.fixture
def build() -> type[Builders]:
    return Builders
